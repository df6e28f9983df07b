"""An environment that already exists (config `existing_envs`) is checked for its framework and version and described
like a built env. The existing environment here (conftest's existing_python) is a venv made without pip, whose packages
are those of the built torch venv (a .pth file), so it stands for a preinstalled interpreter. A stack run in one by the
workflow: tests/workflow/test_existing_env_runs.py."""

from build_env import check_existing, describe


def test_an_existing_env_is_checked_for_its_framework_and_version(existing_python, tmp_path):
    problem, found = check_existing(existing_python, "torch", "2.13")
    assert problem is None and found["version"].startswith("2.13")
    problem, _ = check_existing(existing_python, "torch", "2.1")
    assert "imports torch 2.13" in problem and "declares version 2.1" in problem
    problem, _ = check_existing(existing_python, "tensorflow", "2.21")
    assert str(existing_python) in problem and "cannot import tensorflow" in problem
    problem, _ = check_existing(tmp_path / "no" / "python", "torch", "2.13")
    assert "does not exist" in problem


def test_an_existing_env_without_pip_is_described_like_a_built_one(existing_python):
    description = describe(None, str(existing_python), "existing")
    assert description["env_file"] is None and description["deployment"] == "existing"
    assert any(package.startswith("torch==2.13") for package in description["packages"])
    assert len(description["packages_sha256"]) == 64
