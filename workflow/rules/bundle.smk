# A study's result bundle, on request (`snakemake bundle`), and the bundles the config imports, each unpacked into
# its own folder for the aggregation (dlbench/study/bundle.py).


rule bundle:
    input:
        env=env_description(TOOLS),
        script="scripts/bundle.py",
        code=code_manifest("scripts/bundle.py"),
        records=lambda wildcards: run_outputs("record.json"),
        envs=[env_description(env) for env in ENVS],
    output:
        bundle="results/bundle.tar.gz",
    log:
        "logs/bundle.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        config=json.dumps(config, sort_keys=True),
    shell:
        "{params.python:q} {input.script:q} write --records {input.records:q} --envs {input.envs:q}"
        " --config {params.config:q} --out {output.bundle:q} > {log:q} 2>&1"


rule unpack_bundle:
    input:
        env=env_description(TOOLS),
        script="scripts/bundle.py",
        code=code_manifest("scripts/bundle.py"),
        bundle=lambda wildcards: IMPORTS[wildcards.bundle].path,
    output:
        folder=directory("results/imports/{bundle}"),
    log:
        "logs/imports/{bundle}.log",
    wildcard_constraints:
        bundle=r"[0-9a-f]{16}",  # bundle.Bundle.name
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        digest=lambda wildcards: IMPORTS[wildcards.bundle].digest,
    shell:
        "{params.python:q} {input.script:q} unpack --bundle {input.bundle:q} --digest {params.digest:q}"
        " --into {output.folder:q} > {log:q} 2>&1"
