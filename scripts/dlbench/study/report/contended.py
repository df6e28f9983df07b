"""Contended runs: tries run again because the machine was busy, with what else used it; never averaged."""

from dlbench.study.report.common import markdown_table, number, percent

TITLE = "Contended runs"

METHOD = (
    "Each timed run measures what else used the machine during its timed window: CPU time of processes outside its "
    "own process tree, steal time, other processes on its GPU and clock throttling. A run beyond the config's "
    "`contention` limits is contended: kept, listed here with what it measured, never averaged, and run again after "
    "a settle wait. Repeats run in interleaved rounds (repeat r of every experiment before any repeat r+1), so drift "
    "of the machine falls on every side of a comparison alike."
)


def contended_table(tries):
    """Every contended try (runs and their tries, final or not): its figures and what else used the machine. They
    are kept here and never enter the statistics; a run still contended after its retries was not measured."""
    contended = tries[tries["status"] == "contended"].sort_values(["experiment_id", "rep", "attempt"])
    if contended.empty:
        return (
            "No run was contended: nothing outside the runs' own processes used the machine beyond the "
            "`contention` limits during their timed windows.\n"
        )
    unmeasured = int(contended["final_try"].sum())
    lines = [
        (
            f"{len(contended)} tries were contended and run again; {unmeasured} runs never measured clean (their "
            'experiments report "not measured: machine busy" if no other repeat was clean). Their figures are '
            "listed here and used nowhere else."
        ),
        "",
    ]
    rows = [
        [
            row["experiment_id"],
            row["rep"],
            row["attempt"],
            number(row["train_images_per_s"]),
            number(row["contention_foreign_cpu_cores"], 2),
            percent(row["contention_steal_share"], 1),
            str(row["contention_reasons"])[:200],
        ]
        for _, row in contended.iterrows()
    ]
    header = ["experiment", "repeat", "try", "images/s", "foreign CPU cores", "steal", "why"]
    return "\n".join(lines) + "\n" + markdown_table(header, rows)


def markdown(study, figures):
    return METHOD + "\n\n" + contended_table(study.tries)
