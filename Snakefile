# Deep-learning framework benchmark: one training job per experiment x repeat, each in its stack's own
# environment, aggregated into tables and an HTML + PDF report. See README.md and config.yaml.


import sys
from pathlib import Path

# This copy of the workflow's own library first: the driver's editable install (envs/driver.yaml) names the checkout
# the driver was built in, which a copied workflow (the tests run many) is not.
sys.path.insert(0, f"{workflow.basedir}/scripts")
from dlbench.study import configuration


configfile: configuration.workflow_config_file()


# `snakemake --report report.zip`: the report, tables and figures (flagged report() in the rules) with this overview.
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


# Structural, not lists of every id: matching a path against a regex of N alternatives made planning quadratic.
wildcard_constraints:
    experiment=r"[^/]+",
    search=r"[^/]+",
    env=regex_alternatives(ENVS),
    dataset=regex_alternatives(axis_values("dataset")),
    file=regex_alternatives({spec["name"] for entry in REGISTRY.values() for spec in entry["files"].values()}),
    rep=r"\d+",
    round=r"\d+",
    # an existing env's name (describe_existing_env): a stack's, or the tools'
    stack=regex_alternatives([*STACKS, plan.TOOLS]),
    device="cpu|gpu",
    operator="|".join(config["ops"]["operators"]) or "none",
    code=r"[a-z_]+(\.[a-z0-9_]+(\+[a-z0-9_]+)*)?",  # dlbench/study/dependencies.py: code_name


# On a cluster only the timed jobs are submitted; the rest needs the network or is light (config `slurm`).
localrules:
    all,
    code_manifest,
    build_env,
    describe_existing_env,
    download_archive,
    prepare_dataset,
    index_image_folder,
    aggregate,
    aggregate_ops,
    bundle,
    unpack_bundle,
    plan_round,
    report,
    list_failures,


include: "workflow/rules/code.smk"
include: "workflow/rules/envs.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/ops.smk"
include: "workflow/rules/max_batch.smk"
include: "workflow/rules/rounds.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/bundle.smk"
include: "workflow/rules/report.smk"


# Snakemake calls onsuccess and onerror only where some job ran: this job runs in every invocation (report_failures
# removes its output at the end) after the training runs, so that each invocation ends with the runs not ok and a
# non-zero exit while any is unexpected, even when nothing else had to run.
rule list_failures:
    input:
        records=lambda wildcards: run_outputs("record.json"),
    output:
        FAILURES_LISTED,
    log:
        "logs/list_failures.log",
    localrule: True
    conda:
        "envs/tools.yaml"
    # A shell command, not a run: block, which Snakemake runs by evaluating the whole workflow a second time.
    shell:
        "touch {output:q} && echo 'the runs not ok are listed at the end of the invocation' > {log:q}"


rule all:
    default_target: True
    input:
        rules.report.output,
        # Snakemake does not remake a missing input of an up-to-date job: the tables (gone after an aggregation
        # failed), the prepared data and the venvs (gone or damaged) are remade because the target asks for them.
        rules.aggregate.output,
        rules.aggregate_ops.output,
        prepared_data(),
        venv_markers(),
        rules.list_failures.output,


# Before any job: Snakemake's own removal of an old output in a folder it cannot write ends in a long traceback.
onstart:
    problem = unwritable_output()
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
    runlock.note_run(os.getpid(), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(INVOCATION_START)))
    set_aside_changed_data()


onsuccess:
    runlock.forget_run()
    if not report_failures():
        sys.exit(1)


onerror:
    runlock.forget_run()
    report_failures()
