"""The machine's speed by round: how far the machine drifted while the study ran, round by round."""

import matplotlib.pyplot as plt

from dlbench.study.report.common import TEXT_WIDTH, save

TITLE = "The machine's speed by round"
ABSENT = "every run of a machine ran in one round: no drift between rounds to show."


def drift_figure(rounds, path):
    """Per machine, each round's speed as a factor on the average round, with its 95% interval."""
    machines = list(dict.fromkeys(rounds["machine"]))
    figure, axis = plt.subplots(figsize=(TEXT_WIDTH, 2.2))
    for offset, machine in enumerate(machines):
        part = rounds[rounds["machine"] == machine]
        shift = (offset - (len(machines) - 1) / 2) * 0.1  # machines side by side within a round
        errors = [part["speed"] - part["speed_low"], part["speed_high"] - part["speed"]]
        axis.errorbar(
            part["round"] + shift, part["speed"], yerr=errors, fmt="o", markersize=3, capsize=2, label=machine
        )
    axis.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    axis.set_xlabel("round")
    axis.set_ylabel("speed (x the average round)")
    axis.set_xticks(sorted(set(rounds["round"])))
    if len(machines) > 1:
        axis.legend(fontsize="small")
    save(figure, path)


def drift_words(rounds):
    """One sentence per machine: its slowest and fastest rounds and the drift between them."""
    sentences = []
    for machine, part in rounds.groupby("machine", sort=True):
        slowest, fastest = part.loc[part["speed"].idxmin()], part.loc[part["speed"].idxmax()]
        sentences.append(
            f"{machine}: round {slowest['round']} ran at {slowest['speed']:.2f}x the average round "
            f"[{slowest['speed_low']:.2f}, {slowest['speed_high']:.2f}], round {fastest['round']} at "
            f"{fastest['speed']:.2f}x [{fastest['speed_low']:.2f}, {fastest['speed_high']:.2f}]: a drift of "
            f"{part['drift'].iloc[0]:.2f}x."
        )
    return " ".join(sentences)


def markdown(study, figures):
    if study.rounds.empty:
        return None
    drift_figure(study.rounds, figures / "drift.svg")
    return (
        "![The machine's speed by round](figures/drift.svg)\n\n"
        "Each round's speed as a factor on the machine's average round, with its 95% interval: log throughput fitted "
        "as experiment plus round over every run of the machine (rounds as blocks; the `rounds` table). "
        f"{drift_words(study.rounds)} The comparisons pair each round's runs, so drift between rounds leaves their "
        "verdicts alone; the relative table and the summary's `train_images_per_s_adjusted` read each experiment at "
        "the average round of its group, so that experiments a race ran in different rounds meet on one footing.\n"
    )
