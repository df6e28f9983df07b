rule build_env:
    input:
        env_file="envs/{env}.yaml",
        # the env's identity: an edited lock rebuilds the env and reruns its stack's jobs
        lock="envs/{env}.lock.txt",
        builder="scripts/build_env.py",
        code=code_manifest("scripts/build_env.py"),
    output:
        description="results/envs/{env}.json",
    log:
        "logs/envs/{env}.log",
    wildcard_constraints:
        env=regex_alternatives(BUILT_ENVS),
    priority: SETUP_PRIORITY
    conda:
        "../../envs/{env}.yaml"
    params:
        where=env_build_arguments,
        # Not the driver's own path: how Snakemake is invoked must not rerun anything (the builder makes each
        # venv with the env file's pinned Python where PATH has it).
        python="python" if USE_CONDA else "python3",
    shell:
        "{params.python:q} {input.builder:q} {input.env_file:q} {params.where:q}"
        " --describe {output.description:q} > {log:q} 2>&1"


rule describe_existing_env:
    input:
        builder="scripts/build_env.py",
        code=code_manifest("scripts/build_env.py"),
    output:
        description="results/envs/existing-{stack}.json",
    log:
        "logs/envs/existing-{stack}.log",
    priority: SETUP_PRIORITY
    # Standard library only, run by the existing interpreter itself (existing envs are refused under --sdm conda).
    conda:
        "../../envs/tools.yaml"
    params:
        python=lambda wildcards: config["existing_envs"][wildcards.stack],
        # a changed environment (an upgraded package) describes it anew and reruns its stack's jobs
        packages_sha256=lambda wildcards: existing_env_hash(wildcards.stack),
    shell:
        "{params.python:q} scripts/build_env.py --existing {params.python:q} --describe {output.description:q} > {log:q} 2>&1"
