# Deep-learning framework benchmark: one training job per experiment x repeat, each in its stack's own
# environment, aggregated into tables and an HTML + PDF report. See README.md and config.yaml.


configfile: "config.yaml"


include: "workflow/rules/common.smk"


# Structural, not lists of every id: matching a path against a regex of N alternatives made planning quadratic.
wildcard_constraints:
    experiment=r"[^/]+",
    search=r"[^/]+",
    env=regex_alternatives(ENVS),
    dataset=regex_alternatives(axis_values("dataset")),
    file=regex_alternatives(
        {
            spec["name"]
            for entry in REGISTRY.values()
            for spec in entry["files"].values()
        }
    ),
    rep=r"\d+",
    round=r"\d+",
    stack=regex_alternatives(STACKS),
    device="cpu|gpu",
    operator="|".join(config["ops"]["operators"]) or "none",


# On a cluster only the timed jobs are submitted; the rest needs the network or is light (config `slurm`).
localrules:
    all,
    build_env,
    describe_existing_env,
    download_archive,
    prepare_dataset,
    index_image_folder,
    aggregate,
    aggregate_ops,
    plan_round,
    report,


include: "workflow/rules/envs.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/ops.smk"
include: "workflow/rules/max_batch.smk"
include: "workflow/rules/rounds.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        "results/report/report.html",
        "results/report/report.pdf",
        # Snakemake does not remake a missing input of up-to-date jobs: prepared data set aside as changed is
        # remade because the target asks for it.
        prepared_data(),


onsuccess:
    if not report_failures():
        sys.exit(1)


onerror:
    report_failures()
