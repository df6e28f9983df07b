# A venv (not under conda): installed when its marker is missing (gone, half built, or damaged: common.smk), by what
# the lock in its folder's name pins; rule build_env then describes it. update(): a forced run (-F) keeps a whole
# venv's marker, so that the builder reuses the venv instead of installing it again.
rule install_venv:
    output:
        marker=update(f"{config['venv_root']}/{{venv}}/{COMPLETE_MARKER}"),
    log:
        "logs/envs/{venv}.log",
    wildcard_constraints:
        venv=regex_alternatives(VENVS),
    priority: SETUP_PRIORITY
    conda:
        "../../envs/tools.yaml"
    params:
        env_file=lambda wildcards: env_file(VENVS[wildcards.venv]),
        where=env_build_arguments,
    shell:
        "python3 scripts/build_env.py {params.env_file:q} {params.where:q} > {log:q} 2>&1"


rule build_env:
    input:
        unpack(build_env_inputs),
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
