"""Relative throughput: every stack in every comparison group against one reference stack, a row per group and a
last row per stack across groups (the relative table, dlbench.study.analysis.relative): Lambda's matrix, untested."""

import pandas as pd

from dlbench.study.analysis.relative import ACROSS
from dlbench.study.analysis.tables import GROUP
from dlbench.study.report.common import bracketed, group_titles, markdown_table

TITLE = "Relative throughput"
ABSENT = "one comparison group, or one stack: the answer and Comparisons hold its ratios."

METHOD = (
    "Each stack's fastest variant in each group, its geometric-mean steady throughput over the reference stack's "
    "(**{reference}**, 1.00: {why}); empty where either did not run. The last row is each stack's geometric mean over "
    "the groups it shares with the reference, with a 95% interval from Student's t across those groups (3 or more), "
    "descriptive: it treats the groups as independent samples of workloads, which groups on one machine with "
    "related models are not; it shows how far a stack's standing varies across this study's workloads. Untested: "
    "the Comparisons section tests the pairs within each group, on the rounds both sides ran, so its paired ratios "
    "can differ from these (all repeats) in the second decimal. The table is also `results/tables/relative.csv` "
    "(and `.parquet`)."
)


def markdown(study, figures):
    relative = study.relative
    cells = relative[relative["group"] != ACROSS]
    if cells["group"].nunique() < 2 or cells["stack"].nunique() < 2:
        return None
    stacks = sorted(cells["stack"].unique())
    parts = [part for _, part in cells.groupby(GROUP, dropna=False, sort=False)]
    shared, titles = group_titles(pd.DataFrame([part.iloc[0] for part in parts]).reset_index(drop=True))
    rows = [
        [
            titles[index],
            *(bracketed(part.set_index("stack")["ratio"].get(stack), None, None, ".2f") for stack in stacks),
        ]
        for index, part in enumerate(parts)
    ]
    across = relative[relative["group"] == ACROSS].set_index("stack")
    rows.append(
        [
            f"geometric mean [95%] ({across['groups'].max()} groups at most)",
            *(
                bracketed(
                    across.loc[stack, "ratio"],
                    across.loc[stack, "ratio_ci95_low"],
                    across.loc[stack, "ratio_ci95_high"],
                    ".2f",
                )
                for stack in stacks
            ),
        ]
    )
    first = relative.iloc[0]
    method = METHOD.format(reference=first["reference_stack"], why=first["reference_rule"])
    every = f"Every group: {shared}.\n\n" if shared else ""
    return method + "\n\n" + every + markdown_table(["group", *stacks], rows)
