"""Env files: one source of truth per stack and device; the venv path follows the file's content; the driver's has
this checkout's library, editable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from build_env import (
    COMPLETE_MARKER,
    build_key,
    local_requirements,
    pip_arguments,
    pip_requirements,
    python_pin,
    venv_prefix,
)
from conftest import REPO, STACKS
from dlbench.io import file_sha256


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


def test_an_option_line_is_split_and_a_local_requirement_named_from_the_env_files_folder(tmp_path):
    """The driver's `-e ..` is the checkout, read from envs/ (as conda reads it); its path is part of the key that a
    complete venv records, so a checkout moved elsewhere rebuilds its driver. A stack's key is its file's hash alone."""
    (tmp_path / "envs").mkdir()
    env_file = tmp_path / "envs" / "driver.yaml"
    env_file.write_text("dependencies:\n  - pip:\n      - a==1\n      - -e ..  # the checkout\n")
    assert pip_arguments(pip_requirements(env_file)) == ["a==1", "-e", ".."]
    assert local_requirements(env_file) == [str(tmp_path.resolve())]
    assert build_key(env_file).splitlines() == [file_sha256(env_file), str(tmp_path.resolve())]
    stack = REPO / "envs" / f"{STACKS['torch-2.13']['env']['cpu']}.yaml"
    assert local_requirements(stack) == [] and build_key(stack) == file_sha256(stack)


def test_the_driver_installs_this_checkouts_library_editable():
    assert local_requirements(REPO / "envs" / "driver.yaml") == [str(REPO.resolve())]
    assert "-e" in pip_arguments(pip_requirements(REPO / "envs" / "driver.yaml"))


def test_the_driver_imports_the_library_of_the_checkout_it_was_built_in(tmp_path):
    """What `.venv/bin/python benchmarks/parity.py` needs: the library importable with no path set, from this checkout."""
    marker = Path(sys.prefix) / COMPLETE_MARKER
    if not marker.exists() or file_sha256(REPO / "envs" / "driver.yaml") not in marker.read_text():
        pytest.skip(f"{sys.prefix} is not a driver venv built from envs/driver.yaml")
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    imported = subprocess.run(
        [sys.executable, "-c", "import build_env, dlbench; print(dlbench.__file__)"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == str(REPO / "scripts" / "dlbench" / "__init__.py"), (
        f"{sys.prefix} was built in another checkout: python3 scripts/build_env.py envs/driver.yaml --prefix .venv"
    )
