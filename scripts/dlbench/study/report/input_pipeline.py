"""Input pipelines: streamed experiments, each framework's loader alone beside training, and the input-bound verdict."""

from dlbench.study.report.common import (
    cell,
    markdown_table,
    number,
    panel_rows,
    panel_title,
    panel_titles,
    share,
    variant_labels,
)

TITLE = "Input pipelines"
ABSENT = (
    "no experiment streamed its data (data placement `stream`: an image folder read by each framework's own loader; "
    "see docs/streaming.md)."
)

METHOD = (
    "Experiments with streamed data (data placement `stream`): an image folder read every epoch by each framework's "
    "own loader (decode, random-resized crop and flip for training; resize and centre crop for evaluation), uint8 "
    'batches made float and normalised on the device. "Loader alone" is one pass of `stream.loader_batches` batches '
    'with the model removed (decoded, augmented and placed on the device), after training; "training / loader" is '
    "the steady training throughput over it. Training is called input-bound where it runs at 0.9 or more of its "
    "loader's rate, or where the input share (Input share, memory, utilisation and energy) is 50% or more; partly "
    "input-bound from an input share of 10%. GPU % is NVML's utilisation over the steady epochs: an input-bound GPU "
    "waits."
)


def input_pipeline_table(streamed):
    header = [
        "stack",
        "variant",
        "loader",
        "workers",
        "loader alone img/s",
        "training img/s",
        "training / loader",
        "input share",
        "GPU %",
        "verdict",
    ]
    sections = []
    for panel in panel_titles(streamed):
        part = panel_rows(streamed, panel).assign(variant_label=lambda frame: variant_labels(frame))
        rows = [
            [
                row["stack"],
                row["variant_label"],
                str(row["stream_loader"]).split(" (")[0],
                number(row["stream_workers"]),
                cell(row, "loader_images_per_s_mean"),
                cell(row, "train_images_per_s_gmean"),
                cell(row, "input_bound_share_mean", 2),
                cell(row, "input_share_mean", 1, share),
                cell(row, "gpu_utilisation_mean_mean"),
                row["input_bound"] or "–",
            ]
            for _, row in part.sort_values(["stack", "variant_label"]).iterrows()
        ]
        sections.append(f"### {panel_title(panel)}\n\n" + markdown_table(header, rows))
    return "\n".join(sections)


def markdown(study, figures):
    streamed = study.summary[study.summary["data_placement"] == "stream"]
    if streamed.empty:
        return None
    return METHOD + "\n\n" + input_pipeline_table(streamed)
