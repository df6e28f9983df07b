# Racing (config `race`): after every round but the last `race.max_rounds` allows, a checkpoint decides which
# experiments run the next round; planned_runs (common.smk) asks it, round by round.
checkpoint plan_round:
    input:
        env=env_description(TOOLS),
        script="scripts/plan_round.py",
        code=code_manifest("scripts/plan_round.py"),
        records=round_records,
    output:
        decision=plan.ROUND_DECISION,
    log:
        "logs/rounds/round{round}.log",
    conda:
        "../../envs/tools.yaml"
    params:
        python=env_python(TOOLS),
        options=round_options(),
    shell:
        "{params.python:q} {input.script:q} --look {wildcards.round:q} --records {input.records:q}"
        " --options {params.options:q} --out {output.decision:q} > {log:q} 2>&1"
