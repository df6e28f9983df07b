rule aggregate:
    input:
        env=env_description("tools"),
        script="scripts/aggregate.py",
        code=code_manifest("scripts/aggregate.py"),
        # Each run's epochs.csv and telemetry.csv are beside its record, written before it (rule train).
        records=lambda wildcards: run_outputs("record.json"),
        max_batch=max_batch_outputs(),
    output:
        runs="results/tables/runs.csv",
        runs_parquet="results/tables/runs.parquet",
        summary="results/tables/summary.csv",
        summary_parquet="results/tables/summary.parquet",
        epochs="results/tables/epochs.csv",
        epochs_parquet="results/tables/epochs.parquet",
        max_batch="results/tables/max_batch.csv",
        max_batch_parquet="results/tables/max_batch.parquet",
        comparisons="results/tables/comparisons.csv",
        comparisons_parquet="results/tables/comparisons.parquet",
        versions="results/tables/versions.csv",
        versions_parquet="results/tables/versions.parquet",
        telemetry="results/tables/telemetry.csv",
        telemetry_parquet="results/tables/telemetry.parquet",
    log:
        "logs/aggregate.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python("tools"),
        baseline=(f"--baseline {config['comparison_baseline']}" if config["comparison_baseline"] else ""),
        margin=config["equivalence_margin"],
    shell:
        "{params.python} {input.script} --records {input.records} --max-batch {input.max_batch}"
        " {params.baseline} --equivalence-margin {params.margin} --out $(dirname {output.runs}) > {log} 2>&1"
