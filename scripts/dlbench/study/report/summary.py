"""Summary: what ran and what the config left out, and where each finding is: page 1 for each group's answer,
Comparisons for every experiment's verdict (printed there only), the version study's regressions flagged."""

from dlbench.study.plan import WHY
from dlbench.study.report.common import group_title, ratio_text

TITLE = "Summary"

WHERE_VERDICTS_ARE = (
    "Each group's fastest, its lead over the runner-up and how sure that is are in the answer, first; every "
    "experiment's verdict "
    "against its group's baseline (faster, slower, equivalent or inconclusive, with the repeats that would decide "
    "it) is in Comparisons, from the comparisons table only, which never names a winner the tests did not prove. The "
    "machine and versions are under Environments and provenance."
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


def status_counts(statuses):
    """How the runs ended, ok first: "99 ok, 1 contended (Contended runs)"; a failure names its section."""
    counts = statuses.value_counts()
    others = [
        f"{counts[status]} {status} ({'Contended runs' if status == 'contended' else 'Failed runs'})"
        for status in sorted(counts.index)
        if status != "ok"
    ]
    return ", ".join([f"{counts.get('ok', 0)} ok", *others])


def markdown(study, figures):
    runs, summary = study.runs, study.summary
    lines = [
        (
            f"{len(runs)} runs of {len(summary)} experiments over {summary['stack'].nunique()} stacks "
            f"({', '.join(sorted(summary['stack'].unique()))}); "
            f"{status_counts(runs['status'])}."
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
    lines += regression_lines(study.versions)
    lines += ["", WHERE_VERDICTS_ARE]
    return "\n".join(lines) + "\n"
