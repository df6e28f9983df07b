rule report:
    input:
        **tables.paths([*tables.TABLES, tables.OPS_TABLE], "parquet"),
        env=env_description(TOOLS),
        script="scripts/render_report.py",
        code=code_manifest("scripts/render_report.py"),
        document="report/report.qmd",
        style="report/report.css",
    output:
        **in_report(
            replaced_in_place({"html": "results/report/report.html", "pdf": "results/report/report.pdf"}),
            "../report/report.rst",
            "Report",
        ),
        # drawn anew by each rendering (and embedded in the HTML and PDF)
        figures=report(
            directory("results/report/build/figures"),
            patterns=["{name}.svg"],
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{name}"},
        ),
    log:
        "logs/report.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        title=config["report"]["title"],
        arguments=configuration.command_line_arguments(
            workflow.config_settings.configfiles, workflow.config_settings.config_args
        ),
        config_sha256=configuration.digest(config),
        exclusions=json.dumps(config["exclude"]),
        tables=lambda wildcards, input: Path(input.runs).parent,
    shell:
        "{params.python:q} {input.script:q} --tables {params.tables:q} --document {input.document:q}"
        " --style {input.style:q} --title {params.title:q} --html {output.html:q} --pdf {output.pdf:q}"
        " --arguments={params.arguments:q} --config-sha256 {params.config_sha256:q}"
        " --exclusions {params.exclusions:q} > {log:q} 2>&1"
