rule download_archive:
    input:
        env=env_description(TOOLS),
        script="scripts/fetch_archive.py",
        code=code_manifest("scripts/fetch_archive.py"),
    output:
        archive="resources/archives/{dataset}/{file}",
    log:
        "logs/download/{dataset}/{file}.log",
    priority: SETUP_PRIORITY
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        sha256=lambda wildcards: download_spec(wildcards)["sha256"],
        urls=download_urls,
        offline_dir=config["downloads"]["offline_dir"],
        retries=config["downloads"]["retries"],
    shell:
        "{params.python:q} {input.script:q} --dataset {wildcards.dataset:q} --name {wildcards.file:q}"
        " --sha256 {params.sha256:q} {params.urls:q} --offline-dir {params.offline_dir:q}"
        " --retries {params.retries:q} --out {output.archive:q} > {log:q} 2>&1"


rule prepare_dataset:
    input:
        env=env_description(TOOLS),
        script="scripts/prepare_dataset.py",
        code=code_manifest("scripts/prepare_dataset.py"),
        archives=archives,
    output:
        arrays="results/data/{dataset}/arrays.npz",
        meta="results/data/{dataset}/meta.json",
    log:
        "logs/data/{dataset}.log",
    priority: SETUP_PRIORITY
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        options=dataset_options,
        archive_dir=lambda wildcards: f"resources/archives/{wildcards.dataset}",
        # Moves where the prepared data changed on disk: it is prepared again in this invocation (set aside first by
        # the onstart hook).
        generation=data_generation,
    shell:
        "{params.python:q} {input.script:q} {wildcards.dataset:q} results/data/{wildcards.dataset:q}"
        " --options {params.options:q} --archives {params.archive_dir:q}"
        " --generation {params.generation:q} > {log:q} 2>&1"


# A streamed image folder is read in place: preparing it indexes the JPEGs that decode (threads: one decode each).
rule index_image_folder:
    input:
        env=env_description(TOOLS),
        script="scripts/index_image_folder.py",
        code=code_manifest("scripts/index_image_folder.py"),
    output:
        meta="results/stream/{dataset}/meta.json",
    log:
        "logs/data/{dataset}-stream.log",
    priority: SETUP_PRIORITY
    conda:
        "../../envs/tools.yaml"
    threads: workflow.cores
    params:
        python=env_python(TOOLS),
        options=image_folder_section,
    shell:
        "{params.python:q} {input.script:q} {wildcards.dataset:q} {output.meta:q}"
        " --options {params.options:q} --workers {threads:q} > {log:q} 2>&1"
