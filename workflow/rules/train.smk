# Output and log paths are dlbench/study/plan.py's RUN_DIRECTORY and RUN_LOG (the failure summary and retries read
# them).
rule train:
    input:
        unpack(train_inputs),
    # The record alone is declared (each declared file costs Snakemake's planning of thousands of jobs a share):
    # run_experiment.py writes the run's epochs.csv and telemetry.csv beside it first, the record last.
    output:
        record="results/runs/{experiment}/rep{rep}/record.json",
    log:
        "logs/train/{experiment}/rep{rep}.log",
    # Interleaved rounds: round r (repeat r of every experiment) before any repeat r+1.
    priority: round_priority
    conda:
        per_experiment(lambda row: conda_env_file(row["env"]))
    # All cores: two timed jobs never share the CPU. GPU jobs also take the one GPU.
    threads: workflow.cores
    resources:
        **train_resources(),
    params:
        python=per_experiment(lambda row: env_python(row["env"])),
        experiment=run_parameters,
        framework_threads=config["cpu_threads"],
        contention=json.dumps(config["contention"], sort_keys=True),
        dataset_dir=lambda wildcards, input: Path(input.meta).parent,
        epochs_csv=lambda wildcards, output: Path(output.record).with_name("epochs.csv"),
        telemetry_csv=lambda wildcards, output: Path(output.record).with_name("telemetry.csv"),
    # fd 3: the console, where run_experiment.py says that a contended run is run again.
    shell:
        "{params.python:q} scripts/run_experiment.py --experiment {params.experiment:q}"
        " --dataset-dir {params.dataset_dir:q} --env-description {input.env:q}"
        " --threads {params.framework_threads:q} --record {output.record:q}"
        " --epochs-csv {params.epochs_csv:q} --telemetry-csv {params.telemetry_csv:q}"
        " --contention {params.contention:q} 3>&2 > {log:q} 2>&1"
