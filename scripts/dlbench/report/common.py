"""What the report's sections share: labels and panels, the figure grid and its saving, cells and tables, the texts
of a ratio and a verdict. The sections print the aggregation's tables; nothing here computes a statistic."""

import re

import matplotlib

from dlbench.analysis.tables import GROUP, PANEL

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "dlbench"  # the same figure gives the same ids: no spurious diffs
import matplotlib.pyplot as plt  # after the backend is chosen
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

# One colour per framework in every figure; a framework's stacks and variants differ by line style and marker.
FRAMEWORK_COLOURS = {
    "torch": "#C44E52",
    "tensorflow": "#DD8452",
    "keras": "#8172B3",
    "mxnet": "#55A868",
    "jax": "#4C72B0",
    "flax": "#64B5CD",
    "paddle": "#937860",
}
OTHER_COLOUR = "#7F7F7F"
LINE_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1)), "v")]
STATUS_LABEL = {"oom": "OOM", "error": "ERROR", "unavailable": "N/A", "contended": "BUSY", "diverged": "DIVERGED"}


def variant_label(variant, placement):
    """The variant, and the data placement where it is not the default (the dataset staged on the device)."""
    return variant if placement == "device" else f"{variant}, {placement} data"


def variant_labels(frame):
    return pd.Series(map(variant_label, frame["variant"], frame["data_placement"]), index=frame.index, dtype=object)


# The summary's columns a figure's lines are named, coloured and panelled by: merged onto epochs and traces.
LINE_KEYS = ["stack", "framework", "variant", "data_placement", *PANEL]


def label(frame):
    return frame["stack"] + " · " + variant_labels(frame)


def panel_titles(summary):
    return sorted(set(zip(*(summary[key] for key in PANEL))))


def on_devices(device, replicas):
    """Where a panel or group ran: the device, or its data-parallel replicas."""
    return f"{replicas} {device} replicas" if replicas > 1 else device


def panel_title(panel):
    dataset, model, batch, device, machine, replicas = panel
    on = on_devices(device, replicas)
    return f"{model} on {dataset}, batch {batch}, {on} on {machine}"


def panel_rows(frame, panel, keys=PANEL):
    """The rows of frame that belong to one panel: by default (dataset, model, batch size, device, machine)."""
    return frame[(frame[keys] == pd.Series(panel, index=keys)).all(axis=1)]


def figure_grid(count, max_columns=2, panel_size=(6.5, 3.2)):
    """A figure with `count` visible panels, at most max_columns a row; with none (no run finished anything to
    draw), one that says so, so that a study of failed runs still gets its report."""
    columns = max(1, min(count, max_columns))
    rows = max(1, (count + columns - 1) // columns)
    width, height = panel_size
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, 0.5 + height * rows), squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    if count == 0:
        axes.flat[0].set_visible(True)
        axes.flat[0].set_axis_off()
        axes.flat[0].text(0.5, 0.5, "no finished run to draw", ha="center", va="center")
    return figure, axes.flat


def framework_colour(framework):
    return FRAMEWORK_COLOURS.get(framework, OTHER_COLOUR)


def styled_lines(part, names):
    """(name, rows, style) per line of a panel, lines named by `names` (a Series beside part): the framework's colour,
    and within a framework a line style and marker of their own, so two releases of one framework stay apart."""
    seen = {}
    for name, line in part.groupby(names, sort=True):
        framework = line["framework"].iloc[0]
        seen[framework] = seen.get(framework, -1) + 1
        linestyle, marker = LINE_STYLES[seen[framework] % len(LINE_STYLES)]
        yield name, line, {"color": framework_colour(framework), "linestyle": linestyle, "marker": marker}


def spans_a_decade(values):
    """Whether a panel's positive values span more than 10x: then a linear axis flattens all but the largest."""
    positive = pd.Series(values, dtype=float).dropna()
    positive = positive[positive > 0]
    return len(positive) > 0 and positive.max() > 10 * positive.min()


def legend_below(figure, fontsize=7):
    """One legend for the whole figure, below its panels: never over the data, and each line named once however
    many panels draw it."""
    named = {}
    for axis in figure.axes:
        for handle, name in zip(*axis.get_legend_handles_labels()):
            named.setdefault(name, handle)
    if named:
        figure.legend(
            named.values(),
            named.keys(),
            loc="upper center",
            bbox_to_anchor=(0.5, 0),
            ncol=3,
            fontsize=fontsize,
            frameon=False,
        )


def save(figure, path):
    """SVG (glyphs drawn as paths): vector in the PDF, sharp in the HTML, no font needed where it is read. The
    bounding box takes in the legend below the panels."""
    figure.tight_layout()
    # No timestamp: a redrawn figure is the same file.
    figure.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)


def group_title(row):
    """An experiment group: what its members share (comparisons are made within one)."""
    placement = "" if row["data_placement"] == "device" else f", {row['data_placement']} data"
    scaling = "" if row["replicas"] == 1 else f" ({row['scaling']})"
    on = on_devices(row["device"], row["replicas"]) + scaling
    return (
        f"{row['model']} on {row['dataset']}, batch {row['batch_size']}, {on}, {row['optimizer']} "
        f"lr {row['learning_rate']:g}, {row['epochs']} epochs{placement}, on {row['machine']}"
    )


def comparison_groups(comparisons):
    return comparisons.groupby(GROUP, sort=True, dropna=False)


DECIDED, EQUIVALENT, UNDECIDED = "#4C72B0", "#55A868", "#9A9A9A"  # blue, green, grey


def verdict_colour(verdict):
    """Blue for a proven difference, green for a proven equivalence, grey for inconclusive or not tested."""
    if verdict in ("faster", "slower"):
        return DECIDED
    return EQUIVALENT if verdict.startswith("equivalent") else UNDECIDED


def ratio_axis(axis, part, labels, title, xlabel):
    """Ratios with their intervals (at the level each verdict was tested at, so that a bar wholly off 1 is a proven
    difference) on a log axis around 1, coloured by verdict (verdict_colour)."""
    for y, (ratio, low, high, verdict) in enumerate(
        zip(part["ratio"], part["ratio_low"], part["ratio_high"], part["verdict"])
    ):
        colour = verdict_colour(verdict)
        below, above = (0, 0) if pd.isna(low) else (ratio - low, high - ratio)
        axis.errorbar(ratio, y, xerr=[[below], [above]], fmt="o", color=colour, capsize=3)
    axis.set_yticks(range(len(part)), labels)
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_xscale("log")
    log_ticks(axis.xaxis, "x")
    axis.set_title(title, fontsize=9)
    axis.set_xlabel(xlabel)


def log_ticks(axis, suffix=""):
    """Plain labels on a log axis ("0.2", "5", "2x" with suffix "x"), at least two in view and never crowded: the
    decades where two are in view, else the 1, 2 and 5 of each decade, else every step of the decade, else evenly
    spaced values. Matplotlib's default labels every minor tick of a short span, and they run into each other; call it
    after the data are drawn (it reads the axis' span)."""
    low, high = sorted(axis.get_view_interval())
    for subs in ((1.0,), (1.0, 2.0, 5.0), tuple(float(step) for step in range(1, 10))):
        ticks = [tick for tick in LogLocator(subs=subs).tick_values(low, high) if low <= tick <= high]
        if len(ticks) >= 2:
            break
    else:
        ticks = [tick for tick in MaxNLocator(4).tick_values(low, high) if low <= tick <= high]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.3g}{suffix}"))
    axis.set_minor_locator(LogLocator(subs="auto"))
    axis.set_minor_formatter(NullFormatter())


def ratio_figure(groups, labeller, titler, xlabel, empty, path):
    """One ratio panel per group (a list of (key, rows)), rows sorted by ratio."""
    rows = max((len(part) for _, part in groups), default=1)
    figure, axes = figure_grid(max(len(groups), 1), max_columns=1, panel_size=(9, 0.9 + 0.3 * rows))
    for axis, (_, part) in zip(axes, groups):
        part = part.sort_values("ratio")
        ratio_axis(axis, part, labeller(part), titler(part.iloc[0]), xlabel)
    if not groups:
        axes[0].text(0.5, 0.5, empty, ha="center", va="center")
        axes[0].set_axis_off()
    save(figure, path)


def number(value, digits=0):
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def percent(value, digits=0):
    return "–" if pd.isna(value) else f"{value:.{digits}%}"


def share(value, digits):
    """A share of the work that fixed-batch epochs leave out (input work, communication); a negative one (they ran
    slower than the epochs they are compared with) is noise, not a share, and says so instead of printing as a
    result."""
    if pd.notna(value) and value < 0:
        return "noise (below 0)"
    return percent(value, digits)


def cell(row, column, digits=0, formatter=number):
    """A figure, or the failure it stands for (OOM, ERROR) when no run of the experiment succeeded."""
    if row["runs_ok"] == 0:
        return STATUS_LABEL.get(row["statuses"].split(",")[0], "failed")
    return formatter(row[column], digits)


NUMBER = re.compile(r"[-+−]?\d")  # a cell that starts with a number: a figure, a ratio, an interval, a count


def numeric(column):
    """Whether a column holds figures: every cell a number, a dash or a failure's label (OOM, ERROR)."""
    cells = [str(cell) for cell in column if str(cell) not in ("–", *STATUS_LABEL.values())]
    return bool(cells) and all(NUMBER.match(cell) for cell in cells)


def markdown_table(header, rows):
    """A pipe table; columns of figures right-aligned, so that digits line up."""
    columns = list(zip(*rows)) if rows else [() for _ in header]
    rule = ["---:" if numeric(column) else ":---" for column in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(value).replace("|", "/") for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def ratio_text(row):
    """The ratio and its interval at the level its verdict was tested at: "1.15x [1.02, 1.30]"."""
    interval = "" if pd.isna(row["ratio_low"]) else f" [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}]"
    return f"{row['ratio']:.2f}x{interval}"


def confidence_text(value):
    """An interval's confidence, as a percentage with the digits that tell Holm's levels apart ("98.3 %")."""
    return "–" if pd.isna(value) else f"{value * 100:.3g} %"


def p_text(value):
    return "–" if pd.isna(value) else f"{value:.3g}"


def margin_text(table):
    """The equivalence margin the table was tested with, as the verdicts print it ("5 %")."""
    return f"{table['equivalence_margin'].iloc[0] * 100:g} %"


def deciding_text(row):
    """What would decide an inconclusive comparison."""
    if pd.isna(row["repeats_to_decide"]):
        return "no practical number of repeats would decide"
    return f"about {row['repeats_to_decide']} repeats would decide"


def verdict_text(row):
    """The verdict, and for an inconclusive one the repeats that would decide it."""
    return f"inconclusive ({deciding_text(row)})" if row["verdict"] == "inconclusive" else row["verdict"]


METHOD_WORD = {"paired by round": "paired", "unpaired (Welch)": "unpaired"}  # none: not tested


def method_word(row):
    """ ", paired" or ", unpaired": how a comparison's repeats were compared (nothing where it was not tested)."""
    return f", {METHOD_WORD[row['method']]}" if row["method"] in METHOD_WORD else ""
