"""Comparisons: within each group, every experiment against the group's baseline, with the tests' verdicts: the one
table of every verdict (page 1 gives each group's answer from them, and names an unproven rival's ratio where it
leaves the group undecided)."""

from dlbench.study.report.common import (
    METHOD_WORD,
    comparison_groups,
    confidence_text,
    group_title,
    margin_text,
    markdown_table,
    method_word,
    p_text,
    ratio_text,
    variant_label,
    verdict_text,
)

TITLE = "Comparisons"

METHOD = (
    "Within each group of experiments that differ only in stack and variant, every experiment against the group's "
    "baseline (`comparison_baseline` in the config where the group has that stack, else the fastest; either way "
    "among experiments with at least 3 ok repeats where there are any): the ratio of "
    "geometric-mean throughputs with its interval. Repeats run in rounds (round r runs repeat r of every "
    "experiment of a group before any r + 1), so where both sides have ok runs in at least 3 common rounds the "
    "comparison is paired by round: Student's t on the per-round log ratios, which leaves drift between rounds out; "
    "otherwise it is unpaired, Welch's t on log throughput. A paired comparison's variance is pooled over the "
    "study's paired comparisons on its machine and device (limma's moderated t: shrunk toward a prior fitted over "
    "them, with the prior's degrees of freedom added to its own). Two tests per comparison, each Holm-adjusted "
    "within its group: the test of no difference, and the equivalence test (two one-sided tests) of a ratio within "
    '[1 / (1 + margin), 1 + margin]. "faster" or "slower" means an adjusted difference p below 0.05 and an interval '
    'that excludes 1; "equivalent within" the margin an adjusted equivalence p below 0.05; "inconclusive" neither, '
    "with the number of repeats that would decide it with 80% probability if the ratio and its spread across rounds "
    "stay as observed. Holm's family is every pair of the group's tested experiments, m = k (k - 1) / 2 for k, "
    "not only the comparisons against the baseline: the baseline is chosen from the same data, the fastest partly "
    "by chance. Each interval is at the confidence its verdict was tested at (Holm tests the group's "
    "comparisons one step at a time, the first at 0.05 / m, the next at 0.05 / (m - 1), and stops at the first it "
    "cannot decide), so it agrees with the verdict: wholly above or below 1, faster or slower; containing 1 and "
    "inside the margin, equivalent; containing 1 and reaching past the margin, inconclusive. Raced, each rival is "
    "judged by the race's confidence sequence (Racing, in the methodology: an interval valid at every round at "
    "once, at 0.05 shared among every pair of the group), not by Holm's step; its interval is that sequence's, its "
    "p's are always-valid (1 over the evidence against the null), scaled to the race's 0.05 (times the group's "
    'pairs), so that below 0.05 reads as decided there too, and the columns say "race-adjusted". Experiments '
    "with fewer than 3 ok repeats, on either side, are not tested. The table is also "
    "`results/tables/comparisons.csv` (and `.parquet`). Δ, as benchstat prints it: the change in throughput "
    'where the verdict proves one, "~" where it does not, with n per side: the rounds both ran where paired, each '
    "side's finished repeats otherwise."
)


def repeats_text(row):
    """The repeats a comparison rests on, and how they were compared."""
    if row["method"] == "paired by round":
        return f"{row['pairs']} rounds, {METHOD_WORD[row['method']]}"
    return f"{row['runs_ok']} vs {row['baseline_runs_ok']}{method_word(row)}"


def sample_sizes(row):
    """benchstat's n per side: the rounds both sides ran where paired, else each side's ok repeats."""
    if row["method"] == "paired by round":
        return f"n={row['pairs']}+{row['pairs']}"
    return f"n={row['runs_ok']}+{row['baseline_runs_ok']}"


def delta_text(row):
    """benchstat's delta: the change in throughput as a signed percentage where the verdict proves one (faster or
    slower), "~" where it does not, with the n of each side beside it."""
    if row["verdict"] not in ("faster", "slower"):
        return f"~ ({sample_sizes(row)})"
    change = f"{(row['ratio'] - 1) * 100:+.1f}\u00a0%".replace("-", "−")  # a no-break space: never "−53.8 / %"
    return f"{change} ({sample_sizes(row)})"


def prior_text(part):
    """The pooled-variance prior the group's paired comparisons were shrunk toward, where they were: what makes
    intervals that overlap per experiment a verdict."""
    pooled = part.dropna(subset=["pooled_prior_sd"]) if "pooled_prior_sd" in part else part.iloc[0:0]
    if pooled.empty:
        return ""
    first = pooled.iloc[0]
    return (
        f"Pooled variance: each paired comparison's spread of per-round log ratios was shrunk toward a prior of "
        f"standard deviation {first['pooled_prior_sd']:.3f} ({first['pooled_prior_freedom']:.0f} degrees of "
        "freedom lent), fitted over the study's paired comparisons on this machine and device.\n"
    )


def p_header(part):
    """The table's columns; a race's p's are always-valid and scaled to its 0.05 (times the group's pairs, over
    which the race shares its 0.05), not Holm-adjusted."""
    raced = "race_state" in part and part["race_state"].notna().any()
    adjusted = "race-adjusted" if raced else "Holm"
    return [
        "stack",
        "variant",
        "ratio [interval]",
        "Δ",
        "confidence",
        f"p difference ({adjusted})",
        f"p equivalence ({adjusted})",
        "verdict",
        "repeats",
    ]


def comparisons_table(comparisons):
    """Per group, every experiment against the baseline it was judged against: ratio, interval, delta, the adjusted
    p's of the difference and equivalence tests (Holm's, or raced, scaled to the look), verdict, and the repeats it
    rests on with the method."""
    if comparisons.empty:
        return "No group has two experiments with a finished run, so nothing is compared.\n"
    sections = []
    for _, part in comparison_groups(comparisons):
        tables = []
        for _, against in part.groupby(["baseline_experiment_id", "baseline_rule"], sort=False):
            rows = [
                [
                    row["stack"],
                    variant_label(row["variant"], row["data_placement"]),
                    ratio_text(row),
                    delta_text(row),
                    confidence_text(row["ratio_confidence"]),
                    p_text(row["p_holm"]),
                    p_text(row["p_equivalence_holm"]),
                    verdict_text(row),
                    repeats_text(row),
                ]
                for _, row in against.sort_values("ratio").iterrows()
            ]
            # The table right under its heading (a heading stays with what follows), what it is against below it;
            # raced, a rival that left early was judged against the leader of its look, which need not be the last.
            first = against.iloc[0]
            tables.append(
                markdown_table(p_header(part), rows) + f"\nBaseline: {first['baseline_stack']} "
                f"({first['baseline_variant']}), {first['baseline_rule']}.\n"
            )
        sections.append(f"### {group_title(part.iloc[0])}\n\n" + "\n".join(tables) + prior_text(part))
    return (
        f"Equivalence margin: {margin_text(comparisons)} (a ratio within [1 / (1 + margin), 1 + margin]; "
        "`equivalence_margin` in the config).\n\n" + "\n".join(sections)
    )


def markdown(study, figures):
    return METHOD + "\n\n" + comparisons_table(study.comparisons)
