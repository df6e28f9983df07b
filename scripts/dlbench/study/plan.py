"""The experiment matrix: what a config asks to run, decided in one place that the workflow's rules, the tests and
`scripts/plan.py` all import. Pure functions of the validated config (defaults filled) and envs/stacks.yaml; no
Snakemake, no framework. Needs PyYAML only where the callers read those files.
"""

import itertools
import json
import sys
from pathlib import Path
from typing import NotRequired, TypedDict

from .. import axes, cli, parallel, record
from ..contention import reason_kind
from ..specs import known_model, model_spec, reads_tokens
from ..variants import model_problem, unsupported_reason
from .catalog import dataset_info, holds_tokens, is_image_folder

# The swept axes in the matrix's order and each one's config key (dlbench/axes.py holds every axis).
CONFIG_AXES = axes.CONFIG_KEYS
AXES = tuple(CONFIG_AXES)
EXISTING_ENV_PREFIX = "existing-"


class Experiment(TypedDict):
    """One experiment: a row of the matrix (experiment_table), one value of each axis (AXES) that the stack can run,
    with the config's settings its runs share. The workflow adds `rep` and `seed` per repeat (common.smk's
    run_parameters): the JSON scripts/train.py reads. Rows stay plain dicts, JSON-serialised between processes."""

    stack: str  # a key of envs/stacks.yaml
    dataset: str  # a dataset of the catalog (dlbench/study/catalog.py) or of the config's image_folders
    model: str  # a model of dlbench/specs.py
    device: str  # cpu or gpu
    batch_size: int  # images per training step (and per evaluation batch)
    optimizer: str  # sgd, adam or rmsprop
    learning_rate: float  # the optimiser's step size
    epochs: int  # training epochs, each followed by an evaluation on the test split
    variant: str  # <mode>[-<compile mode>][-nhwc][-syncbn][-composed][-amp], one its stack declares (variants.py)
    data_placement: str  # device, host or stream: where the training data lives
    replicas: int  # data-parallel replicas (devices), each framework's own mechanism (dlbench/parallel.py)
    scaling: str  # weak (batch_size per replica) or strong (batch_size is the global batch); weak with one replica
    launcher: str  # process, process-per-node or torchrun (parallel.LAUNCHERS)
    framework: str  # the stack's framework, as the record calls it
    backend: str  # the stack's execution backend (Keras: KERAS_BACKEND)
    adapter: str  # the module under dlbench/adapters that trains it (a TrainingAdapter)
    env: str  # the env its jobs run in: the stack's env file for the device, or existing-<stack>
    environment: dict[str, str]  # the stack's variables (and its CPU replicas'), set before the framework is imported
    momentum: float  # SGD's momentum (config `momentum`; other optimisers ignore it)
    weight_decay: float  # coupled L2 weight decay (config `weight_decay`)
    target_accuracy: float | None  # the test accuracy whose first crossing gives time_to_target_s; None: not timed
    target_loss: float | None  # a language model's: the test loss whose first crossing gives time_to_target_s
    telemetry_hz: float  # the telemetry sampler's rate
    measure_input_share: bool | str  # true, false or "first" (the first repeat only): config measure_input_share
    measure_latency: bool | str  # the same for the batch-1 latency pass: config measure_latency
    math_mode: dict  # {tf32, autotune}: the math-mode policy (dlbench/mathmode.py)
    min_steady_seconds: float  # the shortest steady window; shorter steady epochs get extra passes
    images_per_epoch: NotRequired[int]  # the cap on one epoch's images, where the config sets one
    stream: NotRequired[dict]  # the config's `stream` options (workers, loader_batches), streamed rows only
    experiment_id: str  # every axis in a fixed order (experiment_id): the key of the table and of the run's folder


# The key that leaves out the experiments of each kind of skipped entry (experiment_table).
SKIPPED_BY = {
    "batch size": "batch_sizes",
    "variant": "variants",
    "model": "variants",
    "data": "models",
    "stream": "data_placements",
}


def grids(config):
    """Per grid, each axis' values: the top-level lists overridden by one `grids` entry (no entries: the top level)."""
    return [
        {axis: grid.get(CONFIG_AXES[axis], config[CONFIG_AXES[axis]]) for axis in AXES}
        for grid in config["grids"] or [{}]
    ]


def axis_values(config, axis):
    """The values an axis takes in any grid, in first-seen order."""
    return list(dict.fromkeys(value for grid in grids(config) for value in grid[axis]))


def existing_env_name(stack):
    return f"{EXISTING_ENV_PREFIX}{stack}"


# The env of the jobs that run no framework (dataset preparation, aggregation, figures, the report): envs/tools.yaml,
# or an existing one where `existing_envs` names it, as on a machine with no package index to build it from.
TOOLS = "tools"
# What those jobs import: an existing tools env is refused before any job unless it has every one.
TOOLS_MODULES = ("numpy", "scipy", "sklearn", "pandas", "pyarrow", "matplotlib", "PIL")


def tools_env(config):
    return existing_env_name(TOOLS) if TOOLS in config["existing_envs"] else TOOLS


def stack_env(config, stacks, stack, device):
    """The env a stack's jobs on this device run in: an existing one named in the config, else its env file's; None
    where it has neither, which the config's checks refuse (configuration.existing_env_files) after the checks that
    plan the matrix have run."""
    if stack in config["existing_envs"]:
        return existing_env_name(stack)
    return stacks[stack]["env"].get(device)


WHY = "why"  # an `exclude` entry's reason, for the report: no axis


def matches(row, exclusion):
    return all(
        row[key] in (value if isinstance(value, list) else [value]) for key, value in exclusion.items() if key != WHY
    )


def placement_suffix(row):
    """Device-staged data, the default, adds nothing to an id; host data adds `_host-data`."""
    return "" if row["data_placement"] == "device" else f"_{row['data_placement']}-data"


def replicas_suffix(row, scaling):
    """One replica, the default, adds nothing to an id; N adds `_r<N>`, and `-strong` with strong scaling."""
    return "" if row["replicas"] == 1 else f"_r{row['replicas']}" + "-strong" * (scaling == "strong")


def experiment_id(row, scaling="weak"):
    """Readable and stable: every axis, in a fixed order."""
    return (
        f"{row['stack']}_{row['dataset']}_{row['model']}_{row['device']}_b{row['batch_size']}"
        f"_{row['optimizer']}-lr{row['learning_rate']:g}_e{row['epochs']}_{row['variant']}{placement_suffix(row)}"
        f"{replicas_suffix(row, scaling)}"
    )


def prepared_meta(dataset, data_placement):
    """The meta.json of a dataset prepared for a placement: arrays (results/data), or a streamed image folder's
    index (results/stream)."""
    return f"results/{'stream' if data_placement == 'stream' else 'data'}/{dataset}/meta.json"


def train_sizes(config, registry):
    """{dataset: training examples}: the prepared data's own count where it exists, else what the config implies
    (None where only preparing the data can tell, e.g. a local ImageNet)."""
    sizes = {}
    for dataset in axis_values(config, "dataset"):
        metas = [Path(prepared_meta(dataset, placement)) for placement in ("device", "stream")]
        known = next((prepared_train_size(meta) for meta in metas if meta.exists()), None)
        sizes[dataset] = known or dataset_info(dataset, config, registry)["train_size"]
    return sizes


def prepared_train_size(meta):
    """The training examples a prepared meta.json counts, None where it cannot be read (planning prepares it again)."""
    try:
        return json.loads(meta.read_text())["train_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def experiment_table(config, stacks, train_sizes=None, token_datasets=None):
    """({id: Experiment}, skipped) over the union of each grid's cartesian product, minus exclusions. `skipped` is the
    sorted set of ("variant", stack, variant, device, data placement, replica counts, reason) left out because the stack
    cannot run them (replica counts: those the reason is theirs alone, else (1,)), ("model", model, variant, reason)
    for a variant that means nothing for a model, ("data", model, dataset, reason) for a model on data it does not
    read (with `token_datasets`, the datasets of tokens: a language model reads those alone, every other model
    images), and ("stream", dataset, reason) for streamed experiments on a dataset that is no image folder;
    with `train_sizes` ({dataset: training examples}), batch sizes larger than the training set are left out too,
    as (stack, dataset, batch size, reason)."""
    table, skipped = {}, set()
    for values in itertools.chain.from_iterable(itertools.product(*grid.values()) for grid in grids(config)):
        row = dict(zip(AXES, values))
        stack = stacks[row["stack"]]
        what = (row["variant"], row["device"], row["data_placement"])
        reason = unsupported_reason(stack, *what, row["replicas"])
        if reason:
            # Said once for every replica count where one replica is left out too, else for this count.
            alone = unsupported_reason(stack, *what, 1) == reason
            skipped.add(("variant", row["stack"], *what, 1 if alone else row["replicas"], reason))
            continue
        reason = model_problem(row["variant"], model_spec(row["model"], 2)) if known_model(row["model"]) else None
        if reason:
            skipped.add(("model", row["model"], row["variant"], reason))
            continue
        reason = data_problem(row["model"], row["dataset"], token_datasets)
        if reason:
            skipped.add(("data", row["model"], row["dataset"], reason))
            continue
        if row["data_placement"] == "stream" and not is_image_folder(row["dataset"], config):
            skipped.add(("stream", row["dataset"], "only image folders stream (`imagenet`, `image_folders`)"))
            continue
        if any(matches(row, exclusion) for exclusion in config["exclude"]):
            continue
        experiment = experiment_row(row, config, stacks)
        reason = parallel.spanning_problem(experiment, config["scheduler"], config["slurm"]["gpus_per_node"])
        if reason:
            skipped.add(("variant", row["stack"], *what, row["replicas"], reason))
            continue
        size, batch = (train_sizes or {}).get(row["dataset"]), parallel.global_batch_size(experiment)
        if size is not None and batch > size:
            skipped.add(
                (
                    "batch size",
                    row["dataset"],
                    batch,
                    size,
                    f"larger than the {size} training examples of {row['dataset']}",
                )
            )
            continue
        table[experiment["experiment_id"]] = experiment
    return table, sorted(replica_counts_merged(skipped), key=str)


def token_datasets(config, registry):
    """The datasets of the config's grids that hold token sequences (a language model's data) rather than images."""
    return {
        dataset for dataset in axis_values(config, "dataset") if holds_tokens(dataset_info(dataset, config, registry))
    }


def data_problem(model, dataset, token_datasets):
    """Why a model does not read a dataset (a language model reads tokens, every other model images); None where it
    does, or where the model or the datasets' kinds are unknown here."""
    if token_datasets is None or not known_model(model):
        return None
    tokens_read, tokens_held = reads_tokens(model_spec(model, 2)), dataset in token_datasets
    if tokens_read == tokens_held:
        return None
    read, held = ("token ids" if tokens_read else "images"), ("tokens" if tokens_held else "images")
    return f"{model} reads {read}, {dataset} holds {held}"


def replica_counts_merged(skipped):
    """The skipped entries with one "variant" entry per reason and replica counts, as tuples of the counts."""
    counts, others = {}, set()
    for entry in skipped:
        if entry[0] == "variant":
            counts.setdefault(entry[:5] + entry[6:], []).append(entry[5])
        else:
            others.add(entry)
    return others | {entry[:5] + (tuple(sorted(found)),) + entry[5:] for entry, found in counts.items()}


def experiment_row(axes, config, stacks) -> Experiment:
    """The experiment of one value of each axis ({axis: value}, AXES), with its stack's entry and the config's
    settings."""
    stack = stacks[axes["stack"]]
    row = Experiment(
        **axes,
        # One replica is the same experiment under either scaling: one id, one record, one `weak`.
        scaling=config["scaling"] if axes["replicas"] > 1 else "weak",
        launcher=stack.get("data_parallel", {}).get("launcher", "process"),
        framework=stack["framework"],
        backend=stack["backend"],
        adapter=stack["adapter"],
        env=stack_env(config, stacks, axes["stack"], axes["device"]),
        environment=parallel.stack_environment(stack, axes["device"], axes["replicas"]),
        momentum=config["momentum"],
        weight_decay=config["weight_decay"],
        target_accuracy=config["target_accuracy"],
        target_loss=config["target_loss"],
        telemetry_hz=config["telemetry_hz"],
        measure_input_share=config["measure_input_share"],
        measure_latency=config["measure_latency"],
        math_mode=config["math_mode"],
        min_steady_seconds=config["min_steady_seconds"],
        experiment_id=experiment_id(axes, config["scaling"]),
    )
    if config["images_per_epoch"]:
        row["images_per_epoch"] = config["images_per_epoch"]
    if axes["data_placement"] == "stream":
        row["stream"] = config["stream"]
    return row


def nothing_planned(config, stacks, train_sizes, skipped, token_datasets=None):
    """The refusal of a config that leaves no experiment to run (experiment_table's arguments and its skipped
    entries), naming the key that left them out and why: `exclude` where the config plans experiments without it,
    else the batch sizes or data placements left out, else the models on data they do not read, else the variants no
    stack can run."""
    if config["exclude"] and experiment_table(dict(config, exclude=[]), stacks, train_sizes, token_datasets)[0]:
        return "config error in `exclude`: every experiment is excluded; loosen `exclude` or add axis values"
    # Models on data they do not read are the cause where no model of the grids reads any of their datasets (in a
    # grid of images and tokens some pairs are always left out); else what the config's values left out, else the
    # variants.
    data = [entry for entry in skipped if entry[0] == "data"]
    pairs = [(model, dataset) for grid in grids(config) for model in grid["model"] for dataset in grid["dataset"]]
    if data and all(data_problem(model, dataset, token_datasets) for model, dataset in pairs):
        causes = data
    else:
        causes = (
            [entry for entry in skipped if entry[0] not in ("variant", "data")]
            or [entry for entry in skipped if entry[0] != "data"]
            or skipped
        )
    keys = "`, `".join(sorted({SKIPPED_BY[entry[0]] for entry in causes}))
    return f"config error in `{keys}`: no experiment is left to run: {'; '.join(map(skipped_message, causes))}"


def skipped_message(entry):
    """One line per left-out group (printed once per invocation)."""
    if entry[0] == "variant":
        _, stack, variant, device, placement, replicas, reason = entry
        on = device if replicas == (1,) else f"{device} with {', '.join(map(str, replicas))} replicas"
        return f"skipping variant {variant!r} with {placement} data for {stack} on {on}: {reason}"
    if entry[0] == "model":
        _, model, variant, reason = entry
        return f"skipping variant {variant!r} for model {model}: {reason}"
    if entry[0] == "data":
        _, model, dataset, reason = entry
        return f"skipping model {model} on {dataset}: {reason}"
    if entry[0] == "stream":
        _, dataset, reason = entry
        return f"skipping data placement 'stream' on {dataset}: {reason}"
    _, dataset, batch_size, _, reason = entry
    return f"skipping batch size {batch_size} on {dataset}: {reason}"


def search_id(row):
    return (
        f"{row['stack']}_{row['dataset']}_{row['model']}_{row['device']}_{row['optimizer']}"
        f"_{row['variant']}{placement_suffix(row)}"
    )


SEARCH_KEYS = (*AXES, "framework", "backend", "adapter", "env", "environment", "momentum", "weight_decay", "math_mode")


def max_batch_searches(config, experiments):
    """{id: row}: one largest-batch search per experiment without its batch size, learning rate and epochs (none
    for memory), for the stacks of `max_batch.stacks` (empty: all); nothing unless `max_batch.enabled`."""
    options = config["max_batch"]
    if not options["enabled"]:
        return {}
    searches = {}
    for row in experiments.values():
        if options["stacks"] and row["stack"] not in options["stacks"]:
            continue
        if row["data_placement"] == "stream":  # batches reach the device one at a time, as with host data
            continue
        if row["replicas"] > 1:  # one device's memory: the one-replica experiment's search answers it
            continue
        search = {key: row[key] for key in SEARCH_KEYS if key not in ("batch_size", "epochs")}
        search.update(
            {key: options[key] for key in ("start", "limit", "resolution", "steps")},
            seed=config["seed"],
            search_id=search_id(row),
        )
        searches.setdefault(search["search_id"], search)
    return searches


RUN_DIRECTORY = "results/runs/{experiment}/rep{rep}"  # the train rule's record and the tables beside it; its log:
RUN_LOG = "logs/train/{experiment}/rep{rep}.log"


ROUND_DECISION = "results/rounds/round{round}.json"  # the racing checkpoint's output after the look at that round


def race_looks(config):
    """The round counts after which the race plans its next round: every round from `repeats` up to the last before
    `race.max_rounds` (after that one no round follows), none without racing."""
    race = config["race"]
    return list(range(config["repeats"], race["max_rounds"])) if race["enabled"] else []


def race_summary(config, experiments):
    """The race a config plans, in words: its looks, its budget and the most runs it may add."""
    race, first = config["race"], config["repeats"]
    most = experiments * (race["max_rounds"] - first)
    if race["budget_runs"] is not None:
        most = min(most, race["budget_runs"] - experiments * first)
    minutes = f", within {race['budget_minutes']:g} min of runs in all" if race["budget_minutes"] is not None else ""
    return (
        f"a look after every round from {first} to {race['max_rounds']}; up to {most} more runs where groups are "
        f"undecided{minutes}"
    )


def rounds_decided(decision):
    """One list of experiments per round a look's decision planned (its `rounds`, each the same experiments)."""
    return [decision["next_round"]] * len(decision["rounds"]) if decision["next_round"] else []


def runs(config, experiments, extra_rounds=None):
    """(experiment id, repeat) of every training job: `repeats` rounds of every experiment, then, with racing, the
    experiments each look planned for the rounds up to the next. extra_rounds lists them per round; None reads the
    decisions already on disk (what a finished invocation ran, for the failure summary and scripts/plan.py)."""
    planned = [(experiment, rep) for experiment in experiments for rep in range(1, config["repeats"] + 1)]
    if extra_rounds is None:
        extra_rounds = decided_rounds(config)
    for rep, more in enumerate(extra_rounds, start=config["repeats"] + 1):
        planned += [(experiment, rep) for experiment in more if experiment in experiments]
    return planned


def decided_rounds(config):
    """The experiments planned for each later round by the decisions on disk, in order, up to the first missing."""
    extra = []
    for look in race_looks(config):
        decision = Path(ROUND_DECISION.format(round=look))
        if not decision.exists():
            break
        more = rounds_decided(json.loads(decision.read_text()))
        if not more:
            break
        extra += more
    return extra


INTERRUPTED = "interrupted"  # a run's outcome, never a record's status: Ctrl-C ended its job before the record


def outcomes(config, experiments, logs_since=None):
    """(experiment id, repeat, record path, record) of every planned run that left a record or a log. An unreadable
    record stands as status `error` naming the file; a run with a log and no record (it died before its runner
    could write one, e.g. its env's interpreter is gone) as `error` with the log's last line: with `logs_since` (a
    time.time()), only a log written since then, so that an old log of a run not run again is no failure."""
    for experiment, rep in runs(config, experiments):
        record_path = Path(RUN_DIRECTORY.format(experiment=experiment, rep=rep)) / "record.json"
        log = Path(RUN_LOG.format(experiment=experiment, rep=rep))
        if record_path.exists():
            try:
                outcome = record.read(record_path)
            except record.UnreadableRecord as error:
                outcome = {"status": "error", "error": str(error)}
        elif log.exists() and log.stat().st_mtime >= (logs_since or 0):
            outcome = ended_without_record(last_line(log))
        else:
            continue
        yield experiment, rep, record_path, outcome


def ended_without_record(log_line):
    """The outcome of a run whose log ends with `log_line` and that left no record: interrupted by Ctrl-C, else died."""
    if log_line == cli.INTERRUPTED_LINE:
        return {"status": INTERRUPTED, "error": "interrupted (Ctrl-C) before its record; a plain rerun resumes it"}
    return {"status": "error", "error": f"left no record; its log ends: {log_line}"}


def last_line(path):
    lines = [line for line in Path(path).read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(the log is empty)"


def failed_runs(config, experiments, statuses=(), logs_since=None):
    """The planned runs whose outcome is not ok (only `statuses`, if given): dicts of status, experiment, rep,
    record, log and error (a contended run's error is what kept it from being measured)."""
    for experiment, rep, record_path, outcome in outcomes(config, experiments, logs_since):
        if outcome["status"] != "ok" and (not statuses or outcome["status"] in statuses):
            error = outcome.get("error") or ""
            if outcome["status"] == "contended":
                error = f"not measured: machine busy in all {outcome['attempt']} tries: " + "; ".join(
                    outcome["contention"]["reasons"]
                )
            yield {
                "status": outcome["status"],
                "experiment": experiment,
                "rep": rep,
                "record": str(record_path),
                "log": RUN_LOG.format(experiment=experiment, rep=rep),
                "error": error,
            }


def redone_runs(config, experiments):
    """The line printed at the end of a workflow run about runs that were run again because the machine was busy
    (None when none was): how many, and the reasons of their contended tries."""
    redone = [outcome for *_, outcome in outcomes(config, experiments) if outcome.get("contended_attempts")]
    if not redone:
        return None
    kinds = sorted(
        {
            reason_kind(reason)
            for outcome in redone
            for attempt in outcome["contended_attempts"]
            for reason in attempt["contention"]["reasons"]
        }
    )
    tries = sum(len(outcome["contended_attempts"]) for outcome in redone)
    clean = sum(outcome["status"] == "ok" for outcome in redone)
    return (
        f"{len(redone)} run(s) were run again because the machine was busy ({tries} contended tries, kept in "
        f"runs.csv; {clean} then measured clean): {'; '.join(kinds)}"
    )


def driver_python():
    """The interpreter running the workflow, as the user would type it again: the checkout's .venv/bin/python, or a
    machine's own (an offline GPU machine's /opt/torch/.venv/bin/python)."""
    executable = Path(sys.executable)
    return str(executable.relative_to(Path.cwd())) if executable.is_relative_to(Path.cwd()) else str(executable)


def end_of_invocation(config, experiments, logs_since, arguments):
    """What a workflow invocation says at its end, and whether it succeeded: the runs run again because the machine
    was busy; the failed runs by status with their logs and the command that retries them (Snakemake with the
    invocation's config `arguments`). It did not succeed when a failed run's status is not in `expected_failures`."""
    lines = [line for line in [redone_runs(config, experiments)] if line]
    failed = list(failed_runs(config, experiments, logs_since=logs_since))
    if not failed:
        return lines, True
    unexpected = {run["status"] for run in failed} - set(config["expected_failures"])
    python = driver_python()
    failed_records = f"{python} scripts/plan.py failed {arguments}".strip()
    profile = "--profile profiles/slurm" if config["scheduler"] == "slurm" else ""
    snakemake = " ".join(filter(None, [f"{python} -m snakemake", profile, arguments]))
    advice = []
    if any(run["status"] == INTERRUPTED for run in failed):  # Snakemake reruns an incomplete job by itself
        advice.append(f"Resume the interrupted with: {snakemake}")
    if any(run["status"] != INTERRUPTED for run in failed):
        retry = f"Retry them with: {snakemake} --forcerun $({failed_records})"
        advice.append(retry + ("" if unexpected else " (expected_failures: these do not fail the run)"))
    return [*lines, *failure_summary(failed), *advice], not unexpected


def failure_summary(failed):
    """The lines printed at the end of a workflow run about its failed runs, grouped by status."""
    lines = []
    for status in sorted({run["status"] for run in failed}):
        group = [run for run in failed if run["status"] == status]
        lines.append(f"{len(group)} run(s) with status {status}:")
        for run in group:
            error = run["error"].splitlines()[0][:200] if run["error"] else ""
            lines.append(f"  {run['experiment']} rep {run['rep']}: {error}\n    log: {run['log']}")
    return lines
