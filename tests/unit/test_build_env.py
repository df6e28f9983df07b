"""Env files: one source of truth per stack and device, each with a lock consistent with it; the venv path follows
the lock's content; the driver's has this checkout's library, editable."""

import os
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
    chosen_uv,
    describe,
    env_files,
    find_uv,
    install_command,
    lock_header,
    lock_path,
    lock_pins,
    lock_problem,
    local_requirements,
    mismatched_packages,
    pip_arguments,
    pip_configuration,
    pip_options,
    pip_requirements,
    python_pin,
    unlocked_reason,
    uv_source_options,
    venv_prefix,
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


def an_installer(name, monkeypatch, tmp_path):
    """The installer `name` for a real build, skipped where it is uv and none is found; uv with a cache of its own,
    so that no file another build left there stands in for the test's."""
    if name == "uv" and find_uv() is None:
        pytest.skip("no uv beside this interpreter, in the checkout's driver venv or on PATH")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return name


def a_tiny_env(folder):
    """tiny.yaml pinning dlbench-tiny==1.0, locked from a folder holding its one wheel, made here (no network)."""
    wheels = folder / "wheels"
    a_wheel(wheels, "dlbench_tiny", "1.0", "first")
    env_file = folder / "tiny.yaml"
    env_file.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - dlbench-tiny==1.0\n")
    write_lock(env_file, wheels)
    return env_file, wheels


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_lock_and_a_folder_of_wheels_build_an_env_with_no_index_and_a_changed_file_is_refused(
    installer, tmp_path, monkeypatch
):
    """The offline machine's case: the lock is made from the folder and the venv installed from it, no index asked,
    its bytecode compiled; a wheel whose file changed afterwards fails the build, naming the package."""
    installer = an_installer(installer, monkeypatch, tmp_path)
    env_file, wheels = a_tiny_env(tmp_path)
    assert lock_pins(lock_path(env_file)) == {"dlbench-tiny": "1.0"} and lock_problem(env_file) is None
    prefix = build_venv(env_file, tmp_path / "venv", wheels, installer)
    imported = subprocess.run(
        [prefix / "bin" / "python", "-c", "import dlbench_tiny; print(dlbench_tiny.VALUE)"],
        capture_output=True,
        check=False,
    )
    assert imported.stdout.decode().strip() == "first"
    assert list(prefix.glob("lib/python3.*/site-packages/__pycache__/dlbench_tiny.*.pyc"))
    a_wheel(wheels, "dlbench_tiny", "1.0", "tampered")
    # uv would install the file it verified before, from its cache (files of one name are taken to be one): a cache
    # without it makes uv read the changed file.
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "another-uv-cache"))
    with pytest.raises(SystemExit, match=r"tiny\.lock\.txt: the file of dlbench[-_]tiny==1\.0 does not match"):
        build_venv(env_file, tmp_path / "other", wheels, installer)


def test_uv_and_pip_build_venvs_that_are_described_alike(tmp_path, monkeypatch):
    """A venv's packages (and their hash, which run records carry) do not tell which installer built it."""
    an_installer("uv", monkeypatch, tmp_path)
    env_file, wheels = a_tiny_env(tmp_path)
    packages = {}
    for installer in ("pip", "uv"):
        python = build_venv(env_file, tmp_path / installer, wheels, installer) / "bin" / "python"
        packages[installer] = describe(env_file, python, "venv")["packages"]
    assert packages["uv"] == packages["pip"] and "dlbench_tiny==1.0" in packages["uv"]


def test_an_env_without_pip_is_described_with_its_packages(tmp_path):
    """An environment with no pip inside (an existing one) is listed with importlib.metadata."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv"], check=True)
    info = next((tmp_path / "venv").glob("lib/python3.*/site-packages")) / "dlbench_tiny-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dlbench_tiny\nVersion: 1.0\n")
    description = describe(None, tmp_path / "venv" / "bin" / "python", "existing")
    assert description["packages"] == ["dlbench_tiny==1.0"]


def an_executable(path):
    """A stand-in executable at path (a uv that is never run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_the_installer_is_uv_where_found_else_pip_unless_pip_is_chosen(tmp_path, monkeypatch):
    """uv beside the running interpreter, else in the checkout's driver venv, else on PATH; none: pip, and uv asked
    for is refused with the way to pip."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "running" / "python"))
    monkeypatch.setattr("build_env.DRIVER_VENV", tmp_path / "driver")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.delenv("DLBENCH_INSTALLER", raising=False)
    assert chosen_uv() is None and chosen_uv("auto") is None and chosen_uv("pip") is None
    with pytest.raises(SystemExit, match=r"installer uv: no uv .*--installer pip, or DLBENCH_INSTALLER=pip"):
        chosen_uv("uv")
    on_path = an_executable(tmp_path / "path" / "uv")
    assert chosen_uv() == chosen_uv("uv") == on_path
    in_driver = an_executable(tmp_path / "driver" / "bin" / "uv")
    assert chosen_uv() == in_driver
    beside = an_executable(tmp_path / "running" / "uv")
    assert chosen_uv() == beside and chosen_uv("pip") is None
    monkeypatch.setenv("DLBENCH_INSTALLER", "pip")
    assert chosen_uv() is None and chosen_uv("uv") == beside
    monkeypatch.setenv("DLBENCH_INSTALLER", "conda")
    with pytest.raises(SystemExit, match="'conda' .*choose one of auto, uv, pip"):
        chosen_uv()


def test_pips_configuration_becomes_uvs_options_for_the_same_sources():
    """uv reads no pip configuration: the sources it names are passed on, a PIP_* variable (`:env:`) overriding an
    [install] section overriding [global], as pip reads them; several indexes searched as pip searches them."""
    listing = (
        ":env:.default-timeout='180'\n"
        ":env:.find-links='/srv/wheels'\n"
        "global.cert='/etc/ssl/certs/ca.crt'\n"
        "global.extra-index-url='file:///mirror/a/simple\\nfile:///mirror/b/simple'\n"
        "global.find-links='/srv/other'\n"
        "global.index-url='https://global.example/simple'\n"
        "install.index-url='https://install.example/simple'\n"
    )
    assert uv_source_options(pip_options(listing)) == [
        *("--index-url", "https://install.example/simple"),
        *("--extra-index-url", "file:///mirror/a/simple", "--extra-index-url", "file:///mirror/b/simple"),
        *("--find-links", "/srv/wheels", "--index-strategy", "unsafe-best-match"),
    ]
    no_index = "global.no-index='true'\n:env:.find-links='/w /x'\n"
    assert uv_source_options(pip_options(no_index)) == ["--no-index", "--find-links", "/w", "--find-links", "/x"]
    assert uv_source_options(pip_options("")) == []


def test_pips_configuration_is_read_as_pip_reads_its_files_and_variables(tmp_path, monkeypatch):
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nfind-links = /from/file\nextra-index-url =\n    file:///a/simple\n    file:///b/simple\n"
        "[install]\nindex-url = https://install.example/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from/variable")
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    options = pip_configuration(sys.executable)
    assert options["find-links"] == "/from/variable" and options["index-url"] == "https://install.example/simple"
    assert options["extra-index-url"].split() == ["file:///a/simple", "file:///b/simple"]
    assert pip_configuration("/bin/false") == {}  # a Python without pip


def test_uv_is_told_the_wheels_folder_alone_or_else_pips_sources_and_compiles_bytecode(tmp_path, monkeypatch):
    monkeypatch.setattr("build_env.pip_configuration", lambda python, environment: {"find-links": "/srv/wheels"})
    python, uv = tmp_path / "venv" / "bin" / "python", "/x/uv"
    assert install_command(uv, python, None) == [
        *(uv, "pip", "install", "--python", str(python), "--compile-bytecode"),
        *("--find-links", "/srv/wheels"),
    ]
    wheels = tmp_path / "wheels"
    assert install_command(uv, python, wheels)[-3:] == ["--no-index", "--find-links", str(wheels)]
    assert install_command(None, python, None) == [str(python), "-m", "pip", "install", "--progress-bar", "off"]


def test_a_hash_mismatch_is_read_from_pips_words_and_from_uvs():
    pip_says = (
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package"
        " versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have"
        " tampered with them.\n    dlbench-tiny==1.0 from file:///w/dlbench_tiny-1.0-py3-none-any.whl:\n"
        "        Expected sha256 0000\n             Got        1111\n"
    )
    uv_says = "error: Failed to download `dlbench-tiny==1.0`\n  cause: Hash mismatch for `dlbench-tiny==1.0`\n\n"
    assert mismatched_packages(pip_says) == mismatched_packages(uv_says) == ["dlbench-tiny==1.0"]
    assert mismatched_packages("error: Failed to fetch: `https://pypi.example/simple/a/`") is None


def a_simple_index(folder, wheel):
    """A package index in a folder (a file:// URL, as a mirror serves one), with one wheel and its sha256."""
    page = folder / "simple" / wheel.name.split("-")[0].replace("_", "-") / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="{wheel.as_uri()}#sha256={file_sha256(wheel)}">{wheel.name}</a>\n')
    return (folder / "simple").as_uri()


def test_uv_builds_a_gpu_lock_from_its_index_though_a_folder_of_links_holds_a_local_build(tmp_path, monkeypatch):
    """A GPU env's lock pins `==1.0` from the index, and PIP_FIND_LINKS names a folder holding `1.0+cpu`, which pip
    passes over by its hash but uv would take (and fail on): uv is told the index alone, as the lock was made."""
    an_installer("uv", monkeypatch, tmp_path)
    index = a_simple_index(tmp_path / "index", a_wheel(tmp_path / "files", "dlbench_tiny", "1.0", "gpu build"))
    a_wheel(tmp_path / "links", "dlbench_tiny", "1.0+cpu", "cpu build")
    monkeypatch.setenv("PIP_INDEX_URL", index)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "links"))
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    env_file = tmp_path / "tiny-cuda.yaml"
    env_file.write_text("dependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - dlbench-tiny==1.0\n")
    write_lock(env_file)
    assert lock_pins(lock_path(env_file)) == {"dlbench-tiny": "1.0"}
    python = build_venv(env_file, tmp_path / "venv", installer="uv") / "bin" / "python"
    imported = subprocess.run(
        [python, "-c", "import dlbench_tiny; print(dlbench_tiny.VALUE)"], capture_output=True, check=False
    )
    assert imported.stdout.decode().strip() == "gpu build"
