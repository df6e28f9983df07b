rule max_batch:
    input:
        unpack(max_batch_inputs),
    output:
        result="results/max_batch/{search}.json",
    log:
        "logs/max_batch/{search}.log",
    conda:
        lambda wildcards: conda_env_file(search_of(wildcards)["env"])
    # Timed-job rules: all cores, and the GPU for GPU searches, so probes never share memory with another job.
    threads: workflow.cores
    resources:
        **job_resources(lambda wildcards: search_of(wildcards)["device"]),
    params:
        python=lambda wildcards: env_python(search_of(wildcards)["env"]),
        search=lambda wildcards: json.dumps(search_of(wildcards), sort_keys=True),
        framework_threads=config["cpu_threads"],
        contention=json.dumps(config["contention"], sort_keys=True),
        dataset_dir=lambda wildcards, input: Path(input.meta).parent,
    shell:
        "{params.python:q} scripts/max_batch.py --search {params.search:q} --dataset-dir {params.dataset_dir:q}"
        " --env-description {input.env:q} --threads {params.framework_threads:q} --contention {params.contention:q}"
        " --out {output.result:q} > {log:q} 2>&1"
