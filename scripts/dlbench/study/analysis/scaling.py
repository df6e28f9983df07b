"""The scaling table: each experiment on N > 1 data-parallel replicas against the same experiment on one (equal in
every other axis, on the same machine), and the stacks' scaling compared at each N.

Speedup is the ratio of geometric-mean training throughputs, N replicas over one, tested as a comparison is
(dlbench.study.analysis.statistics.compared: paired by round where both have ok runs in at least 3 common rounds, else
Welch); scaling efficiency is the speedup over N (1: the ideal, N times one replica's throughput), with the speedup's
95% interval divided by N. Weak scaling keeps each replica's batch, strong scaling the global batch (the record's
`scaling`); efficiencies of the two are different questions and never compared.

Where the framework can leave out its gradients' reduction (PyTorch's no_sync), the runs measured the share of a
step spent communicating that compute does not hide (the record's communication_share): its mean over the repeats.

Stacks are compared at one N within a family (dataset, model, device, batch size, optimiser, rate, epochs, placement,
scaling, N and machine): the ratio of two efficiencies is the ratio of their speedups, whose log is the difference of
the two speedups' log ratios, with their errors added in quadrature and Welch-Satterthwaite's degrees of freedom. Each
is tested against the family's best-scaling experiment with the comparisons' verdicts (Holm within the family, over
every pair of it: the best is chosen from the same data, as the comparisons' fastest is):
"faster" there reads "scales better", "slower" "scales worse"; the efficiency ratio's interval (`ratio_low`,
`ratio_high`, `ratio_confidence`) is at the level its verdict was tested at, as the comparisons' is.
"""

import numpy as np
import pandas as pd

from dlbench.study.analysis.comparisons import DECISION_COLUMNS, ok_throughputs, on_machine
from dlbench.study.analysis.statistics import LogRatio, compared, decisions, interval
from dlbench.study.analysis.tables import GROUP, IDENTITY

# An experiment's identity but its replicas, scaling and id: the one-replica experiment it scales from (one replica
# runs the same experiment under either scaling, recorded `weak`).
SCALES_FROM = [key for key in IDENTITY if key not in ("experiment_id", "replicas", "scaling")]
FAMILY = GROUP  # GROUP holds replicas and scaling: the stacks and variants at one N
SCALING_COLUMNS = [
    *FAMILY,
    "stack",
    "framework",
    "variant",
    "experiment_id",
    "base_experiment_id",
    "global_batch_size",
    "train_images_per_s_gmean",
    "replica_images_per_s_gmean",
    "base_images_per_s_gmean",
    "communication_share_mean",
    "method",
    "pairs",
    "speedup",
    "efficiency",
    "efficiency_ci95_low",
    "efficiency_ci95_high",
    "best_experiment_id",
    "best_stack",
    "best_variant",
    "efficiency_ratio",
    *DECISION_COLUMNS,
]


def speedups(runs, summary):
    """One row per experiment above one replica that has its one-replica experiment: speedup and efficiency, with
    the speedup's log ratio (None where either side has too few ok repeats)."""
    throughputs = ok_throughputs(runs)
    measured = summary[summary["train_images_per_s_gmean"].notna()]
    bases = {tuple(row[SCALES_FROM]): row for _, row in measured[measured["replicas"] == 1].iterrows()}
    rows, log_ratios = [], []
    for _, row in measured[measured["replicas"] > 1].sort_values(FAMILY + ["stack", "variant"]).iterrows():
        base = bases.get(tuple(row[SCALES_FROM]))
        if base is None:
            continue
        count = int(row["replicas"])
        method, pairs, log_ratio = compared(throughputs[on_machine(row)], throughputs[on_machine(base)])
        speedup = row["train_images_per_s_gmean"] / base["train_images_per_s_gmean"]
        low = high = np.nan
        if log_ratio is not None:
            speedup, low, high = interval(log_ratio)
        rows.append(
            {
                **{key: row[key] for key in FAMILY},
                **{key: row[key] for key in ("stack", "framework", "variant", "experiment_id")},
                "base_experiment_id": base["experiment_id"],
                "global_batch_size": row["global_batch_size"],
                "train_images_per_s_gmean": row["train_images_per_s_gmean"],
                "replica_images_per_s_gmean": row["train_images_per_s_gmean"] / count,
                "base_images_per_s_gmean": base["train_images_per_s_gmean"],
                "communication_share_mean": row["communication_share_mean"],
                "method": method,
                "pairs": pairs,
                "speedup": speedup,
                "efficiency": speedup / count,
                "efficiency_ci95_low": low / count,
                "efficiency_ci95_high": high / count,
            }
        )
        log_ratios.append(log_ratio)
    return rows, log_ratios


def versus_best(log_ratio, best):
    """The log ratio of an experiment's speedup to the best's: their difference, errors in quadrature,
    Welch-Satterthwaite's degrees of freedom (None where either was not tested)."""
    if log_ratio is None or best is None:
        return None
    shares = np.array([log_ratio.error**2, best.error**2])
    freedoms = np.array([log_ratio.freedom, best.freedom], dtype=float)
    freedom = shares.sum() ** 2 / (shares**2 / freedoms).sum() if shares.sum() > 0 else float(freedoms.min())
    return LogRatio(
        log_ratio.estimate - best.estimate,
        float(np.sqrt(shares.sum())),
        freedom,
        float(np.hypot(log_ratio.spread, best.spread)),
        min(log_ratio.rounds, best.rounds),
    )


def against_best(row, best, log_ratio):
    """The columns of a row's efficiency against its family's best: the ratio (the ratio of the speedups' geometric
    means where tested, else of the efficiencies); its interval comes with its verdict (decisions)."""
    ratio = row["efficiency"] / best["efficiency"] if log_ratio is None else np.exp(log_ratio.estimate)
    return {
        "best_experiment_id": best["experiment_id"],
        "best_stack": best["stack"],
        "best_variant": best["variant"],
        "efficiency_ratio": ratio,
    }


def scaling_table(runs, summary, margin):
    """The scaling table (SCALING_COLUMNS): speedups, and each against its family's best-scaling experiment."""
    rows, log_ratios = speedups(runs, summary)
    families = {}
    for position, row in enumerate(rows):
        families.setdefault(tuple(row[key] for key in FAMILY), []).append(position)
    for positions in families.values():
        best = max(positions, key=lambda position: rows[position]["efficiency"])
        others = [position for position in positions if position != best]
        ratios = [versus_best(log_ratios[position], log_ratios[best]) for position in others]
        for position, log_ratio, outcome in zip(others, ratios, decisions(ratios, margin)):
            rows[position].update(against_best(rows[position], rows[best], log_ratio), **outcome)
        rows[best].update(against_best(rows[best], rows[best], None))
    numbers = [
        name
        for name in SCALING_COLUMNS
        if name.startswith(("efficiency", "speedup", "p_", "communication", "ratio_")) or "gmean" in name
    ]
    table = pd.DataFrame(rows, columns=SCALING_COLUMNS)
    return table.astype({name: "float64" for name in numbers} | {"pairs": "int64", "repeats_to_decide": "Int64"})
