"""Data-parallel replicas train the same network: for every stack with a mechanism (envs/stacks.yaml
`data_parallel`), one SGD step of the MLP on one global batch split over 2 CPU replicas (logical devices or gloo
processes, as on GPU they would be devices) equals the same step on one replica, in its base and compiled variants;
and the record says how the gradients were reduced and through what."""

import json
import subprocess

import numpy as np
import pytest
from conftest import REPO, STACKS, library_environment
from dlbench import parallel, specs, variants
from probe_replicas import CLASSES, SEED, SHAPE

# The step's weights with 2 replicas against 1, relative to the step's largest update: each replica's gradient of
# half the batch, then reduced (summed or averaged), rounds differently from one gradient of the whole batch, at
# float32 rounding of the update (measured worst below 1e-6).
STEP_TOLERANCE = 1e-5
PARALLEL = {name: entry for name, entry in STACKS.items() if "data_parallel" in entry}


def probe_variants(entry):
    """The stack's base variant and its compiled one (the same for PyTorch, whose users run eager)."""
    return list(dict.fromkeys([entry["variants"][0], variants.compiled_variant(entry)]))


@pytest.fixture(scope="module")
def replica_probes(env_python, tmp_path_factory):
    """stack -> output folder of tests/probe_replicas.py with 1 and 2 replicas, the probes running side by side."""
    running = []
    for stack, entry in PARALLEL.items():
        out = tmp_path_factory.mktemp(f"replicas-{stack}")
        for replicas in (1, 2):
            experiment = {"replicas": replicas, "launcher": entry["data_parallel"]["launcher"], "device": "cpu"}
            argv = [entry["adapter"], ",".join(probe_variants(entry)), str(replicas), str(out)]
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


@pytest.mark.parametrize("stack", sorted(PARALLEL))
def test_a_step_on_two_replicas_equals_the_step_on_one(replica_probes, stack):
    spec = specs.without_dropout(specs.model_spec("mlp", CLASSES))
    initial = [array for leaf in specs.initial_weights(spec, SHAPE, SEED) for array in leaf]
    for variant in probe_variants(PARALLEL[stack]):
        one = weights(replica_probes[stack] / f"{variant}_replicas1.npz")
        two = weights(replica_probes[stack] / f"{variant}_replicas2.npz")
        update = max(np.abs(after - before).max() for after, before in zip(one, initial))
        assert update > 1e-4, (stack, variant, "the step changed nothing")
        difference = max(np.abs(a - b).max() for a, b in zip(two, one)) / update
        assert difference < STEP_TOLERANCE, (stack, variant, difference)
        results = [json.loads((replica_probes[stack] / f"{variant}_replicas{n}.json").read_text()) for n in (1, 2)]
        assert results[1]["loss"] == pytest.approx(results[0]["loss"], rel=1e-5), (stack, variant)


@pytest.mark.parametrize("stack", sorted(PARALLEL))
def test_the_record_says_how_gradients_were_reduced_and_through_what(replica_probes, stack):
    for variant in probe_variants(PARALLEL[stack]):
        engaged = json.loads((replica_probes[stack] / f"{variant}_replicas2.json").read_text())["engaged"]
        assert engaged["replicas"] == 2 and len(engaged["replica_devices"]) == 2, (stack, engaged)
        assert engaged["data_parallel"] and engaged["gradient_reduction"] and engaged["collective"], (stack, engaged)
        alone = json.loads((replica_probes[stack] / f"{variant}_replicas1.json").read_text())["engaged"]
        assert "data_parallel" not in alone, (stack, alone)


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
