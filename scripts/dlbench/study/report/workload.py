"""The workload: what the runs trained on and for how long - each dataset's sizes, classes and image shape; per
comparison group the steps per epoch, the target accuracy and when the runs reached it, how long whole trainings
lasted and the first epoch's share of them. Printed from the workload table; it says where time to target is
first-epoch time and where compilation dominates end to end."""

import pandas as pd

from dlbench.study.report.common import group_title, groups_text, lead_in, markdown_table, number, percent

TITLE = "The workload"
ABSENT = "no run finished (Failed runs, Contended runs)."

# Where the first epoch (tracing, compilation, warm-up) is more than this share of a whole training, it decides the
# end-to-end time: the steady epochs, which throughput measures, are the smaller part.
DOMINANT_SHARE = 0.5


def dataset_table(workload):
    datasets = workload.dropna(subset=["dataset_train_images"]).drop_duplicates("dataset")
    if datasets.empty:
        return "The runs did not record their datasets' sizes (recorded before they were).\n"
    rows = [
        [
            row["dataset"],
            number(row["dataset_train_images"]),
            number(row["dataset_test_images"]),
            number(row["dataset_classes"]),
            row["dataset_image_shape"],
        ]
        for _, row in datasets.iterrows()
    ]
    if not any(is_token_shape(row["dataset_image_shape"]) for _, row in datasets.iterrows()):
        return markdown_table(
            ["dataset", "training images", "test images", "classes", "image (height x width x channels)"], rows
        )
    header = ["dataset", "training examples", "test examples", "classes (tokens: the vocabulary)", "example shape"]
    return markdown_table(header, rows) + (
        "\nA token dataset's examples are sequences of token ids, its shape their context; an image's is height x "
        "width x channels.\n"
    )


def is_token_shape(shape):
    """Whether a dataset's recorded example shape (text: "64", or "28x28x1" for an image) is a sequence's."""
    return isinstance(shape, str) and "x" not in shape


def reached_text(row):
    """After which epoch the runs reached the target accuracy: every run after epoch 1, by epoch N, or how many
    did."""
    if row["runs_ok"] == 0:
        return "no run finished"
    if row["target_at_first_epoch"]:
        return "every run after epoch 1"
    if row["runs_reached_target"] == row["runs_ok"]:
        return f"every run, by epoch {int(row['target_epoch_max'])}"
    return f"{int(row['runs_reached_target'])} of {int(row['runs_ok'])} runs"


def target_text(row):
    """A group's target: its test accuracy, or a language model's test loss."""
    if pd.notna(row.get("target_loss")):
        return f"test loss {row['target_loss']:g}"
    return "none" if pd.isna(row["target_accuracy"]) else f"accuracy {row['target_accuracy']:g}"


def trainings_text(row):
    if row["runs_ok"] == 0:
        return "–"
    return f"{row['training_s_min']:,.2f}-{row['training_s_max']:,.2f}"


def group_table(workload):
    rows = [
        [
            group_title(row),
            number(row["steps_per_epoch"]),
            target_text(row),
            reached_text(row),
            trainings_text(row),
            percent(row["first_epoch_share_median"]),
        ]
        for _, row in workload.iterrows()
    ]
    header = [
        "group",
        "steps per epoch",
        "target",
        "target reached",
        "whole training, s (min-max)",
        "first epoch's share (median)",
    ]
    return markdown_table(header, rows)


def findings(workload):
    """The sentences the table supports: where time to target is first-epoch time, and where the first epoch takes
    most of a whole training."""
    finished = workload[workload["runs_ok"] > 0]
    lines = []
    first = finished[finished["target_at_first_epoch"]]
    if len(first):
        lines.append(
            f"In {len(first)} of {groups_text(len(finished))} every run reached the target accuracy after its first "
            "epoch: there, time to target is the first epoch's time, and it ranks the stacks by their first epoch."
        )
    dominated = finished[finished["first_epoch_share_median"] > DOMINANT_SHARE]
    if len(dominated):
        lines.append(
            f"Whole trainings last {finished['training_s_min'].min():,.2f}-{finished['training_s_max'].max():,.2f} s; "
            f"in {len(dominated)} of {groups_text(len(finished))} the first epoch, which carries tracing, compilation "
            f"and warm-up, is more than {percent(DOMINANT_SHARE)} of a training (median): end to end, compilation "
            "dominates, and steady throughput describes the smaller part of the time (End to end)."
        )
    return "\n\n".join(lines)


def markdown(study, figures):
    workload = study.workload
    if workload.empty or workload["runs_ok"].sum() == 0:
        return None
    return (
        lead_in("The datasets, as the runs read them:")
        + dataset_table(workload)
        + "\n"
        + lead_in(
            "Per group, the training steps per epoch (whole batches), when the runs reached the target accuracy, "
            "how long whole trainings lasted (every epoch, evaluation excluded) and the first epoch's share of that:"
        )
        + group_table(workload)
        + "\n"
        + findings(workload)
        + "\n"
    )
