rule ops_benchmark:
    input:
        unpack(ops_inputs),
    output:
        record="results/ops/{stack}/{device}/{operator}.json",
    log:
        "logs/ops/{stack}/{device}/{operator}.log",
    conda:
        ops_conda_env
    # Timed like training: all cores, and the GPU for GPU jobs.
    threads: workflow.cores
    resources:
        **job_resources(lambda wildcards: wildcards.device),
    params:
        python=lambda wildcards: env_python(ops_env(wildcards)),
        options=ops_options,
        framework_threads=config["cpu_threads"],
        contention=json.dumps(config["contention"], sort_keys=True),
    shell:
        "{params.python:q} scripts/run_ops.py --stack {wildcards.stack:q} --operator {wildcards.operator:q}"
        " --device {wildcards.device:q} --options {params.options:q} --env-description {input.env:q}"
        " --threads {params.framework_threads:q} --contention {params.contention:q} --out {output.record:q} > {log:q} 2>&1"


rule aggregate_ops:
    input:
        env=env_description(TOOLS),
        script="scripts/aggregate_ops.py",
        code=code_manifest("scripts/aggregate_ops.py"),
        records=ops_outputs(),
    output:
        **in_report(
            replaced_in_place({"table": tables.paths([tables.OPS_TABLE], "csv")[tables.OPS_TABLE]}),
            "../report/ops.rst",
            "Tables",
        ),
        **replaced_in_place({"parquet": tables.paths([tables.OPS_TABLE], "parquet")[tables.OPS_TABLE]}),
    log:
        "logs/aggregate_ops.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
    shell:
        "{params.python:q} {input.script:q} --out {output.table:q} --records {input.records:q} > {log:q} 2>&1"
