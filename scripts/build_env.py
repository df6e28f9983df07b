"""Build (or reuse) the Python venv for one conda-format env file, and describe it.

The env file is the single source of truth: its `pip:` section is installed into a venv whose folder name
carries the file's hash, so an edited file gets a fresh venv and an unchanged one is reused (also across
working directories that share the venv root). pip runs in the env file's folder, as conda runs it, so a local
requirement names a folder from there: the driver's `-e ..` installs this checkout's library, editable
(pyproject.toml). Standard library only: it runs before any venv exists.

    python3 scripts/build_env.py envs/torch-2.13-cpu.yaml --venv-root .venvs --describe results/envs/x.json
    python3 scripts/build_env.py envs/driver.yaml --prefix .venv
    python3 scripts/build_env.py --existing /opt/torch/.venv/bin/python --describe results/envs/existing-x.json

An environment that already exists (a preinstalled venv, an HPC module's or a container's Python) is described,
never changed: `check_existing` validates it (the workflow calls it before any job) and `describe` lists its
packages with pip, or with importlib.metadata where it has no pip.
"""

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from dlbench.cli import run_main
from dlbench.io import file_sha256, write_json_atomic

COMPLETE_MARKER = ".dlbench-complete"


def pip_requirements(env_file):
    """The requirement lines of the `- pip:` block of a conda env file (one `- spec` per line)."""
    requirements, pip_indent = [], None
    for raw in Path(env_file).read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if stripped in ("- pip:", "-  pip:"):
            pip_indent = indent
        elif pip_indent is not None and stripped.startswith("- ") and indent > pip_indent:
            requirements.append(stripped[2:].strip().strip("\"'"))
        elif pip_indent is not None and stripped:
            pip_indent = None
    if not requirements:
        raise SystemExit(f"{env_file}: no `- pip:` section with requirements found")
    return requirements


def pip_arguments(requirements):
    """pip install's arguments for requirement lines: an option line (`-e ..`) split into its words, as pip reads
    it in a requirements file."""
    return [word for line in requirements for word in (shlex.split(line) if line.startswith("-") else [line])]


def local_requirements(env_file):
    """The folders and files the env file installs from the filesystem (`-e ..`), resolved from its folder."""
    folder = Path(env_file).absolute().parent
    words = pip_arguments(pip_requirements(env_file))
    return [str((folder / word).resolve()) for word in words if word.startswith((".", "/"))]


def build_key(env_file):
    """What a complete venv's marker holds: the env file's hash and the local paths it installs from. A checkout
    moved elsewhere so rebuilds its driver, whose editable install names the old path."""
    return "\n".join([file_sha256(env_file), *local_requirements(env_file)])


def python_pin(env_file):
    """The `python=X.Y` pin of the env file, or None."""
    for line in Path(env_file).read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- python="):
            return stripped.split("=", 1)[1].strip()
    return None


def venv_prefix(venv_root, env_file):
    """Where the venv for this exact env file content lives."""
    return Path(venv_root) / f"{Path(env_file).stem}-{file_sha256(env_file)[:12]}"


@contextlib.contextmanager
def locked(path):
    """An exclusive lock, so two workflows sharing a venv root never build the same venv at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build_venv(env_file, prefix):
    """Create the venv at prefix with the env file's pip requirements, unless a complete one is there."""
    prefix = Path(prefix).absolute()
    with locked(prefix.parent / f".{prefix.name}.lock"):
        marker = prefix / COMPLETE_MARKER
        if marker.exists() and marker.read_text().strip() == build_key(env_file):
            print(f"reusing {prefix}", flush=True)
            return prefix
        if marker.exists():  # a fixed --prefix (the driver's .venv) outlives edits of its env file
            print(f"{env_file} or a path it installs from changed since {prefix} was built: rebuilding it", flush=True)
        pin = python_pin(env_file)
        # The pinned interpreter where PATH has it (python3.11), else this one: which Python runs this script
        # (and so the workflow's driver path) does not decide what the venv is made with.
        interpreter = (shutil.which(f"python{pin}") if pin else None) or sys.executable
        made_with = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if pin and made_with != pin:
            print(f"WARNING: {env_file} pins python={pin} but the venv is made with Python {made_with}", flush=True)
        if prefix.exists():
            print(f"removing incomplete {prefix}", flush=True)
            shutil.rmtree(prefix)
        print(f"creating {prefix} for {env_file} with {interpreter} (Python {made_with})", flush=True)
        subprocess.run([interpreter, "-m", "venv", str(prefix)], check=True)
        requirements = pip_requirements(env_file)
        print("installing: " + " ".join(requirements), flush=True)
        pip_install = [str(prefix / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
        subprocess.run(pip_install + pip_arguments(requirements), check=True, cwd=Path(env_file).absolute().parent)
        (prefix / COMPLETE_MARKER).write_text(build_key(env_file) + "\n")
        return prefix


# Run by an env's own interpreter: the version of the first of the modules (the framework, or the tools) after
# importing them all, and the distributions installed, without pip.
INSPECT = """import importlib, importlib.metadata as metadata, json, platform, sys
modules = [importlib.import_module(name) for name in sys.argv[1].split(",") if name]
version = modules[0].__version__ if modules else None
packages = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata['Name']})
print(json.dumps({"version": version, "python_version": platform.python_version(), "packages": packages}))
"""


def inspect(python, module=None, environment=None):
    """{version of `module` as imported, python_version, packages} of the interpreter `python`; `module` may name
    several, comma-separated (the version is the first's)."""
    output = subprocess.run(
        [str(python), "-c", INSPECT, module or ""],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(environment or {})),
    )
    if output.returncode != 0:
        tail = " | ".join(output.stderr.strip().splitlines()[-2:])
        raise RuntimeError(f"`{python}` cannot import {module or 'its standard library'}: {tail}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def packages_sha256(packages):
    return hashlib.sha256("\n".join(packages).encode()).hexdigest()


def check_imports(python, module, environment=None):
    """The problem with `python` importing `module` (or several, comma-separated), or None; and the inspection when
    there is none."""
    if not (Path(python).is_file() and os.access(python, os.X_OK)):
        return f"interpreter {python} does not exist or is not executable", None
    try:
        return None, inspect(python, module, environment)
    except RuntimeError as error:
        return str(error), None


def check_existing(python, module, declared_version, environment=None):
    """The problem with using `python` for a stack whose framework imports as `module` at `declared_version` (a
    release prefix, e.g. 2.13 matches 2.13.0), or None; and the inspection when there is none."""
    problem, found = check_imports(python, module, environment)
    if problem:
        return problem, None
    version = str(found["version"])
    if version != declared_version and not version.startswith(declared_version + "."):
        return f"{python} imports {module} {version}, but the stack declares version {declared_version}", None
    return None, found


def describe(env_file, python, deployment):
    """What the env actually holds: interpreter, Python version, frozen packages and their hash. An existing env
    (no env file) is listed with pip freeze where it has pip, else with importlib.metadata."""
    freeze = subprocess.run([python, "-m", "pip", "freeze", "--all"], capture_output=True, text=True)
    found = inspect(python)
    packages = (
        sorted(line for line in freeze.stdout.splitlines() if line.strip())
        if freeze.returncode == 0
        else found["packages"]
    )
    version = found["python_version"]
    return {
        "env_file": str(env_file) if env_file else None,
        "env_file_sha256": file_sha256(env_file) if env_file else None,
        "deployment": deployment,
        "python": str(python),
        "python_version": version,
        "packages": packages,
        "packages_sha256": packages_sha256(packages),
        "built_on": platform.node(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_file", nargs="?", help="conda-format env file (not with --existing)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--venv-root", help="build under this folder, in a subfolder named by the file's hash")
    where.add_argument("--prefix", help="build exactly here")
    where.add_argument("--current", action="store_true", help="describe the running interpreter (conda deployment)")
    where.add_argument("--existing", help="describe this interpreter of an environment that already exists")
    parser.add_argument("--describe", help="write a JSON description of the env here")
    args = parser.parse_args()
    if (args.env_file is None) != bool(args.existing):
        parser.error("give an env file, or --existing PYTHON without one")
    if args.existing:
        python, deployment = args.existing, "existing"
    elif args.current:
        python, deployment = sys.executable, "conda"
    else:
        prefix = Path(args.prefix) if args.prefix else venv_prefix(args.venv_root, args.env_file)
        python, deployment = build_venv(args.env_file, prefix) / "bin" / "python", "venv"
    if args.describe:
        write_json_atomic(args.describe, describe(args.env_file, python, deployment))


if __name__ == "__main__":
    run_main(main)
