"""Bad config is refused before any job runs, with one message naming the key and the allowed values, by the workflow
and by the planning command (scripts/plan.py); the studies in config/ plan what they say."""

import os
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, SNAKEMAKE, copy_repository
from dlbench.study import configuration

WORKFLOW_CONFIG = REPO / "config.yaml"
# Snakemake's refusal of a --configfile that is not a mapping, as docs/troubleshooting.md quotes it.
SNAKEMAKE_NOT_A_MAPPING = "Config file must be given as JSON or YAML with keys at top level."


def dry_run(*config):
    return subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--config", *config], cwd=REPO, capture_output=True, text=True
    )


def dry_run_with(tmp_path, overrides):
    """Dry run with a config file holding the default config updated with overrides (typed YAML values)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text()) | overrides
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--configfile", str(tmp_path / "config.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    return result.returncode, result.stdout + result.stderr


def test_bad_config_is_refused_by_the_workflow_with_every_problem_named():
    """The workflow refuses through dlbench/study/configuration.py (its cases: tests/unit/test_configuration.py), before
    any job, naming each key at once."""
    result = dry_run("stacks=[caffe-1.0]", "models=[alexnet]")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config error in `stacks.0`: 'caffe-1.0' is not allowed. Allowed values: mxnet-1.9, torch-2.13" in output
    assert "config error in `models.0`: 'alexnet' is not allowed. Allowed values: mlp, cnn, lenet" in output


def test_an_empty_workflow_config_is_refused_naming_the_file(tmp_path):
    copy = tmp_path / "repo"
    copy_repository(copy)
    (copy / "config.yaml").write_text("")
    result = subprocess.run([*SNAKEMAKE, "-n", "--cores", "1"], cwd=copy, capture_output=True, text=True)
    assert result.returncode != 0
    assert "config file config.yaml: a config is a mapping of keys (stacks:, datasets:, ...); it is empty" in (
        result.stdout + result.stderr
    )


@pytest.mark.parametrize(("content", "found"), [("", "it is empty"), ("- stacks\n- models\n", "it holds a list")])
def test_a_configfile_that_is_no_mapping_is_named_by_the_planning_command(tmp_path, content, found):
    """Snakemake reads the --configfile files before the workflow starts and refuses one that is not a mapping with a
    message of its own that names no file (docs/troubleshooting.md quotes it); the planning command, given the same
    arguments, names the file and what it holds. Nothing is planned or written either way."""
    study = tmp_path / "study.yaml"
    study.write_text(content)
    other = tmp_path / "other.yaml"
    other.write_text("repeats: 2\n")
    arguments = ["--configfile", str(other), str(study)]
    workflow = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", *arguments], cwd=REPO, check=False, capture_output=True, text=True
    )
    assert workflow.returncode != 0
    assert SNAKEMAKE_NOT_A_MAPPING in workflow.stdout + workflow.stderr
    planning = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "plan.py"), "experiments", *arguments],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
    )
    assert planning.returncode != 0
    assert f"config file {study}: a config is a mapping of keys (stacks:, datasets:, ...); {found}" in planning.stderr
    assert str(other) not in planning.stderr


def test_an_image_folder_with_a_wrong_layout_is_refused_before_any_job(tmp_path):
    (tmp_path / "flowers" / "train" / "daisy").mkdir(parents=True)
    code, output = dry_run_with(
        tmp_path,
        {
            "datasets": ["flowers"],
            "data_placements": ["stream"],
            "image_folders": {"flowers": {"path": str(tmp_path / "flowers")}},
        },
    )
    assert code != 0
    assert (
        f"config error in `image_folders.flowers.path`: {tmp_path / 'flowers'}: no val/ folder (found: train)" in output
    )


def test_excluding_everything_is_refused():
    result = dry_run("exclude=[{model: [mlp, lenet, gpt-tiny]}]")
    assert "every experiment is excluded" in result.stdout + result.stderr


def test_unsupported_variant_is_skipped_with_a_reason():
    result = dry_run("stacks=[torch-2.13]", "variants=[eager,graph]")
    assert result.returncode == 0
    assert (
        "skipping variant 'graph' with device data for torch-2.13 on cpu: PyTorch's graph mode is torch.compile"
        in result.stderr
    )


def test_the_planning_command_layers_a_study_config_as_the_workflow_does():
    """scripts/plan.py with a study config plans the experiments Snakemake plans (both layer it on config.yaml)."""
    planned = subprocess.run(
        [sys.executable, "scripts/plan.py", "experiments", "--configfile", "config/versions.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    experiments = planned.stdout.split()
    dry_run = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--configfile", "config/versions.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    study = yaml.safe_load((REPO / "config/versions.yaml").read_text())
    repeats = study.get("repeats", yaml.safe_load(WORKFLOW_CONFIG.read_text())["repeats"])
    train_jobs = next(line for line in dry_run.stdout.splitlines() if line.startswith("train "))
    assert len(experiments) > 1 and int(train_jobs.split()[1]) == len(experiments) * repeats
    assert all(experiment in dry_run.stdout for experiment in experiments)


def test_the_planning_command_refuses_what_the_workflow_refuses(tmp_path):
    (tmp_path / "study.yaml").write_text("learning_rates: [.nan]\n")
    result = subprocess.run(
        [sys.executable, "scripts/plan.py", "experiments", "--configfile", str(tmp_path / "study.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "config error in `learning_rates.0`: nan is not a finite number" in result.stderr


def stand_in_gpu(tmp_path, gpus=1):
    """The environment of a run whose PATH has a stand-in nvidia-smi that lists `gpus` GPUs (GPU studies plan here)."""
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir(exist_ok=True)
    listing = "".join(f'echo "GPU {index}: Stand-in (UUID: GPU-{index})"\n' for index in range(gpus))
    fake.write_text(f"#!/bin/sh\n{listing}")
    fake.chmod(0o755)
    return {"PATH": f"{fake.parent}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/tmp")}


def test_the_seeds_study_plans_every_grid(tmp_path):
    """config/seeds.yaml (a GPU study) plans its grids here with a stand-in nvidia-smi that lists one GPU."""
    environment = stand_in_gpu(tmp_path)
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--configfile", "config/seeds.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=environment,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    planned = result.stdout + result.stderr
    seeds = yaml.safe_load((REPO / "config" / "seeds.yaml").read_text())
    for grid in seeds["grids"]:
        for model in grid["models"]:
            for stack in grid["stacks"]:
                assert f"results/runs/{stack}_" in planned and f"_{model}_gpu_" in planned, (stack, model)
    for expected in (
        "mxnet-1.9_cifar10_resnet20_gpu_b128_adam-lr0.001_e10_graph",
        "torch-2.13_cifar10_vgg16-cifar_gpu_b128_adam-lr0.001_e10_compile",
        "tensorflow-2.21_synthetic-imagenet_resnet50_gpu_b16_adam-lr0.001_e3_xla",
        "mxnet-1.9_mnist_lenet_gpu_b200_adam-lr0.001_e15_eager",
        "keras-3-tensorflow_cifar10_resnet18_gpu_b32_adam-lr0.001_e10_xla_host-data",
        "torch-2.13_cifar10_resnet18_gpu_b32_adam-lr0.001_e10_compile_host-data",
    ):
        assert f"results/runs/{expected}/rep3/record.json" in planned, expected
    assert "skipping variant 'xla' with device data for mxnet-1.9 on gpu: MXNet 1.9 has no XLA backend" in planned
    assert "keras-3-tensorflow_cifar10_resnet18_gpu_b32_adam-lr0.001_e10_xla/" not in planned
    assert "skipping variant 'xla' with device data for keras-3-tensorflow on gpu: fit on TensorFlow reads" in planned


def test_the_imagenet_study_plans_streamed_runs_of_every_stack(tmp_path, env_python):
    """config/imagenet.yaml on a generated folder, with a stand-in nvidia-smi: the index is planned, never arrays."""
    subprocess.run(
        [str(env_python("tools")), "scripts/make_image_folder.py", str(tmp_path / "ilsvrc")],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    environment = stand_in_gpu(tmp_path)
    result = subprocess.run(
        [
            *SNAKEMAKE,
            "-n",
            "--cores",
            "1",
            "--configfile",
            "config/imagenet.yaml",
            "--config",
            f"imagenet={{path: {tmp_path / 'ilsvrc'}}}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=environment,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    planned = result.stdout + result.stderr
    for expected in (
        "torch-2.13_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_eager-amp_stream-data",
        "torch-2.13_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_compile-amp_stream-data",
        "mxnet-1.9_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_graph-amp_stream-data",
        "tensorflow-2.21_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_xla-amp_stream-data",
        "keras-3-jax_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_xla-amp_stream-data",
        "keras-3-tensorflow_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_graph-amp_stream-data",
        "keras-3-torch_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_compile-amp_stream-data",
        "flax-0.12_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_xla-amp_stream-data",
        "torch-2.13_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_compile-reduce-overhead-amp_stream-data",
        "torch-2.13_imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_compile-max-autotune-amp_stream-data",
    ):
        assert f"results/runs/{expected}/rep3/record.json" in planned, expected
    assert "results/stream/imagenet/meta.json" in planned and "results/data/imagenet" not in planned


def test_the_scaling_study_plans_every_gpu_count_and_refuses_more_than_the_machine_has(tmp_path):
    """config/scaling.yaml on a machine listing 8 GPUs: every stack with a mechanism at 1, 2, 4 and 8 replicas, the
    jobs taking a GPU per replica; stacks without one skip replicas, saying why. With 4 GPUs it is refused."""
    command = [*SNAKEMAKE, "-n", "--cores", "1", "--resources", "gpu=8", "--configfile", "config/scaling.yaml"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=stand_in_gpu(tmp_path, 8))
    assert result.returncode == 0, result.stderr[-2000:]
    planned = result.stdout + result.stderr
    for expected in (
        "torch-2.13_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_eager-amp",
        "torch-2.13_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_compile-amp_r8",
        "mxnet-1.9_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_graph-amp_r4",
        "tensorflow-2.21_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_graph-amp_r2",
        "keras-3-jax_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_xla-amp_r8",
        "keras-3-tensorflow_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_graph-amp_host-data_r8",
        "flax-0.12_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_xla-amp_r2",
    ):
        assert f"results/runs/{expected}/rep3/record.json" in planned, expected
    # MirroredStrategy runs graph, not XLA: TensorFlow's xla-amp is left out above one replica, saying why
    assert "tensorflow-2.21_synthetic-imagenet_resnet50_gpu_b128_sgd-lr0.1_e3_xla-amp_r2" not in planned
    assert (
        "skipping variant 'xla-amp' with device data for tensorflow-2.21 on gpu with 2, 4, 8 replicas: jit_compile"
        in planned
    )
    fewer = subprocess.run(
        command[:-2] + ["--configfile", "config/scaling.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=stand_in_gpu(tmp_path, 4),
    )
    assert fewer.returncode != 0
    assert "config error in `replicas`: 8 replicas on gpu, but this machine has 4 GPUs" in fewer.stdout + fewer.stderr


def test_the_versions_study_plans_each_framework_at_two_releases():
    """config/versions.yaml: every framework at two releases, each release its own stack and env file, on the same
    experiments (so the aggregation can pair them)."""
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--configfile", "config/versions.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    study = yaml.safe_load((REPO / "config" / "versions.yaml").read_text())
    stacks = configuration.load_stacks()
    releases = {}
    for stack in study["stacks"]:
        releases.setdefault((stacks[stack]["framework"], stacks[stack]["backend"]), set()).add(
            stacks[stack]["env"]["cpu"]
        )
    assert {framework for framework, _ in releases} == {"mxnet", "torch", "tensorflow", "keras"}
    assert all(len(envs) == 2 for envs in releases.values())
    planned = result.stdout + result.stderr
    for stack in study["stacks"]:
        assert f"results/runs/{stack}_digits_lenet_cpu_b64" in planned, stack


def test_a_wheels_folder_builds_every_venv_from_it_with_no_index(tmp_path):
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "-p", "--forcerun", "build_env", "--cores", "1"]
        + ["--config", "stacks=[torch-2.13]", f"wheels={tmp_path}"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    builds = [line for line in result.stdout.splitlines() if "scripts/build_env.py envs/" in line]
    assert builds and all(f"--wheels {tmp_path}" in line for line in builds), builds
