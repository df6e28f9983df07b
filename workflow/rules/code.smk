# A job's code as one input (common.smk's code_manifest): the hashes of the files its scripts import, rewritten when
# one changes, so the jobs that import it run again.
rule code_manifest:
    input:
        code_files,
    output:
        manifest="results/code/{code}.sha256",
    log:
        "logs/code/{code}.log",
    priority: SETUP_PRIORITY
    # Coreutils' sha256sum, not a `run:` block, which Snakemake would start as a whole Snakemake process per job.
    conda:
        "../../envs/tools.yaml"
    shell:
        "sha256sum {input:q} > {output.manifest:q} 2> {log:q}"
