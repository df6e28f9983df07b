rule build_env:
    input:
        env_file="envs/{env}.yaml",
        builder="scripts/build_env.py",
    output:
        description="results/envs/{env}.json",
    log:
        "logs/envs/{env}.log",
    conda:
        "../../envs/{env}.yaml"
    params:
        where=env_build_arguments,
        python="python" if USE_CONDA else sys.executable,
    shell:
        "{params.python} {input.builder} {input.env_file} {params.where}"
        " --describe {output.description} > {log} 2>&1"
