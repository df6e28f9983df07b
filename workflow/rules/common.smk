import functools
import json
import os
import sys
import time
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake_interface_executor_plugins.settings import DeploymentMethod

# The workflow's library and scripts (scripts/) are on the path: the Snakefile put them there, first.
from build_env import (
    COMPLETE_MARKER,
    build_interpreter,
    check_existing,
    check_imports,
    lock_problem,
    packages_sha256,
    unlocked_reason,
    venv_prefix,
    venv_problem,
)
from dlbench import cli, data
from dlbench.study import bundle, catalog, configuration, dependencies, plan, runlock, slurm
from dlbench.study.analysis import tables

# The config Snakemake layered (config.yaml, --configfile, --config), checked and with its defaults, refused with
# every problem at once: the same checks scripts/plan.py makes (dlbench/study/configuration.py).
configuration.with_defaults(config, workflow.config_settings.config)
STACKS = configuration.load_stacks()
REGISTRY = configuration.load_registry(config)
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
GPU_RESOURCE = workflow.global_resources.get("gpu")  # --resources gpu=N (profiles/default: 1), a Resource
configuration.check(
    config,
    STACKS,
    REGISTRY,
    configuration.this_machine(conda=USE_CONDA, gpu_resource=getattr(GPU_RESOURCE, "value", GPU_RESOURCE)),
)
for warning in configuration.warnings(config):
    print(warning, file=sys.stderr)
if workflow.is_main_process and (line := cli.other_checkouts_driver(workflow.basedir, sys.prefix)):
    print(line, file=sys.stderr)
# Another run still going here: said before Snakemake's lock message, whose advice (--unlock) would then have two runs
# write the same records. A job's own Snakemake (a `run:` block, a Slurm step) runs inside the run, so it is not asked.
LIVE_RUN = runlock.live_run() if workflow.is_main_process else None
if LIVE_RUN and runlock.takes_the_folder(sys.argv[1:]):
    raise WorkflowError(runlock.still_going(LIVE_RUN))
# Snakemake's job rate limit (slurm.job_rate_limit), where this invocation has scheduling settings at all.
if workflow.scheduling_settings is not None:
    workflow.scheduling_settings.max_jobs_per_timespan = slurm.job_rate_limit(
        config["scheduler"], workflow.scheduling_settings.max_jobs_per_timespan
    )


def axis_values(axis):
    return plan.axis_values(config, axis)


def needs_gpu():
    return "gpu" in axis_values("device") + config["ops"]["devices"]


def slurm_submission():
    """Account and partitions of `--profile profiles/slurm`, checked before any job is submitted
    (dlbench/study/slurm.py); empty where jobs are not submitted to Slurm."""
    # Remote execution: this is a job running inside Slurm, which submits nothing.
    if config["scheduler"] != "slurm" or workflow.remote_exec:
        return slurm.NOT_SUBMITTED
    try:
        return slurm.resolve(config["slurm"], os.environ, needs_gpu())
    except slurm.SlurmSettingError as error:
        raise WorkflowError(str(error))


def device_resources(device, replicas=1):
    return slurm.device_resources(device, config["scheduler"], SLURM, replicas, config["slurm"]["gpus_per_node"])


def job_resources(device_of_job):
    """The resources (device_resources) of a max-batch or ops job, each a function of its wildcards."""
    return {
        name: lambda wildcards, name=name: device_resources(device_of_job(wildcards))[name]
        for name in device_resources("cpu")
    }


def train_resources():
    """The resources (device_resources) of a train job: per_experiment, constants where the devices agree."""
    return {
        name: per_experiment(lambda row, name=name: device_resources(row["device"], row["replicas"])[name])
        for name in device_resources("cpu")
    }


def per_experiment(value_of_row):
    """A train job's directive, from its experiment row: a constant where every planned experiment gives the same
    value, as Snakemake evaluates a function once per job (a large share of planning thousands of them).
    """
    values = {value_of_row(row) for row in EXPERIMENTS.values()}
    if len(values) == 1:
        return values.pop()
    return lambda wildcards: value_of_row(experiment_of(wildcards))


@functools.cache
def existing_env_hash(stack):
    """The packages hash of an existing environment, validated first: the interpreter runs and imports the stack's
    framework at the stack's declared version (with the stack's variables set), or for the tools env every module
    the tools' jobs import. Called when a job of that env is planned (describe_existing_env's params), before any job
    runs; never on --lint or for jobs that do not use it.
    """
    python, tools = config["existing_envs"][stack], stack == plan.TOOLS
    if tools:
        problem, found = check_imports(python, ",".join(plan.TOOLS_MODULES))  # the problem names them all
    else:
        entry = STACKS[stack]
        problem, found = check_existing(python, entry["framework"], entry["version"], entry["environment"])
    if problem:
        raise WorkflowError(f"config error in `existing_envs.{stack}`: {problem}")
    runs = "the tools' jobs run" if tools else f"stack {stack} runs"
    version = "" if tools else f" ({entry['framework']} {found['version']})"
    print(f"{runs} in the existing environment of {python}{version}", file=sys.stderr)
    return packages_sha256(found["packages"])


def stack_env(stack, device):
    return plan.stack_env(config, STACKS, stack, device)


def experiment_table():
    """{id: row} of the experiment matrix (dlbench/study/plan.py), each left-out group printed once."""
    sizes, tokens = plan.train_sizes(config, REGISTRY), plan.token_datasets(config, REGISTRY)
    table, skipped = plan.experiment_table(config, STACKS, sizes, tokens)
    for entry in skipped:
        print(plan.skipped_message(entry), file=sys.stderr)
    if not table:
        raise WorkflowError(plan.nothing_planned(config, STACKS, sizes, skipped, tokens))
    return table


# A run without a record lists as failed where its log was written in this invocation (plan.outcomes).
INVOCATION_START = time.time()


def jobs_to_run():
    """The jobs this invocation runs (Snakemake's DAG; for the onstart hook, where it is built)."""
    return workflow.dag.needrun_jobs()


def unwritable_output():
    """One line naming the first output or log of this invocation's jobs in a folder that cannot be written (None
    when all can): dlbench/cli.py's check."""
    return cli.unwritable_output(path for job in jobs_to_run() for path in [*job.output, *job.log])


def set_aside_changed_data():
    """Rename aside each prepared dataset that changed since preparation and is prepared again in this run (its
    `generation` parameter moved), kept for inspection: from the onstart hook, so never in a dry run.
    """
    for job in jobs_to_run():
        if job.rule.name == "prepare_dataset":
            aside = data.set_aside_if_changed(Path(job.output.meta).parent)
            if aside:
                print(f"set aside as {aside}", file=sys.stderr)


FAILURES_LISTED = "results/.failures_listed"  # the output of rule list_failures


def print_failures():
    """What plan.end_of_invocation says, printed; False when the exit code must be non-zero."""
    arguments = configuration.command_line_arguments(
        workflow.config_settings.configfiles, workflow.config_settings.config_args
    )
    lines, succeeded = plan.end_of_invocation(config, EXPERIMENTS, INVOCATION_START, arguments)
    for line in lines:
        print(line, file=sys.stderr)
    return succeeded


def report_failures():
    """At the end of every invocation: the runs not ok (print_failures), and False when the exit code must be
    non-zero. Removes rule list_failures' output, so that the next invocation runs it, and so this, again."""
    Path(FAILURES_LISTED).unlink(missing_ok=True)
    return print_failures()


SLURM = slurm_submission()
EXPERIMENTS = experiment_table()
configuration.race_budget(config, EXPERIMENTS)
SEARCHES = plan.max_batch_searches(config, EXPERIMENTS)


def imported_bundles():
    """{name: Bundle} of the result bundles the config imports, each read through and checked before any job
    (dlbench/study/bundle.py)."""
    try:
        bundles = bundle.check_all(config["imports"])
    except bundle.BundleError as error:
        raise WorkflowError(f"config error in `imports`: {error}")
    for imported in bundles.values() if workflow.is_main_process else []:
        print(f"importing {imported.path}: {bundle.machines_words(imported.manifest)}", file=sys.stderr)
    return bundles


IMPORTS = imported_bundles()
# A dry run runs no job and so no end-of-run hook: it names the runs not ok (failed, interrupted, records unreadable
# or inconsistent) when it plans, as a real run does at its end.
if workflow.is_main_process and runlock.dry_run(sys.argv[1:]):
    print_failures()
OPS_JOBS = [
    (stack, device, operator)
    for stack in config["ops"]["stacks"]
    for device in config["ops"]["devices"]
    for operator in config["ops"]["operators"]
]
TOOLS = plan.tools_env(config)  # the env of the jobs that run no framework
ENVS = sorted(
    {row["env"] for row in EXPERIMENTS.values()} | {stack_env(stack, device) for stack, device, _ in OPS_JOBS} | {TOOLS}
)
BUILT_ENVS = [env for env in ENVS if not env.startswith(plan.EXISTING_ENV_PREFIX)]


def refuse_unbuildable_envs():
    """Before any job: each env the workflow builds has a lock that builds it here, present, up to date with its env
    file and made for this platform and Python. An env file that cannot be locked here (its lock file says why) is
    named, and its build job fails with the reason. Snakemake's conda deployment reads the env files, not the locks."""
    for env in [] if USE_CONDA else BUILT_ENVS:
        problem = lock_problem(env_file(env), build_interpreter(env_file(env))[1])
        if problem and unlocked_reason(env_file(env)):
            print(f"WARNING: {problem}; its build_env job fails, and so its stack's jobs", file=sys.stderr)
        elif problem:
            raise WorkflowError(problem)


def regex_alternatives(names):
    """A wildcard constraint that matches exactly these names; none (no env to build: every env exists) matches
    nothing, where an empty pattern would match anything."""
    return "|".join(name.replace(".", r"\.") for name in sorted(names)) or "(?!)"


def env_file(env):
    return f"envs/{env}.yaml"


refuse_unbuildable_envs()


def conda_env_file(env):
    """An env's file relative to workflow/rules/ as `conda:` expects; None for an existing env, which has none."""
    return None if env.startswith(plan.EXISTING_ENV_PREFIX) else f"../../{env_file(env)}"


def replaced_in_place(paths):
    """Outputs that Snakemake leaves in place until their job replaces them (update()), instead of removing them before
    the job runs: the tables and the report, whose jobs write all their files at once or none (dlbench/io.py's
    replacing_all), so that a failed aggregation or rendering keeps the last good ones. Snakemake also backs them
    up and restores them if the job fails."""
    return {name: update(path) for name, path in paths.items()}


def in_report(outputs, caption, category):
    """These outputs flagged for Snakemake's own report (`snakemake --report report.zip`), each labelled by its name,
    with the caption (workflow/report/) that says what they hold."""
    return {
        name: report(path, caption=caption, category=category, labels={"name": name}) for name, path in outputs.items()
    }


def env_description(env):
    """A job's input that stands for its env: a new lock, or a venv installed again (rule install_venv), describes
    the env anew and reruns its jobs, each record replaced only once its job starts. (Not ancient(): Snakemake then
    skips every other reason to rerun a job whose env is described anew, a changed lock among them.)"""
    return f"results/envs/{env}.json"


# Each venv the workflow builds, by its folder's name (the env file's stem and the lock's hash): rule install_venv's
# output is the marker inside it that only a whole build writes, so a venv gone or half built is installed again.
VENVS = {} if USE_CONDA else {venv_prefix(".", env_file(env)).name: env for env in BUILT_ENVS}


def venv_marker(env):
    return str(venv_prefix(config["venv_root"], env_file(env)) / COMPLETE_MARKER)


def venv_markers():
    return [venv_marker(env) for env in VENVS.values()]


def build_env_inputs(wildcards):
    """A built venv's description follows its installation; conda's envs are Snakemake's own."""
    return {} if USE_CONDA else {"venv": venv_marker(wildcards.env)}


def withdraw_damaged_venvs():
    """Before any job (dry runs included): a venv damaged since it was installed (its interpreter, or a package its
    lock pins, missing or changed) loses its marker, the claim that it stands whole, so that Snakemake installs it
    again before any job that needs it. Not in a cluster job's own invocation, which runs its one job."""
    for env in BUILT_ENVS if workflow.is_main_process else []:
        marker = Path(venv_marker(env))
        problem = marker.exists() and venv_problem(marker.parent, env_file(env))
        if problem:
            print(f"NOTE: {problem}: the {env} env is installed again before its jobs", file=sys.stderr)
            marker.unlink()


withdraw_damaged_venvs()


@functools.cache
def env_python(env):
    """The interpreter a job of this env runs: an existing env's, the env's venv, or the active conda env's."""
    existing = {plan.existing_env_name(stack): python for stack, python in config["existing_envs"].items()}
    if env in existing:
        return existing[env]
    if USE_CONDA:
        return "python"
    return str(venv_prefix(config["venv_root"], env_file(env)) / "bin" / "python")


def env_build_arguments(wildcards):
    """The builder's words for where the env goes, each quoted in the command."""
    if USE_CONDA:
        return ["--current"]
    offline = ["--wheels", config["wheels"]] if config["wheels"] else []
    return ["--venv-root", config["venv_root"], *offline]


def code_manifest(script, adapter=None, backend=None, streamed=False):
    """The one input that stands for a job's code: a manifest (rule code_manifest) of the script, what it imports
    from the repository transitively, the scripts it starts and the adapters it loads by name for its backend and
    data, found from the code (dlbench/study/dependencies.py): a library change reruns exactly the jobs it touches.
    """
    return f"results/code/{dependencies.code_name(script, adapter, backend, streamed)}.sha256"


def code_files(wildcards):
    """The files a code manifest covers, from its name (dlbench/study/dependencies.py's code_name)."""
    return dependencies.code_files(wildcards.code)


# Setup jobs (envs, data) run before any timed job, and round r's timed jobs before round r+1's: with every timed
# job taking all cores, the scheduler then runs repeat r of every experiment before any repeat r+1, whatever order
# the envs were ready in, so drift of the machine falls on every side of a comparison alike.
SETUP_PRIORITY = 200


def round_priority(wildcards):
    return SETUP_PRIORITY - 1 - int(wildcards.rep)


def experiment_of(wildcards):
    return EXPERIMENTS[wildcards.experiment]


def run_parameters(wildcards):
    """The experiment row plus this repeat's number and seed, as the JSON train.py reads."""
    row = dict(experiment_of(wildcards), rep=int(wildcards.rep))
    row["seed"] = config["seed"] + row["rep"]
    return json.dumps(row, sort_keys=True)


def prepared_meta(row):
    """The meta.json of the prepared data a row trains on: arrays, or a streamed folder's index."""
    return plan.prepared_meta(row["dataset"], row["data_placement"])


def prepared_data():
    """Every prepared dataset the planned experiments read."""
    return sorted({prepared_meta(row) for row in EXPERIMENTS.values()})


def train_inputs(wildcards):
    row = experiment_of(wildcards)
    return {
        "env": env_description(row["env"]),
        "meta": prepared_meta(row),
        "code": code_manifest(
            "scripts/run_experiment.py", row["adapter"], row["backend"], row["data_placement"] == "stream"
        ),
    }


def planned_runs(through_round=None):
    """(experiment, repeat) of the training runs through a round (None: all): the `repeats` rounds, then with racing
    the experiments each look's checkpoint (rule plan_round) planned for the rounds up to the next look.
    """
    extra = []
    for look in plan.race_looks(config):
        if through_round is not None and look >= through_round:
            break
        decision = checkpoints.plan_round.get(round=look).output.decision
        more = plan.rounds_decided(json.loads(Path(decision).read_text()))
        if not more:
            break
        extra += more
    return plan.runs(config, EXPERIMENTS, extra)


def run_outputs(name, through_round=None):
    return [
        f"{plan.RUN_DIRECTORY.format(experiment=experiment, rep=rep)}/{name}"
        for experiment, rep in planned_runs(through_round)
    ]


def round_records(wildcards):
    """The records a round's checkpoint decides from: every run through that round."""
    return run_outputs("record.json", int(wildcards.round))


def round_options():
    """What the race's planner needs from the config: the first rounds, the race and the margin."""
    keys = ("repeats", "race", "equivalence_margin")
    return json.dumps({key: config[key] for key in keys}, sort_keys=True)


def search_of(wildcards):
    return SEARCHES[wildcards.search]


def max_batch_inputs(wildcards):
    search = search_of(wildcards)
    return {
        "env": env_description(search["env"]),
        "meta": f"results/data/{search['dataset']}/meta.json",
        "code": code_manifest("scripts/max_batch.py", search["adapter"], search["backend"]),
    }


def max_batch_outputs():
    return [f"results/max_batch/{search}.json" for search in SEARCHES]


def ops_env(wildcards):
    return stack_env(wildcards.stack, wildcards.device)


def ops_conda_env(wildcards):
    return conda_env_file(ops_env(wildcards))


def ops_inputs(wildcards):
    stack = STACKS[wildcards.stack]
    return {
        "env": env_description(ops_env(wildcards)),
        "code": code_manifest("scripts/run_ops.py", stack["ops_adapter"], stack["backend"]),
    }


def ops_options(wildcards):
    """What run_ops.py needs beyond its wildcards: the adapter, the stack's variables, the sweep."""
    stack = STACKS[wildcards.stack]
    sweep = {
        key: config["ops"][key]
        for key in (
            "dtypes",
            "elementwise_sizes",
            "gemm_sizes",
            "samples",
            "min_sample_ms",
        )
    }
    return json.dumps(
        dict(
            sweep,
            adapter=stack["ops_adapter"],
            environment=stack["environment"],
            math_mode=config["math_mode"],
        ),
        sort_keys=True,
    )


def ops_outputs():
    return [f"results/ops/{stack}/{device}/{operator}.json" for stack, device, operator in OPS_JOBS]


def data_generation(wildcards):
    """The prepare rule's `generation` (dlbench/data.py)."""
    return dataset_generation(wildcards.dataset)


@functools.cache
def dataset_generation(dataset):
    """A dataset's generation, saying once per invocation why it is prepared again."""
    generation, problem = data.generation(Path("results/data") / dataset)
    if problem:
        print(
            f"{problem}: it changed since it was prepared, so it is set aside and prepared again",
            file=sys.stderr,
        )
    return generation


def dataset_options(wildcards):
    """The config sections prepare_dataset.py reads, plus the registry entry of a downloadable dataset."""
    sections = ("synthetic", "synthetic_tokens", "synthetic_imagenet", "imagenet", "image_folders")
    options = {key: config[key] for key in sections}
    options["entry"] = REGISTRY.get(wildcards.dataset)
    return json.dumps(options, sort_keys=True)


def image_folder_section(wildcards):
    """The one config section an image folder's index depends on (a change elsewhere re-indexes nothing)."""
    options, key = catalog.image_folder_options(wildcards.dataset, config)
    sections = {"imagenet": {"path": None}, "image_folders": {}}
    if key == "imagenet":
        sections["imagenet"] = options
    else:
        sections["image_folders"][wildcards.dataset] = options
    return json.dumps(sections, sort_keys=True)


def archives(wildcards):
    """The verified downloads a dataset is prepared from (ancient: fetching again must not retrain)."""
    entry = REGISTRY.get(wildcards.dataset)
    files = entry["files"].values() if entry else []
    return [ancient(f"resources/archives/{wildcards.dataset}/{spec['name']}") for spec in files]


def download_spec(wildcards):
    (spec,) = [s for s in REGISTRY[wildcards.dataset]["files"].values() if s["name"] == wildcards.file]
    return spec


def download_urls(wildcards):
    """--url arguments, as words each quoted in the command: the mirror first, then the registry's base URLs."""
    bases = REGISTRY[wildcards.dataset]["urls"]
    mirror = config["downloads"]["mirror"]
    if mirror:
        bases = [f"{mirror.rstrip('/')}/{wildcards.dataset}/", *bases]
    return [word for base in bases for word in ("--url", f"{base}{wildcards.file}")]
