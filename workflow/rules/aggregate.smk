rule aggregate:
    input:
        env=env_description(TOOLS),
        script="scripts/aggregate.py",
        code=code_manifest("scripts/aggregate.py"),
        # Each run's epochs.csv and telemetry.csv are beside its record, written before it (rule train).
        records=lambda wildcards: run_outputs("record.json"),
        max_batch=max_batch_outputs(),
        # the runs of the bundles the config imports, each unpacked in its folder (rule unpack_bundle)
        imports=[f"results/imports/{name}" for name in IMPORTS],
    output:
        **in_report(replaced_in_place(tables.paths(tables.TABLES, "csv")), "../report/tables.rst", "Tables"),
        **replaced_in_place(tables.paths(tables.TABLES, "parquet", key_suffix="_parquet")),
    log:
        "logs/aggregate.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        # words, each quoted in the command (none where there is no baseline)
        baseline=(["--baseline", config["comparison_baseline"]] if config["comparison_baseline"] else []),
        margin=config["equivalence_margin"],
        race=json.dumps(dict(config["race"], repeats=config["repeats"]), sort_keys=True),
        prices=json.dumps(config["price_per_hour"], sort_keys=True),
        out=lambda wildcards, output: Path(output.runs).parent,
    shell:
        "{params.python:q} {input.script:q} --records {input.records:q} --max-batch {input.max_batch:q}"
        " --imports {input.imports:q}"
        " {params.baseline:q} --equivalence-margin {params.margin:q} --race {params.race:q}"
        " --price-per-hour {params.prices:q} --out {params.out:q}"
        " > {log:q} 2>&1"
