"""The GPU acceptance command in its CPU mode (tiny sizes, a scripted NVML, the study as a dry run): every step runs
and reports its figures, so the command works when a GPU machine is next lent (its figures are benchmarks, never
asserted)."""

import subprocess
import sys

from conftest import REPO, VENV_ROOT, read_csv

STEPS = [
    "parity-torch-2.13",
    "parity-keras-3-jax",
    "gpt2-torch-2.13",
    "gpt2-keras-3-jax",
    "parity-flax-0.12",
    "parity-keras-3-torch",
    "nvml",
    "one-replica-mechanisms",
    "max-batch",
    "compile-modes",
    "workflow",
]


def test_every_acceptance_step_runs_on_cpu(tmp_path):
    out = tmp_path / "acceptance"
    command = [sys.executable, REPO / "benchmarks" / "gpu_acceptance.py", "run", "--cpu", "--out", out]
    result = subprocess.run([*map(str, command), "--venv-root", str(VENV_ROOT), "--budget-s", "1800"], cwd=REPO)
    assert result.returncode == 0
    summary = read_csv(out / "summary.csv")
    failed = {row["step"]: (out / row["log"]).read_text()[-3000:] for row in summary if row["status"] != "ok"}
    assert [row["step"] for row in summary] == STEPS and not failed, failed

    parity = [
        row
        for stack in ("torch-2.13", "keras-3-jax", "flax-0.12", "keras-3-torch")
        for row in read_csv(out / f"parity-{stack}.csv")
    ]
    assert len(parity) == 4 and all(float(row["ratio"]) > 0 for row in parity)
    language_models = [row for stack in ("torch-2.13", "keras-3-jax") for row in read_csv(out / f"gpt2-{stack}.csv")]
    assert [row["model"] for row in language_models] == ["gpt-tiny"] * 2  # GPT-2 124M on a GPU
    assert all(float(row["ratio"]) > 0 for row in language_models)
    assert "tokens/s" in next(row["figures"] for row in summary if row["step"] == "gpt2-torch-2.13")
    mechanisms = {(row["stack"], row["through_mechanism"]): row for row in read_csv(out / "one-replica-mechanisms.csv")}
    assert {stack for stack, _ in mechanisms} == {"torch-2.13", "flax-0.12", "keras-3-jax"}
    for stack, engaged in (("torch-2.13", "DistributedDataParallel"), ("flax-0.12", "Mesh"), ("keras-3-jax", "")):
        assert mechanisms[(stack, "False")]["data_parallel"] == ""  # the plain run: no mechanism
        assert engaged in mechanisms[(stack, "True")]["data_parallel"] != ""
    nvml = {row["check"]: row["finding"] for row in read_csv(out / "nvml.csv")}
    assert nvml["foreign process, refuse"].startswith("stopped: the GPU is in use by pid")
    assert nvml["foreign process, wait"].startswith("stopped: the GPU was still in use after waiting 3 s")
    assert nvml["foreign process, record"].startswith("ran beside pid")
    assert nvml["foreign process gone, wait"] == "ran (nothing beside)"
    assert nvml["throttle reasons"] == "sw_power_cap" and "J counted" in nvml["energy"]
    searched = read_csv(out / "max-batch.csv")
    assert searched[-1]["status"] == "result" and int(searched[-1]["batch_size"]) == 64  # the CPU search's limit
    compiled = read_csv(out / "compile-modes.csv")
    no_cuda_graphs = ["eager", "compile", "compile-max-autotune"]  # reduce-overhead needs CUDA
    assert [row["variant"] for row in compiled] == no_cuda_graphs
    assert all(float(row["first_epoch_s"]) > 0 for row in compiled)


def test_a_step_past_its_time_is_killed_with_its_children_and_the_summary_kept(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_acceptance

    marker = tmp_path / "grandchild-lived"
    command = ["sh", "-c", f"(sleep 3; touch {marker}) & sleep 30"]
    assert gpu_acceptance.run_command(command, tmp_path / "step.log", seconds=1) == "timed out"
    subprocess.run(["sleep", "4"], check=True)
    assert not marker.exists()  # the whole process group went
    rows = [{"step": "a", "status": "timed out", "seconds": 1, "figures": "", "log": "step.log"}]
    gpu_acceptance.write_summary(tmp_path, rows)
    assert "| a | timed out | 1 |" in (tmp_path / "summary.md").read_text()


def test_on_a_gpu_the_wheels_install_first_whatever_only_names(tmp_path, monkeypatch):
    """Planning the steps imports what the wheels bring (jsonschema, Snakemake): the install runs before it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_acceptance

    happened = []
    install = ("install", lambda out: happened.append("install") or [], lambda out: "")
    monkeypatch.setattr(gpu_acceptance, "install_step", lambda args: install)
    monkeypatch.setattr(gpu_acceptance, "steps", lambda args: happened.append("planned") or [])
    monkeypatch.setattr(gpu_acceptance.harness, "gpu_description", lambda: "a GPU")
    parser = gpu_acceptance.parser()
    args = parser.parse_args(["run", "--out", str(tmp_path), "--only", "workflow"])
    gpu_acceptance.run(args)
    assert happened == ["install", "planned"]
