"""The whole workflow end to end, once, on a tiny config: five stacks, two of them also on 2 data-parallel replicas
(PyTorch's gloo processes, MXNet's CPU contexts), a report; then what a rerun plans after no
change, a changed batch size, a changed lock, an env file changed after its lock and a re-fetched dataset. (Faults and recovery: test_recovery.py.)"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import zipfile

import jsonschema
import pytest
import yaml
from archives import mnist_like, registry_entry, serve
from conftest import REPO, SHARED_MACHINE, SNAKEMAKE, VENV_ROOT, copy_repository, planned_rules, read_csv
from dlbench.study.analysis import tables
from hostile import HOSTILE, HOSTILE_URL_PATH, markers

FAST_STACKS = ["mxnet-1.9", "tensorflow-2.21", "keras-3-jax", "keras-3-tensorflow"]
TINY_CONFIG = {
    "stacks": ["mxnet-1.9", "torch-2.13", "tensorflow-2.21", "keras-3-jax", "keras-3-tensorflow"],
    "datasets": ["synthetic-12x12x1"],
    "models": ["mlp"],
    "batch_sizes": [32, 512],
    "epochs": [2],
    "variants": ["eager", "graph", "xla"],
    "data_placements": ["device", "host"],
    "repeats": 2,
    "race": {"enabled": False},
    "exclude": [
        {"stack": FAST_STACKS, "variant": "eager"},
        {"stack": ["tensorflow-2.21", "keras-3-tensorflow"], "variant": "xla"},  # keras-3-jax runs xla only
        {"stack": FAST_STACKS, "batch_size": 512},  # torch at 512 > 256 training images: left out at planning
        {"stack": ["torch-2.13", "keras-3-tensorflow"], "data_placement": "host"},
    ],
    # The top-level grid, and two of its experiments again on 2 replicas: the report's scaling section.
    "grids": [
        {},
        {"stacks": ["torch-2.13", "mxnet-1.9"], "batch_sizes": [32], "data_placements": ["device"], "replicas": [2]},
    ],
    "synthetic": {"classes": 4, "train_size": 256, "test_size": 64, "seed": 0},
    "min_steady_seconds": 0.1,
    "max_batch": {"enabled": True, "stacks": ["mxnet-1.9"], "start": 16, "limit": 64},
    "ops": {
        "stacks": ["torch-2.13"],
        "operators": ["relu", "gemm"],
        "elementwise_sizes": [1000, 10000],
        "gemm_sizes": [16, 64],
    },
    "venv_root": str(VENV_ROOT),
    "contention": SHARED_MACHINE,
}
EXPERIMENTS = 10  # 5 with device-staged data, 3 with host data, 2 on 2 replicas


def snakemake(workdir, *arguments):
    result = subprocess.run([*SNAKEMAKE, "--cores", "2", *arguments], cwd=workdir, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return result.stdout + result.stderr


def planned_jobs(workdir):
    """{rule: count} from a dry run's job stats table, without the jobs every invocation runs."""
    return planned_rules(snakemake(workdir, "-n"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A copy of the repository's files, run once to a finished report on the tiny config."""
    root = tmp_path_factory.mktemp("workflow")
    copy_repository(root)
    (root / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    snakemake(root)
    return root


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A local HTTP mirror serving MNIST-format archives: (its URL, the files' registry entries). The same files are
    served under a folder named like a shell command, which the mnist study's mirror URL names."""
    served = tmp_path_factory.mktemp("mirror")
    _, files = mnist_like(served / "mnist", train=128, test=32)
    (served / HOSTILE_URL_PATH).parent.mkdir(parents=True)  # its `/bin/mkdir`s make it several folders deep
    (served / HOSTILE_URL_PATH).symlink_to(served)
    server, url = serve(served)
    yield url, files
    server.shutdown()


@pytest.fixture(scope="module")
def mnist_workdir(tmp_path_factory, mirror):
    """One experiment on an MNIST-format set that the workflow downloads from the local mirror, with shell commands
    in the names of the registry, mirror, offline folder and venv root (none may run: tests/support/hostile.py)."""
    url, files = mirror
    root = tmp_path_factory.mktemp("mnist-workflow")
    copy_repository(root)
    registry = {"mnist": registry_entry("idx", (28, 28, 1), files, "http://127.0.0.1:9/unreachable/")}
    (root / f"registry {HOSTILE}.yaml").write_text(yaml.safe_dump(registry))
    (root / f"venvs {HOSTILE}").symlink_to(VENV_ROOT)
    config = {
        "stacks": ["torch-2.13"],
        "datasets": ["mnist"],
        "models": ["mlp"],
        "batch_sizes": [32],
        "epochs": [2],
        "variants": ["eager"],
        "repeats": 1,
        "race": {"enabled": False},
        "venv_root": f"venvs {HOSTILE}",
        "contention": SHARED_MACHINE,
        "downloads": {
            "registry": f"registry {HOSTILE}.yaml",
            "mirror": f"{url}/{HOSTILE_URL_PATH}/",
            "offline_dir": f"offline {HOSTILE}",
            "retries": 1,
        },
        "ops": {"stacks": []},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(root)
    return root


def test_mnist_from_the_mirror_trains_end_to_end(mnist_workdir):
    (record_path,) = (mnist_workdir / "results/runs").glob("*/rep1/record.json")
    record = json.loads(record_path.read_text())
    assert (record["status"], record["dataset"]) == ("ok", "mnist")
    meta = json.loads((mnist_workdir / "results/data/mnist/meta.json").read_text())
    assert meta["source"]["kind"] == "idx" and meta["train_size"] == 128
    assert "verified" in (mnist_workdir / "logs/download/mnist/train-images-idx3-ubyte.gz.log").read_text()
    assert planned_jobs(mnist_workdir) == {}
    assert markers(mnist_workdir) == []


def test_a_fetched_again_archive_does_not_retrain(mnist_workdir):
    for archive in (mnist_workdir / "resources/archives/mnist").iterdir():
        archive.touch()
    assert planned_jobs(mnist_workdir) == {}


def test_a_corrupted_archive_fails_loudly_then_is_fetched_again(mnist_workdir):
    """Bit rot in a downloaded archive, found when the prepared data must be rebuilt: the preparation names the
    archive and removes it, the run exits non-zero; the next run fetches it again, prepares the data and retrains
    what depends on it (prepared data made again always retrains its runs), and then plans nothing."""
    archive = mnist_workdir / "resources/archives/mnist/train-images-idx3-ubyte.gz"
    (record,) = (mnist_workdir / "results/runs").glob("*/rep1/record.json")
    corrupted = bytearray(archive.read_bytes())
    corrupted[len(corrupted) // 2] ^= 0xFF
    archive.write_bytes(bytes(corrupted))
    (mnist_workdir / "results/data/mnist/arrays.npz").unlink()  # the prepared data must be made again
    failed = subprocess.run([*SNAKEMAKE, "--cores", "2"], cwd=mnist_workdir, capture_output=True, text=True)
    assert failed.returncode != 0
    log = (mnist_workdir / "logs/data/mnist.log").read_text()
    assert "train-images-idx3-ubyte.gz: sha256" in log and "removed, rerun to fetch it again" in log
    assert "logs/data/mnist.log" in failed.stdout + failed.stderr and not archive.exists()
    snakemake(mnist_workdir)
    assert "verified" in (mnist_workdir / "logs/download/mnist/train-images-idx3-ubyte.gz.log").read_text()
    assert json.loads(record.read_text())["status"] == "ok" and planned_jobs(mnist_workdir) == {}


def test_report_is_rendered_and_self_contained(workdir):
    html = (workdir / "results/report/report.html").read_text()
    assert (workdir / "results/report/report.pdf").read_bytes().startswith(b"%PDF")
    assert not re.search(r"""(src|href)=["']https?://""", html), "the HTML must not load anything from a CDN"
    assert "data:image/svg+xml" in html and "data:image/png" not in html
    for stack in TINY_CONFIG["stacks"]:
        assert stack in html


def test_snakemakes_own_report_packs_the_report_tables_and_figures(workdir):
    """`snakemake --report` after the finished study: one archive with Snakemake's page, holding each report()
    output's caption, and the HTML and PDF, the tables and the figures (stored by name under report/data/raw/)."""
    snakemake(workdir, "--report", "report.zip")
    archive = zipfile.ZipFile(workdir / "report.zip")
    stored = {name.rsplit("/", 1)[-1] for name in archive.namelist() if name.startswith("report/data/raw/")}
    assert {"report.html", "report.pdf", "summary.csv", "fastest.csv", "ops.csv", "throughput.svg"} <= stored, stored
    page = archive.read("report/report.html").decode()
    assert "One of the tables every statistic of the report is read from" in page  # workflow/report/tables.rst


def test_every_record_follows_the_schema(workdir):
    schema = yaml.safe_load((REPO / "workflow/schemas/run_record.schema.yaml").read_text())
    records = [json.loads(path.read_text()) for path in (workdir / "results/runs").glob("*/rep*/record.json")]
    assert len(records) == EXPERIMENTS * 2
    for record in records:
        jsonschema.validate(record, schema)
    ok = [record for record in records if record["status"] == "ok"]
    assert len(ok) == len(records) == EXPERIMENTS * 2
    assert all(record["train_images_per_s"] > 0 and record["provenance"]["packages_sha256"] for record in ok)
    for record in ok:  # each run names the lock its venv was installed from exactly
        lock = (workdir / record["provenance"]["env_file"]).with_suffix(".lock.txt")
        assert record["provenance"]["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest(), lock
    assert all(record["gpu_memory_peak_mb"] is None and record["gpu_fields_reason"] for record in records)
    host = [record for record in ok if record["data_placement"] == "host"]
    assert {record["stack"] for record in host} == {"mxnet-1.9", "tensorflow-2.21", "keras-3-jax"}
    assert all(record["experiment_id"].endswith("_host-data") for record in host)
    for record in ok:  # in each experiment's first repeat alone (measure_input_share: first) the fixed-batch epoch
        if record["rep"] > 1:  # ran; its share lies in its noise interval (tiny epochs: a wide one)
            assert record["input_share"] is None and not record["input_share_epochs_s"]
            continue
        low, high = record["input_share_interval"]
        assert 0 < record["fixed_batch_epoch_s"] and low <= record["input_share"] <= high < 1
        assert record["input_share_covers"]
    for record in ok:  # every second of each run is in one named part, and the parts add up to the wall
        assert set(record["wall_s"]) >= {"process_start", "imports", "build", "first_epoch", "steady_epochs", "exit"}
        assert 0.5 < sum(record["wall_s"].values()) < 600


def test_tables_have_one_row_per_run_and_per_experiment(workdir):
    runs = [run for run in read_csv(workdir / "results/tables/runs.csv") if run["final_try"] == "True"]
    summary = (workdir / "results/tables/summary.csv").read_text().splitlines()
    assert len(runs) == EXPERIMENTS * 2 and len(summary) == 1 + EXPERIMENTS
    assert "train_images_per_s_ci95_low" in summary[0]
    overlaps = {run["overlapping_runs"] for run in read_csv(workdir / "results/tables/runs.csv")}
    assert overlaps == {"0"}, "timed jobs ran at the same time"
    for path in [*tables.paths(tables.TABLES, "csv").values(), *tables.paths(tables.TABLES, "parquet").values()]:
        assert (workdir / path).exists()


def test_repeats_run_in_interleaved_rounds(workdir):
    """Every experiment's first repeat starts before any second repeat (the envs were ready at different times)."""
    runs = [run for run in read_csv(workdir / "results/tables/runs.csv") if run["final_try"] == "True"]
    starts = {rep: sorted(run["provenance_started_at"] for run in runs if run["rep"] == rep) for rep in ("1", "2")}
    assert len(starts["1"]) == len(starts["2"]) == EXPERIMENTS and starts["1"][-1] < starts["2"][0]


def test_replicated_runs_are_scaled_against_one_replica_in_the_tables_and_the_report(workdir):
    scaling = read_csv(workdir / "results/tables/scaling.csv")
    assert sorted((row["stack"], row["variant"], row["replicas"]) for row in scaling) == [
        ("mxnet-1.9", "graph", "2"),
        ("torch-2.13", "eager", "2"),
    ]
    for row in scaling:
        assert row["base_experiment_id"] + "_r2" == row["experiment_id"] and float(row["efficiency"]) > 0
        assert row["global_batch_size"] == "64"  # weak scaling: 32 per replica
    records = [json.loads(path.read_text()) for path in (workdir / "results/runs").glob("*_r2/rep1/record.json")]
    engaged = {record["stack"]: record["engaged"] for record in records}
    assert engaged["torch-2.13"]["collective"] == "gloo" and engaged["mxnet-1.9"]["data_parallel"]
    assert all(record["replica_images_per_s"] == record["train_images_per_s"] / 2 for record in records)
    shares = {record["stack"]: record["communication_share"] for record in records}
    assert shares["mxnet-1.9"] is None and shares["torch-2.13"] is not None  # DDP's no_sync; Gluon has no such step
    communication = {row["stack"]: row["communication_share_mean"] for row in scaling}
    assert communication["mxnet-1.9"] == "" and communication["torch-2.13"] != ""
    html = (workdir / "results/report/report.html").read_text()
    assert "Data-parallel scaling" in html and "efficiency [95%]" in html


def test_largest_batch_searches_are_tabled_and_reported(workdir):
    """MXNet's two searches (device and host data) reach the limit, 64, after trying 16, 32 and 64."""
    searches = read_csv(workdir / "results/tables/max_batch.csv")
    assert sorted(row["search_id"] for row in searches) == [
        "mxnet-1.9_synthetic-12x12x1_mlp_cpu_adam_graph",
        "mxnet-1.9_synthetic-12x12x1_mlp_cpu_adam_graph_host-data",
    ]
    for row in searches:
        assert (row["status"], row["max_batch"], row["limit_reached"], row["probes"]) == ("ok", "64", "True", "3")
    assert "64 (the limit)" in (workdir / "results/report/report.html").read_text()


def test_operator_benchmarks_are_tabled_and_reported(workdir):
    lines = (workdir / "results/tables/ops.csv").read_text().splitlines()
    header, rows = lines[0].split(","), [line.split(",") for line in lines[1:]]
    assert len(rows) == 4
    status, fraction = header.index("status"), header.index("fraction_of_ceiling")
    assert all(row[status] == "ok" and float(row[fraction]) > 0 for row in rows)
    html = (workdir / "results/report/report.html").read_text()
    assert "Operator microbenchmarks" in html and "Fraction of the ceiling" in html


def test_a_study_imports_another_studys_bundle_and_keeps_its_own_results(workdir, mnist_workdir, tmp_path):
    """The MNIST study's bundle (`snakemake bundle`), imported by a copy of the tiny study: its run joins the tables
    and the report beside the study's own, which stay as they were, and no training runs again; a bundle that is not
    there is refused before any job."""
    snakemake(mnist_workdir, "bundle")
    study = tmp_path / "importing"
    shutil.copytree(workdir, study, symlinks=True)
    (study / "config.yaml").write_text(yaml.safe_dump(dict(TINY_CONFIG, imports=["absent.tar.gz"])))
    refused = subprocess.run([*SNAKEMAKE, "--cores", "2", "-n"], cwd=study, capture_output=True, text=True)
    said = refused.stdout + refused.stderr  # Snakemake prints a workflow error on stdout
    assert refused.returncode and "config error in `imports`: absent.tar.gz: no such bundle" in said
    bundle = mnist_workdir / "results/bundle.tar.gz"
    (study / "config.yaml").write_text(yaml.safe_dump(dict(TINY_CONFIG, imports=[str(bundle)])))
    own = {path: path.read_bytes() for path in (study / "results/runs").rglob("*") if path.is_file()}
    planned = planned_jobs(study)
    assert planned["unpack_bundle"] == 1 and "train" not in planned, planned
    snakemake(study)
    assert all(path.read_bytes() == data for path, data in own.items()), "an import changed the study's own runs"
    runs = [run for run in read_csv(study / "results/tables/runs.csv") if run["final_try"] == "True"]
    imported = [run for run in runs if run["dataset"] == "mnist"]
    assert len(runs) == EXPERIMENTS * 2 + 1 and len(imported) == 1
    assert "mlp on mnist" in (study / "results/report/report.html").read_text(), "the imported run's group is reported"


def test_a_rerun_has_nothing_to_do_and_says_once_what_it_leaves_out(workdir):
    output = snakemake(workdir, "-n")
    assert planned_rules(output) == {}
    skipped = "skipping batch size 512 on synthetic-12x12x1: larger than the 256 training examples of synthetic-12x12x1"
    assert output.count(skipped) == 1


def test_a_refetched_dataset_does_not_retrain(workdir):
    (workdir / "results/data/synthetic-12x12x1/arrays.npz").touch()
    assert planned_jobs(workdir) == {}


def test_changing_one_batch_size_reruns_exactly_its_experiments(workdir):
    config = dict(TINY_CONFIG, batch_sizes=[16, 512])
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    try:
        # the five stacks' experiments at batch 32 with device-staged data, three with host data; two repeats each
        assert planned_jobs(workdir) == {"train": (5 + 3) * 2, "aggregate": 1, "report": 1}
    finally:
        (workdir / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))


def test_a_changed_lock_rebuilds_that_env_and_reruns_its_stack_only(workdir):
    lock = workdir / "envs/mxnet-1.9-cpu.lock.txt"
    original = lock.read_text()
    lock.write_text(original + "# edited\n")
    try:
        assert planned_jobs(workdir) == {
            "install_venv": 1,
            "build_env": 1,
            "train": 3 * 2,
            "max_batch": 2,
            "aggregate": 1,
            "report": 1,
        }
    finally:
        lock.write_text(original)


def test_an_env_file_changed_after_its_lock_is_refused_before_any_job(workdir):
    env_file = workdir / "envs/mxnet-1.9-cpu.yaml"
    original = env_file.read_text()
    env_file.write_text(original.replace("numpy==1.23.5", "numpy==1.23.4"))
    try:
        result = subprocess.run([*SNAKEMAKE, "-n", "--cores", "2"], cwd=workdir, capture_output=True, text=True)
    finally:
        env_file.write_text(original)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        "envs/mxnet-1.9-cpu.lock.txt is out of date: envs/mxnet-1.9-cpu.yaml pins numpy==1.23.4, it has 1.23.5;"
        " regenerate it with `python3 scripts/build_env.py --lock envs/mxnet-1.9-cpu.yaml`"
    ) in result.stdout + result.stderr


RACE_CONFIG = {
    # Keras' run_eagerly runs op by op in Python, many times slower than its compiled step: a clearly slower
    # experiment. MXNet's two modes beside it, a group of their own, may race on.
    "stacks": ["keras-3-jax"],
    "datasets": ["synthetic-12x12x1"],
    "models": ["mlp"],
    "batch_sizes": [16],
    "epochs": [3],
    "variants": ["eager", "graph"],
    "grids": [
        {"stacks": ["keras-3-jax"], "variants": ["eager", "xla"]},
        {"stacks": ["mxnet-1.9"], "batch_sizes": [32]},
    ],
    "repeats": 3,
    # Looks after rounds 3 and 4, the most: the group's one pair judged at the whole 0.05 by its sequence.
    "race": {"max_rounds": 4, "pooled": False},
    "min_steady_seconds": 0.2,
    "ops": {"stacks": []},
    "synthetic": {"classes": 4, "train_size": 512, "test_size": 64, "seed": 0},
    "venv_root": str(VENV_ROOT),
    "contention": SHARED_MACHINE,
}
SLOWER_ONE = "keras-3-jax_synthetic-12x12x1_mlp_cpu_b16_adam-lr0.001_e3_eager"


def invocation(workdir):
    return subprocess.Popen(
        [*SNAKEMAKE, "--cores", "2"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_a_race_eliminates_a_clearly_slower_experiment_at_the_first_look_and_resumes_after_a_kill(tmp_path):
    """Killed during its second round, the study resumes; after three rounds the first look eliminates Keras' eager
    mode; only undecided groups' live experiments run round 4; the comparisons carry the race's verdicts; a finished
    race run again plans nothing."""
    copy_repository(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(RACE_CONFIG))
    killed = invocation(tmp_path)
    deadline = time.monotonic() + 900
    while not list(tmp_path.glob("results/runs/*/rep2/record.json")) and time.monotonic() < deadline:
        assert killed.poll() is None, "the first invocation ended before its second round"
        time.sleep(0.2)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    snakemake(tmp_path, "--unlock")  # the stale lock of a killed run: Snakemake's own remedy
    output = snakemake(tmp_path)
    decision = json.loads((tmp_path / "results/rounds/round3.json").read_text())
    assert SLOWER_ONE not in decision["next_round"] and decision["rounds"] in ([4], []), decision
    rounds = {}
    for run in read_csv(tmp_path / "results/tables/runs.csv"):
        rounds.setdefault(run["experiment_id"], set()).add(int(run["rep"]))
    assert all(rounds[experiment] == {1, 2, 3, 4} for experiment in decision["next_round"])
    assert all(rounds[experiment] == {1, 2, 3} for experiment in set(rounds) - set(decision["next_round"]))
    compared = {row["experiment_id"]: row for row in read_csv(tmp_path / "results/tables/comparisons.csv")}
    slower = compared[SLOWER_ONE]
    assert (slower["race_state"], slower["verdict"], slower["pairs"]) == ("eliminated", "slower", "3")
    assert float(slower["ratio_high"]) < 1 and slower["race_outcome"] == "decided"
    assert "look after round 3" in (tmp_path / "logs/rounds/round3.log").read_text()
    assert planned_rules(snakemake(tmp_path, "-n")) == {}, output[-3000:]
