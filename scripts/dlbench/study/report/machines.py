"""Machines side by side: every workload that ran on several machines (this study's and its imported bundles'), a
column per machine, each machine's ratio over the reference machine, and whether the stacks rank alike (the machines
table, dlbench.study.analysis.machines)."""

from dlbench.study.analysis.machines import WORKLOAD_GROUP
from dlbench.study.report.common import bracketed, markdown_table, number

TITLE = "Machines side by side"
ABSENT = (
    "every run ran on one machine: the config's `imports` set other studies' result bundles (`snakemake bundle`) "
    "beside this one's."
)

METHOD = (
    "Each workload (an experiment but its device) that ran on more than one machine: per machine its geometric-mean "
    "steady throughput (images, or a language model's sequences, per second) with its 95% interval, and in brackets "
    "its ratio over the reference machine, **{reference}**, with a 95% interval from Welch's t on the log "
    "throughputs: unpaired, each machine with its own noise (no interval below 3 ok runs on a side). The ranking "
    "orders the stacks every machine of the group ran by their fastest variant's throughput: an order of estimates, "
    "whose leads each machine's Comparisons and page-1 answer test. The table is also `results/tables/machines.csv` "
    "(and `.parquet`)."
)


def workload_title(row):
    return (
        f"{row['model']} on {row['dataset']}, batch {row['batch_size']}, {row['optimizer']} lr "
        f"{row['learning_rate']:g}, {row['epochs']} epochs, {row['data_placement']} data"
        + ("" if row["replicas"] == 1 else f", {row['replicas']} replicas ({row['scaling']})")
    )


def machine_cell(row):
    throughput = bracketed(
        row["train_images_per_s_gmean"], row["train_images_per_s_ci95_low"], row["train_images_per_s_ci95_high"], ",.0f"
    )
    if row["machine"] == row["reference_machine"]:
        return throughput
    return f"{throughput} ({bracketed(row['ratio'], row['ratio_ci95_low'], row['ratio_ci95_high'], '.2f')}x)"


def ranking_text(group, machines):
    """Whether the stacks rank alike on every machine, and where not each machine's order with its numbers."""
    first = group.iloc[0]
    if not first["order"]:
        return "No stack ran on every machine of this workload: no ranking to set side by side."
    confidence = "; ".join(
        f"{machine}: {group[group['machine'] == machine]['page1_confidence'].iloc[0] or 'not on page 1'}"
        for machine in machines
    )
    if first["ranking_holds"]:
        return f"The stacks rank alike on every machine: {first['order']} (page 1's answer per machine: {confidence})."
    best = group.groupby(["machine", "stack"])["train_images_per_s_gmean"].max()
    orders = "; ".join(
        f"on {machine}, " + " > ".join(f"{stack} ({number(best[machine, stack])})" for stack in order.split(" > "))
        for machine, order in group.groupby("machine")["order"].first().items()
    )
    return f"**The ranking differs between machines**: {orders} (page 1's answer per machine: {confidence})."


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
            + ranking_text(group, present)
        )
    return "\n\n".join(parts) + "\n"
