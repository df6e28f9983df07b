"""Data placement `stream` through the workflow end to end: a generated image folder indexed once and streamed by two
stacks to the report (indexing and the loaders themselves: tests/frameworks/test_stream.py)."""

import subprocess

import yaml
from archives import make_image_folder
from conftest import SHARED_MACHINE, SNAKEMAKE, VENV_ROOT, copy_repository, read_csv


def test_a_streamed_study_runs_through_the_workflow_to_its_report(env_python, tmp_path):
    """Two stacks stream a generated folder (one of them also from arrays): the index is prepared once, the
    digits dataset skips streaming, and the report has the input-pipeline table."""
    copy_repository(tmp_path)
    make_image_folder(env_python("tools"), tmp_path / "images", "--classes", "2", "--train", "8", "--val", "4", "--bad")
    config = {
        "stacks": ["torch-2.13", "tensorflow-2.21"],
        "datasets": ["tiny", "digits"],
        "models": ["mlp"],
        "batch_sizes": [8],
        "epochs": [2],
        "variants": ["eager", "graph"],
        "repeats": 1,
        "race": {"enabled": False},
        "data_placements": ["stream"],
        "image_folders": {"tiny": {"path": str(tmp_path / "images"), "resolution": 16}},
        "exclude": [{"stack": "tensorflow-2.21", "variant": "eager"}],
        "stream": {"workers": 1},
        "min_steady_seconds": 0,
        "venv_root": str(VENV_ROOT),
        "ops": {"stacks": []},
        "contention": SHARED_MACHINE,
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([*SNAKEMAKE, "--cores", "2"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "skipping data placement 'stream' on digits: only image folders stream" in result.stderr
    summary = read_csv(tmp_path / "results" / "tables" / "summary.csv")
    assert sorted(row["experiment_id"].split("_")[0] for row in summary) == ["tensorflow-2.21", "torch-2.13"]
    assert all(row["experiment_id"].endswith("_stream-data") and row["input_bound"] for row in summary)
    assert not (tmp_path / "results" / "data" / "tiny").exists()  # streaming reads the folder, never arrays
    html = (tmp_path / "results" / "report" / "report.html").read_text()
    assert "loader alone img/s" in html and "tf.data" in html and "torch.utils.data.DataLoader" in html
