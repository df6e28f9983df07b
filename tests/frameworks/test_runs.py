"""Run records from the runner (in the torch and MXNet venvs) and the aggregation over them (in the tools venv)."""

import json
import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from conftest import REPO, SUPPORT, library_environment, read_csv
from dlbench.record import EPOCH_COLUMNS, base_record, write_epochs_csv
from dlbench.telemetry import TRACE_COLUMNS
from runs import ENV_DESCRIPTION, RECORD_SCHEMA, experiment, prepare_synthetic, runner_command, strict_json


def test_a_killed_training_process_still_leaves_a_record(tmp_path, env_python):
    """The child blocks reading meta.json (a FIFO) after importing torch; killing it must not lose the run."""
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    os.mkfifo(dataset / "meta.json")
    runner = subprocess.Popen(
        runner_command(env_python("torch-2.13-cpu"), experiment(), dataset, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    children = []
    while not children and time.monotonic() < deadline:
        time.sleep(0.5)
        children = subprocess.run(["pgrep", "-P", str(runner.pid)], capture_output=True, text=True).stdout.split()
    assert children, "train.py child never started"
    time.sleep(8)  # let it pass the imports and block on the FIFO
    os.kill(int(children[0]), signal.SIGKILL)
    runner.communicate(timeout=60)
    assert runner.returncode == 0
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "error"
    assert "killed by signal SIGKILL before writing its record" in record["error"]
    assert (tmp_path / "epochs.csv").read_text().startswith("epoch,train_s")


def test_an_exception_in_training_is_recorded_with_its_message(tmp_path, env_python):
    """A batch larger than the training set fails inside train.py, which records the error and exits 0."""
    row = experiment(batch_size=100_000)
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 64, 16)
    result = subprocess.run(
        runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "error"
    assert record["error"] == "ValueError: batch size 100000 is larger than the training set (64 examples)"
    assert record["framework_version"].startswith("2.13.0")
    assert record["host_rss_peak_mb"] > 0


def test_a_language_model_trains_on_tokens_and_records_tokens_per_second(tmp_path, env_python):
    """gpt-tiny on a synthetic token dataset through the runner: next-token loss falls below a guess's (ln of the
    vocabulary), and the record counts tokens: sequences/s x context."""
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 256, 64, "synthetic-tokens-32x16")
    row = experiment(dataset="synthetic-tokens-32x16", model="gpt-tiny", batch_size=32, target_accuracy=None)
    result = subprocess.run(
        runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "ok", record["error"]
    assert record["final_test_loss"] < math.log(32) - 0.5
    assert record["tokens_per_example"] == 16
    assert record["train_tokens_per_s"] == pytest.approx(16 * record["train_images_per_s"])
    assert record["engaged"]["attention"] == "torch.nn.functional.scaled_dot_product_attention"


def test_a_compile_mode_that_fails_ends_its_run_with_the_compilers_message(tmp_path, env_python):
    """torch.compile in max-autotune with no working C++ compiler (Inductor's CPU backend needs one): the run ends
    `error` with Inductor's own message, as any compiler failure would."""
    row = experiment(
        variant="compile-max-autotune",
        environment={"CXX": "/bin/false", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")},
    )
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 64, 16)
    result = subprocess.run(
        runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "error"
    assert record["error"].startswith("InductorError: ") and "No working C++ compiler" in record["error"]


def test_short_steady_epochs_are_timed_over_a_longer_window(tmp_path, env_python):
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 256, 16)
    row = experiment(batch_size=32, min_steady_seconds=0.3)
    result = subprocess.run(
        runner_command(env_python("torch-2.13-cpu"), row, dataset, tmp_path), capture_output=True, text=True
    )
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "ok", result.stdout[-3000:]
    window = record["epoch_train_s"][1:] + record["extra_steady_epochs_s"]
    assert record["extra_steady_epochs_s"] and sum(window[:-1]) < 0.3 <= sum(window) == record["steady_window_s"]
    assert record["train_images_per_s"] == pytest.approx(256 * len(window) / sum(window))
    pairs = max(2, math.ceil(len(window) / 2))  # the input share's real and fixed-batch epochs
    assert len(record["input_share_epochs_s"]) == len(record["fixed_batch_epochs_s"]) == pairs
    assert len(record["epoch_eval_s"]) == 3
    assert "extra steady epochs after the last evaluation" in result.stdout


def test_an_out_of_memory_error_ends_the_run_as_oom(tmp_path, env_python):
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 64, 16)
    command = runner_command(env_python("torch-2.13-cpu"), experiment(batch_size=16), dataset, tmp_path)[:-2]
    command[1] = str(SUPPORT / "oom_run.py")  # train.py itself (no launcher options), with a scripted OOM
    result = subprocess.run(command, capture_output=True, text=True, env=library_environment())
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "oom"
    assert record["error"] == "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
    assert "OUT OF MEMORY" in result.stdout
    trace = (tmp_path / "telemetry.csv").read_text().splitlines()
    assert trace[0].startswith("t_s,phase,gpu_util_pct") and any(",epoch 1," in line for line in trace)


def test_a_loss_that_is_not_finite_ends_the_run_as_diverged(tmp_path, env_python):
    """Plain SGD at learning rate 1000 on a small synthetic set: the loss overflows to NaN within a few epochs. The
    run stops after that epoch, keeps the epochs that finished and writes strict JSON (no NaN in any file)."""
    dataset = prepare_synthetic(env_python("tools"), tmp_path / "dataset", 10, 64, 16)
    row = experiment(
        experiment_id="mxnet-1.9_synthetic-8x8x1_mlp_cpu_b16_sgd-lr1000_e4_eager",
        stack="mxnet-1.9",
        framework="mxnet",
        backend="gluon",
        adapter="mxnet_gluon",
        dataset="synthetic-8x8x1",
        batch_size=16,
        optimizer="sgd",
        learning_rate=1000.0,
        epochs=4,
        measure_input_share=False,
    )
    result = subprocess.run(
        runner_command(env_python("mxnet-1.9-cpu"), row, dataset, tmp_path), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = strict_json((tmp_path / "record.json").read_text())
    jsonschema.validate(record, RECORD_SCHEMA)
    assert record["status"] == "diverged", result.stderr[-3000:]
    found = re.fullmatch(
        r"(training|test) loss became (nan|inf|-inf) in epoch (\d+) \(learning rate 1000\): the run "
        r"diverged; lower the learning rate",
        record["error"],
    )
    assert found, record["error"]
    epoch = int(found[3])
    assert epoch < 4 and len(record["epoch_train_s"]) == len(record["loss_curve"]) == epoch
    assert all(math.isfinite(loss) for loss in record["loss_curve"][:-1])
    assert (record["loss_curve"][-1] is None) == (found[1] == "training")
    assert record["train_images_per_s"] is None and record["final_test_accuracy"] is None
    assert f"DIVERGED: {record['error']}" in result.stdout and "Traceback" not in result.stdout + result.stderr
    rows = read_csv(tmp_path / "epochs.csv")
    assert [int(row["epoch"]) for row in rows] == list(range(1, epoch + 1))
    assert rows[-1]["train_loss" if found[1] == "training" else "test_loss"] == ""
    for name in ("epochs.csv", "telemetry.csv"):
        cells = {cell.lower() for row in read_csv(tmp_path / name) for cell in row.values()}
        assert not cells & {"nan", "inf", "-inf", "infinity", "-infinity"}, name


def fake_run(folder, rep, images_per_s, status="ok", seconds=(0, 10)):
    """A record of a run from second `seconds[0]` to `seconds[1]` of a fixed minute."""
    row = experiment(rep=rep)
    record = base_record(row, ENV_DESCRIPTION, REPO)
    record.update(status=status, framework_version="2.13.0")
    record["provenance"].update(
        started_at=f"2026-11-22T10:00:{seconds[0]:02d}.000+00:00",
        finished_at=f"2026-11-22T10:00:{seconds[1]:02d}.000+00:00",
    )
    if status == "ok":
        images = 1344
        seconds = images / images_per_s
        record.update(
            epoch_train_s=[1.0, seconds, seconds],
            epoch_eval_s=[0.1, 0.1, 0.1],
            train_images_per_s=images_per_s,
            inference_images_per_s=3600.0,
            final_test_accuracy=0.9,
            time_to_target_s=2.0,
        )
    else:
        record["error"] = "RuntimeError: boom"
    path = folder / f"rep{rep}" / "record.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    rows = [  # the epochs the record names, as its run would have written them beside it
        dict(zip(EPOCH_COLUMNS, (epoch, train_s, 0.1, 1.0, 1.0, 0.9, 1344, 1344 / train_s)))
        for epoch, train_s in enumerate(record["epoch_train_s"], 1)
    ]
    write_epochs_csv(path.with_name("epochs.csv"), rows)
    path.with_name("telemetry.csv").write_text(",".join(TRACE_COLUMNS) + "\n")
    return str(path)


def test_summary_statistics_over_repeats(tmp_path, env_python):
    records = [
        fake_run(tmp_path, 1, 100.0, seconds=(0, 10)),
        fake_run(tmp_path, 2, 110.0, seconds=(10, 20)),
        fake_run(tmp_path, 3, 120.0, seconds=(20, 30)),
        fake_run(tmp_path, 4, 0, "error", (30, 31)),
    ]
    out = tmp_path / "tables"
    subprocess.run(
        [str(env_python("tools")), str(REPO / "scripts" / "aggregate.py"), "--records", *records, "--out", str(out)],
        check=True,
    )
    runs = read_csv(out / "runs.csv")
    assert [run["status"] for run in runs] == ["ok", "ok", "ok", "error"]
    (row,) = read_csv(out / "summary.csv")
    assert (row["runs"], row["runs_ok"], row["statuses"], row["errors"]) == ("4", "3", "error,ok", "RuntimeError: boom")
    summary = {
        key: float(value or "nan") for key, value in row.items() if key.startswith(("train_images_per_s", "steady_"))
    }
    assert summary["train_images_per_s_mean"] == pytest.approx(110.0)
    assert summary["train_images_per_s_std"] == pytest.approx(10.0)
    assert summary["train_images_per_s_median"] == pytest.approx(110.0)
    assert summary["train_images_per_s_min"] == pytest.approx(100.0)
    logs = np.log([100.0, 110.0, 120.0])
    half_width = 4.302652729911275 * logs.std(ddof=1) / 3**0.5  # t(0.975, df=2) * s / sqrt(n), on logs
    assert summary["train_images_per_s_gmean"] == pytest.approx(np.exp(logs.mean()))
    # one experiment, each run its own round: at the average round it is its geometric mean, with no freedom left
    # for an interval once the rounds are fitted
    assert summary["train_images_per_s_adjusted"] == pytest.approx(np.exp(logs.mean()))
    assert np.isnan(summary["train_images_per_s_adjusted_low"])
    assert summary["train_images_per_s_ci95_low"] == pytest.approx(np.exp(logs.mean() - half_width))
    assert summary["train_images_per_s_ci95_high"] == pytest.approx(np.exp(logs.mean() + half_width))
    assert summary["train_images_per_s_cv"] == pytest.approx(10.0 / 110.0)
    assert row["interval_note"] == ""
    assert summary["steady_epoch_s_mean"] == pytest.approx((13.44 + 1344 / 110 + 11.2) / 3)
    assert (out / "summary.parquet").exists() and (out / "runs.parquet").exists()
    assert [run["overlapping_runs"] for run in runs] == ["0"] * 4  # back to back is not an overlap


def test_overlapping_timed_runs_are_flagged(tmp_path, env_python):
    """Two runs on one host (one GPU) at the same time: the aggregation flags both and warns."""
    records = [
        fake_run(tmp_path, 1, 100.0, seconds=(0, 10)),
        fake_run(tmp_path, 2, 100.0, seconds=(9, 15)),
        fake_run(tmp_path, 3, 100.0, seconds=(15, 20)),
    ]
    result = subprocess.run(
        [
            str(env_python("tools")),
            str(REPO / "scripts" / "aggregate.py"),
            "--records",
            *records,
            "--out",
            str(tmp_path / "tables"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [run["overlapping_runs"] for run in read_csv(tmp_path / "tables" / "runs.csv")] == ["1", "1", "0"]
    assert "WARNING: 2 timed runs overlapped another run on the same host" in result.stdout


def aggregate(tmp_path, env_python, records, *options):
    out = tmp_path / "tables"
    subprocess.run(
        [
            str(env_python("tools")),
            str(REPO / "scripts" / "aggregate.py"),
            "--records",
            *records,
            "--out",
            str(out),
            *options,
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_an_interval_is_never_absurd_and_needs_three_repeats(tmp_path, env_python):
    """Throughputs as spread as the short default epochs gave (a Student's t on the raw values went negative)."""
    wide = [
        fake_run(tmp_path / "a", rep, value, seconds=(rep * 10, rep * 10 + 5))
        for rep, value in enumerate([20000.0, 60000.0, 40000.0], 1)
    ]
    out = aggregate(tmp_path, env_python, wide)
    (row,) = read_csv(out / "summary.csv")
    assert 0 < float(row["train_images_per_s_ci95_low"]) < float(row["train_images_per_s_gmean"])
    two = [fake_run(tmp_path / "b", rep, 100.0 + rep, seconds=(rep * 10, rep * 10 + 5)) for rep in (1, 2)]
    (row,) = read_csv(aggregate(tmp_path / "b", env_python, two) / "summary.csv")
    assert (
        row["train_images_per_s_ci95_low"] == ""
        and row["interval_note"] == "2 ok repeat(s): an interval needs at least 3"
    )


def group_of_runs(folder, throughputs, status="ok"):
    """Records of one experiment per stack (`throughputs`: stack -> its rounds' images/s, None for a run that ended
    with `status`), otherwise identical."""
    paths, clock = [], 0
    for stack, values in throughputs.items():
        for rep, value in enumerate(values, 1):
            path = fake_run(folder / stack, rep, value, "ok" if value else status, seconds=(clock, clock + 1))
            record = json.loads(Path(path).read_text())
            record.update(stack=stack, experiment_id=record["experiment_id"].replace("torch-2.13", stack))
            Path(path).write_text(json.dumps(record))
            paths.append(path)
            clock += 1
    return paths


def test_comparisons_pair_rounds_and_decide_only_what_the_repeats_decide(tmp_path, env_python):
    """Each stack against the fastest that can be tested, paired by round: a clear difference, an equivalence
    within the margin, a comparison the repeats cannot decide (with the rounds that would) and one with too few
    repeats to test (the quickest, but never the baseline: against it nothing could be tested)."""
    records = group_of_runs(
        tmp_path,
        {
            "slow": [100.0, 101.0, 99.0],
            "fast": [200.0, 203.0, 197.0],
            "same": [199.0, 202.0, 196.5],
            "unsure": [200.0, 182.0, 208.0],
            "few": [300.0, 310.0],
        },
    )
    rows = {row["stack"]: row for row in read_csv(aggregate(tmp_path, env_python, records) / "comparisons.csv")}
    assert {row["baseline_stack"] for row in rows.values()} == {"fast"}
    assert set(rows) == {"slow", "same", "unsure", "few"}
    assert {stack: row["verdict"] for stack, row in rows.items()} == {
        "slow": "slower",
        "same": "equivalent within 5 %",
        "unsure": "inconclusive",
        "few": "not tested: fewer than 3 ok repeats",
    }
    assert float(rows["slow"]["ratio"]) == pytest.approx(0.5, rel=0.01) and float(rows["slow"]["ratio_high"]) < 1
    assert rows["slow"]["baseline_rule"] == "the fastest"
    tested = [row for stack, row in rows.items() if stack != "few"]
    assert {(row["method"], row["pairs"]) for row in tested} == {("paired by round", "3")}
    assert float(rows["same"]["p_equivalence_holm"]) < 0.05 < float(rows["unsure"]["p_equivalence_holm"])
    assert float(rows["unsure"]["ratio_low"]) < 1 < float(rows["unsure"]["ratio_high"])
    assert 3 < int(rows["unsure"]["repeats_to_decide"]) <= 100 and rows["slow"]["repeats_to_decide"] == ""
    assert rows["few"]["p_holm"] == "" and rows["few"]["method"] == "" and rows["few"]["equivalence_margin"] == "0.05"
    p_values = sorted(float(rows[stack]["p_value"]) for stack in ("slow", "same", "unsure"))
    # Holm over the 6 pairs of the 4 tested stacks (the baseline is chosen from the data): the smallest times 6
    assert float(rows["slow"]["p_holm"]) == pytest.approx(min(1.0, 6 * p_values[0]))
    named = read_csv(
        aggregate(tmp_path / "named", env_python, records, "--baseline", "slow", "--equivalence-margin", "0.1")
        / "comparisons.csv"
    )
    assert {row["baseline_stack"] for row in named} == {"slow"}
    assert {row["equivalence_margin"] for row in named} == {"0.1"}
    assert {row["stack"]: row["verdict"] for row in named}["fast"] == "faster"


def test_rounds_without_enough_ok_runs_in_common_are_compared_unpaired(tmp_path, env_python):
    """The baseline's second round was contended: it never enters a statistic, leaving two rounds in common, so
    the comparison falls back to Welch's unpaired test over each side's ok runs."""
    records = group_of_runs(
        tmp_path, {"slow": [100.0, 101.0, 99.0], "fast": [200.0, None, 198.0, 201.0]}, status="contended"
    )
    (row,) = read_csv(aggregate(tmp_path, env_python, records) / "comparisons.csv")
    assert (row["method"], row["pairs"], row["runs_ok"], row["baseline_runs_ok"]) == ("unpaired (Welch)", "0", "3", "3")
    assert row["verdict"] == "slower" and float(row["ratio"]) == pytest.approx(0.5, rel=0.01)


def test_runs_on_different_machines_are_never_pooled_or_compared(tmp_path, env_python):
    """One experiment run on two cluster nodes with different GPUs: two summary rows (one per machine), and each
    stack compared only with stacks on its own machine. A GPU run that failed before naming its GPU belongs to
    the machine its host's other runs named."""
    records = []
    for node, gpu, speed in (("node1", "NVIDIA H100 80GB HBM3", 2.0), ("node2", "NVIDIA A100-SXM4-80GB", 1.0)):
        paths = group_of_runs(
            tmp_path / node,
            {
                "slow": [100.0 * speed, 101.0 * speed, 99.0 * speed],
                "fast": [200.0 * speed, 202.0 * speed, 198.0 * speed],
            },
        )
        for rep, path in enumerate(paths):
            record = json.loads(Path(path).read_text())
            record["device"] = "gpu"
            record["provenance"].update(host=node, gpu=gpu, cpu_model="Xeon", slurm_job_id=str(rep))
            Path(path).write_text(json.dumps(record))
        records += paths
    failed = json.loads(Path(records[-1]).read_text())
    failed.update(rep=4, status="error", error="RuntimeError: no CUDA device", train_images_per_s=None)
    failed["provenance"]["gpu"] = None
    path = Path(records[-1]).parents[1] / "rep4" / "record.json"
    path.parent.mkdir()
    path.write_text(json.dumps(failed))
    for name in ("epochs.csv", "telemetry.csv"):
        path.with_name(name).write_text(Path(records[-1]).with_name(name).read_text())
    out = aggregate(tmp_path, env_python, records + [str(path)])
    summary = read_csv(out / "summary.csv")
    assert sorted((row["stack"], row["machine"], row["runs"]) for row in summary) == [
        ("fast", "NVIDIA A100-SXM4-80GB / Xeon", "4"),
        ("fast", "NVIDIA H100 80GB HBM3 / Xeon", "3"),
        ("slow", "NVIDIA A100-SXM4-80GB / Xeon", "3"),
        ("slow", "NVIDIA H100 80GB HBM3 / Xeon", "3"),
    ]
    comparisons = read_csv(out / "comparisons.csv")
    assert len(comparisons) == 2 and all(float(row["ratio"]) == pytest.approx(0.5, rel=0.01) for row in comparisons)
    assert {row["machine"] for row in comparisons} == {"NVIDIA A100-SXM4-80GB / Xeon", "NVIDIA H100 80GB HBM3 / Xeon"}


def test_a_backend_release_pairs_one_stack_s_releases(tmp_path, env_python):
    """Keras 3.15 on JAX 0.9 and on JAX 0.10: one framework release, two backend releases, so a version pair named
    by both, newer JAX over older."""
    records = group_of_runs(tmp_path, {"keras-3-jax-0.9": [100.0, 101.0, 99.0], "keras-3-jax": [80.0, 81.0, 79.0]})
    for path in records:
        record = json.loads(Path(path).read_text())
        older = record["stack"].endswith("0.9")
        record.update(framework="keras", backend="jax", framework_version="3.15.1")
        record["engaged"]["backend_version"] = "jax 0.9.2" if older else "jax 0.10.2"
        Path(path).write_text(json.dumps(record))
    (pair,) = read_csv(aggregate(tmp_path, env_python, records) / "versions.csv")
    assert (pair["older_stack"], pair["older_version"]) == ("keras-3-jax-0.9", "3.15.1 (jax 0.9.2)")
    assert (pair["newer_stack"], pair["newer_version"]) == ("keras-3-jax", "3.15.1 (jax 0.10.2)")
    assert pair["verdict"] == "slower" and pair["regression"] == "True" and pair["method"] == "paired by round"
