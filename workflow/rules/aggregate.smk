rule aggregate:
    input:
        env=env_description(TOOLS),
        script="scripts/aggregate.py",
        code=code_manifest("scripts/aggregate.py"),
        # Each run's epochs.csv and telemetry.csv are beside its record, written before it (rule train).
        records=lambda wildcards: run_outputs("record.json"),
        max_batch=max_batch_outputs(),
    output:
        **tables.paths(tables.TABLES, "csv"),
        **tables.paths(tables.TABLES, "parquet", key_suffix="_parquet"),
    log:
        "logs/aggregate.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        baseline=(f"--baseline {config['comparison_baseline']}" if config["comparison_baseline"] else ""),
        margin=config["equivalence_margin"],
    shell:
        "{params.python} {input.script} --records {input.records} --max-batch {input.max_batch}"
        " {params.baseline} --equivalence-margin {params.margin} --out $(dirname {output.runs}) > {log} 2>&1"
