"""Data-parallel replicas train the same network: for every stack with a mechanism (envs/stacks.yaml
`data_parallel`), one SGD step on one global batch split over 2 CPU replicas (logical devices or gloo processes, as on
GPU they would be devices) equals the same step on one replica: the MLP in the stack's base and compiled variants, and
a network with batch norm where its statistics are the global batch's (a -syncbn variant, or JAX's mechanisms, which
compute them so), while per-replica statistics measurably differ; and the record says how the gradients were reduced,
through what, and where batch norm took its statistics."""

import json
import socket
import subprocess

import numpy as np
import pytest
from conftest import REPO, STACKS, library_environment
from dlbench import parallel, specs, variants
from probe_replicas import MODELS, SEED, SHAPE

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


@pytest.fixture(scope="module")
def replica_probes(env_python, tmp_path_factory):
    """stack -> output folder of tests/probe_replicas.py with 1 and 2 replicas, the probes running side by side."""
    running = []
    for stack, entry in PARALLEL.items():
        out = tmp_path_factory.mktemp(f"replicas-{stack}")
        for replicas in (1, 2):
            experiment = {"replicas": replicas, "launcher": entry["data_parallel"]["launcher"], "device": "cpu"}
            argv = [entry["adapter"], ",".join(cases(entry, replicas)), str(replicas), str(out)]
            command = parallel.launch(
                env_python(entry["env"]["cpu"]), REPO / "tests" / "probe_replicas.py", argv, experiment
            )
            environment = library_environment(parallel.stack_environment(entry, "cpu", replicas))
            log = open(out / f"replicas{replicas}.log", "w")
            running.append((stack, out, log, subprocess.Popen(command, env=environment, stdout=log, stderr=log)))
    folders = {}
    for stack, out, log, process in running:
        process.wait()
        log.close()
        logs = "\n".join(path.read_text()[-3000:] for path in sorted(out.glob("*.log")))
        assert process.returncode == 0, f"replica probe of {stack} failed:\n{logs}"
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


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_nodes_meet_at_the_rendezvous_and_train_as_one_replica_would(replica_probes, tmp_path, env_python):
    """The multi-node launch (one torchrun per node meeting at a c10d rendezvous, as a Slurm job spanning nodes
    starts them: parallel.slurm_launch) with both nodes on loopback: 2 replicas, one per node, take the step that
    one replica takes on the global batch."""
    entry = PARALLEL["torch-2.13"]
    experiment = {"replicas": 2, "launcher": "torchrun", "device": "cpu"}
    argv = [entry["adapter"], "mlp:eager", "2", str(tmp_path)]
    command = parallel.launch(
        env_python(entry["env"]["cpu"]),
        REPO / "tests" / "probe_replicas.py",
        argv,
        experiment,
        nodes=2,
        rendezvous=f"127.0.0.1:{free_port()}",
    )
    assert "--nnodes=2" in command and "--nproc-per-node=1" in command
    environment = library_environment(parallel.stack_environment(entry, "cpu", 2))
    nodes = [
        subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(output[-3000:] for output in outputs)
    one = weights(replica_probes["torch-2.13"] / "mlp_eager_replicas1.npz")
    two = weights(tmp_path / "mlp_eager_replicas2.npz")
    assert step_difference(two, one) < STEP_TOLERANCE
    assert result(tmp_path, "mlp", "eager", 2)["engaged"]["replicas"] == 2


def test_a_replica_that_dies_ends_the_run_as_error_naming_it_and_nothing_waits(tmp_path, env_python):
    """Process 1 of a 2-replica PyTorch run raises in its first epoch while process 0 waits in an all-reduce:
    process 1 records its error and exits non-zero, torchrun stops process 0 at once (long before the collectives'
    timeout), and the run's record names the failed replica."""
    import run_experiment
    from dlbench.process import run_child
    from runs import ENV_DESCRIPTION, experiment, prepare_synthetic

    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 64, 16)
    row = experiment(replicas=2, scaling="weak", launcher="torchrun", batch_size=16)
    (tmp_path / "env.json").write_text(json.dumps(ENV_DESCRIPTION))
    argv = [
        "--experiment",
        json.dumps(row),
        "--dataset-dir",
        str(dataset),
        "--env-description",
        str(tmp_path / "env.json"),
    ]
    argv += ["--threads", "1", "--record", str(tmp_path / "record.json")]
    argv += ["--epochs-csv", str(tmp_path / "epochs.csv"), "--telemetry-csv", str(tmp_path / "telemetry.csv")]
    command = parallel.launch(env_python("torch-2.13-cpu"), REPO / "tests" / "replica_death.py", argv, row)
    outcome = run_child(command, pythonpath=[REPO / "scripts"], timeout=240)
    assert not outcome.timed_out and outcome.seconds < parallel.COLLECTIVE_TIMEOUT_S / 2
    assert not outcome.ok
    record = run_experiment.record_of_try(argv, outcome, 2)
    assert record["status"] == "error"
    assert record["error"].startswith("replica process 1 of 2 failed: RuntimeError: replica lost its device"), record
