"""A CPU's microarchitecture from the family, model and stepping a record keeps (/proc/cpuinfo): what tells a reader
which machine ran a study where the model name does not, as a virtual machine's "AMD EPYC" does not. The tables are
the vendors' published family and model numbers (AMD's Processor Programming References, Intel's "Intel
Architecture and Processor Identification" table); a CPU missing from them is named by its numbers alone. Standard
library only."""

import re

# AMD: family -> [(first model, last model, microarchitecture)], the models in the inclusive ranges given.
AMD = {
    23: [(0x00, 0x0F, "Zen"), (0x08, 0x08, "Zen+"), (0x10, 0x17, "Zen"), (0x18, 0x2F, "Zen+"), (0x30, 0xFF, "Zen 2")],
    25: [
        (0x00, 0x0F, "Zen 3"),
        (0x10, 0x1F, "Zen 4"),
        (0x20, 0x3F, "Zen 3"),
        (0x40, 0x4F, "Zen 3+"),
        (0x50, 0x5F, "Zen 3"),
        (0x60, 0x7F, "Zen 4"),
        (0xA0, 0xAF, "Zen 4c"),
    ],
    26: [(0x00, 0xFF, "Zen 5")],
}
# Intel family 6: model -> microarchitecture; model 85's stepping tells three server generations apart.
INTEL = {
    42: "Sandy Bridge",
    45: "Sandy Bridge-EP",
    58: "Ivy Bridge",
    62: "Ivy Bridge-EP",
    60: "Haswell",
    63: "Haswell-EP",
    69: "Haswell",
    70: "Haswell",
    61: "Broadwell",
    71: "Broadwell",
    79: "Broadwell-EP",
    86: "Broadwell-DE",
    78: "Skylake",
    94: "Skylake",
    142: "Kaby Lake",
    158: "Coffee Lake",
    165: "Comet Lake",
    166: "Comet Lake",
    106: "Ice Lake-SP",
    108: "Ice Lake-D",
    125: "Ice Lake",
    126: "Ice Lake",
    140: "Tiger Lake",
    141: "Tiger Lake",
    143: "Sapphire Rapids",
    151: "Alder Lake",
    154: "Alder Lake",
    170: "Meteor Lake",
    173: "Granite Rapids",
    175: "Sierra Forest",
    183: "Raptor Lake",
    186: "Raptor Lake",
    191: "Raptor Lake",
    189: "Lunar Lake",
    197: "Arrow Lake",
    198: "Arrow Lake",
    207: "Emerald Rapids",
}
SKYLAKE_SERVER = [(4, "Skylake-SP"), (7, "Cascade Lake"), (11, "Cooper Lake")]  # (last stepping, name), model 85
GENERATION = re.compile(r"family (\d+), model (\d+), stepping (\d+)")


def microarchitecture(model_name, generation):
    """The microarchitecture of a CPU named `model_name` whose recorded generation reads "family F, model M,
    stepping S"; None where the vendor or the numbers are not in the tables."""
    numbers = GENERATION.fullmatch(generation or "")
    if not numbers:
        return None
    family, model, stepping = map(int, numbers.groups())
    if "AMD" in model_name:
        last = [name for first, end, name in AMD.get(family, []) if first <= model <= end]
        return last[-1] if last else None  # a narrower range listed later overrides a wider one
    if "Intel" in model_name and family == 6:
        if model == 85:
            return next((name for highest, name in SKYLAKE_SERVER if stepping <= highest), None)
        return INTEL.get(model)
    return None
