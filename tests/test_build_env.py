"""Env files: one source of truth per stack and device; the venv path follows the file's content."""

import pytest
from build_env import pip_requirements, python_pin, venv_prefix
from conftest import REPO, STACKS


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_every_stack_has_a_pinned_env_file_per_device(stack, device):
    env_file = REPO / "envs" / f"{STACKS[stack]['env'][device]}.yaml"
    assert python_pin(env_file) == "3.11"
    requirements = pip_requirements(env_file)
    assert requirements and all("==" in line for line in requirements), requirements


def test_cuda_env_files_use_cuda_builds():
    cuda = {stack: pip_requirements(REPO / "envs" / f"{entry['env']['gpu']}.yaml") for stack, entry in STACKS.items()}
    assert "mxnet-cu112==1.9.1" in cuda["mxnet-1.9"]
    assert "tensorflow[and-cuda]==2.21.0" in cuda["tensorflow-2.21"]
    assert "jax[cuda12]==0.10.2" in cuda["keras-3-jax"]


def test_mxnet_keeps_numpy_below_1_24():
    assert "numpy==1.23.5" in pip_requirements(REPO / "envs" / "mxnet-1.9-cpu.yaml")


def test_pip_section_parsing(tmp_path):
    env_file = tmp_path / "x.yaml"
    env_file.write_text(
        "name: x\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - a==1  # why\n"
        '      - "b[extra]==2"\nother: 1\n'
    )
    assert pip_requirements(env_file) == ["a==1", "b[extra]==2"]


def test_missing_pip_section_is_an_error(tmp_path):
    env_file = tmp_path / "x.yaml"
    env_file.write_text("name: x\ndependencies:\n  - python=3.11\n")
    with pytest.raises(SystemExit, match="no `- pip:` section"):
        pip_requirements(env_file)


def test_venv_folder_changes_with_the_file_content(tmp_path):
    env_file = tmp_path / "stack.yaml"
    env_file.write_text("dependencies:\n  - pip:\n      - a==1\n")
    before = venv_prefix(tmp_path, env_file)
    env_file.write_text("dependencies:\n  - pip:\n      - a==2\n")
    assert venv_prefix(tmp_path, env_file) != before
    assert before.name.startswith("stack-")
