"""Env build time and disk: one env file's venv built fresh three ways, in one run, each into its own temporary
folder, and timed:

    locked, cold cache   scripts/build_env.py from the lock (hashes required, no resolution), pip's cache empty
    locked, warm cache   the same again, the cache now holding every file
    unlocked, warm       the env file's own pins installed as pip resolves them today (how venvs were built before
                         the locks), the cache warm

Printed per way: seconds and the venv's size on disk (MB); the cold build also prints the cache it filled. Run from
the repository root, alone (no other work beside it: quote the foreign load with the figures):

    python3 benchmarks/env_build.py [envs/torch-2.13-cpu.yaml]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from build_env import build_interpreter, is_local, pip_arguments, pip_requirements  # noqa: E402


def megabytes(folder):
    return (
        sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file() and not path.is_symlink()) / 1e6
    )


def timed(command, environment):
    """The command's seconds; its output is kept quiet unless it fails, when it is printed and the build stops."""
    started = time.perf_counter()
    result = subprocess.run(command, env=environment, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return time.perf_counter() - started


def locked_build(env_file, prefix, environment):
    return timed([sys.executable, REPO / "scripts" / "build_env.py", env_file, "--prefix", prefix], environment)


def unlocked_build(env_file, prefix, environment):
    """The env file's pins installed with pip resolving everything else, as before the locks."""
    python, _ = build_interpreter(env_file)
    requirements = [line for line in pip_requirements(env_file) if not is_local(line)]
    started = time.perf_counter()
    subprocess.run([python, "-m", "venv", prefix], check=True)
    pip = [Path(prefix) / "bin" / "python", "-m", "pip", "install", "--progress-bar", "off"]
    timed([*pip, *pip_arguments(requirements)], environment)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_file", nargs="?", default="envs/torch-2.13-cpu.yaml")
    env_file = str(Path(parser.parse_args().env_file).absolute())
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        environment = {**os.environ, "PIP_CACHE_DIR": str(root / "cache")}
        print(f"{Path(env_file).name}: fresh venvs, pip's cache in a new folder", flush=True)
        ways = [
            ("locked, cold cache", locked_build, "cold"),
            ("locked, warm cache", locked_build, "warm"),
            ("unlocked, warm cache", unlocked_build, "unlocked"),
        ]
        for label, build, folder in ways:
            seconds = build(env_file, str(root / folder), environment)
            line = f"  {label:<22} {seconds:6.1f} s  venv {megabytes(root / folder):7,.0f} MB"
            if folder == "cold":
                line += f"  (cache filled: {megabytes(root / 'cache'):,.0f} MB)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
