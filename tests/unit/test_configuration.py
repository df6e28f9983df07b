"""Configs that cannot run are refused before anything runs, every problem at once, each naming its key (or file) and
what is allowed: dlbench/study/configuration.py, the checks the workflow and scripts/plan.py share, tested as functions
(the workflow's and scripts/plan.py's refusals: tests/workflow/test_config.py). Layering matches Snakemake's:
config.yaml, then each --configfile, then --config."""

import pytest
import yaml
from conftest import REPO
from dlbench.study import configuration, plan

MACHINE = configuration.Machine(gpus=0, memory_bytes=24 * 2**30, cores=2)  # this project's 2-core, 24 GiB machine
WORKFLOW_CONFIG = REPO / "config.yaml"

# (what the study config sets, what the refusal says): every one of these is nonsense that must not run.
HOSTILE = [
    ({"learning_rates": [float("nan")]}, "`learning_rates.0`: nan is not a finite number"),
    ({"learning_rates": [float("inf")]}, "`learning_rates.0`: inf is not a finite number"),
    ({"learning_rates": [float("-inf")]}, "`learning_rates.0`: -inf is not a finite number"),
    ({"learning_rates": [1e6]}, "`learning_rates.0`: 1e+06 is above 10, where every optimiser here diverges"),
    ({"learning_rates": [0]}, "`learning_rates.0`: 0 is less than or equal to the minimum of 0"),
    ({"learning_rates": [-0.1]}, "`learning_rates.0`: -0.1 is less than or equal to the minimum of 0"),
    ({"grids": [{"learning_rates": [50]}]}, "`grids.0.learning_rates.0`: 50 is above 10"),
    ({"epochs": [0]}, "`epochs.0`: 0 is less than the minimum of 1"),
    ({"epochs": [10**9]}, "`epochs.0`: 1000000000 is greater than the maximum of 1000"),
    ({"epochs": ["3"]}, "`epochs.0`: '3' is not of type 'integer'"),
    ({"batch_sizes": [0]}, "`batch_sizes.0`: 0 is less than the minimum of 1"),
    ({"batch_sizes": [64, -3]}, "`batch_sizes.1`: -3 is less than the minimum of 1"),
    ({"batch_sizes": [64.5]}, "`batch_sizes.0`: 64.5 is not of type 'integer'"),
    ({"stacks": ["caffe-1.0"]}, "`stacks.0`: 'caffe-1.0' is not allowed. Allowed values: mxnet-1.9, torch-2.13"),
    ({"stacks": []}, "`stacks`: [] should be non-empty"),
    ({"models": ["alexnet"]}, "`models.0`: 'alexnet' is not allowed. Allowed values: mlp, cnn, lenet"),
    ({"datasets": ["imagenet-21k"]}, "`datasets.0`: unknown dataset 'imagenet-21k'; allowed: cifar10"),
    ({"datasets": ["synthetic-100000x100000x3"]}, "synthetic-100000x100000x3 needs at least 57,220.5 GiB"),
    ({"datasets": ["synthetic-4x4x1"]}, "model 'lenet' cannot run on dataset 'synthetic-4x4x1'"),
    ({"datasets": ["synthetic-8x8x2"]}, "height and width must be positive and channels 1 or 3"),
    (
        {"datasets": ["synthetic-30x30x3"], "models": ["vit-tiny"]},
        "model 'vit-tiny' cannot run on dataset 'synthetic-30x30x3': PatchEmbed(patch=4, width=128) needs an image "
        "whose sides the patch divides, got shape (30, 30, 3)",
    ),
    ({"datasets": ["synthetic-tokens-1x16"]}, "synthetic-tokens-1x16': the vocabulary must be 2 to 16777216"),
    ({"datasets": ["synthetic-0x8x1"]}, "height and width must be positive and channels 1 or 3"),
    ({"datasets": ["imagenet"]}, "dataset 'imagenet' needs `imagenet.path`"),
    ({"synthetic": {"train_size": 10**9}}, "synthetic-32x32x3 needs at least 2,861.0 GiB"),
    (
        {"datasets": ["synthetic-tokens-256x4096"], "models": ["gpt-tiny"], "synthetic_tokens": {"train_size": 10**7}},
        "synthetic-tokens-256x4096 needs at least 305.2 GiB for its 10,000,000 training sequences of 4096 tokens",
    ),
    ({"synthetic": {"train_size": 0}}, "`synthetic.train_size`: 0 is less than the minimum of 1"),
    ({"devices": ["tpu"]}, "`devices.0`: 'tpu' is not one of ['cpu', 'gpu']"),
    ({"devices": ["gpu"]}, "`devices`: 'gpu' is listed but this machine has no NVIDIA GPU"),
    ({"ops": {"devices": ["gpu"]}}, "'gpu' is listed but this machine has no NVIDIA GPU"),
    ({"variants": ["turbo"]}, "`variants.0`: 'turbo' does not match"),
    ({"optimizers": ["lbfgs"]}, "`optimizers.0`: 'lbfgs' is not one of ['adam', 'sgd', 'rmsprop']"),
    ({"data_placements": ["disk"]}, "`data_placements.0`: 'disk' is not one of ['device', 'host', 'stream']"),
    ({"exclude": [{"stack": "keras-3-jx"}]}, "`exclude.0.stack`: 'keras-3-jx' is not allowed. Allowed values:"),
    ({"exclude": [{"stack": ["torch-2.13", "tf-2.21"]}]}, "`exclude.0.stack`: 'tf-2.21' is not allowed."),
    ({"exclude": [{"variant": "turbo"}]}, "`exclude.0.variant`: 'turbo' does not match"),
    ({"exclude": [{"model": "alexnet"}]}, "`exclude.0.model`: 'alexnet' is not allowed."),
    ({"exclude": [{"device": "tpu"}]}, "`exclude.0.device`: 'tpu' is not one of ['cpu', 'gpu']"),
    ({"exclude": [{"batch_size": "64"}]}, "`exclude.0.batch_size`: '64' is not of type 'integer'"),
    ({"exclude": [{"colour": "red"}]}, "`exclude.0`: 'colour' is not one of ['stack', 'dataset'"),
    ({"exclude": [{}]}, "`exclude.0`: {} should be non-empty"),
    ({"exclude": [{"variant": "eager", "why": 3}]}, "`exclude.0.why`: 3 is not of type 'string'"),
    ({"grids": [{"stacks": ["torch-2.99"]}]}, "`grids.0.stacks.0`: 'torch-2.99' is not allowed."),
    ({"grids": [{"batchsize": [3]}]}, "`grids.0`: Additional properties are not allowed ('batchsize' was unexpected)"),
    ({"grids": [{"models": ["alexnet"]}]}, "`grids.0.models.0`: 'alexnet' is not allowed."),
    ({"grids": [{"learning_rates": [float("nan")]}]}, "`grids.0.learning_rates.0`: nan is not a finite number"),
    ({"images_per_epoch": 32}, "`images_per_epoch`: 32 is below batch size 64"),
    ({"max_batch": {"stacks": ["caffe-1.0"]}}, "`max_batch.stacks`: 'caffe-1.0' is not allowed."),
    ({"max_batch": {"start": 512, "limit": 64}}, "`max_batch.start`: 512 is above `max_batch.limit` (64)"),
    ({"comparison_baseline": "caffe-1.0"}, "`comparison_baseline`: 'caffe-1.0' is not allowed."),
    ({"ops": {"stacks": ["keras-3-tensorflow"]}}, "`ops.stacks`: 'keras-3-tensorflow' is not allowed."),
    ({"existing_envs": {"caffe-1.0": "/usr/bin/python3"}}, "`existing_envs`: 'caffe-1.0' is not allowed."),
    ({"existing_envs": {"tool": "/usr/bin/python3"}}, "'tool' is not allowed. Allowed values: mxnet-1.9, torch-2.13"),
    ({"existing_envs": {"tool": "/usr/bin/python3"}}, ", torch-2.11, tools"),  # the tools' jobs' env too
    ({"batchsize": 3}, "`(top level)`: Additional properties are not allowed ('batchsize' was unexpected)"),
    ({"repeats": 0}, "`repeats`: 0 is less than the minimum of 1"),
    ({"repeats": 10**6}, "`repeats`: 1000000 is greater than the maximum of 100"),
    ({"equivalence_margin": 0}, "`equivalence_margin`: 0 is less than or equal to the minimum of 0"),
    ({"race": {"looks": [5, 8]}}, "('looks' was unexpected); the race now looks after every round"),
    ({"race": {"looks": [5, 8]}}, "remove `race.looks` and set `race.max_rounds`"),
    ({"race": {"max_rounds": 2}}, "`race.max_rounds`: 2 is below `repeats` (3), the rounds before the race's first"),
    ({"repeats": 1}, "`repeats`: 1 round before the race's first look; a look needs at least 2"),
    ({"race": {"budget_minutes": 0}}, "`race.budget_minutes`: 0 is less than or equal to the minimum of 0"),
    ({"race": {"budget_runs": 0}}, "`race.budget_runs`: 0 is less than the minimum of 1"),
    ({"momentum": float("nan")}, "`momentum`: nan is not a finite number"),
    ({"weight_decay": float("inf")}, "`weight_decay`: inf is not a finite number"),
    ({"contention": {"max_steal_share": 1.5}}, "`contention.max_steal_share`: 1.5 is greater than the maximum of 1"),
    ({"contention": {"max_foreign_cpu_cores": -0.1}}, "`contention.max_foreign_cpu_cores`: -0.1 is less than"),
    ({"contention": {"retries": -1}}, "`contention.retries`: -1 is less than the minimum of 0"),
    ({"contention": {"foreign_gpu_process": "kill"}}, "`contention.foreign_gpu_process`: 'kill' is not one of"),
    ({"contention": {"throttle_reasons": ["gpu_idle"]}}, "`contention.throttle_reasons.0`: 'gpu_idle' is not one of"),
    ({"expected_failures": ["crashed"]}, "`expected_failures.0`: 'crashed' is not one of"),
    ({"replicas": [0]}, "`replicas.0`: 0 is less than the minimum of 1"),
    ({"replicas": [1, 4]}, "`replicas`: 4 replicas on cpu, but this machine has 2 cores for them to share"),
    ({"grids": [{"replicas": [3]}]}, "`grids.0.replicas`: 3 replicas on cpu, but this machine has 2 cores"),
    ({"scaling": "linear"}, "`scaling`: 'linear' is not one of ['weak', 'strong']"),
    (
        {"replicas": [1, 2], "scaling": "strong", "batch_sizes": [63]},
        "`batch_sizes` (replicas: 2, scaling: strong): batch size 63 is not divisible by 2 replicas",
    ),
    ({"replicas": [2], "images_per_epoch": 64, "batch_sizes": [64]}, "`images_per_epoch`: 64 is below batch size 128"),
]


def checked(tmp_path, study, command_line=None):
    """The study config layered over config.yaml, loaded and checked as the workflow does."""
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    config = configuration.load([tmp_path / "study.yaml"], command_line, WORKFLOW_CONFIG)
    configuration.check(config, configuration.load_stacks(), configuration.load_registry(config), MACHINE)
    return config


@pytest.mark.parametrize(("study", "expected"), HOSTILE, ids=[str(study)[:60] for study, _ in HOSTILE])
def test_a_hostile_config_is_refused_naming_the_key(tmp_path, monkeypatch, study, expected):
    monkeypatch.chdir(REPO)  # the registry path in config.yaml is relative to the repository
    with pytest.raises(configuration.ConfigError) as refusal:
        checked(tmp_path, study)
    assert expected in str(refusal.value)


def test_more_gpu_replicas_than_the_machine_or_a_slurm_node_holds_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    (tmp_path / "study.yaml").write_text(
        yaml.safe_dump({"devices": ["gpu"], "replicas": [1, 2, 8], "stacks": ["torch-2.13"]})
    )
    config = configuration.load([tmp_path / "study.yaml"], None, WORKFLOW_CONFIG)
    stacks, registry = configuration.load_stacks(), configuration.load_registry(config)
    two_gpus = configuration.Machine(gpus=2, memory_bytes=2**40, cores=16)
    assert configuration.refusals(config, stacks, registry, two_gpus) == [
        "config error in `replicas`: 8 replicas on gpu, but this machine has 2 GPUs (`nvidia-smi -L`); use at most "
        "2, or run on a cluster (--profile profiles/slurm)"
    ]
    one_gpu_resource = configuration.Machine(gpus=8, memory_bytes=2**40, cores=16, gpu_resource=1)
    assert configuration.refusals(config, stacks, registry, one_gpu_resource)[-1] == (
        "config error in `replicas`: 8 replicas on gpu take 8 of Snakemake's `gpu` resource, but this invocation "
        "gives 1 (profiles/default: gpu=1); run with --resources gpu=8"
    )
    cluster = dict(config, scheduler="slurm", slurm=dict(config["slurm"], gpus_per_node=3))
    assert configuration.refusals(cluster, stacks, registry, configuration.Machine(gpus=0, cores=16)) == [
        "config error in `replicas`: 8 replicas on gpu span nodes of 3 GPUs (`slurm.gpus_per_node`) but do not "
        "fill them; use a multiple of 3"
    ]
    eight = dict(cluster, slurm=dict(config["slurm"], gpus_per_node=4))
    assert configuration.refusals(eight, stacks, registry, configuration.Machine(gpus=0, cores=16)) == []


def test_every_problem_is_named_at_once(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(configuration.ConfigError) as refusal:
        checked(tmp_path, {"stacks": ["caffe-1.0"], "models": ["alexnet"], "learning_rates": [1e6]})
    assert len(refusal.value.problems) == 3


@pytest.mark.parametrize(
    ("content", "found"), [("", "it is empty"), ("- stacks\n", "it holds a list"), ("just words\n", "it holds a str")]
)
def test_a_config_file_that_is_not_a_mapping_is_refused_naming_the_file(tmp_path, content, found):
    (tmp_path / "study.yaml").write_text(content)
    with pytest.raises(
        configuration.ConfigError,
        match=f"config file {tmp_path / 'study.yaml'}: a config is a mapping of keys .*; {found}",
    ):
        configuration.load([tmp_path / "study.yaml"], None, WORKFLOW_CONFIG)


def test_a_config_file_that_is_not_yaml_is_refused_naming_the_file(tmp_path):
    (tmp_path / "study.yaml").write_text("stacks: [torch-2.13\n")
    with pytest.raises(configuration.ConfigError, match=f"config file {tmp_path / 'study.yaml'}: not valid YAML"):
        configuration.load([tmp_path / "study.yaml"], None, WORKFLOW_CONFIG)


def test_a_list_of_numbers_on_the_command_line_is_refused_explaining_the_string_trap(tmp_path, monkeypatch):
    """Snakemake's --config batch_sizes=[64,128] gives strings ('64'): the refusal says why and what to do."""
    monkeypatch.chdir(REPO)
    from snakemake.cli import parse_config

    with pytest.raises(configuration.ConfigError) as refusal:
        checked(tmp_path, {}, parse_config(["batch_sizes=[64,128]"]))
    assert "`batch_sizes.0`: '64' is not of type 'integer' (Snakemake's --config reads the items of a list" in str(
        refusal.value
    )
    assert "pass it with --configfile" in str(refusal.value)


def test_fewer_than_two_epochs_runs_with_a_warning_that_says_how_to_get_a_steady_epoch(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    config = checked(tmp_path, {"epochs": [1, 3]})
    (warning,) = configuration.warnings(config)
    assert "`epochs` 1: with fewer than 2 epochs there is no steady epoch" in warning and "at least 2" in warning
    assert not list(configuration.warnings(checked(tmp_path, {})))


def test_layering_is_snakemakes_config_yaml_then_each_configfile_then_the_command_line(tmp_path):
    (tmp_path / "one.yaml").write_text("models: [cnn]\nsynthetic: {classes: 4}\ncontention: {retries: 1}\n")
    (tmp_path / "two.yaml").write_text("synthetic: {train_size: 128}\n")
    config = configuration.layered([tmp_path / "one.yaml", tmp_path / "two.yaml"], {"repeats": 5}, WORKFLOW_CONFIG)
    base = yaml.safe_load(WORKFLOW_CONFIG.read_text())
    assert config["stacks"] == base["stacks"] and config["models"] == ["cnn"] and config["repeats"] == 5
    assert config["synthetic"] == dict(base["synthetic"], classes=4, train_size=128)  # merged key by key


def test_the_retry_hint_repeats_the_users_config_arguments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    words = configuration.command_line_arguments([tmp_path / "config/seeds.yaml"], ["repeats=5", "exclude=[{a: b}]"])
    assert words == "--configfile config/seeds.yaml --config repeats=5 'exclude=[{a: b}]'"
    assert configuration.command_line_arguments([], None) == ""


def test_a_top_level_list_every_grid_replaces_is_not_judged(tmp_path, monkeypatch):
    """Grids that all name their own datasets and rates plan none of the top-level ones, so those are not refused."""
    monkeypatch.chdir(REPO)
    config = checked(
        tmp_path,
        {
            "datasets": ["imagenet"],
            "learning_rates": [50],
            "grids": [{"datasets": ["digits"], "learning_rates": [0.01]}],
        },
    )
    assert plan.axis_values(config, "dataset") == ["digits"]


@pytest.mark.parametrize("value", [5, {"a": 1}, [None]])
def test_an_exclude_value_of_the_wrong_type_is_a_config_error_not_a_traceback(tmp_path, monkeypatch, value):
    monkeypatch.chdir(REPO)
    with pytest.raises(
        configuration.ConfigError, match="config error in `exclude.0.dataset`: .* is not of type 'string'"
    ):
        checked(tmp_path, {"exclude": [{"dataset": value}]})


def test_a_dataset_too_large_for_memory_is_judged_only_where_it_is_planned_as_arrays(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    large = {"datasets": ["digits", "synthetic-4000x4000x3"], "models": ["mlp"]}
    with pytest.raises(configuration.ConfigError, match="synthetic-4000x4000x3 needs at least 91.6 GiB"):
        checked(tmp_path, large)
    checked(tmp_path, dict(large, exclude=[{"dataset": "synthetic-4000x4000x3"}]))


def test_a_json_config_file_reads_as_snakemake_reads_it(tmp_path):
    (tmp_path / "study.json").write_text('{"learning_rates": [1e-3], "repeats": 2}')
    config = configuration.load([tmp_path / "study.json"], None, WORKFLOW_CONFIG)
    assert config["learning_rates"] == [0.001] and config["repeats"] == 2


def test_several_config_files_follow_one_flag_in_the_retry_hint(tmp_path, monkeypatch):
    """Snakemake's --configfile takes a list, and a second flag replaces the first: one flag, every file."""
    monkeypatch.chdir(tmp_path)
    words = configuration.command_line_arguments([tmp_path / "a.yaml", tmp_path / "b c.yaml"], None)
    assert words == "--configfile a.yaml 'b c.yaml'"


def test_existing_environments_are_refused_only_where_software_is_deployed_with_conda(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    existing = {"torch-2.13": "/usr/bin/python3", "tools": "/usr/bin/python3"}  # a stack's, and the tools' jobs'
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"existing_envs": existing}))
    config = configuration.load([tmp_path / "study.yaml"], None, WORKFLOW_CONFIG)
    stacks, registry = configuration.load_stacks(), configuration.load_registry(config)
    conda = configuration.Machine(gpus=0, memory_bytes=24 * 2**30, conda=True)
    assert configuration.refusals(config, stacks, registry, MACHINE) == []
    assert configuration.refusals(config, stacks, registry, conda) == [
        "config error in `existing_envs`: existing environments run as they are, not under --sdm conda; "
        "drop --sdm conda or the `existing_envs` entries"
    ]


def test_a_wheels_folder_that_is_not_there_is_refused_before_any_build(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    stacks = configuration.load_stacks()

    def refused(wheels, machine=MACHINE):
        (tmp_path / "study.yaml").write_text(yaml.safe_dump({"wheels": wheels}))
        config = configuration.load([tmp_path / "study.yaml"], None, WORKFLOW_CONFIG)
        return configuration.refusals(config, stacks, configuration.load_registry(config), machine)

    assert refused(None) == [] and refused(str(tmp_path)) == []
    (problem,) = refused(str(tmp_path / "wheels"))
    assert problem.startswith(f"config error in `wheels`: {tmp_path / 'wheels'} is not a folder; download the wheels")
    conda = configuration.Machine(gpus=0, memory_bytes=24 * 2**30, conda=True)
    assert refused(str(tmp_path), conda) == [
        "config error in `wheels`: conda builds the envs under --sdm conda; drop --sdm conda or `wheels`"
    ]


def test_a_race_budget_too_small_for_the_first_rounds_is_refused_naming_the_key():
    config = {"repeats": 3, "race": {"enabled": True, "budget_runs": 20}}
    with pytest.raises(configuration.ConfigError, match=r"`race.budget_runs`: 20 runs cannot pay for the first 3 "):
        configuration.race_budget(config, {f"e{index}": {} for index in range(8)})
    configuration.race_budget(dict(config, race={"enabled": True, "budget_runs": 24}), {f"e{i}": {} for i in range(8)})
    configuration.race_budget(dict(config, race={"enabled": False, "budget_runs": 1}), {"e": {}})


# config.yaml's keys whose value is the default study's choice rather than the schema's default: the exclusions are a
# judgement about the default stacks, the operator sweep is off in the default study (a config that names
# `ops.stacks` gets the schema's operators, sizes and samples), and the race's budget is sized for the default study.
STUDY_CHOICES = {"exclude", "ops", "race"}


def test_the_default_study_is_the_schemas_defaults_but_for_its_named_choices():
    """A key left out of a config means what config.yaml says, so that `config.yaml` reads as the defaults."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())["properties"]
    study = yaml.safe_load((REPO / "config.yaml").read_text())
    differing = {key for key, value in study.items() if schema[key].get("default") != value}
    assert differing == STUDY_CHOICES


def test_a_stack_without_an_env_file_for_a_device_is_refused_with_its_reason_even_when_it_has_runs(monkeypatch):
    """torch-2.11 has only a GPU env file: on CPU, with a variant it runs (eager), the checks that plan the matrix
    (the race's schedule) still pass over it and the env files' check says what to do, not a KeyError."""
    monkeypatch.chdir(REPO)
    config = configuration.with_defaults({"stacks": ["torch-2.11"], "variants": ["eager"], "ops": {"stacks": []}})
    stacks = configuration.load_stacks()
    assert "cpu" not in stacks["torch-2.11"]["env"]
    problems = configuration.refusals(config, stacks, configuration.load_registry(config), MACHINE)
    assert any(
        "stack torch-2.11 has no env file for cpu" in problem and "existing_envs" in problem for problem in problems
    )
