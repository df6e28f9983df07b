"""Why an operator measurement lies above the machine's ceiling. An operator whose time per call does not grow with its
size copies no data - a view (flatten of a contiguous tensor) or a zero-copy import (a framework adopting a NumPy
array's memory) - so bytes it never moved, divided by its time, are no bandwidth. One whose data fits in the CPU's
last-level cache reads and writes at the cache's speed, above the memory bandwidth the ceiling measures. A GEMM above
NumPy's is no such effect: its timing is what to check. The causes are read from the measurements, per row."""

import numpy as np
import pandas as pd

from dlbench.ops import FLOP_BOUND, OPERATORS

# Time per call growing slower than size to this power over a size sweep: the call does no work per element.
NO_COPY_GROWTH = 0.2
LINE = ["stack", "operator", "device", "dtype"]


def growth(line):
    """The power of size that time per call grows with over one line's sweep (smallest to largest size); NaN with
    fewer than two sizes."""
    line = line.sort_values("elements")
    if len(line) < 2 or line["elements"].iloc[-1] == line["elements"].iloc[0]:
        return np.nan
    first, last = line.iloc[0], line.iloc[-1]
    return np.log(last["median_s"] / first["median_s"]) / np.log(last["elements"] / first["elements"])


VIEW, IMPORT, CACHE, GEMM, UNEXPLAINED = (
    "view",
    "zero-copy import",
    "cache-resident",
    "GEMM above NumPy's",
    "unexplained",
)


def cause(row, exponent):
    """Why one row lies above its ceiling (None for a row at or below it): VIEW or IMPORT where its time per call does
    not grow with size, CACHE where the bytes it moves fit in the last-level cache, GEMM for a FLOP-bound operator
    above NumPy's GEMM, else UNEXPLAINED."""
    if row["status"] != "ok" or pd.isna(row["fraction_of_ceiling"]) or row["fraction_of_ceiling"] <= 1:
        return None
    if row["operator"] in FLOP_BOUND:
        return GEMM
    if exponent < NO_COPY_GROWTH:
        return VIEW if OPERATORS[row["operator"]][0] == "device" else IMPORT
    moved = row["gb_per_s"] * 1e9 * row["median_s"]
    if pd.notna(row["ceiling_cache_bytes"]) and moved <= row["ceiling_cache_bytes"]:
        return CACHE
    return UNEXPLAINED


def over_ceiling_causes(ops):
    """Per row of the ops table, why it lies above its ceiling (None where it does not)."""
    measured = ops[ops["status"] == "ok"]
    exponents = measured.groupby(LINE)[["elements", "median_s"]].apply(growth)
    return pd.Series(
        [
            cause(row, exponents.get(tuple(row[LINE]), np.nan)) if row["status"] == "ok" else None
            for _, row in ops.iterrows()
        ],
        index=ops.index,
        dtype=object,
    )
