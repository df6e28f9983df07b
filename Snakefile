# Deep-learning framework benchmark: one training job per experiment x repeat, each in its stack's own
# environment, aggregated into tables and an HTML + PDF report. See README.md and config.yaml.


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/envs.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "results/report/report.html",
        "results/report/report.pdf",
    default_target: True
