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
        "{params.python} {input.script} --dataset {wildcards.dataset} --name {wildcards.file}"
        " --sha256 {params.sha256} {params.urls} --offline-dir {params.offline_dir}"
        " --retries {params.retries} --out {output.archive} > {log} 2>&1"


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
        "{params.python} {input.script} {wildcards.dataset} results/data/{wildcards.dataset}"
        " --options {params.options:q} --archives {params.archive_dir}"
        " --generation {params.generation} > {log} 2>&1"


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
        "{params.python} {input.script} {wildcards.dataset} {output.meta}"
        " --options {params.options:q} --workers {threads} > {log} 2>&1"
