"""The workload table: per comparison group, what its runs trained on and for how long - the dataset as the runs read
it (sizes, classes, image shape), the steps per epoch, the target accuracy and after which epoch the runs reached it,
and how long whole trainings lasted, with the first epoch's share of them (tracing, compilation, warm-up). Over the
runs with status ok."""

import pandas as pd

from dlbench.study.analysis.tables import GROUP

DATASET_COLUMNS = ["dataset_train_images", "dataset_test_images", "dataset_classes", "dataset_image_shape"]
COLUMNS = [
    *GROUP,
    *DATASET_COLUMNS,
    "global_batch_size",
    "images_per_epoch",
    "steps_per_epoch",
    "target_accuracy",
    "target_loss",
    "runs_ok",
    "runs_reached_target",
    "target_epoch_max",
    "target_at_first_epoch",
    "training_s_min",
    "training_s_max",
    "first_epoch_share_median",
]


def first(values):
    """A group's value of a column its runs share (None where no run recorded it)."""
    values = values.dropna()
    return values.iloc[0] if len(values) else None


def describe(group):
    ok = group[group["status"] == "ok"]
    images, batch = first(ok["images_per_epoch"]), first(ok["global_batch_size"])
    reached = ok["target_epoch"].dropna()
    row = {column: first(ok[column]) if column in ok else None for column in DATASET_COLUMNS}
    row.update(
        global_batch_size=batch,
        images_per_epoch=images,
        steps_per_epoch=None if images is None or batch is None else int(images) // int(batch),
        target_accuracy=first(group["target_accuracy"]),
        target_loss=first(group["target_loss"]),
        runs_ok=len(ok),
        runs_reached_target=len(reached),
        target_epoch_max=reached.max() if len(reached) else None,
        # Every ok run reached the target after its first epoch: its time to target is its first epoch's time.
        target_at_first_epoch=bool(len(ok)) and len(reached) == len(ok) and bool((reached == 1).all()),
        training_s_min=ok["training_s"].min(),
        training_s_max=ok["training_s"].max(),
        first_epoch_share_median=(ok["first_epoch_s"] / ok["training_s"]).median(),
    )
    return pd.Series(row)


def workload_table(runs):
    """One row per comparison group (GROUP), from each run's final try."""
    final = runs[runs["final_try"]]
    for column in DATASET_COLUMNS:  # records from before datasets were described have none of these
        if column not in final:
            final = final.assign(**{column: None})
    if final.empty:
        return pd.DataFrame(columns=COLUMNS)
    table = final.groupby(GROUP, dropna=False, sort=True).apply(describe, include_groups=False).reset_index()
    return table[COLUMNS]
