"""How every figure of the report tells its series apart, defined once: a colour per stack family (a framework with its
backend, whatever its release), a line style per release within a family (per workload where a panel holds one stack),
a marker per variant, a marker fill per data placement. The same stack has the same colour in the training and the
operator figures."""

import re
import zlib

# A stack's family: its name without the release ("torch-2.13" -> "torch", "keras-3-jax-0.9" -> "keras-3-jax").
RELEASE = re.compile(r"-\d+(\.\d+)*$")

FAMILY_COLOURS = {
    "torch": "#C44E52",
    "tensorflow": "#DD8452",
    "keras-3-tensorflow": "#B8A03A",
    "keras-3-jax": "#8172B3",
    "keras-3-torch": "#DA8BC3",
    "flax": "#64B5CD",
    "mxnet": "#55A868",
    "paddle": "#937860",
}
OTHER_COLOUR = "#7F7F7F"  # a stack of no known family: grey, never another family's colour
LINE_STYLES = ["-", "--", ":", "-."]
# The variant's mode (dlbench.variants.MODES) picks the marker; a variant with suffixes (-amp, -nhwc) one of the rest.
MODE_MARKERS = {"eager": "o", "graph": "s", "xla": "^", "compile": "D"}
OTHER_MARKERS = ["v", "P", "X", "*", "<", ">", "h"]
PLACEMENT_FILLS = {"device": "full", "host": "none", "stream": "left"}


def family(stack):
    return RELEASE.sub("", stack)


def stack_colour(stack):
    return FAMILY_COLOURS.get(family(stack), OTHER_COLOUR)


def variant_marker(variant):
    """The same marker for a variant in every figure (a suffixed variant's is stable, from its name)."""
    if variant in MODE_MARKERS:
        return MODE_MARKERS[variant]
    return OTHER_MARKERS[zlib.crc32(variant.encode()) % len(OTHER_MARKERS)]


def release_styles(stacks):
    """{stack: line style}: within a family, each release its own style, oldest (by name) solid."""
    releases = {}
    for stack in sorted(set(stacks)):
        releases.setdefault(family(stack), []).append(stack)
    return {
        stack: LINE_STYLES[index % len(LINE_STYLES)]
        for members in releases.values()
        for index, stack in enumerate(members)
    }


def workload_styles(workloads):
    """{workload: line style}, in the order given, for a figure whose panel holds one stack's several workloads."""
    return {workload: LINE_STYLES[index % len(LINE_STYLES)] for index, workload in enumerate(workloads)}


def series_style(stack, variant, placement, linestyle="-"):
    """A series' matplotlib style: its family's colour, its variant's marker, its placement's fill."""
    return {
        "color": stack_colour(stack),
        "marker": variant_marker(variant),
        "fillstyle": PLACEMENT_FILLS.get(placement, "full"),
        "linestyle": linestyle,
    }
