"""`--profile profiles/slurm` on a real Slurm: the one-node cluster of scripts/slurm_cluster.sh (munge, MariaDB +
slurmdbd, slurmctld, slurmd with a GPU GRES). The tiny workflow runs with every training job a Slurm job, then GPU
jobs are checked for what they ask Slurm for, then bad settings are refused before any submission. The account
and partition rules themselves (dlbench/study/slurm.py): tests/unit/test_slurm_settings.py."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED_MACHINE, SNAKEMAKE, STACKS, VENV_ROOT, copy_repository, planned_rules

TORCH = "torch-2.13"
SLURM_OPTIONS = [
    "--profile",
    "profiles/slurm",
    "--slurm-init-seconds-before-status-checks",
    "5",
    "--seconds-between-status-checks",
    "5",
]


@pytest.fixture(scope="module")
def cluster():
    """The one-node cluster, up (reused when already running), and down again after the tests where they started it:
    a configured cluster whose controller is gone makes every Slurm client call, and so every later Snakemake start
    (the Slurm executor plugin asks `scontrol` at import), wait seconds for it."""
    if os.geteuid() != 0:
        pytest.skip("starting the Slurm daemons needs root (scripts/slurm_cluster.sh up)")
    script = str(REPO / "scripts" / "slurm_cluster.sh")
    was_running = "slurmctld: running" in subprocess.run([script, "status"], capture_output=True, text=True).stdout
    result = subprocess.run([script, "up"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    yield result.stderr
    if not was_running:
        subprocess.run([script, "down"], capture_output=True, check=True)


def sacct(*job_ids):
    """{job id: {field: value}} of the given jobs from Slurm's accounting."""
    fields = ["JobID", "JobName", "State", "Account", "Partition", "ReqTRES", "Submit", "Start", "End", "NodeList"]
    output = subprocess.run(
        [
            "sacct",
            "--allocations",
            "--noheader",
            "--parsable2",
            f"--format={','.join(fields)}",
            "--jobs",
            ",".join(job_ids),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {row[0]: dict(zip(fields, row)) for row in (line.split("|") for line in output.splitlines() if line)}


def all_job_ids():
    output = subprocess.run(
        ["sacct", "--allocations", "--noheader", "--parsable2", "--format=JobID", "--starttime", "now-1days"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(output.split())


def workdir_with(root, config):
    copy_repository(root)
    base = {
        "stacks": [TORCH],
        "datasets": ["synthetic-12x12x1"],
        "models": ["mlp"],
        "batch_sizes": [32],
        "epochs": [2],
        "variants": ["eager"],
        "repeats": 2,
        "race": {"enabled": False},
        "min_steady_seconds": 0.1,
        "synthetic": {"classes": 4, "train_size": 256, "test_size": 64, "seed": 0},
        "ops": {"stacks": []},
        "venv_root": str(VENV_ROOT),
        "contention": SHARED_MACHINE,
    }
    (root / "config.yaml").write_text(yaml.safe_dump({**base, **config}))
    return root


def snakemake(workdir, *options):
    return subprocess.run([*SNAKEMAKE, *SLURM_OPTIONS, *options], cwd=workdir, capture_output=True, text=True)


def records(workdir):
    return [json.loads(path.read_text()) for path in sorted(Path(workdir).glob("results/runs/*/rep*/record.json"))]


@pytest.fixture(scope="module")
def cpu_run(cluster, tmp_path_factory):
    workdir = workdir_with(tmp_path_factory.mktemp("slurm-cpu"), {"stacks": [TORCH, "mxnet-1.9"]})
    result = snakemake(workdir)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return workdir


def test_every_training_job_ran_as_a_slurm_job_and_its_record_names_it(cpu_run):
    runs = records(cpu_run)
    assert len(runs) == 4 and all(run["status"] == "ok" for run in runs)
    job_ids = [run["provenance"]["slurm_job_id"] for run in runs]
    assert all(job_ids) and len(set(job_ids)) == 4
    jobs = sacct(*job_ids)
    for run in runs:
        job = jobs[run["provenance"]["slurm_job_id"]]
        assert job["State"] == "COMPLETED" and job["NodeList"] == run["provenance"]["host"]
        assert job["Partition"] == "debug"  # the cluster's default partition


def test_the_records_and_report_are_made_and_a_rerun_plans_nothing(cpu_run):
    assert (cpu_run / "results" / "tables" / "runs.csv").exists()
    assert (cpu_run / "results" / "report" / "report.pdf").stat().st_size > 0
    before = all_job_ids()
    result = snakemake(cpu_run, "--dry-run")
    assert result.returncode == 0 and planned_rules(result.stdout + result.stderr) == {}
    assert all_job_ids() == before


def test_each_gpu_job_asks_for_exactly_one_gpu_and_snakemake_does_not_serialise_them(
    cluster, tmp_path_factory, env_python
):
    # The node's GPU is declared, not real: the runs find no CUDA device and record an error, as on a node whose
    # GPU is missing. What is tested is what Slurm was asked for and when.
    torch_python = env_python(STACKS[TORCH]["env"]["cpu"])
    config = {"devices": ["gpu"], "existing_envs": {TORCH: str(torch_python)}, "expected_failures": ["error"]}
    workdir = workdir_with(tmp_path_factory.mktemp("slurm-gpu"), config)
    result = snakemake(workdir)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    runs = records(workdir)
    assert len(runs) == 2 and all(run["device"] == "gpu" and run["status"] == "error" for run in runs)
    assert (workdir / "results" / "report" / "report.pdf").exists()  # a study of failed runs still gets its report
    jobs = sacct(*(run["provenance"]["slurm_job_id"] for run in runs))
    assert all("gres/gpu=1" in job["ReqTRES"].split(",") for job in jobs.values())
    first, second = sorted(jobs.values(), key=lambda job: job["Start"])
    # Both were handed to Slurm before the first had finished: no workflow-wide gpu=1 limit held the second back.
    assert second["Submit"] < first["End"]


def test_an_unknown_account_is_refused_before_any_job_is_submitted(cluster, tmp_path):
    workdir = workdir_with(tmp_path, {"slurm": {"account": "nosuch"}})
    before = all_job_ids()
    result = snakemake(workdir)
    assert result.returncode != 0
    assert "config error in `slurm.account`" in result.stderr and "'nosuch' is not an account" in result.stderr
    assert all_job_ids() == before
