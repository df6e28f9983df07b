"""Build (or reuse) the Python venv for one conda-format env file, and describe it.

The env file is the single source of truth: its `pip:` section is installed into a venv whose folder name
carries the file's hash, so an edited file gets a fresh venv and an unchanged one is reused (also across
working directories that share the venv root). Standard library only: it runs before any venv exists.

    python3 scripts/build_env.py envs/torch-2.13-cpu.yaml --venv-root .venvs --describe results/envs/x.json
    python3 scripts/build_env.py envs/driver.yaml --prefix .venv
"""

import argparse
import contextlib
import fcntl
import hashlib
import platform
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dlbench.io import write_json_atomic  # noqa: E402

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


def python_pin(env_file):
    """The `python=X.Y` pin of the env file, or None."""
    for line in Path(env_file).read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- python="):
            return stripped.split("=", 1)[1].strip()
    return None


def file_sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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
        if (prefix / COMPLETE_MARKER).exists():
            print(f"reusing {prefix}", flush=True)
            return prefix
        pin = python_pin(env_file)
        running = "{}.{}".format(*sys.version_info[:2])
        if pin and not running.startswith(pin):
            print(f"WARNING: {env_file} pins python={pin} but the venv is made with Python {running}", flush=True)
        if prefix.exists():
            print(f"removing incomplete {prefix}", flush=True)
            shutil.rmtree(prefix)
        print(f"creating {prefix} for {env_file}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
        requirements = pip_requirements(env_file)
        print("installing: " + " ".join(requirements), flush=True)
        pip_install = [str(prefix / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
        subprocess.run(pip_install + requirements, check=True)
        (prefix / COMPLETE_MARKER).write_text(file_sha256(env_file) + "\n")
        return prefix


def describe(env_file, python, deployment):
    """What the env actually holds: interpreter, Python version, frozen packages and their hash."""
    freeze = subprocess.run(
        [python, "-m", "pip", "freeze", "--all"], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], check=True, capture_output=True, text=True
    ).stdout.strip()
    packages = sorted(line for line in freeze if line.strip())
    return {
        "env_file": str(env_file),
        "env_file_sha256": file_sha256(env_file),
        "deployment": deployment,
        "python": str(python),
        "python_version": version,
        "packages": packages,
        "packages_sha256": hashlib.sha256("\n".join(packages).encode()).hexdigest(),
        "built_on": platform.node(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_file")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--venv-root", help="build under this folder, in a subfolder named by the file's hash")
    where.add_argument("--prefix", help="build exactly here")
    where.add_argument("--current", action="store_true", help="describe the running interpreter (conda deployment)")
    parser.add_argument("--describe", help="write a JSON description of the env here")
    args = parser.parse_args()
    if args.current:
        python, deployment = sys.executable, "conda"
    else:
        prefix = Path(args.prefix) if args.prefix else venv_prefix(args.venv_root, args.env_file)
        python, deployment = build_venv(args.env_file, prefix) / "bin" / "python", "venv"
    if args.describe:
        write_json_atomic(args.describe, describe(args.env_file, python, deployment))


if __name__ == "__main__":
    main()
