"""The machines side by side: every workload that ran on more than one machine (this study's own runs and those of the
bundles it imports, config `imports`), in the shape of Lambda's GPU benchmark table.

- Workload: an experiment's axes but its device (WORKLOAD), so that one stack, variant, model, dataset, batch and
  schedule on a CPU machine and on a GPU machine is one workload.
- Cell: each machine's geometric-mean steady throughput of the workload with its 95% interval (summary.csv), a
  language model's in tokens per second as well (the same ratios: a reader's unit).
- Ratio: each machine over the reference machine (`reference`: the machine of this study's own runs, else the one
  with the most runs), with a 95% interval from Welch's t on the log throughputs: unpaired, each machine with its own
  noise, since rounds on two machines were never paired. Untested below MIN_REPEATS ok runs on either side.
- Page 1 per machine: each machine's answer for the group (the comparison group's axes but the device):
  `page1_fastest` with its `page1_confidence` and `page1_decision` (fastest.csv), and `fastest_holds`, whether every
  machine names the same stack fastest. A fastest that differs between machines is a proven flip only where every
  one of those answers is decided.
- Ranking: per group and machine, the stacks that every machine of the group ran, in order of their fastest
  variant's throughput (`stack_throughput`, `order`); `ranking_holds` says whether every machine orders them alike.
  An order is one of estimates: beyond the fastest, each machine's Comparisons say which of its gaps are proven.
"""

import numpy as np
import pandas as pd

from dlbench.axes import COMPARISON_GROUP, NAMES
from dlbench.study.analysis.comparisons import ok_throughputs
from dlbench.study.analysis.fastest import FASTEST_TOKENS
from dlbench.study.analysis.statistics import MIN_REPEATS, interval, welch_log_ratio

WORKLOAD = [name for name in NAMES if name != "device"]
WORKLOAD_GROUP = [name for name in COMPARISON_GROUP if name != "device"]
THROUGHPUT = ["train_images_per_s_gmean", "train_images_per_s_ci95_low", "train_images_per_s_ci95_high"]
COLUMNS = [
    *WORKLOAD,
    "machine",
    "device",
    "experiment_id",
    "runs_ok",
    *THROUGHPUT,
    *FASTEST_TOKENS,
    "reference_machine",
    "ratio",
    "ratio_ci95_low",
    "ratio_ci95_high",
    "stack_throughput",
    "order",
    "ranking_holds",
    "page1_fastest",
    "page1_confidence",
    "page1_decision",
    "fastest_holds",
]


def reference_machine(summary, own_machines):
    """The machine every ratio is against: of this study's own machines the one with the most runs, else (a report of
    imports alone) the machine with the most runs overall; ties by name."""
    runs = summary.groupby("machine")["runs"].sum()
    candidates = runs[runs.index.isin(own_machines)] if runs.index.isin(own_machines).any() else runs
    return sorted(candidates.index, key=lambda machine: (-candidates[machine], machine))[0]


def ratio_against(values, reference):
    """(ratio, low, high) of one machine's throughputs over the reference's, unpaired; the ratio of geometric means
    alone below MIN_REPEATS runs on a side."""
    if min(len(values), len(reference)) < MIN_REPEATS:
        ratio = np.exp(np.mean(np.log(values)) - np.mean(np.log(reference))) if values and reference else np.nan
        return ratio, np.nan, np.nan
    return interval(welch_log_ratio(values, reference))


def orders(shared):
    """{machine: its stacks in order of their fastest variant's throughput} over the stacks every machine of the
    group ran (the group's rows, workloads on several machines)."""
    best = shared.groupby(["machine", "stack"])["stack_throughput"].first().dropna().reset_index()
    common = set.intersection(*(set(part["stack"]) for _, part in best.groupby("machine")))
    ranked = best[best["stack"].isin(common)].sort_values("stack_throughput", ascending=False)
    return {machine: list(part["stack"]) for machine, part in ranked.groupby("machine")}


def page1_answer(answers, key):
    """The machine's page-1 answer for the group (fastest.csv): its fastest stack, confidence and decision words."""
    if key not in answers.index:
        return {"page1_fastest": None, "page1_confidence": None, "page1_decision": None}
    answer = answers.loc[key]
    return {
        "page1_fastest": answer["fastest_stack"],
        "page1_confidence": answer["confidence"],
        "page1_decision": answer["decision"],
    }


def machines_table(runs, summary, fastest, own_machines):
    """One row per workload and machine, for every workload that ran on two machines or more (module docstring)."""
    if summary["machine"].nunique() < 2:
        return pd.DataFrame(columns=COLUMNS)
    reference = reference_machine(summary, own_machines)
    spread = summary.groupby(WORKLOAD, dropna=False)["machine"].transform("nunique")
    shared = summary[spread > 1].copy()
    if shared.empty:
        return pd.DataFrame(columns=COLUMNS)
    throughputs = ok_throughputs(runs)
    answers = fastest.set_index(["machine", *COMPARISON_GROUP])
    rows = []
    for _, workload in shared.groupby(WORKLOAD, dropna=False):
        at_reference = workload[workload["machine"] == reference]
        base = (
            list(throughputs.get((at_reference["experiment_id"].iloc[0], reference), {}).values())
            if len(at_reference)
            else []
        )
        for _, row in workload.iterrows():
            values = list(throughputs.get((row["experiment_id"], row["machine"]), {}).values())
            ratio, low, high = ratio_against(values, base) if base else (np.nan, np.nan, np.nan)
            rows.append(
                {
                    **{key: row[key] for key in [*WORKLOAD, "machine", "device", "experiment_id", "runs_ok"]},
                    **{key: row[key] for key in THROUGHPUT},
                    **{key: row.get(key, np.nan) for key in FASTEST_TOKENS},  # images only: no such columns
                    "reference_machine": reference,
                    "ratio": ratio,
                    "ratio_ci95_low": low,
                    "ratio_ci95_high": high,
                    "order": "",  # set below, once the group's every workload has its rows
                    "ranking_holds": True,
                    **page1_answer(answers, tuple(row[key] for key in ["machine", *COMPARISON_GROUP])),
                    "fastest_holds": True,
                }
            )
    table = pd.DataFrame(rows, columns=COLUMNS)
    by_stack = table.groupby(["machine", *WORKLOAD_GROUP, "stack"], dropna=False)["train_images_per_s_gmean"]
    table["stack_throughput"] = by_stack.transform("max")
    for _, group in table.groupby(WORKLOAD_GROUP, dropna=False):
        ranking = orders(group)
        holds = len({tuple(order) for order in ranking.values()}) <= 1
        fastest_holds = group["page1_fastest"].nunique(dropna=False) == 1
        for index, machine in group["machine"].items():
            table.at[index, "order"] = " > ".join(ranking.get(machine, []))
            table.at[index, "ranking_holds"] = holds
            table.at[index, "fastest_holds"] = fastest_holds
    return table.sort_values([*WORKLOAD_GROUP, "stack", "variant", "machine"]).reset_index(drop=True)
