"""Env files: one source of truth per stack and device, each with a lock consistent with it; the venv path follows
the lock's content; the driver's has this checkout's library, editable."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from build_env import (
    COMPLETE_MARKER,
    build_interpreter,
    build_key,
    build_venv,
    env_files,
    lock_header,
    lock_path,
    lock_pins,
    lock_problem,
    local_requirements,
    pip_arguments,
    pip_install,
    pip_requirements,
    python_pin,
    unlocked_reason,
    venv_prefix,
    venv_problem,
    write_lock,
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


def test_venv_folder_changes_with_the_lock_content(tmp_path):
    env_file = tmp_path / "stack.yaml"
    env_file.write_text("dependencies:\n  - pip:\n      - a==1\n")
    (tmp_path / "stack.lock.txt").write_text("a==1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    before = venv_prefix(tmp_path, env_file)
    (tmp_path / "stack.lock.txt").write_text("a==1 \\\n    --hash=sha256:" + "1" * 64 + "\n")
    assert venv_prefix(tmp_path, env_file) != before
    assert before.name.startswith("stack-")


def test_an_env_file_without_a_lock_has_no_venv_and_is_refused_with_the_command(tmp_path):
    env_file = tmp_path / "stack.yaml"
    env_file.write_text("dependencies:\n  - pip:\n      - a==1\n")
    with pytest.raises(SystemExit, match=r"has no lock .*python3 scripts/build_env.py --lock .*stack\.yaml"):
        venv_prefix(tmp_path, env_file)


def test_an_option_line_is_split_and_a_local_requirement_named_from_the_env_files_folder(tmp_path):
    """The driver's `-e ..` is the checkout, read from envs/ (as conda reads it); its path is part of the key that a
    complete venv records, so a checkout moved elsewhere rebuilds its driver. A stack's key is its file's hash alone."""
    (tmp_path / "envs").mkdir()
    env_file = tmp_path / "envs" / "driver.yaml"
    env_file.write_text("dependencies:\n  - pip:\n      - a==1\n      - -e ..  # the checkout\n")
    assert pip_arguments(pip_requirements(env_file)) == ["a==1", "-e", ".."]
    assert local_requirements(env_file) == [str(tmp_path.resolve())]
    (tmp_path / "envs" / "driver.lock.txt").write_text("a==1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    lock_digest = file_sha256(tmp_path / "envs" / "driver.lock.txt")
    assert build_key(env_file).splitlines() == [lock_digest, str(tmp_path.resolve())]
    stack = REPO / "envs" / f"{STACKS['torch-2.13']['env']['cpu']}.yaml"
    assert local_requirements(stack) == [] and build_key(stack) == file_sha256(lock_path(stack))


def test_the_driver_installs_this_checkouts_library_editable():
    assert local_requirements(REPO / "envs" / "driver.yaml") == [str(REPO.resolve())]
    assert "-e" in pip_arguments(pip_requirements(REPO / "envs" / "driver.yaml"))


def test_the_driver_imports_the_library_of_the_checkout_it_was_built_in(tmp_path):
    """What `.venv/bin/python benchmarks/parity.py` needs: the library importable with no path set, from this checkout."""
    marker = Path(sys.prefix) / COMPLETE_MARKER
    if not marker.exists() or file_sha256(lock_path(REPO / "envs" / "driver.yaml")) not in marker.read_text():
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


# Env files whose lock cannot be made on this project's machines: their lock file says why instead.
NOT_LOCKED = {"paddle-3.3-cuda"}


@pytest.mark.parametrize("env_file", env_files(), ids=lambda path: path.stem)
def test_every_env_file_has_a_lock_consistent_with_it(env_file):
    """Each pinned package is in the lock at the same release (`2.13.0` admits the local build `2.13.0+cpu`) and the
    header names the env file's digest, a platform and a Python; every locked package has its hash."""
    lock = lock_path(env_file)
    assert lock.exists(), f"{lock} is missing: python3 scripts/build_env.py --lock envs/{env_file.name}"
    header = lock_header(lock)
    if env_file.stem in NOT_LOCKED:
        assert header["not-locked"] and lock_pins(lock) == {}
        return
    assert lock_problem(env_file) is None
    assert header["platform"] and header["python"] == python_pin(env_file)
    text = lock.read_text()
    assert text.count("--hash=sha256:") == len(lock_pins(lock)) > len(pip_requirements(env_file)) - 1


def test_only_the_documented_env_files_are_not_locked():
    documented = (REPO / "docs" / "stacks.md").read_text()
    for env_file in env_files():
        if "not-locked" in lock_header(lock_path(env_file)):
            assert env_file.stem in NOT_LOCKED and f"`{env_file.stem}` is not locked" in documented


def a_locked_env(folder, lock_text=None):
    """envs/stack.yaml pinning a==1.0 in folder, with a lock that is consistent with it unless lock_text is given."""
    env_file = folder / "stack.yaml"
    env_file.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - a==1.0\n      - b[x]==2\n")
    target = build_interpreter(env_file)[1]
    header = f"# env-file-sha256: {file_sha256(env_file)}\n# platform: {target[0]}\n# python: {target[1]}\n"
    pins = "a==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\nB==2 \\\n    --hash=sha256:" + "1" * 64 + "\n"
    lock_path(env_file).write_text(lock_text or header + pins)
    return env_file, target, header, pins


def test_a_lock_out_of_date_with_its_env_file_is_refused_naming_the_file_and_the_command(tmp_path):
    env_file, target, header, pins = a_locked_env(tmp_path)
    assert lock_problem(env_file, target) is None
    command = r"`python3 scripts/build_env.py --lock .*stack\.yaml`"
    for lock_text, why in [
        (header + pins.replace("a==1.0", "a==1.1"), "pins a==1.0, it has 1.1"),
        (header + pins.split("B==2")[0], "pins b==2, which it lacks"),
        (header.replace(file_sha256(env_file), "0" * 64) + pins, "changed since it was locked"),
    ]:
        lock_path(env_file).write_text(lock_text)
        problem = lock_problem(env_file, target)
        assert "stack.lock.txt is out of date" in problem and why in problem
        with pytest.raises(SystemExit, match=command):
            build_venv(env_file, tmp_path / "venv")
    assert not (tmp_path / "venv").exists()


def test_a_lock_for_another_platform_or_python_is_refused(tmp_path):
    env_file, target, header, pins = a_locked_env(tmp_path)
    lock_path(env_file).write_text(header.replace(target[0], "macosx-14.0-arm64") + pins)
    with pytest.raises(SystemExit, match=f"is for macosx-14.0-arm64 with Python 3.11, .* builds with {target[0]}"):
        build_venv(env_file, tmp_path / "venv")
    lock_path(env_file).write_text(header.replace(f"python: {target[1]}", "python: 3.99") + pins)
    assert "with Python 3.99" in lock_problem(env_file, target)
    assert not (tmp_path / "venv").exists()


def test_an_env_file_that_cannot_be_locked_is_refused_with_the_reason_its_lock_file_gives(tmp_path):
    env_file, _, _, _ = a_locked_env(tmp_path, "# not-locked: b comes only from an index unreachable here\n")
    assert unlocked_reason(env_file) == "b comes only from an index unreachable here"
    with pytest.raises(SystemExit, match="stack.yaml has no lock: b comes only from an index unreachable here"):
        build_venv(env_file, tmp_path / "venv")
    assert not (tmp_path / "venv").exists()


def a_wheel(folder, name, version, content):
    """A pure-Python wheel, made here (no network): one module whose VALUE is content."""
    folder.mkdir(exist_ok=True)
    info = f"{name}-{version}.dist-info"
    members = {
        f"{name}.py": f"VALUE = {content!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: dlbench-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    members[f"{info}/RECORD"] = "".join(f"{member},,\n" for member in [*members, f"{info}/RECORD"])
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
    return path


def test_a_lock_and_a_folder_of_wheels_build_an_env_with_no_index_and_a_changed_file_is_refused(tmp_path):
    """The offline machine's case: the lock is made from the folder and the venv installed from it, no index asked;
    a wheel whose file changed afterwards fails the build, naming the package."""
    wheels = tmp_path / "wheels"
    a_wheel(wheels, "dlbench_tiny", "1.0", "first")
    env_file = tmp_path / "tiny.yaml"
    env_file.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - dlbench-tiny==1.0\n")
    write_lock(env_file, wheels)
    assert lock_pins(lock_path(env_file)) == {"dlbench-tiny": "1.0"} and lock_problem(env_file) is None
    python = build_venv(env_file, tmp_path / "venv", wheels) / "bin" / "python"
    imported = subprocess.run([python, "-c", "import dlbench_tiny; print(dlbench_tiny.VALUE)"], capture_output=True)
    assert imported.stdout.decode().strip() == "first"
    a_wheel(wheels, "dlbench_tiny", "1.0", "tampered")
    with pytest.raises(SystemExit, match=r"tiny\.lock\.txt: the file of dlbench[-_]tiny==1\.0 does not match"):
        build_venv(env_file, tmp_path / "other", wheels)
    assert not (tmp_path / "other").exists(), "a failed build leaves nothing behind"


def test_a_venv_gone_half_built_or_damaged_is_named_and_built_again(tmp_path, capsys):
    """What the workflow checks before any job (venv_problem), from the files alone: the build's marker, the
    interpreter, each locked package's version; a build finds the same and builds the venv again."""
    wheels = tmp_path / "wheels"
    a_wheel(wheels, "dlbench_tiny", "1.0", "first")
    env_file = tmp_path / "tiny.yaml"
    env_file.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - dlbench-tiny==1.0\n")
    write_lock(env_file, wheels)
    prefix = build_venv(env_file, tmp_path / "venv", wheels)
    assert venv_problem(prefix, env_file) is None
    info = next(prefix.glob("lib/python*/site-packages/dlbench_tiny-1.0.dist-info"))
    info.rename(info.with_name("dlbench_tiny-0.9.dist-info"))
    assert "venv holds dlbench-tiny 0.9, where" in venv_problem(prefix, env_file)
    shutil.rmtree(info.with_name("dlbench_tiny-0.9.dist-info"))
    assert venv_problem(prefix, env_file).endswith(
        f"lacks dlbench-tiny, where {lock_path(env_file)} pins dlbench-tiny==1.0"
    )
    capsys.readouterr()
    build_venv(env_file, prefix, wheels)
    assert "lacks dlbench-tiny" in capsys.readouterr().out and venv_problem(prefix, env_file) is None
    (prefix / "bin" / "python").unlink()
    assert "has lost its interpreter" in venv_problem(prefix, env_file)
    (prefix / COMPLETE_MARKER).unlink()
    assert "was not built whole (an interrupted or failed build)" in venv_problem(prefix, env_file)
    shutil.rmtree(prefix)
    assert venv_problem(prefix, env_file) == f"{prefix} is gone"


def test_a_local_requirement_whose_build_needs_what_the_lock_lacks_is_refused(tmp_path):
    """A checkout installed from the env file (`-e ./library`) is built without isolation by what the lock installed:
    a lock without its build backend is refused naming it, before pip would fetch one or fail."""
    library = tmp_path / "library"
    library.mkdir()
    (library / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64", "wheel"]\n')
    env_file = tmp_path / "stack.yaml"
    env_file.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - a==1.0\n      - -e ./library\n")
    target = build_interpreter(env_file)[1]
    header = f"# env-file-sha256: {file_sha256(env_file)}\n# platform: {target[0]}\n# python: {target[1]}\n"
    pin = "{}\\\n    --hash=sha256:" + "0" * 64 + "\n"
    lock_path(env_file).write_text(header + pin.format("a==1.0 ") + pin.format("Setuptools==84.2.1 "))
    assert "stack.lock.txt lacks what that build needs: wheel; pin it in the env file" in lock_problem(env_file)
    lock_path(env_file).write_text(
        header + pin.format("a==1.0 ") + pin.format("setuptools==84.2.1 ") + pin.format("wheel==0.46 ")
    )
    assert lock_problem(env_file, target) is None


def test_a_failed_install_names_pips_error_in_its_last_line(tmp_path):
    """The reason leads: a CI excerpt of a long pip log may show only the builder's last line."""
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\necho 'Installing collected packages: torch' >&2\n"
        "echo 'ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device' >&2\nexit 1\n"
    )
    python.chmod(0o755)
    with pytest.raises(SystemExit, match=r"exit status 1\) building from .*: ERROR: .*No space left on device"):
        pip_install(python, ["torch"], tmp_path, tmp_path / "x.lock.txt")
