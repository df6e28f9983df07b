"""The comparisons and versions tables. A comparison is the ratio of geometric-mean training throughputs of an
experiment against its group's baseline (the config's `comparison_baseline` stack where the group has it, else the
fastest with enough ok repeats to be tested). Its method: paired by round where both sides have ok runs in at least 3
common rounds (`rep`: runs of one round ran side by side in time), else Welch's unpaired t on log throughput. Two tests,
each Holm-adjusted within the comparison group (the family: the experiments that differ only in stack and variant),
differences and equivalences apart: the t-test of no difference and the equivalence test (TOST) against a ratio within
[1 / (1 + margin), 1 + margin]. The family counts every pair of the group's tested experiments, not only those against
the baseline: the baseline is chosen from the same data, and Holm over its comparisons alone would not cover that choice
(dlbench.study.analysis.statistics says why). A paired comparison's variance is pooled over the study's paired
comparisons on its machine and device (dlbench.study.analysis.pooling: limma's moderated t). Verdict: "faster" or
"slower" where the adjusted difference p is below 0.05; "equivalent within 5 %" where the adjusted equivalence p is
below 0.05; else "inconclusive", with `repeats_to_decide` (the rounds that would decide it at the observed ratio and
spread; empty where no practical count would). The ratio's interval (`ratio_low`, `ratio_high`, with `ratio_confidence`)
is at the level the verdict was tested at, so it agrees with the verdict. dlbench.study.analysis.statistics says why.

Raced (config `race`), a group's stack comparisons are its race's (dlbench.study.analysis.race, replayed through the
looks the group reached, as the planner ran it): each rival against the leader it was last judged against, over that
look's rounds, at that look's level ("slower" where eliminated, "equivalent" where retired, "faster" where a live rival
came out proven faster on the rounds it shares with the leader, else "inconclusive"); its
interval at that level, so it agrees with the verdict; `p_holm` and `p_equivalence_holm` are the p's scaled to the
race's 0.05 (p times 0.05 over the look's level), so that below 0.05 reads as decided there too; `race_state`,
`race_outcome` and `race_leader` say where the rival and its group stand, and which experiment led at the group's last
look (page 1 names it the fastest, unless a live rival was proven faster than it).

A version pair is the same comparison between two releases of one framework (same backend and variant), newer over
older, Holm-adjusted within the versions of one experiment group (consecutive releases: pairs fixed in advance, so
the family is the pairs alone): "slower" there is a regression. Beside it: the ratio
of first-epoch times (compilation included) and the difference in mean final test accuracy.
"""

import re

import numpy as np
import pandas as pd

from dlbench.study.analysis.pooling import pooled_across, prior_columns, priors_by_source
from dlbench.study.analysis import sequential
from dlbench.study.analysis.race import (
    AT_BUDGET,
    ELIMINATED,
    RETIRED,
    UNDECIDED,
    in_order,
    look_ratio,
    noise_source,
    ok_only,
    race_groups,
    race_study,
    schedule,
)
from dlbench.study.analysis.statistics import (
    ALPHA,
    FASTER,
    INCONCLUSIVE,
    MIN_REPEATS,
    NOT_TESTED,
    PAIRED,
    SLOWER,
    compared,
    decisions,
    equivalence_bound,
    equivalent,
)
from dlbench.study.analysis.tables import GROUP


def baseline_of(part, named):
    """The group's baseline experiment and why: the named stack's fastest variant where the group has it, else the
    fastest experiment, so that each ratio says how far an experiment is from the group's best. Among experiments
    with enough ok repeats to be tested where there are any: a baseline that cannot be tested decides nothing."""
    candidates = part[part["stack"] == named] if named in set(part["stack"]) else part
    testable = candidates[candidates["runs_ok"] >= MIN_REPEATS]
    candidates = testable if len(testable) else candidates
    rule = f"{named} (config comparison_baseline)" if named in set(part["stack"]) else "the fastest"
    return candidates.loc[candidates["train_images_per_s_gmean"].idxmax()], rule


TEST_COLUMNS = ["method", "pairs", "ratio"]
DECISION_COLUMNS = [
    "ratio_low",
    "ratio_high",
    "ratio_confidence",
    "p_value",
    "p_holm",
    "p_equivalence",
    "p_equivalence_holm",
    "equivalence_margin",
    "verdict",
    "repeats_to_decide",
    "resolvable_ratio",
]
COMPARISON_COLUMNS = [
    *GROUP,
    "stack",
    "variant",
    "experiment_id",
    "runs_ok",
    "baseline_stack",
    "baseline_variant",
    "baseline_experiment_id",
    "baseline_runs_ok",
    "baseline_rule",
    *TEST_COLUMNS,
    *DECISION_COLUMNS,
    "pooled_prior_sd",
    "pooled_prior_freedom",
    "race_state",
    "race_outcome",
    "race_leader",
]


def ok_throughputs(runs):
    """(experiment id, machine) -> {round (rep): steady throughput} of its ok runs: a run of any other status (an
    error, or one contended by other load) never enters a statistic."""
    ok = runs[(runs["status"] == "ok") & runs["train_images_per_s"].notna()]
    return {
        key: dict(zip(group["rep"].astype(int), group["train_images_per_s"].astype(float)))
        for key, group in ok.groupby(["experiment_id", "machine"])
    }


def on_machine(row):
    return row["experiment_id"], row["machine"]


def ratio_columns(values, reference, row, reference_row):
    """The method, pairs and ratio of one experiment's throughputs (round -> value) against another's, and the log
    ratio its tests take (None, and only the ratio of geometric means, with too few repeats). Its interval comes
    with its verdict (decisions), at the level the verdict was tested at."""
    method, pairs, log_ratio = compared(values, reference)
    if log_ratio is None:
        ratio = row["train_images_per_s_gmean"] / reference_row["train_images_per_s_gmean"]
        return dict(zip(TEST_COLUMNS, (method, pairs, ratio))), None
    return dict(zip(TEST_COLUMNS, (method, pairs, np.exp(log_ratio.estimate)))), log_ratio


def with_verdicts(rows, log_ratios, columns, margin, baseline_from_data=True):
    """The table of rows (each with its log ratio), tested and given its verdict, Holm-adjusted within each
    experiment group (GROUP): the family of comparisons a reader reads together (every pair of the group where the
    baseline was chosen from the data: statistics.decisions)."""
    table = pd.DataFrame(rows, columns=columns)
    outcomes = [None] * len(rows)
    for positions in table.groupby(GROUP, dropna=False, sort=False).indices.values():
        for position, outcome in zip(
            positions, decisions([log_ratios[index] for index in positions], margin, baseline_from_data)
        ):
            outcomes[position] = outcome
    table[DECISION_COLUMNS] = pd.DataFrame(outcomes, columns=DECISION_COLUMNS, index=table.index)
    return table.astype({"pairs": "int64", "repeats_to_decide": "Int64"})


def comparisons(runs, summary, named_baseline, margin, race=None):
    """One row per experiment against its group's baseline (groups: experiments equal but for stack and variant);
    each paired comparison's variance pooled over the study's paired comparisons on its machine and device
    (dlbench.study.analysis.pooling). race: the config's `race` with `repeats` beside it where the study raced (each
    group's rows are then its race's: raced_comparisons)."""
    if race is not None and race["enabled"]:
        return raced_comparisons(runs, summary, race, margin)
    throughputs = ok_throughputs(runs)
    rows, log_ratios = [], []
    measured = summary[summary["train_images_per_s_gmean"].notna()]
    for key, part in measured.groupby(GROUP, dropna=False, sort=True):
        if len(part) < 2:
            continue
        baseline, rule = baseline_of(part, named_baseline)
        for _, row in part[part["experiment_id"] != baseline["experiment_id"]].iterrows():
            values, reference = throughputs[on_machine(row)], throughputs[on_machine(baseline)]
            tests, log_ratio = ratio_columns(values, reference, row, baseline)
            rows.append(
                dict(
                    zip(GROUP, key),
                    stack=row["stack"],
                    variant=row["variant"],
                    experiment_id=row["experiment_id"],
                    runs_ok=len(values),
                    baseline_stack=baseline["stack"],
                    baseline_variant=baseline["variant"],
                    baseline_experiment_id=baseline["experiment_id"],
                    baseline_runs_ok=len(reference),
                    baseline_rule=rule,
                    **tests,
                )
            )
            log_ratios.append(log_ratio)
    sources = [(row["machine"], row["device"]) for row in rows]  # a CPU's noise is not a GPU's
    references = [(row["machine"], row["baseline_experiment_id"]) for row in rows]
    methods = [row["method"] for row in rows]
    priors = priors_by_source(methods, log_ratios, sources, references)
    log_ratios = pooled_across(methods, log_ratios, sources, references, priors)
    for row, method, source in zip(rows, methods, sources):
        row.update(prior_columns(priors[source] if method == PAIRED else None))
    return with_verdicts(rows, log_ratios, COMPARISON_COLUMNS, margin)


def raced_row(rival, judgement, state, throughputs, prior, margin, most, reachable):
    """The test and decision columns of one rival of a race, against the leader it was last judged against, from the
    race's confidence sequence at that look's level (dlbench.study.analysis.sequential): its interval, its
    always-valid p's, and where still open the rounds that would decide it and the lead `most` rounds resolve. In a
    group the race left within reach (`reachable`: stopped at the budget), a rival whose ratio as shown would need more
    than `most` rounds needs the most, as the race costed it (a ratio within its noise decides there)."""
    log_ratio = look_ratio(throughputs[rival], throughputs[judgement.against], judgement.rounds, prior)
    if log_ratio is None:
        tests = dict(method=None, pairs=0, ratio=np.nan)
        return dict(tests, verdict=NOT_TESTED, equivalence_margin=margin, race_state=state)
    called = {ELIMINATED: SLOWER, RETIRED: equivalent(margin)}.get(state, INCONCLUSIVE)
    low, high = sequential.interval(log_ratio, judgement.level)
    if called == INCONCLUSIVE and low > 0:
        # The leader is chosen on each side's own rounds, the test pairs their common ones: a live rival can come out
        # proven faster there, a claim of the same sequence, at the same level, as an elimination.
        called = FASTER
    bound = equivalence_bound(margin)
    p_value, p_same = sequential.difference_p(log_ratio), sequential.equivalence_p(log_ratio, bound)
    scale = ALPHA / judgement.level
    needed = sequential.rounds_to_decide(log_ratio, bound, judgement.level, most) if called == INCONCLUSIVE else None
    if needed is None and called == INCONCLUSIVE and reachable:
        needed = most
    return dict(
        method=PAIRED,
        pairs=log_ratio.rounds,
        ratio=np.exp(log_ratio.estimate),
        ratio_low=np.exp(low),
        ratio_high=np.exp(high),
        ratio_confidence=1 - judgement.level,
        p_value=p_value,
        p_holm=min(1.0, p_value * scale),
        p_equivalence=p_same,
        p_equivalence_holm=min(1.0, p_same * scale),
        equivalence_margin=margin,
        verdict=called,
        repeats_to_decide=needed,
        resolvable_ratio=sequential.resolvable_ratio(log_ratio, most, judgement.level),
        race_state=state,
    )


def race_outcome(result):
    """A finished race's outcome: one undecided at its last look though within reach was stopped at the budget."""
    return AT_BUDGET if result.outcome == UNDECIDED else result.outcome


def raced_comparisons(runs, summary, race, margin):
    """The comparisons table of a raced study: per group, one row per rival of its race (raced_row), the rival's
    baseline the leader it was judged against."""
    looks = schedule(race["repeats"], race["max_rounds"])
    groups = race_groups(runs)
    races, priors = race_study(groups, looks, margin, race["pooled"], noise_source)
    described = summary.set_index(["experiment_id", "machine"])
    rows = []
    for key, result in in_order(races):
        throughputs = ok_only(groups[key])
        machine = key[GROUP.index("machine")]
        for rival, judgement in sorted(result.judgements.items()):
            own, baseline = described.loc[(rival, machine)], described.loc[(judgement.against, machine)]
            state = result.states[rival][0]
            reachable = result.outcome == UNDECIDED
            tests = raced_row(rival, judgement, state, throughputs, priors[key], margin, looks[-1], reachable)
            rows.append(
                dict(
                    zip(GROUP, key),
                    stack=own["stack"],
                    variant=own["variant"],
                    experiment_id=rival,
                    runs_ok=len(throughputs[rival]),
                    baseline_stack=baseline["stack"],
                    baseline_variant=baseline["variant"],
                    baseline_experiment_id=judgement.against,
                    baseline_runs_ok=len(throughputs[judgement.against]),
                    baseline_rule=f"the race's leader at round {judgement.rounds}",
                    **tests,
                    **prior_columns(priors[key] if tests["method"] == PAIRED else None),
                    race_outcome=race_outcome(result),
                    race_leader=result.leader,
                )
            )
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    return table.astype({"pairs": "int64", "repeats_to_decide": "Int64"})


def release(version):
    """A version string as a sortable tuple of its numbers ("2.13.0+cpu" -> (2, 13, 0))."""
    return tuple(int(number) for number in re.findall(r"\d+", str(version).split("+")[0]))


def stack_release(row):
    """(sortable release, name) of an experiment's stack: the framework's release, then its backend's where the
    stack reports one, so that Keras 3.15 on JAX 0.9 and on JAX 0.10 are two releases of one stack."""
    backend = row["backend_version"] if isinstance(row["backend_version"], str) else None
    name = row["framework_version"] + (f" ({backend})" if backend else "")
    return (release(row["framework_version"]), release(backend or "")), name


VERSION_IDENTITY = ["framework", "backend", "variant", *GROUP]
VERSION_COLUMNS = [
    *VERSION_IDENTITY,
    "older_stack",
    "older_version",
    "older_packages_sha256",
    "older_runs_ok",
    "newer_stack",
    "newer_version",
    "newer_packages_sha256",
    "newer_runs_ok",
    *TEST_COLUMNS,
    *DECISION_COLUMNS,
    "regression",
    "first_epoch_ratio",
    "accuracy_difference",
]


def version_pairs(runs, summary, margin):
    """One row per pair of releases of one framework (consecutive releases, by version number) on otherwise
    identical experiments: newer over older throughput, tested as the comparisons are (Holm within each experiment
    group); first-epoch time ratio and accuracy difference beside it."""
    throughputs = ok_throughputs(runs)
    packages = runs[runs["status"] == "ok"].groupby(["experiment_id", "machine"])["provenance_packages_sha256"].first()
    rows, log_ratios = [], []
    measured = summary[summary["train_images_per_s_gmean"].notna() & summary["framework_version"].notna()]
    for key, part in measured.groupby(VERSION_IDENTITY, dropna=False, sort=True):
        releases = [stack_release(row) for _, row in part.iterrows()]
        part = part.assign(release=[key for key, _ in releases], release_name=[name for _, name in releases])
        part = part.sort_values("release")
        for (_, older), (_, newer) in zip(part.iterrows(), part.iloc[1:].iterrows()):
            if older["release"] == newer["release"]:
                continue  # two stacks of one release: a stack comparison, not a version one
            values, reference = throughputs[on_machine(newer)], throughputs[on_machine(older)]
            tests, log_ratio = ratio_columns(values, reference, newer, older)
            rows.append(
                dict(
                    zip(VERSION_IDENTITY, key),
                    older_stack=older["stack"],
                    older_version=older["release_name"],
                    older_packages_sha256=packages.get(on_machine(older)),
                    older_runs_ok=len(reference),
                    newer_stack=newer["stack"],
                    newer_version=newer["release_name"],
                    newer_packages_sha256=packages.get(on_machine(newer)),
                    newer_runs_ok=len(values),
                    **tests,
                    first_epoch_ratio=newer["first_epoch_s_gmean"] / older["first_epoch_s_gmean"],
                    accuracy_difference=newer["final_test_accuracy_mean"] - older["final_test_accuracy_mean"],
                )
            )
            log_ratios.append(log_ratio)
    table = with_verdicts(rows, log_ratios, VERSION_COLUMNS, margin, baseline_from_data=False)
    table["regression"] = table["verdict"] == "slower"
    return table
