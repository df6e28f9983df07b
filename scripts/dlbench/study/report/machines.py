"""Machines side by side: every workload that ran on several machines (this study's and its imported bundles'), a
column per machine, each machine's ratio over the reference machine, and whether the stacks rank alike (the machines
table, dlbench.study.analysis.machines)."""

from dlbench.study.analysis.fastest import DECISIVE
from dlbench.study.analysis.machines import WORKLOAD_GROUP
from dlbench.study.analysis.recommendation import ratio_words
from dlbench.study.report.common import markdown_table, number, throughput_cell

TITLE = "Machines side by side"
ABSENT = (
    "every run ran on one machine: the config's `imports` set other studies' result bundles (`snakemake bundle`) "
    "beside this one's."
)

METHOD = (
    "Each workload (an experiment but its device) that ran on more than one machine: per machine its geometric-mean "
    "steady throughput (images per second, or a language model's tokens per second) with its 95% interval, and in "
    "brackets its ratio over the reference machine, **{reference}**, with a 95% interval from Welch's t on the log "
    "throughputs: unpaired, each machine with its own noise (no interval below 3 ok runs on a side). Under each table, "
    "each machine's page-1 answer (a fastest that differs is a proven flip only where every answer is decided), then "
    "the stacks every machine ran in order of their fastest variant's throughput: an order of estimates, whose gaps "
    "each machine's Comparisons test. The table is also `results/tables/machines.csv` (and `.parquet`)."
)


def workload_title(row):
    return (
        f"{row['model']} on {row['dataset']}, batch {row['batch_size']}, {row['optimizer']} lr "
        f"{row['learning_rate']:g}, {row['epochs']} epochs, {row['data_placement']} data"
        + ("" if row["replicas"] == 1 else f", {row['replicas']} replicas ({row['scaling']})")
    )


def machine_cell(row):
    throughput = throughput_cell(row)
    if row["machine"] == row["reference_machine"]:
        return throughput
    return f"{throughput} ({ratio_words(row['ratio'], row['ratio_ci95_low'], row['ratio_ci95_high'])})"


def answers_text(group, machines):
    """Each machine's page-1 answer for the group: the same fastest everywhere, or which differs and whether every
    one of those answers is decided (a proven flip)."""
    answers = group.groupby("machine")[["page1_fastest", "page1_confidence", "page1_decision"]].first()
    answers = answers.reindex(machines)
    if group["fastest_holds"].iloc[0]:
        each = "; ".join(f"{machine}: {answer['page1_decision']}" for machine, answer in answers.iterrows())
        return f"Page 1's fastest is {answers['page1_fastest'].iloc[0]} on every machine ({each})."
    each = "; ".join(
        f"{answer['page1_fastest']} on {machine} ({answer['page1_decision']})" for machine, answer in answers.iterrows()
    )
    proven = (answers["page1_confidence"] == DECISIVE).all()
    return f"**Page 1's fastest differs between machines**: {each}. " + (
        "Every one of these answers is decided: the fastest flips between these machines."
        if proven
        else "Not every one of these answers is decided, so the flip is not proven: the undecided machine's "
        "recommendation on page 1 says what would decide it."
    )


def ranking_text(group):
    """Whether the stacks rank alike on every machine, and where not each machine's order with its numbers."""
    first = group.iloc[0]
    if not first["order"]:
        return "No stack ran on every machine of this workload: no ranking to set side by side."
    if first["ranking_holds"]:
        return f"The stacks rank alike on every machine: {first['order']}."
    best = group.groupby(["machine", "stack"])["stack_throughput"].first()
    orders = "; ".join(
        f"on {machine}, " + " > ".join(f"{stack} ({number(best[machine, stack])})" for stack in order.split(" > "))
        for machine, order in group.groupby("machine")["order"].first().items()
    )
    return f"The stacks' order of estimates differs between machines: {orders}."


def markdown(study, figures):
    table = study.machines
    if table.empty:
        return None
    machines = sorted(
        table["machine"].unique(), key=lambda machine: (machine != table["reference_machine"].iloc[0], machine)
    )
    parts = [METHOD.format(reference=table["reference_machine"].iloc[0])]
    for _, group in table.groupby(WORKLOAD_GROUP, dropna=False, sort=False):
        present = [machine for machine in machines if machine in set(group["machine"])]
        rows = [
            [
                f"{stack} · {variant}",
                *(
                    machine_cell(found.iloc[0]) if len(found := workload[workload["machine"] == machine]) else "–"
                    for machine in present
                ),
            ]
            for (stack, variant), workload in group.groupby(["stack", "variant"])
        ]
        parts.append(
            f"**{workload_title(group.iloc[0])}**\n\n"
            + markdown_table(["stack · variant", *present], rows)
            + "\n"
            + answers_text(group, present)
            + " "
            + ranking_text(group)
        )
    return "\n\n".join(parts) + "\n"
