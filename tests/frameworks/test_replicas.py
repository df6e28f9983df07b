"""Data-parallel replicas train the same network: for every stack with a mechanism (envs/stacks.yaml
`data_parallel`), one SGD step on one global batch split over 2 CPU replicas (logical devices or gloo processes, as on
GPU they would be devices) equals the same step on one replica: the MLP in the stack's base and compiled variants, and
a network with batch norm where its statistics are the global batch's (a -syncbn variant, or JAX's mechanisms, which
compute them so), while per-replica statistics measurably differ; and the record says how the gradients were reduced,
through what, and where batch norm took its statistics."""

import json
import os
import socket
import subprocess

import numpy as np
import pytest
from conftest import REPO, SUPPORT, STACKS, library_environment
import run_experiment
from dlbench import parallel, specs, variants
from dlbench.process import run_child
from probe_replicas import MODELS, SEED, SHAPE
from runs import experiment, prepare_synthetic, runner_command, train_arguments

# The step's weights with 2 replicas against 1, relative to the step's largest update: each replica's gradient of
# half the batch, then reduced (summed or averaged), rounds differently from one gradient of the whole batch, at
# float32 rounding of the update (measured worst below 1e-6).
STEP_TOLERANCE = 1e-5
PARALLEL = {name: entry for name, entry in STACKS.items() if "data_parallel" in entry}


def probe_variants(entry):
    """The stack's base variant and its compiled one (the same for PyTorch, whose users run eager)."""
    return list(dict.fromkeys([entry["variants"][0], variants.compiled_variant(entry)]))


def sync_variant(entry):
    """The stack's first synchronised-batch-norm variant that runs on 2 CPU replicas, or None."""
    runnable = [
        v for v in entry["variants"] if "-syncbn" in v and not variants.unsupported_reason(entry, v, "cpu", "device", 2)
    ]
    return runnable[0] if runnable else None


def cases(entry, replicas):
    """The probe's <model>:<variant> cases: the MLP in probe_variants; the batch-norm network in the base variant,
    and on 2 replicas in the synchronised one too."""
    bn = [entry["variants"][0]] + ([sync_variant(entry)] if replicas > 1 and sync_variant(entry) else [])
    return [f"mlp:{variant}" for variant in probe_variants(entry)] + [f"bn:{variant}" for variant in bn]


def start_probe(out, replicas, command, environment):
    """One probe_replicas.py launch, its output in out/replicas<N>.log."""
    with open(out / f"replicas{replicas}.log", "w") as log:
        return subprocess.Popen(command, env=environment, stdout=log, stderr=log)


@pytest.fixture(scope="module")
def replica_probes(env_python, tmp_path_factory):
    """stack -> output folder of tests/support/probe_replicas.py with 1 and 2 replicas, the probes running side by
    side. A probe that fails among them runs once more alone: side by side on 2 cores, a rank of torch-2.13's gloo
    probe has aborted at random ("terminate called without an active exception"), which alone it has not."""
    running = []
    for stack, entry in PARALLEL.items():
        out = tmp_path_factory.mktemp(f"replicas-{stack}")
        for replicas in (1, 2):
            experiment = {"replicas": replicas, "launcher": entry["data_parallel"]["launcher"], "device": "cpu"}
            argv = [entry["adapter"], ",".join(cases(entry, replicas)), str(replicas), str(out)]
            command = parallel.launch(env_python(entry["env"]["cpu"]), SUPPORT / "probe_replicas.py", argv, experiment)
            environment = library_environment(parallel.stack_environment(entry, "cpu", replicas))
            launch = (out, replicas, command, environment)
            running.append((stack, launch, start_probe(*launch)))
    codes = [process.wait() for _, _, process in running]  # all of them ended: a failed one runs again alone
    folders = {}
    for (stack, launch, process), code in zip(running, codes):
        if code != 0:
            process = start_probe(*launch)
            process.wait()
        out = launch[0]
        logs = "\n".join(path.read_text()[-3000:] for path in sorted(out.glob("*.log")))
        assert process.returncode == 0, f"replica probe of {stack} failed (side by side, then alone):\n{logs}"
        folders[stack] = out
    return folders


def weights(path):
    with np.load(path) as saved:
        return [saved[f"arr_{index}"] for index in range(len(saved.files))]


def result(folder, model, variant, replicas):
    return json.loads((folder / f"{model}_{variant}_replicas{replicas}.json").read_text())


def step_difference(two, one, model="mlp"):
    """The largest difference of the weights after the step on 2 replicas from those after the step on one,
    relative to the step's largest update (batch-norm running statistics included)."""
    initial = [array for leaf in specs.initial_weights(MODELS[model], SHAPE, SEED) for array in leaf]
    update = max(np.abs(after - before).max() for after, before in zip(one, initial))
    assert update > 1e-4, "the step changed nothing"
    return max(np.abs(a - b).max() for a, b in zip(two, one)) / update


@pytest.mark.parametrize("stack", sorted(PARALLEL))
def test_a_step_on_two_replicas_equals_the_step_on_one(replica_probes, stack):
    folder = replica_probes[stack]
    for variant in probe_variants(PARALLEL[stack]):
        one = weights(folder / f"mlp_{variant}_replicas1.npz")
        two = weights(folder / f"mlp_{variant}_replicas2.npz")
        difference = step_difference(two, one)
        assert difference < STEP_TOLERANCE, (stack, variant, difference)
        losses = [result(folder, "mlp", variant, n)["loss"] for n in (1, 2)]
        assert losses[1] == pytest.approx(losses[0], rel=1e-5), (stack, variant)


@pytest.mark.parametrize("stack", sorted(PARALLEL))
def test_batch_norm_over_the_global_batch_steps_as_one_replica_and_per_replica_statistics_do_not(replica_probes, stack):
    """Batch norm on 2 replicas: where its statistics are the global batch's (the record says so), the step equals
    the step on one replica; where they are each replica's (DDP, MirroredStrategy and Gluon by default), it
    differs, and the stack's -syncbn variant, where it runs on CPU, closes the gap."""
    entry, folder = PARALLEL[stack], replica_probes[stack]
    base = entry["variants"][0]
    one = weights(folder / f"bn_{base}_replicas1.npz")
    two = weights(folder / f"bn_{base}_replicas2.npz")
    statistics = result(folder, "bn", base, 2)["engaged"]["batch_norm_statistics"]
    if statistics.startswith("global batch"):
        assert step_difference(two, one, "bn") < STEP_TOLERANCE, (stack, statistics)
    else:
        assert statistics.startswith("per replica") and step_difference(two, one, "bn") > 100 * STEP_TOLERANCE
    synchronised = sync_variant(entry)
    if synchronised:
        engaged = result(folder, "bn", synchronised, 2)["engaged"]
        assert engaged["batch_norm_statistics"].startswith("global batch"), (stack, engaged)
        difference = step_difference(weights(folder / f"bn_{synchronised}_replicas2.npz"), one, "bn")
        assert difference < STEP_TOLERANCE, (stack, synchronised, difference)


@pytest.mark.parametrize("stack", sorted(PARALLEL))
def test_the_record_says_how_gradients_were_reduced_and_through_what(replica_probes, stack):
    for variant in probe_variants(PARALLEL[stack]):
        engaged = result(replica_probes[stack], "mlp", variant, 2)["engaged"]
        assert engaged["replicas"] == 2 and len(engaged["replica_devices"]) == 2, (stack, engaged)
        assert engaged["data_parallel"] and engaged["gradient_reduction"] and engaged["collective"], (stack, engaged)
        assert engaged["batch_norm_statistics"].startswith(("per replica", "global batch")), (stack, engaged)
        alone = result(replica_probes[stack], "mlp", variant, 1)["engaged"]
        assert "data_parallel" not in alone, (stack, alone)


STAND_IN_SLURM = REPO / "tests" / "stand_in_slurm"  # srun and scontrol for a two-"node" job on this machine
# The stacks whose replicas span nodes, and the probe's cases across two: the MLP (and for Flax, its batches handed
# over from the host by each process, and batch norm over the global batch) in the stack's base variant.
ACROSS_NODES = {"torch-2.13": ["mlp:eager"], "flax-0.12": ["mlp:xla", "mlp:xla:host", "bn:xla"]}


def free_job_id():
    """A Slurm job id whose rendezvous port (parallel.slurm_launch's) is free on loopback."""
    for job_id in range(1, parallel.PORT_SPREAD):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", parallel.RENDEZVOUS_PORT + job_id))
            except OSError:
                continue
            return job_id
    raise RuntimeError("no free port in the rendezvous range")


def two_nodes_here(monkeypatch):
    """The variables of a Slurm job spanning two nodes, both this machine (the stand-in srun and scontrol first on
    PATH); the environ that makes parallel.training_command launch across them."""
    monkeypatch.setenv("PATH", f"{STAND_IN_SLURM}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", str(free_job_id()))
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node1")
    return {"SLURM_JOB_NUM_NODES": "2"}


def test_every_launcher_that_spans_nodes_is_tried_across_two():
    assert {PARALLEL[name]["data_parallel"]["launcher"] for name in ACROSS_NODES} == set(parallel.SPANNING_LAUNCHERS)


@pytest.mark.parametrize("stack", sorted(ACROSS_NODES))
def test_a_slurm_job_across_two_nodes_trains_as_one_replica_would(
    replica_probes, stack, tmp_path, env_python, monkeypatch
):
    """The command a Slurm job spanning two nodes runs (parallel.training_command: srun starting one task per node,
    which meet at the first node: torchrun's c10d rendezvous, or jax.distributed's coordinator), under stand-ins for
    srun and scontrol that run both "nodes" here on loopback: 2 replicas, one per node, take the step one replica
    takes on the global batch."""
    entry = PARALLEL[stack]
    experiment = {"replicas": 2, "launcher": entry["data_parallel"]["launcher"], "device": "cpu"}
    argv = [entry["adapter"], ",".join(ACROSS_NODES[stack]), "2", str(tmp_path)]
    probe = SUPPORT / "probe_replicas.py"
    command = parallel.training_command(
        env_python(entry["env"]["cpu"]), probe, argv, experiment, two_nodes_here(monkeypatch)
    )
    assert command[:2] == ["bash", "-c"] and "srun --overlap --kill-on-bad-exit=1 --nodes=2" in command[2]
    environment = library_environment(parallel.stack_environment(entry, "cpu", 1))  # one replica's device a node
    finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, (finished.stdout + finished.stderr)[-4000:]
    for case in ACROSS_NODES[stack]:
        model, variant, *placement = case.split(":")
        stem = f"{model}_{variant}_replicas2" + "".join(f"_{where}" for where in placement)
        alone = variant if model == "mlp" else entry["variants"][0]  # the one-replica probe's batch norm: base variant
        one = weights(replica_probes[stack] / f"{model}_{alone}_replicas1.npz")
        assert step_difference(weights(tmp_path / f"{stem}.npz"), one, model) < STEP_TOLERANCE, case
        engaged = json.loads((tmp_path / f"{stem}.json").read_text())["engaged"]
        assert engaged["replicas"] == 2, (case, engaged)
    if stack == "flax-0.12":  # two processes, their collectives through gloo
        assert engaged["processes"] == 2 and "across 2 processes (gloo)" in engaged["collective"], engaged


def two_replica_row(stack, **changes):
    entry = PARALLEL[stack]
    launcher = entry["data_parallel"]["launcher"]
    row = experiment(stack=stack, framework=entry["framework"], adapter=entry["adapter"], replicas=2)
    row["variant"] = variants.compiled_variant(entry)
    return row | dict(launcher=launcher, batch_size=16, environment={}, **changes)


@pytest.fixture(scope="module")
def small_dataset(env_python, tmp_path_factory):
    return prepare_synthetic(env_python("tools"), tmp_path_factory.mktemp("replica-runs") / "dataset", 10, 64, 16)


@pytest.mark.parametrize("stack", sorted(ACROSS_NODES))
def test_a_replica_that_dies_ends_the_run_as_error_naming_it_and_nothing_waits(
    stack, small_dataset, tmp_path, env_python, monkeypatch
):
    """Process 1 of a 2-replica run raises in its first epoch while process 0 waits in an all-reduce: process 1
    records its error and exits non-zero, its launcher stops process 0 at once (long before the collectives'
    timeout: torchrun on one node; srun --kill-on-bad-exit across two, for Flax's process per node), and the run's
    record names the failed replica."""
    row = two_replica_row(stack)
    across = two_nodes_here(monkeypatch) if row["launcher"] == "process-per-node" else {}
    argv = train_arguments(row, small_dataset, tmp_path)
    python = env_python(PARALLEL[stack]["env"]["cpu"])
    command = parallel.training_command(python, SUPPORT / "replica_death.py", argv, row, across)
    outcome = run_child(command, pythonpath=[REPO / "scripts"], timeout=240)
    assert not outcome.timed_out and outcome.seconds < parallel.COLLECTIVE_TIMEOUT_S / 2
    assert not outcome.ok
    record = run_experiment.record_of_try(argv, outcome, 2)
    assert record["status"] == "error"
    assert record["error"].startswith("replica process 1 of 2 failed: RuntimeError: replica lost its device"), record


def test_a_flax_run_across_two_nodes_ends_ok_with_one_record(small_dataset, tmp_path, env_python, monkeypatch):
    """run_experiment.py in a Slurm job of two nodes (both here): one Flax process per node, joined by
    jax.distributed, trains the run; rank 0's record is the run's, and the other process's outputs are gone."""
    across = two_nodes_here(monkeypatch)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", across["SLURM_JOB_NUM_NODES"])
    row = two_replica_row("flax-0.12", epochs=2, data_placement="host")
    command = runner_command(env_python(PARALLEL["flax-0.12"]["env"]["cpu"]), row, small_dataset, tmp_path)
    finished = subprocess.run(command, env=library_environment(), capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-4000:]
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["status"] == "ok", record.get("error")
    assert record["engaged"]["processes"] == 2 and record["replicas"] == 2 and record["global_batch_size"] == 32
    assert not list(tmp_path.rglob("rank*")), "the other process's outputs are left"
