"""Version regression: each framework's releases on otherwise identical experiments, newer over older."""

from dlbench.study.report.common import (
    comparison_groups,
    group_title,
    margin_text,
    markdown_table,
    method_word,
    number,
    p_text,
    ratio_figure,
    ratio_text,
    variant_label,
    variant_labels,
    verdict_text,
)

TITLE = "Version regression"
ABSENT = (
    "no framework ran at two versions (a version study runs two stacks of one framework on the same experiments; "
    "see the version study in docs/stacks.md)."
)


def version_label(part):
    return (
        part["framework"] + " " + part["older_version"] + " → " + part["newer_version"] + " · " + variant_labels(part)
    )


def version_figure(versions, path):
    """Newer over older release throughput per framework pair (log axis, with the interval its verdict was tested at), a panel per group."""
    ratio_figure(
        list(comparison_groups(versions)),
        version_label,
        group_title,
        "newer / older release throughput (log scale)",
        "no framework ran at two versions",
        path,
    )


def versions_table(versions):
    header = [
        "framework",
        "variant",
        "older (stack, packages)",
        "newer (stack, packages)",
        "throughput ratio",
        "p (Holm), method",
        "verdict",
        "first-epoch ratio",
        "accuracy change",
    ]
    sections = []
    for _, part in comparison_groups(versions):
        rows = [
            [
                row["framework"],
                variant_label(row["variant"], row["data_placement"]),
                f"{row['older_version']} ({row['older_stack']}, {str(row['older_packages_sha256'])[:12]})",
                f"{row['newer_version']} ({row['newer_stack']}, {str(row['newer_packages_sha256'])[:12]})",
                ratio_text(row),
                p_text(row["p_holm"]) + method_word(row),
                "REGRESSION" if row["regression"] else verdict_text(row),
                f"{row['first_epoch_ratio']:.2f}x",
                number(row["accuracy_difference"] * 100, 2) + " pts",
            ]
            for _, row in part.iterrows()
        ]
        sections.append(f"### {group_title(part.iloc[0])}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


def markdown(study, figures):
    if study.versions.empty:
        return None
    version_figure(study.versions, figures / "versions.svg")
    return (
        "![Version ratios: newer over older release throughput, with the interval its verdict was tested at]"
        "(figures/versions.svg)\n\n"
        "Newer release over older, per framework, backend and variant on otherwise identical experiments, "
        "tested as the comparisons are (ratio of geometric-mean steady throughput with its interval at the level its "
        "verdict was tested at, paired by round or else unpaired, Holm-adjusted within each experiment group; "
        f"equivalence within {margin_text(study.versions)}); REGRESSION marks a proven slowdown.\n\n"
        + versions_table(study.versions)
    )
