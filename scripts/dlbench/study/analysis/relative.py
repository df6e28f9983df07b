"""The relative-throughput table, the shape of Lambda's GPU benchmark matrix: every stack in every comparison group
against one reference stack, and per stack a summary across the groups it ran in.

- Reference: the config's `comparison_baseline` where the study has that stack, else the stack proven fastest (a
  decided answer) in the most groups (ties: the one measured in more groups, then by name). One stack for every
  group, so that a column of ratios reads across workloads.
- Cell: a stack's fastest variant in the group (its highest steady throughput at the average round of the group:
  blocks.side_by_side, so that a stack a race stopped early meets the reference on the same footing whatever the
  machine's drift between rounds) over the reference's fastest variant there; empty where either has no measured run. Untested: the Comparisons section tests each pair
  within its group; this table sets the groups side by side.
- Summary row per stack: the geometric mean of its ratios over the groups where both it and the reference ran, with
  a 95% interval from Student's t on their logarithms across groups (3 groups or more). Descriptive: it treats the
  groups as independent samples of workloads, which groups on one machine with related models are not; it shows how
  far the stack's standing varies across the study's workloads, not how noisy one measurement is.
"""

from collections import Counter

import pandas as pd

from dlbench.study.analysis.blocks import side_by_side
from dlbench.study.analysis.fastest import DECISIVE
from dlbench.study.analysis.statistics import log_interval
from dlbench.study.analysis.tables import GROUP

ACROSS = "across groups"  # the summary rows' group label
COLUMNS = [
    *GROUP,
    "group",  # a row's group, or ACROSS for a stack's summary
    "stack",
    "variant",
    "reference_stack",
    "reference_rule",
    "ratio",
    "ratio_ci95_low",
    "ratio_ci95_high",
    "groups",
]


def reference_stack(summary, fastest, named):
    """(the stack every ratio is against, why: module docstring)."""
    measured = summary[summary["train_images_per_s_gmean"].notna()]
    if named in set(measured["stack"]):
        return named, "the config's `comparison_baseline`"
    proven = fastest[fastest["confidence"] == DECISIVE] if "confidence" in fastest else fastest.iloc[0:0]
    wins = Counter(proven["fastest_stack"].dropna())
    presence = measured.groupby("stack")[GROUP].apply(lambda part: len(part.drop_duplicates()))
    chosen = min(presence.index, key=lambda stack: (-wins.get(stack, 0), -presence[stack], stack))
    if not wins:
        return chosen, f"no group has a proven fastest; measured in {presence[chosen]} groups, the most"
    return chosen, f"proven fastest in {wins[chosen]} of {len(fastest)} groups, no stack in more"


def best_variants(part):
    """Per stack, its fastest variant's row in one group, with its throughput side by side (`throughput`)."""
    measured = part[part["train_images_per_s_gmean"].notna()].assign(throughput=lambda rows: side_by_side(rows))
    return measured.loc[measured.groupby("stack")["throughput"].idxmax()]


def group_labels(keys):
    """{key: a group's short name}: model on dataset, batch, device count, and where groups share those, the other
    parts of their keys that tell them apart (optimiser, rate, epochs, placement, machine), so that no two groups of
    the table share a label."""
    short = {}
    for key in keys:
        row = dict(zip(GROUP, key))
        replicas = "" if row["replicas"] == 1 else f", {row['replicas']} {row['device']}s"
        short[key] = f"{row['model']}/{row['dataset']} b{row['batch_size']} {row['device']}{replicas}"
    labels = {}
    for key in keys:
        twins = [other for other in keys if short[other] == short[key]]
        apart = [
            f"{column} {value}" for at, (column, value) in enumerate(zip(GROUP, key)) if len({t[at] for t in twins}) > 1
        ]
        labels[key] = short[key] + (f" ({', '.join(apart)})" if apart else "")
    return labels


def relative_table(summary, fastest, named=None):
    """One row per stack per group (its ratio over the reference's) and one per stack across groups (COLUMNS)."""
    if summary["train_images_per_s_gmean"].notna().sum() == 0:
        return pd.DataFrame(columns=COLUMNS)
    reference, rule = reference_stack(summary, fastest, named)
    rows, groups = [], dict(list(summary.groupby(GROUP, dropna=False, sort=True)))
    labels = group_labels(list(groups))
    for key, part in groups.items():
        best = best_variants(part).set_index("stack")
        if reference not in best.index:
            continue
        base = best.loc[reference, "throughput"]
        for stack, row in best.iterrows():
            rows.append(
                dict(
                    zip(GROUP, key),
                    group=labels[key],
                    stack=stack,
                    variant=row["variant"],
                    reference_stack=reference,
                    reference_rule=rule,
                    ratio=row["throughput"] / base,
                    groups=1,
                )
            )
    cells = pd.DataFrame(rows, columns=COLUMNS)
    summaries = []
    for stack, part in cells.groupby("stack", sort=True):
        centre, low, high = log_interval(part["ratio"].astype(float))
        summaries.append(
            dict(
                group=ACROSS,
                stack=stack,
                reference_stack=reference,
                reference_rule=rule,
                ratio=centre,
                ratio_ci95_low=low,
                ratio_ci95_high=high,
                groups=len(part),
            )
        )
    table = pd.concat([cells, pd.DataFrame(summaries, columns=COLUMNS)], ignore_index=True)
    # The summary rows have no group: its whole-number axes stay whole numbers beside their blanks ("batch 64").
    return table.astype({axis: "Int64" for axis in GROUP if pd.api.types.is_integer_dtype(summary[axis])})
