"""The config as the workflow and `scripts/plan.py` both see it, and every refusal of a config that cannot run.

Loading layers the workflow's config.yaml, then each --configfile, then --config, merged key by key as Snakemake
does, checks the result against workflow/schemas/config.schema.yaml and fills its defaults. `refusals` then lists
every problem the schema cannot see (unknown stacks, models and datasets, values no study means, a dataset larger
than the machine's memory, a GPU study on a machine without one): plain functions of the config, envs/stacks.yaml,
the download registry and the machine, one message per problem naming its key. Needs the driver (Snakemake for its
merge and --config parser, jsonschema, PyYAML).
"""

import functools
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator
from snakemake.exceptions import WorkflowError
from snakemake.utils import update_config, validate

from .. import parallel
from ..specs import MODELS, known_model, layer_shapes, model_spec
from . import catalog, image_folder, plan

REPO = Path(__file__).resolve().parents[3]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
REGISTRY_SCHEMA = REPO / "workflow" / "schemas" / "datasets.schema.yaml"
STACKS = REPO / "envs" / "stacks.yaml"
WORKFLOW_CONFIG = "config.yaml"  # the Snakefile's `configfile:`, relative to the directory Snakemake runs in
# No optimiser here trains at a learning rate above this; 1e6 is a typo, not a study.
MAX_LEARNING_RATE = 10
# What each of the schemas' patterns asks for, in a refusal's words. Names, URLs and paths reach the jobs' commands
# (quoted there); these keep out what a name or a URL cannot mean.
PATTERN_MEANINGS = {
    "^/": "an absolute path, e.g. /opt/torch/.venv/bin/python",
    r"^https?://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+$": (
        "an http:// or https:// URL of the characters a URL holds (others percent-encoded: a space is %20)"
    ),
    r"^[A-Za-z0-9_.+-]+$": "a Slurm name: letters, digits, `_`, `.`, `+` and `-`",
    r"^[A-Za-z0-9][A-Za-z0-9._-]*$": "a name of letters, digits, `.`, `_` and `-`, starting with a letter or digit",
    r"^[0-9a-f]{64}$": "a sha256: 64 lowercase hexadecimal digits",
}
# Free text where a line break is at home; every other string of a config is a name, a path, a URL or a title.
MULTILINE_KEYS = re.compile(r"grids\.\d+\.description")
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


class ConfigError(WorkflowError):
    """A config that cannot run: one line per problem, each naming its key or its file and what would be allowed.
    A WorkflowError, so that Snakemake prints it as its own message, without a traceback."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class Machine:
    """What planning needs to know of the machine it plans for: its GPUs (asked lazily: nvidia-smi runs only where a
    config asks for a GPU), its CPU cores, its memory, and whether software is deployed there with conda (Snakemake's
    --sdm conda)."""

    def __init__(self, gpus=None, memory_bytes=None, conda=False, cores=None, gpu_resource=None):
        self._gpus, self.memory_bytes, self.conda = gpus, memory_bytes, conda
        self.cores = cores or parallel.schedulable_cpus()
        self.gpu_resource = gpu_resource  # Snakemake's `gpu` resource (--resources gpu=N); None: not limited

    @property
    def gpus(self):
        if self._gpus is None:
            self._gpus = gpu_count()
        return self._gpus

    @property
    def has_gpu(self):
        return self.gpus > 0


def this_machine(conda=False, gpu_resource=None):
    return Machine(memory_bytes=memory_bytes(), conda=conda, gpu_resource=gpu_resource)


def gpu_count():
    """The NVIDIA GPUs `nvidia-smi -L` lists (0 without nvidia-smi or where it fails)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return 0
    if listing.returncode != 0:
        return 0
    return sum(line.startswith("GPU ") for line in listing.stdout.splitlines())


def memory_bytes():
    """The machine's memory (MemTotal), None where /proc/meminfo cannot tell."""
    try:
        line = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) * 1024


def read_mapping(path):
    """A config file's content, read as Snakemake reads it (JSON, else YAML), refused (naming the file) unless it is
    a mapping of keys."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ConfigError([f"config file {path}: cannot be read: {error.strerror}"]) from None
    try:
        content = json.loads(text)
    except ValueError:
        try:
            content = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError([f"config file {path}: not valid YAML: {error}"]) from None
    if not isinstance(content, dict):
        found = "it is empty" if content is None else f"it holds a {type(content).__name__}"
        raise ConfigError([f"config file {path}: a config is a mapping of keys (stacks:, datasets:, ...); {found}"])
    return content


def workflow_config_file(path=WORKFLOW_CONFIG):
    """The Snakefile's `configfile:`, refused here (naming it) where it is not a mapping: Snakemake's own message
    does not say which file. A missing one is Snakemake's to judge (it is optional beside --configfile)."""
    if Path(path).exists():
        read_mapping(path)
    return path


def layered(configfiles=(), command_line=None, workflow_config=WORKFLOW_CONFIG):
    """The config Snakemake builds: the --configfile files merged key by key in order, then the --config values
    ({key: value} as Snakemake parsed them), and that override merged into the workflow's config.yaml."""
    override = {}
    for path in configfiles:
        update_config(override, read_mapping(path))
    update_config(override, dict(command_line or {}))
    config = read_mapping(workflow_config) if Path(workflow_config).exists() or not configfiles else {}
    update_config(config, override)
    return config


def load(configfiles=(), command_line=None, workflow_config=WORKFLOW_CONFIG):
    """The layered config, checked against the schema, defaults filled."""
    return with_defaults(layered(configfiles, command_line, workflow_config), command_line)


def with_defaults(config, command_line=None):
    """Check the config against its schema, one line per problem naming the key, then fill the defaults (in place).
    `command_line` ({key: value} given with --config) adds a hint where a problem comes from Snakemake reading
    the items of a command-line list as strings."""
    problems = [*unreadable_values(config)]
    if not problems:  # the schema's bounds cannot judge a NaN
        problems = [
            schema_message(error, command_line or {})
            for error in Draft202012Validator(config_schema()).iter_errors(config)
        ]
    if problems:
        raise ConfigError([*sorted(problems), f"(every key is described in {SCHEMA})"])
    validate(config, str(SCHEMA), set_default=True)
    return config


@functools.cache
def config_schema():
    """The config schema, read once per process (the checks and the exclude refusals both use it)."""
    return yaml.safe_load(SCHEMA.read_text())


def key_name(path):
    return ".".join(map(str, path)) or "(top level)"


# Keys a config may still hold from an earlier release, with what took their place.
REPLACED_KEYS = {
    ("race", "looks"): (
        "the race now looks after every round (its confidence sequence costs no error per look) until each group is "
        "decided, tied, out of reach or at the budget: remove `race.looks` and set `race.max_rounds`, the most rounds "
        "a group may run, to its last value if you need the same cap"
    ),
}


def replaced_keys(error):
    """What took the place of each key an additionalProperties error names that an earlier release had."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return []
    path, known = tuple(error.absolute_path), set(error.schema.get("properties", {}))
    return [REPLACED_KEYS[(*path, key)] for key in error.instance if key not in known and (*path, key) in REPLACED_KEYS]


def schema_message(error, command_line):
    message = f"config error in `{key_name(error.absolute_path)}`: {error_text(error)}"
    message += "".join(f"; {hint}" for hint in replaced_keys(error))
    if error.absolute_path and error.absolute_path[0] in command_line and isinstance(error.instance, str):
        message += (
            " (Snakemake's --config reads the items of a list, and values it cannot read as a number, as "
            "strings: put lists of numbers in a config file and pass it with --configfile)"
        )
    return message


def error_text(error):
    """A schema error in words: a pattern's meaning where it has one (PATTERN_MEANINGS), else jsonschema's."""
    meaning = PATTERN_MEANINGS.get(error.schema.get("pattern")) if error.validator == "pattern" else None
    return f"{error.instance!r} is not {meaning}" if meaning else error.message


def unreadable_values(value, path=()):
    """'config error' lines for every value the schema cannot judge: a NaN or infinite number (YAML's .nan, .inf),
    and a control character (a newline, a tab, an escape) in a string other than free text (MULTILINE_KEYS)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and CONTROL_CHARACTER.search(key):
                yield f"config error in `{key_name(path)}`: the name {key!r} holds a control character"
            yield from unreadable_values(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from unreadable_values(item, (*path, index))
    elif isinstance(value, float) and not math.isfinite(value):
        yield f"config error in `{key_name(path)}`: {value} is not a finite number"
    elif isinstance(value, str) and CONTROL_CHARACTER.search(value) and not MULTILINE_KEYS.fullmatch(key_name(path)):
        yield (
            f"config error in `{key_name(path)}`: {value!r} holds a control character (such as a newline or a "
            "tab); names, paths, URLs and titles are one line of printable characters"
        )


def load_stacks():
    return yaml.safe_load(STACKS.read_text())


def load_registry(config):
    """The download registry the config names, refused (naming the file and the entry) unless it follows its
    schema: its URLs, file names and digests reach the download jobs' commands."""
    path = config["downloads"]["registry"]
    try:
        registry = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ConfigError([f"config error in `downloads.registry`: {path}: cannot be read: {error.strerror}"]) from None
    validator = Draft202012Validator(yaml.safe_load(REGISTRY_SCHEMA.read_text()))
    problems = [
        *(
            problem.replace("config error in ", f"config error in `downloads.registry`: {path}: ")
            for problem in unreadable_values(registry)
        ),
        *(
            f"config error in `downloads.registry`: {path}: `{key_name(error.absolute_path)}`: {error_text(error)}"
            for error in validator.iter_errors(registry)
        ),
    ]
    if problems:
        raise ConfigError([*sorted(problems), f"(the registry's entries are described in {REGISTRY_SCHEMA})"])
    return registry


def refusals(config, stacks, registry, machine):
    """Every problem of a schema-valid config that keeps it from running, one line each naming the key."""
    checks = (
        unknown_names,
        datasets_models,
        learning_rates,
        epoch_cap,
        exclusions,
        named_stacks,
        max_batch_range,
        race_schedule,
        existing_env_files,
        existing_envs_under_conda,
        wheels_folder,
        dataset_memory,
        gpu_on_this_machine,
        replica_counts,
    )
    return [problem for check in checks for problem in check(config, stacks, registry, machine)]


def check(config, stacks, registry, machine):
    problems = refusals(config, stacks, registry, machine)
    if problems:
        raise ConfigError(problems)


def warnings(config):
    """What a runnable config will not measure, said once at planning."""
    short = sorted({epochs for epochs in plan.axis_values(config, "epochs") if epochs < 2})
    if short:
        yield (
            f"warning: `epochs` {short[0]}: with fewer than 2 epochs there is no steady epoch, so images/s "
            "(train_images_per_s) is not measured, only the first epoch, which includes compilation and warm-up; "
            "use epochs of at least 2 (3, the default, gives 2 steady epochs)"
        )


def axis_sources(config, axis):
    """(key, value) of every value an axis is planned with: each `grids` entry's, and the top-level list's where
    there are no grids or a grid leaves the axis out."""
    name = plan.CONFIG_AXES[axis]
    if not config["grids"] or any(name not in grid for grid in config["grids"]):  # else every grid replaces it
        for index, value in enumerate(config[name]):
            yield f"{name}.{index}", value
    for number, grid in enumerate(config["grids"]):
        for index, value in enumerate(grid.get(name, [])):
            yield f"grids.{number}.{name}.{index}", value


def not_allowed(key, value, allowed):
    return f"config error in `{key}`: {value!r} is not allowed. Allowed values: {', '.join(map(str, allowed))}"


def name_problem(axis, value, config, stacks, registry):
    """Why a stack, model or dataset name is unknown ('' when it is known)."""
    if axis == "stack" and value not in stacks:
        return f"{value!r} is not allowed. Allowed values: {', '.join(stacks)}"
    if axis == "model" and not known_model(value):
        return f"{value!r} is not allowed. Allowed values: {', '.join([*MODELS, 'lstm<hidden units>'])}"
    if axis == "dataset":
        try:
            catalog.dataset_info(value, config, registry)
        except ValueError as error:
            return str(error)
    return ""


def unknown_names(config, stacks, registry, machine):
    for axis in ("stack", "model", "dataset"):
        for key, value in axis_sources(config, axis):
            problem = name_problem(axis, value, config, stacks, registry)
            if problem:
                yield f"config error in `{key}`: {problem}"


def datasets_models(config, stacks, registry, machine):
    """Each image folder's layout, and each model's layers on each dataset of the kind it reads (images or tokens),
    within every grid."""
    seen = set()
    for grid in plan.grids(config):
        for dataset in grid["dataset"]:
            if name_problem("dataset", dataset, config, stacks, registry):
                continue
            info = catalog.dataset_info(dataset, config, registry)
            if catalog.is_image_folder(dataset, config) and dataset not in seen:
                options, key = catalog.image_folder_options(dataset, config)
                try:
                    image_folder.classes(options["path"])
                except image_folder.ImageFolderError as error:
                    yield f"config error in `{key}.path`: {error}"
            seen.add(dataset)
            tokens = {dataset} if catalog.holds_tokens(info) else set()
            for model in grid["model"]:
                if (model, dataset) in seen or not known_model(model):
                    continue
                if plan.data_problem(model, dataset, tokens):  # the planner leaves it out, and says so
                    continue
                seen.add((model, dataset))
                try:
                    layer_shapes(model_spec(model, info["classes"]), info["shape"])
                except ValueError as error:
                    yield f"config error: model {model!r} cannot run on dataset {dataset!r}: {error}"


def learning_rates(config, stacks, registry, machine):
    for key, rate in axis_sources(config, "learning_rate"):
        if rate > MAX_LEARNING_RATE:
            yield (
                f"config error in `{key}`: {rate:g} is above {MAX_LEARNING_RATE}, where every optimiser here "
                "diverges; learning rates are typically 1e-4 to 1 (the default is 0.001)"
            )


def epoch_cap(config, stacks, registry, machine):
    """An epoch is whole global batches (batch size times replicas with weak scaling)."""
    replicas = max(plan.axis_values(config, "replicas")) if config["scaling"] == "weak" else 1
    cap, largest = config["images_per_epoch"], max(plan.axis_values(config, "batch_size")) * replicas
    if cap is not None and cap < largest:
        yield (
            f"config error in `images_per_epoch`: {cap} is below batch size {largest}; an epoch is whole "
            f"batches, so make it at least {largest} (or null: whole epochs)"
        )


def exclusions(config, stacks, registry, machine):
    """Every value an `exclude` entry names must be one the axis could take: a typo would silently exclude nothing."""
    schema = config_schema()["properties"]
    for number, entry in enumerate(config["exclude"]):
        for axis, values in entry.items():
            if axis == plan.WHY:
                continue
            for value in values if isinstance(values, list) else [values]:
                key = f"exclude.{number}.{axis}"
                item_schema = Draft202012Validator(schema[plan.CONFIG_AXES[axis]]["items"])
                problem = next((error.message for error in item_schema.iter_errors(value)), "")
                if not problem and isinstance(value, str):
                    problem = name_problem(axis, value, config, stacks, registry)
                if problem:
                    yield f"config error in `{key}`: {problem}"


def named_stacks(config, stacks, registry, machine):
    """Stacks named by other keys: they must be stacks this config runs (or, for ops, that have an ops adapter)."""
    planned = plan.axis_values(config, "stack")
    for stack in config["max_batch"]["stacks"]:
        if stack not in planned:
            yield not_allowed("max_batch.stacks", stack, planned)
    baseline = config["comparison_baseline"]
    if baseline is not None and baseline not in planned:
        yield not_allowed("comparison_baseline", baseline, planned)
    with_ops = [name for name, entry in stacks.items() if entry.get("ops_adapter")]
    for stack in config["ops"]["stacks"]:
        if stack not in with_ops:
            yield not_allowed("ops.stacks", stack, with_ops)
    for stack in config["existing_envs"]:
        if stack not in stacks and stack != plan.TOOLS:
            yield not_allowed("existing_envs", stack, [*stacks, plan.TOOLS])


def existing_envs_under_conda(config, stacks, registry, machine):
    if config["existing_envs"] and machine.conda:
        yield (
            "config error in `existing_envs`: existing environments run as they are, not under --sdm conda; "
            "drop --sdm conda or the `existing_envs` entries"
        )


def wheels_folder(config, stacks, registry, machine):
    """A folder of wheels to build the venvs from must exist; under --sdm conda no venv is built from it."""
    wheels = config.get("wheels")
    if wheels and machine.conda:
        yield "config error in `wheels`: conda builds the envs under --sdm conda; drop --sdm conda or `wheels`"
    elif wheels and not Path(wheels).is_dir():
        yield (
            f"config error in `wheels`: {wheels} is not a folder; download the wheels the locks name into it "
            '(docs/stacks.md, "Without a package index") or set `wheels: null` to install from the package index'
        )


def max_batch_range(config, stacks, registry, machine):
    options = config["max_batch"]
    if options["start"] > options["limit"]:
        yield (
            f"config error in `max_batch.start`: {options['start']} is above `max_batch.limit` "
            f"({options['limit']}); make start <= limit"
        )


def race_schedule(config, stacks, registry, machine):
    race = config["race"]
    if not race["enabled"]:
        return
    if config["repeats"] < 2:
        yield (
            f"config error in `repeats`: {config['repeats']} round before the race's first look; a look needs at "
            "least 2 (a paired spread), so set repeats: 2 or more, or race: {enabled: false}"
        )
    if race["max_rounds"] < config["repeats"]:
        yield (
            f"config error in `race.max_rounds`: {race['max_rounds']} is below `repeats` ({config['repeats']}), the "
            f"rounds before the race's first look; set it to {config['repeats']} or more (e.g. 30)"
        )


def race_budget(config, experiments):
    """Raises ConfigError where `race.budget_runs` cannot pay for the first rounds of every experiment."""
    runs, first = config["race"]["budget_runs"], len(experiments) * config["repeats"]
    if config["race"]["enabled"] and runs is not None and runs < first:
        raise ConfigError(
            [
                f"config error in `race.budget_runs`: {runs} runs cannot pay for the first {config['repeats']} "
                f"rounds of the {len(experiments)} experiments ({first} runs); raise it to {first} or more, or "
                "leave it null"
            ]
        )


def existing_env_files(config, stacks, registry, machine):
    for grid in plan.grids(config):
        for stack in grid["stack"]:
            for device in grid["device"]:
                if stack in stacks and stack not in config["existing_envs"] and not stacks[stack]["env"].get(device):
                    yield (
                        f"config error in `existing_envs`: stack {stack} has no env file for {device} in "
                        f"envs/stacks.yaml; name the Python of an environment that has it, e.g. "
                        f"existing_envs: {{{stack}: /path/to/bin/python}}"
                    )
                    return


def dataset_memory(config, stacks, registry, machine):
    """A dataset that planned experiments stage as arrays (device or host placement) must fit in the machine's
    memory: its uint8 training images alone, before any float copy, must (a token dataset's int32 ids and targets)."""
    if machine.memory_bytes is None or list(unknown_names(config, stacks, registry, machine)):
        return
    sizes = plan.train_sizes(config, registry)
    table, _ = plan.experiment_table(config, stacks, sizes, plan.token_datasets(config, registry))
    for dataset in sorted({row["dataset"] for row in table.values() if row["data_placement"] != "stream"}):
        info = catalog.dataset_info(dataset, config, registry)
        size = info["train_size"] or sizes[dataset]  # the config's count; a prepared image folder's own
        if size is None:
            continue
        tokens = catalog.holds_tokens(info)  # a language model's sequences: int32 ids and as many int32 targets
        needed = size * math.prod(info["shape"]) * (8 if tokens else 1)
        examples = (
            f"sequences of {info['shape'][0]} tokens" if tokens else f"images of {'x'.join(map(str, info['shape']))}"
        )
        remedy = "shorter contexts or fewer sequences" if tokens else "smaller images or fewer"
        if needed > machine.memory_bytes:
            yield (
                f"config error in `datasets`: {dataset} needs at least {needed / 2**30:,.1f} GiB for its "
                f"{size:,} training {examples}, more than this machine's {machine.memory_bytes / 2**30:,.1f} GiB of "
                f"memory; use {remedy} (`{'synthetic_tokens' if tokens else 'synthetic'}.train_size`)"
                + ("" if tokens else ", or stream an image folder")
            )


def gpu_on_this_machine(config, stacks, registry, machine):
    # On a cluster the GPUs are the compute nodes': a training job that finds none records the error.
    wanted = "gpu" in plan.axis_values(config, "device") + config["ops"]["devices"]
    if wanted and config["scheduler"] == "local" and not machine.has_gpu:
        yield (
            "config error in `devices`: 'gpu' is listed but this machine has no NVIDIA GPU (`nvidia-smi -L` lists "
            "none). Allowed here: cpu (on a Slurm cluster's login node, run with --profile profiles/slurm)"
        )


def replica_counts(config, stacks, registry, machine):
    """Replicas the machine can give each run: GPUs on a GPU (here, or a Slurm node's `slurm.gpus_per_node` times
    nodes), cores on a CPU (replicas are logical devices or processes sharing them); strong scaling's global batch
    must split equally."""
    for grid_number, grid in enumerate(plan.grids(config)):
        for count in grid["replicas"]:
            key = (
                f"grids.{grid_number}.replicas"
                if config["grids"] and "replicas" in config["grids"][grid_number]
                else "replicas"
            )
            if "gpu" in grid["device"]:
                yield from gpu_replica_problems(config, machine, key, count)
            if "cpu" in grid["device"] and count > machine.cores:
                yield (
                    f"config error in `{key}`: {count} replicas on cpu, but this machine has {machine.cores} cores "
                    f"for them to share; use at most {machine.cores}"
                )
            for batch_size in grid["batch_size"]:
                problem = parallel.batch_problem(batch_size, count, config["scaling"])
                if problem:
                    yield f"config error in `batch_sizes` ({key}: {count}, scaling: strong): {problem}"


def gpu_replica_problems(config, machine, key, count):
    if config["scheduler"] == "local" and machine.has_gpu and count > machine.gpus:
        yield (
            f"config error in `{key}`: {count} replicas on gpu, but this machine has {machine.gpus} GPUs "
            f"(`nvidia-smi -L`); use at most {machine.gpus}, or run on a cluster (--profile profiles/slurm)"
        )
    elif config["scheduler"] == "local" and machine.gpu_resource is not None and count > machine.gpu_resource:
        yield (
            f"config error in `{key}`: {count} replicas on gpu take {count} of Snakemake's `gpu` resource, but this "
            f"invocation gives {machine.gpu_resource} (profiles/default: gpu=1); run with --resources gpu={count}"
        )
    per_node = config["slurm"]["gpus_per_node"]
    if config["scheduler"] == "slurm" and per_node and count > per_node and count % per_node:
        yield (
            f"config error in `{key}`: {count} replicas on gpu span nodes of {per_node} GPUs "
            f"(`slurm.gpus_per_node`) but do not fill them; use a multiple of {per_node}"
        )


def command_line_arguments(configfiles, config_args):
    """The config arguments a user ran Snakemake with, as a command line to repeat (e.g. in a retry hint)."""
    words = ["--configfile " + " ".join(quoted(os.path.relpath(path)) for path in configfiles)] if configfiles else []
    if config_args:
        words.append("--config " + " ".join(quoted(argument) for argument in config_args))
    return " ".join(words)


def quoted(argument):
    return argument if re.fullmatch(r"[\w.,=@%+/:-]+", argument) else "'" + argument.replace("'", "'\\''") + "'"


def digest(config):
    """The sha256 of the whole config as the workflow reads it (defaults filled in): one study, one digest, whichever
    files and --config overrides it came from. The report's reproduce line names it."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
