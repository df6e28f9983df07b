"""Summary: what ran, and per comparison group the conclusion the tests support, from the comparisons and versions
tables only."""

from dlbench.plan import WHY
from dlbench.report.common import comparison_groups, deciding_text, group_title, ratio_text

TITLE = "Summary"

CLOSING = (
    "The conclusions above come from the comparisons table only (Comparisons): a stack is called faster or slower "
    "than its group's baseline only where a test proves the difference, equivalent only where a test proves the ratio "
    "within the margin, and inconclusive otherwise, with the repeats that would decide it; each names how its repeats "
    "were compared (paired by round or unpaired), and the machine and versions are under Environments and provenance."
)


def decided_clause(members, verdict):
    """One verdict's members, fastest first, each with its ratio and interval."""
    listed = ", ".join(
        f"{row['stack']} ({row['variant']}) {ratio_text(row)}"
        for _, row in members.sort_values("ratio", ascending=False).iterrows()
    )
    return f"{verdict}: {listed}"


def undecided_clause(members):
    """The inconclusive members, fastest first, each with the repeats that would decide it."""
    listed = [
        f"{row['stack']} ({row['variant']}) {ratio_text(row)}, {deciding_text(row)}"
        for _, row in members.sort_values("ratio", ascending=False).iterrows()
    ]
    return "inconclusive: " + "; ".join(listed)


def methods_text(part):
    """How a group's comparisons were tested: paired by round, unpaired, or some of each."""
    methods = sorted(set(part["method"].dropna()))
    return " and ".join(methods) + ", Holm within the group" if methods else "none tested"


def conclusion(part):
    """The sentence for one comparison group, from the comparisons table only: who is proven faster, slower or
    equivalent, who is inconclusive (and what would decide it), who was not tested. It never names a winner the
    tests did not prove."""
    first = part.iloc[0]
    clauses = []
    equivalences = sorted(verdict for verdict in set(part["verdict"]) if verdict.startswith("equivalent"))
    for verdict in ("faster", "slower", *equivalences):
        members = part[part["verdict"] == verdict]
        if len(members):
            clauses.append(decided_clause(members, verdict))
    undecided = part[part["verdict"] == "inconclusive"]
    if len(undecided):
        clauses.append(undecided_clause(undecided))
    untested = part[part["verdict"].str.startswith("not tested")]
    if len(untested):
        clauses.append(
            f"not tested (fewer than 3 ok repeats): {', '.join(untested['stack'] + ' (' + untested['variant'] + ')')}"
        )
    return (
        f"- {group_title(first)}; against {first['baseline_stack']} ({first['baseline_variant']}, "
        f"{first['baseline_rule']}; {methods_text(part)}): " + "; ".join(clauses) + "."
    )


def regression_lines(versions):
    """The summary's sentences on releases, from the versions table only."""
    flagged = versions[versions["regression"]]
    return [
        f"- **Regression**: {row['framework']} {row['newer_version']} trains at {ratio_text(row)} of "
        f"{row['older_version']}, {group_title(row)} ({row['variant']})."
        for _, row in flagged.iterrows()
    ]


def exclusion_line(entry):
    """One `exclude` entry: what it left out, and why where the config says."""
    left_out = ", ".join(
        f"{axis} {' or '.join(map(str, values if isinstance(values, list) else [values]))}"
        for axis, values in entry.items()
        if axis != WHY
    )
    return f"- {left_out}: {entry.get(WHY) or 'no reason given in the config'}."


def exclusions_text(origin):
    """The experiments the config left out (`exclude`), each entry with its reason."""
    entries = origin.get("exclusions") or []
    if not entries:
        return []
    return ["", "Left out by the config (`exclude`), so in no table or figure:", "", *map(exclusion_line, entries)]


def markdown(study, figures):
    runs, summary = study.runs, study.summary
    lines = [
        (
            f"{len(runs)} runs of {len(summary)} experiments over {summary['stack'].nunique()} stacks "
            f"({', '.join(sorted(summary['stack'].unique()))}); "
            f"{int((runs['status'] != 'ok').sum())} runs did not finish with status ok."
        ),
    ]
    lines += [*exclusions_text(study.origin), ""]
    overlapping = int((runs["overlapping_runs"] > 0).sum())
    if overlapping:
        lines += [
            (
                f"**Warning: {overlapping} runs overlapped another run on the same host; their timings are "
                "not trustworthy.**"
            ),
            "",
        ]
    lines += [conclusion(part) for _, part in comparison_groups(study.comparisons)]
    lines += regression_lines(study.versions)
    lines += ["", CLOSING]
    return "\n".join(lines) + "\n"
