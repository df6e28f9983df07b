rule prepare_dataset:
    input:
        env=env_description("tools"),
        script="scripts/prepare_dataset.py",
        library=library_files("catalog.py", "data.py"),
    output:
        arrays="results/data/{dataset}/arrays.npz",
        meta="results/data/{dataset}/meta.json",
    log:
        "logs/data/{dataset}.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python("tools"),
        options=synthetic_arguments,
    shell:
        "{params.python} {input.script} {wildcards.dataset} results/data/{wildcards.dataset}"
        " {params.options} > {log} 2>&1"
