# Output and log paths are dlbench/plan.py's RUN_DIRECTORY and RUN_LOG (the failure summary and retries read them).
rule train:
    input:
        unpack(train_inputs),
    output:
        record="results/runs/{experiment}/rep{rep}/record.json",
        epochs="results/runs/{experiment}/rep{rep}/epochs.csv",
        telemetry="results/runs/{experiment}/rep{rep}/telemetry.csv",
    log:
        "logs/train/{experiment}/rep{rep}.log",
    # Interleaved rounds: round r (repeat r of every experiment) before any repeat r+1.
    priority: round_priority
    conda:
        job_conda_env
    # All cores: two timed jobs never share the CPU. GPU jobs also take the one GPU.
    threads: workflow.cores
    resources:
        gpu=train_resource(local_gpus),
        gres=train_resource(slurm_gres),
        slurm_account=SLURM["account"],
        slurm_partition=train_resource(slurm_partition),
    params:
        python=lambda wildcards: env_python(experiment_of(wildcards)["env"]),
        experiment=run_parameters,
        framework_threads=config["cpu_threads"],
        contention=json.dumps(config["contention"], sort_keys=True),
    # fd 3: the console, where run_experiment.py says that a contended run is run again.
    shell:
        "{params.python} scripts/run_experiment.py --experiment {params.experiment:q}"
        " --dataset-dir $(dirname {input.meta}) --env-description {input.env}"
        " --threads {params.framework_threads} --record {output.record} --epochs-csv {output.epochs}"
        " --telemetry-csv {output.telemetry} --contention {params.contention:q} 3>&2 > {log} 2>&1"
