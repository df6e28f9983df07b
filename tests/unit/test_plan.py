"""The experiment matrix module (dlbench/study/plan.py) that the rules, scripts/plan.py and the tests share, and the
prepared-data fingerprints the workflow checks before planning."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from dlbench import cli, data, variants
from dlbench.study import configuration, plan
from runs import write_run

STACKS = configuration.load_stacks()
AXIS_DEFAULTS = {
    "stacks": ["torch-2.13"],
    "datasets": ["synthetic-8x8x1"],
    "models": ["mlp"],
    "devices": ["cpu"],
    "batch_sizes": [32, 512],
    "optimizers": ["adam"],
    "learning_rates": [0.001],
    "epochs": [2],
    "variants": ["eager", "graph"],
    "data_placements": ["device"],
    "replicas": [1],
}
CONFIG = dict(
    AXIS_DEFAULTS,
    scaling="weak",
    scheduler="local",
    slurm={"gpus_per_node": None},
    grids=[],
    exclude=[],
    existing_envs={},
    momentum=0.9,
    weight_decay=0.0,
    target_accuracy=None,
    target_loss=None,
    telemetry_hz=10,
    measure_input_share=True,
    measure_latency="first",
    min_steady_seconds=1.0,
    math_mode={"tf32": True, "autotune": True},
    repeats=2,
    synthetic={"classes": 4, "train_size": 256, "test_size": 8},
    synthetic_tokens={"train_size": 256, "test_size": 8, "seed": 0},
    synthetic_imagenet={"train_size": 10},
    image_folders={},
    images_per_epoch=None,
    stream={"workers": None, "loader_batches": 20},
    race={"enabled": False, "max_rounds": 8, "pooled": True, "budget_runs": None, "budget_minutes": None},
)


def test_the_matrix_leaves_out_what_cannot_run_with_one_reason_each(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table, skipped = plan.experiment_table(CONFIG, STACKS, plan.train_sizes(CONFIG, {}))
    assert list(table) == ["torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager"]
    messages = [plan.skipped_message(entry) for entry in skipped]
    assert messages == [
        "skipping batch size 512 on synthetic-8x8x1: larger than the 256 training examples of synthetic-8x8x1",
        "skipping variant 'graph' with device data for torch-2.13 on cpu: PyTorch's graph mode is "
        "torch.compile (variant compile)",
    ]
    assert len(plan.runs(CONFIG, table)) == 2


def test_each_model_runs_on_the_data_it_reads_and_the_rest_is_said_once(tmp_path, monkeypatch):
    """Images and tokens in one grid: a language model on the token dataset alone, the image models on the images."""
    monkeypatch.chdir(tmp_path)
    config = dict(
        CONFIG,
        datasets=["synthetic-8x8x1", "synthetic-tokens-16x8"],
        models=["mlp", "gpt-tiny"],
        batch_sizes=[32],
        variants=["eager"],
    )
    tokens = plan.token_datasets(config, {})
    assert tokens == {"synthetic-tokens-16x8"}
    table, skipped = plan.experiment_table(config, STACKS, plan.train_sizes(config, {}), tokens)
    assert sorted((row["model"], row["dataset"]) for row in table.values()) == [
        ("gpt-tiny", "synthetic-tokens-16x8"),
        ("mlp", "synthetic-8x8x1"),
    ]
    assert [plan.skipped_message(entry) for entry in skipped] == [
        "skipping model gpt-tiny on synthetic-8x8x1: gpt-tiny reads token ids, synthetic-8x8x1 holds images",
        "skipping model mlp on synthetic-tokens-16x8: mlp reads images, synthetic-tokens-16x8 holds tokens",
    ]
    only_mismatched = dict(config, datasets=["synthetic-8x8x1"], models=["gpt-tiny"])
    sizes, tokens = plan.train_sizes(only_mismatched, {}), plan.token_datasets(only_mismatched, {})
    table, skipped = plan.experiment_table(only_mismatched, STACKS, sizes, tokens)
    assert not table
    assert plan.nothing_planned(only_mismatched, STACKS, sizes, skipped, tokens).startswith(
        "config error in `models`: no experiment is left to run: skipping model gpt-tiny on synthetic-8x8x1"
    )
    # Where pairs match but a stack cannot run their variant, the variant is named, not the pairs left out.
    unrunnable = dict(config, variants=["graph"])
    sizes, tokens = plan.train_sizes(unrunnable, {}), plan.token_datasets(unrunnable, {})
    table, skipped = plan.experiment_table(unrunnable, STACKS, sizes, tokens)
    assert not table
    assert plan.nothing_planned(unrunnable, STACKS, sizes, skipped, tokens).startswith(
        "config error in `variants`: no experiment is left to run: skipping variant 'graph' with device data for "
        "torch-2.13"
    )


def test_an_exclude_entrys_reason_excludes_nothing_itself(tmp_path, monkeypatch):
    """`why` is no axis: the entry leaves out what its axes match, and its reason is only for the report."""
    monkeypatch.chdir(tmp_path)
    entry = {"variant": "eager", "why": "a debugging mode"}
    sizes = plan.train_sizes(CONFIG, {})
    table, _ = plan.experiment_table(dict(CONFIG, exclude=[entry]), STACKS, sizes)
    assert list(table) == []  # the one experiment that can run is eager
    table, _ = plan.experiment_table(dict(CONFIG, exclude=[dict(entry, variant="graph")]), STACKS, sizes)
    assert list(table) == ["torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager"]


def test_torch_compile_modes_are_variants_a_device_or_stack_without_them_leaves_out_saying_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    modes = ["compile", "compile-reduce-overhead", "compile-max-autotune-nhwc-amp"]
    config = dict(CONFIG, stacks=["torch-2.13", "keras-3-torch", "mxnet-1.9"], batch_sizes=[32], variants=modes)
    table, skipped = plan.experiment_table(config, STACKS, plan.train_sizes(config, {}))
    assert sorted(row["variant"] for row in table.values()) == ["compile", "compile", "compile-max-autotune-nhwc-amp"]
    reasons = {(entry[1], entry[2]): plan.skipped_message(entry) for entry in skipped if entry[0] == "variant"}
    assert "CUDA graphs, which capture CUDA work only" in reasons["torch-2.13", "compile-reduce-overhead"]
    assert (
        "jit_compile runs torch.compile in its default mode only"
        in reasons["keras-3-torch", "compile-max-autotune-nhwc-amp"]
    )
    assert "torch.compile is PyTorch's" in reasons["mxnet-1.9", "compile-reduce-overhead"]
    with pytest.raises(ValueError, match="for compile only, compile mode one of reduce-overhead, max-autotune"):
        variants.parse("xla-max-autotune")


def test_composed_attention_runs_for_attention_models_and_channels_last_for_images_only(tmp_path, monkeypatch):
    """A variant that would change nothing in a model (composed attention without attention) or cannot apply to it (a
    channels-last layout of token ids) is left out saying why; TensorFlow, whose attention is always written out,
    has no composed variant."""
    monkeypatch.chdir(tmp_path)
    config = dict(
        CONFIG,
        stacks=["torch-2.13", "tensorflow-2.21"],
        models=["mlp", "vit-tiny", "gpt-tiny"],
        datasets=["synthetic-8x8x1", "synthetic-32x32x3", "synthetic-tokens-64x16"],
        batch_sizes=[32],
        variants=["eager", "eager-composed", "eager-nhwc"],
        exclude=[{"model": ["vit-tiny", "mlp"], "dataset": "synthetic-tokens-64x16"}],
    )
    config["exclude"] += [{"model": ["gpt-tiny", "vit-tiny"], "dataset": "synthetic-8x8x1"}]
    config["exclude"] += [{"model": ["gpt-tiny", "mlp"], "dataset": "synthetic-32x32x3"}]
    table, skipped = plan.experiment_table(config, STACKS, plan.train_sizes(config, {}))
    planned = sorted((row["stack"], row["model"], row["variant"]) for row in table.values())
    assert [entry for entry in planned if entry[0] == "torch-2.13"] == [
        ("torch-2.13", "gpt-tiny", "eager"),
        ("torch-2.13", "gpt-tiny", "eager-composed"),
        ("torch-2.13", "mlp", "eager"),
        ("torch-2.13", "mlp", "eager-nhwc"),
        ("torch-2.13", "vit-tiny", "eager"),
        ("torch-2.13", "vit-tiny", "eager-composed"),
        ("torch-2.13", "vit-tiny", "eager-nhwc"),
    ]
    messages = [plan.skipped_message(entry) for entry in skipped]
    assert "skipping variant 'eager-composed' for model mlp: composed attention: the model has no attention layers" in (
        messages
    )
    assert (
        "skipping variant 'eager-nhwc' for model gpt-tiny: a channels-last layout: the model reads token ids, not "
        "images" in messages
    )
    assert any("for tensorflow-2.21 on cpu: TensorFlow has no fused attention kernel" in line for line in messages)
    assert variants.parse("compile-nhwc-composed-amp").name == "compile-nhwc-composed-amp"


def test_only_image_folders_stream_and_a_streamed_row_carries_its_loader_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = dict(
        CONFIG,
        datasets=["synthetic-8x8x1", "flowers"],
        data_placements=["device", "stream"],
        batch_sizes=[32],
        variants=["eager"],
        image_folders={"flowers": {"path": "/data/flowers"}},
        images_per_epoch=64,
    )
    table, skipped = plan.experiment_table(config, STACKS, {})
    assert sorted(table) == [
        "torch-2.13_flowers_mlp_cpu_b32_adam-lr0.001_e2_eager",
        "torch-2.13_flowers_mlp_cpu_b32_adam-lr0.001_e2_eager_stream-data",
        "torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager",
    ]
    assert [plan.skipped_message(entry) for entry in skipped] == [
        "skipping data placement 'stream' on synthetic-8x8x1: only image folders stream (`imagenet`, `image_folders`)"
    ]
    streamed = table["torch-2.13_flowers_mlp_cpu_b32_adam-lr0.001_e2_eager_stream-data"]
    assert streamed["stream"] == config["stream"] and streamed["images_per_epoch"] == 64
    assert plan.prepared_meta("flowers", "stream") == "results/stream/flowers/meta.json"
    assert plan.prepared_meta("flowers", "host") == "results/data/flowers/meta.json"
    searches = tiny_searches(config, table)
    assert not any(search["search_id"].endswith("_stream-data") for search in searches.values())
    assert "stream" not in table["torch-2.13_flowers_mlp_cpu_b32_adam-lr0.001_e2_eager"]


def test_the_prepared_size_wins_over_the_configured_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/data/synthetic-8x8x1").mkdir(parents=True)
    (tmp_path / "results/data/synthetic-8x8x1/meta.json").write_text(json.dumps({"train_size": 1000}))
    table, _ = plan.experiment_table(CONFIG, STACKS, plan.train_sizes(CONFIG, {}))
    assert len(table) == 2


def test_failed_runs_are_found_by_status_and_summarised_with_their_logs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table, _ = plan.experiment_table(CONFIG, STACKS, {})
    experiment = next(iter(table))
    for rep, (status, error) in enumerate([("ok", None), ("oom", "OutOfMemoryError: CUDA out of memory\nmore")], 1):
        write_run(tmp_path / plan.RUN_DIRECTORY.format(experiment=experiment, rep=rep), status=status, error=error)
    failed = list(plan.failed_runs(CONFIG, table))
    assert [(run["status"], run["rep"]) for run in failed] == [("oom", 2)]
    assert list(plan.failed_runs(CONFIG, table, ["error"])) == []
    assert plan.failure_summary(failed) == [
        "1 run(s) with status oom:",
        f"  {experiment} rep 2: OutOfMemoryError: CUDA out of memory\n    log: logs/train/{experiment}/rep2.log",
    ]


def test_an_invocation_ends_with_its_failed_runs_a_retry_command_and_fails_unless_they_were_expected(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plan.sys, "executable", str(tmp_path / ".venv/bin/python"))
    table, _ = plan.experiment_table(CONFIG, STACKS, {})
    config = dict(CONFIG, scheduler="local", expected_failures=[])
    assert plan.end_of_invocation(config, table, None, "") == ([], True)  # nothing ran: no run failed
    experiment = next(iter(table))
    write_run(tmp_path / plan.RUN_DIRECTORY.format(experiment=experiment, rep=1), status="oom", error="out of memory")
    lines, succeeded = plan.end_of_invocation(config, table, None, "--config repeats=1")
    assert not succeeded and lines[0] == "1 run(s) with status oom:"
    assert lines[-1] == (
        "Retry them with: .venv/bin/python -m snakemake --config repeats=1 --forcerun "
        "$(.venv/bin/python scripts/plan.py failed --config repeats=1)"
    )
    slurm = dict(config, scheduler="slurm", expected_failures=["oom"])
    lines, succeeded = plan.end_of_invocation(slurm, table, None, "")
    assert succeeded and "--profile profiles/slurm --forcerun" in lines[-1] and lines[-1].endswith("fail the run)")
    monkeypatch.setattr(plan.sys, "executable", "/opt/torch/.venv/bin/python")  # a machine's own interpreter
    lines, _ = plan.end_of_invocation(config, table, None, "")
    assert lines[-1].startswith("Retry them with: /opt/torch/.venv/bin/python -m snakemake --forcerun")


def test_a_run_interrupted_before_its_record_is_resumed_by_a_plain_rerun_not_forced(tmp_path, monkeypatch):
    """Ctrl-C ends a job with its log's last line (dlbench/cli.py): the run is listed as interrupted, and the advice is
    the plain invocation that resumes it (Snakemake reruns an incomplete job by itself), not --forcerun."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plan.sys, "executable", str(tmp_path / ".venv/bin/python"))
    table, _ = plan.experiment_table(CONFIG, STACKS, {})
    experiment = next(iter(table))
    log = tmp_path / plan.RUN_LOG.format(experiment=experiment, rep=1)
    log.parent.mkdir(parents=True)
    log.write_text(f"[10:00:00] epoch 1/3\n{cli.INTERRUPTED_LINE}\n")
    config = dict(CONFIG, scheduler="local", expected_failures=[])
    lines, succeeded = plan.end_of_invocation(config, table, None, "")
    assert not succeeded and lines == [
        "1 run(s) with status interrupted:",
        f"  {experiment} rep 1: interrupted (Ctrl-C) before its record; a plain rerun resumes it\n"
        f"    log: logs/train/{experiment}/rep1.log",
        "Resume the interrupted with: .venv/bin/python -m snakemake",
    ]
    log.write_text("[10:00:00] epoch 1/3\nSegmentation fault\n")  # died: an error, retried with --forcerun
    lines, _ = plan.end_of_invocation(config, table, None, "")
    assert lines[0] == "1 run(s) with status error:" and lines[-1].startswith("Retry them with: ")


@pytest.fixture
def prepared(tmp_path):
    np.savez(tmp_path / data.ARRAYS, train_x=np.zeros((4, 2, 2, 1), np.uint8))
    (tmp_path / "meta.json").write_text(json.dumps({"files": {data.ARRAYS: data.fingerprint(tmp_path / data.ARRAYS)}}))
    return tmp_path


def test_prepared_data_that_changed_is_named_and_refused(prepared):
    arrays = prepared / data.ARRAYS
    assert data.changed(prepared, always_hash=False) == "" and (prepared / data.VERIFIED).exists()
    data.verify(prepared)
    content = bytearray(arrays.read_bytes())
    content[-30] ^= 1
    arrays.write_bytes(bytes(content))
    assert "SHA-256" in data.changed(prepared, always_hash=False)
    with pytest.raises(data.PreparedDataError, match=f"{arrays}.*corrupted.*snakemake --forcerun"):
        data.verify(prepared)
    arrays.write_bytes(bytes(content[:-1]))
    assert "bytes" in data.changed(prepared, always_hash=False)
    arrays.unlink()
    assert data.changed(prepared, always_hash=False) == f"{arrays} is missing"


def test_raced_rounds_add_the_experiments_each_look_planned_for_the_next_round(tmp_path, monkeypatch):
    """Two rounds of everything, then per look the round its decision planned, up to the first that planned none."""
    monkeypatch.chdir(tmp_path)
    config = dict(CONFIG, race=dict(CONFIG["race"], enabled=True, max_rounds=7))
    table = {"a": {}, "b": {}}
    assert plan.race_looks(config) == [2, 3, 4, 5, 6]  # after every round but the most
    assert plan.runs(config, table) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    for look, rounds, planned in ((2, [3], ["a", "b"]), (3, [4], ["a", "b"]), (4, [5], ["b"]), (5, [], [])):
        decision = tmp_path / plan.ROUND_DECISION.format(round=look)
        decision.parent.mkdir(parents=True, exist_ok=True)
        decision.write_text(json.dumps({"look": look, "rounds": rounds, "next_round": planned}))
    assert plan.runs(config, table)[4:] == [("a", 3), ("b", 3), ("a", 4), ("b", 4), ("b", 5)]
    assert plan.runs(CONFIG, table)[4:] == []  # no race: the decisions on disk are not read


def test_a_byte_changed_with_its_modification_time_put_back_is_seen_by_planning_without_writing(prepared):
    """Bit rot: planning's cheap check (no hash where nothing moved since the last verified hash) still sees a write
    that restored the modification time, as the change time moves; planning itself writes nothing."""
    arrays = prepared / data.ARRAYS
    assert data.changed(prepared, always_hash=True) == ""  # a training run verified it
    assert data.generation(prepared) == (0, "")
    stat, content = arrays.stat(), bytearray(arrays.read_bytes())
    content[-30] ^= 1
    arrays.write_bytes(bytes(content))
    os.utime(arrays, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    files = {path: path.read_bytes() for path in prepared.iterdir()}
    generation, problem = data.generation(prepared)
    assert generation == 1 and "SHA-256" in problem
    assert {path: path.read_bytes() for path in prepared.iterdir()} == files  # a dry run changes nothing


def test_preparing_again_sets_the_changed_folder_aside_and_its_generation_then_stays(prepared):
    (prepared / data.ARRAYS).write_bytes(b"rotten")
    assert data.generation(prepared)[0] == 1
    aside = data.set_aside_if_changed(prepared)
    assert aside.name.startswith(f"{prepared.name}.changed-") and (aside / data.ARRAYS).read_bytes() == b"rotten"
    assert not prepared.exists() and data.set_aside_if_changed(prepared) is None
    prepared.mkdir()  # prepared again, recording the generation it was given
    np.savez(prepared / data.ARRAYS, train_x=np.ones((4, 2, 2, 1), np.uint8))
    meta = {"files": {data.ARRAYS: data.fingerprint(prepared / data.ARRAYS)}, "generation": 1}
    (prepared / "meta.json").write_text(json.dumps(meta))
    assert data.generation(prepared) == (1, "")


def test_an_unreadable_meta_json_asks_for_a_generation_no_preparation_recorded(prepared):
    (prepared / "meta.json").write_text('{"files": ')
    generation, problem = data.generation(prepared)
    assert generation > 1 and "meta.json is unreadable" in problem


def run_log(root, text):
    """The planned experiments, with a log of the first one's repeat 1 holding text (and no record)."""
    table, _ = plan.experiment_table(CONFIG, STACKS, {})
    experiment = next(iter(table))
    log = root / plan.RUN_LOG.format(experiment=experiment, rep=1)
    log.parent.mkdir(parents=True)
    log.write_text(text)
    return table, experiment, log


def test_runs_that_left_no_record_or_an_unreadable_one_are_failed_runs_naming_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table, experiment, _ = run_log(tmp_path, "bash: line 1: .venvs/torch/bin/python: No such file or directory\n\n")
    record = tmp_path / plan.RUN_DIRECTORY.format(experiment=experiment, rep=2) / "record.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"status": "ok", "experiment_id": "tr')  # truncated
    failed = {run["rep"]: run for run in plan.failed_runs(CONFIG, table)}
    assert failed[1]["status"] == "error"
    assert (
        failed[1]["error"]
        == "left no record; its log ends: bash: line 1: .venvs/torch/bin/python: No such file or directory"
    )
    assert failed[2]["status"] == "error" and failed[2]["error"].startswith(
        f"record unreadable: {record.relative_to(tmp_path)}: "
    )


def test_an_old_log_of_a_run_not_run_again_is_no_failure_of_this_invocation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table, _, log = run_log(tmp_path, "an old run's log\n")
    os.utime(log, (1_000_000, 1_000_000))
    assert list(plan.failed_runs(CONFIG, table, logs_since=2_000_000)) == []
    assert len(list(plan.failed_runs(CONFIG, table))) == 1  # asked for outright (scripts/plan.py failed): listed


def test_an_unreadable_prepared_meta_does_not_stop_planning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    meta = tmp_path / plan.prepared_meta("synthetic-8x8x1", "device")
    meta.parent.mkdir(parents=True)
    meta.write_text('{"train_size": ')
    config = dict(CONFIG, datasets=["synthetic-8x8x1"], synthetic={"classes": 4, "train_size": 64})
    assert plan.train_sizes(config, {}) == {"synthetic-8x8x1": 64}


def tiny_searches(config, table):
    """The largest-batch searches planned for `table` with a one-step search of every stack."""
    searches = {"enabled": True, "stacks": [], "start": 1, "limit": 2, "resolution": 1, "steps": 1}
    return plan.max_batch_searches(dict(config, max_batch=searches, seed=0), table)


def test_a_config_that_plans_nothing_is_blamed_on_the_key_that_left_everything_out(tmp_path):
    study = tmp_path / "big.yaml"
    study.write_text("batch_sizes: [100000]\n")
    result = subprocess.run(
        [sys.executable, "scripts/plan.py", "experiments", "--configfile", str(study)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert result.stderr.startswith(
        "config error in `batch_sizes`: no experiment is left to run: skipping batch size 100000 on digits: larger "
        "than the 1437 training examples of digits"
    )
