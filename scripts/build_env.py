"""Build (or reuse) the Python venv for one conda-format env file, and describe it; or lock env files.

The env file names what a stack needs; its lock beside it (envs/<name>.lock.txt) pins every package that installs,
transitively, each with its sha256, for one platform and Python. A venv is installed from the lock exactly (hashes
required, no dependency resolution) in a folder named by the lock's hash: an edited lock gets a fresh venv and an
unchanged one is reused (also across working directories that share the venv root) while it stands whole; one half
built, or damaged since (its interpreter, or a locked package missing or changed: `venv_problem`), is built again, and
a failed build leaves nothing behind. A lock out of date with its env
file, or made for another platform or Python, is refused with the command that regenerates it. pip runs in the env
file's folder, as conda runs it, so a local requirement names a folder from there: the driver's `-e ..` installs this
checkout's library, editable (pyproject.toml), after the lock, built by the setuptools the lock pins. Standard library
only: it runs before any venv exists.

    python3 scripts/build_env.py envs/torch-2.13-cpu.yaml --venv-root .venvs --describe results/envs/x.json
    python3 scripts/build_env.py envs/driver.yaml --prefix .venv
    python3 scripts/build_env.py envs/torch-2.13-cpu.yaml --prefix /tmp/t --wheels wheels/  # no package index
    python3 scripts/build_env.py --lock envs/torch-2.13-cpu.yaml  # no file named: every env file in envs/
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
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from dlbench.cli import run_main
from dlbench.io import file_sha256, write_json_atomic, write_text_atomic

COMPLETE_MARKER = ".dlbench-complete"
REPO = Path(__file__).absolute().parents[1]
# A lock's header lines, `# key: value`: what it was made from and for, and how to make it again.
HEADER_KEYS = ("command", "env-file-sha256", "platform", "python", "not-locked")
# A GPU env file (by its name's device suffix) is locked from the package indexes alone, without pip's configuration
# files and PIP_FIND_LINKS: a local wheel folder may hold a CPU build of the same release, whose local version
# (`2.13.0+cpu`) pip prefers. PIP_INDEX_URL and PIP_EXTRA_INDEX_URL still apply.
GPU_ENV = re.compile(r"-(cuda|cu\d+)$")
HASH_MISMATCH = "DO NOT MATCH THE HASHES"


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


def is_local(line):
    """A requirement line that installs from the filesystem (`-e ..`): never locked, installed after the lock."""
    return any(word.startswith((".", "/")) for word in shlex.split(line))


def local_requirements(env_file):
    """The folders and files the env file installs from the filesystem (`-e ..`), resolved from its folder."""
    folder = Path(env_file).absolute().parent
    words = pip_arguments(pip_requirements(env_file))
    return [str((folder / word).resolve()) for word in words if word.startswith((".", "/"))]


def build_requirements(folder):
    """The normalized names of what a local folder's build needs (pyproject.toml's `build-system.requires`; pip's
    default, setuptools, where it names none)."""
    pyproject = Path(folder) / "pyproject.toml"
    if not pyproject.is_file():
        return ["setuptools"] if Path(folder).is_dir() else []
    requires = tomllib.loads(pyproject.read_text()).get("build-system", {}).get("requires", ["setuptools"])
    return [normalized(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]) for requirement in requires]


def unlocked_build_requirements(env_file, locked):
    """What the env file's local requirements need to build and its lock (`locked`, lock_pins) lacks: they are built
    without isolation (build_venv), by what the lock installed, so that nothing is fetched at build time."""
    needed = {name for folder in local_requirements(env_file) for name in build_requirements(folder)}
    return sorted(needed - set(locked))


def normalized(name):
    """A distribution name as packaging compares them (PEP 503): `Jinja2` and `jinja2`, `typing_extensions` and
    `typing-extensions` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins(env_file):
    """{normalized name: version} of the env file's `name==version` requirements, extras dropped."""
    pins = {}
    for line in pip_requirements(env_file):
        if not line.startswith("-") and "==" in line:
            name, version = line.split("==", 1)
            pins[normalized(name.split("[", 1)[0].strip())] = version.strip()
    return pins


def env_files(folder=REPO / "envs"):
    """Every env file of the folder (the conda-format files; stacks.yaml, the table of stacks, is none)."""
    return sorted(path for path in Path(folder).glob("*.yaml") if "dependencies:" in path.read_text())


def shown(path):
    """A path as the user names it: relative to the checkout where it is inside it."""
    path = Path(path).absolute()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def lock_path(env_file):
    """The lock beside an env file: envs/x.yaml -> envs/x.lock.txt."""
    env_file = Path(env_file)
    return env_file.with_name(f"{env_file.stem}.lock.txt")


def lock_command(env_file):
    """The command that (re)generates an env file's lock."""
    return f"python3 scripts/build_env.py --lock {shown(env_file)}"


def lock_header(lock):
    """The `# key: value` lines of a lock's header, as a dict."""
    header = {}
    for line in Path(lock).read_text().splitlines():
        key, _, value = line.removeprefix("# ").partition(": ")
        if line.startswith("# ") and key in HEADER_KEYS:
            header[key] = value.strip()
    return header


def lock_pins(lock):
    """{normalized name: version} of a lock's `name==version` lines."""
    pins = {}
    for line in Path(lock).read_text().splitlines():
        if "==" in line and not line.startswith(("#", " ")):
            name, version = line.split("==", 1)
            pins[normalized(name)] = version.split()[0]
    return pins


def same_release(locked_version, pinned_version):
    """A pin `==2.13.0` admits the local build `2.13.0+cpu`, as pip reads it (PEP 440)."""
    return locked_version == pinned_version or locked_version.startswith(pinned_version + "+")


def unlocked_reason(env_file):
    """Why an env file cannot be locked, where its lock file says so instead of pinning (its `not-locked:` line)."""
    lock = lock_path(env_file)
    return lock_header(lock).get("not-locked") if lock.exists() else None


def lock_problem(env_file, target=None):
    """Why the env file's lock cannot build its venv (None when it can): missing, not lockable, out of date with the
    env file (a pin missing or at another version, or the file's digest in the header differs), or made for another
    target than `target` (platform, Python X.Y) where given."""
    lock = lock_path(env_file)
    refresh = f"regenerate it with `{lock_command(env_file)}`"
    if not lock.exists():
        return f"{shown(env_file)} has no lock ({shown(lock)}): {refresh}"
    header = lock_header(lock)
    if unlocked_reason(env_file):
        return f"{shown(env_file)} has no lock: {unlocked_reason(env_file)}"
    locked = lock_pins(lock)
    for name, version in requirement_pins(env_file).items():
        if name not in locked:
            return f"{shown(lock)} is out of date: {shown(env_file)} pins {name}=={version}, which it lacks; {refresh}"
        if not same_release(locked[name], version):
            return (
                f"{shown(lock)} is out of date: {shown(env_file)} pins {name}=={version}, it has {locked[name]};"
                f" {refresh}"
            )
    unbuildable = unlocked_build_requirements(env_file, locked)
    if unbuildable:
        return (
            f"{shown(env_file)} installs from this checkout without build isolation, and {shown(lock)} lacks what"
            f" that build needs: {', '.join(unbuildable)}; pin it in the env file and {refresh}"
        )
    if header.get("env-file-sha256") != file_sha256(env_file):
        return f"{shown(lock)} is out of date: {shown(env_file)} changed since it was locked; {refresh}"
    made_for = (header.get("platform"), header.get("python"))
    if target and made_for != tuple(target):
        return (
            f"{shown(lock)} is for {made_for[0]} with Python {made_for[1]}, and this machine builds with {target[0]}"
            f" and Python {target[1]}: build on a machine of that platform, or lock the env here with"
            f" `{lock_command(env_file)}` (a new lock: a new environment)"
        )
    return None


def lock_sha256(env_file):
    """The identity of an env: its lock's digest (an env file without a lock has none: refused)."""
    if not lock_path(env_file).exists():
        raise SystemExit(lock_problem(env_file))
    return file_sha256(lock_path(env_file))


def build_key(env_file):
    """What a complete venv's marker holds: the lock's hash and the local paths the env file installs from. A checkout
    moved elsewhere so rebuilds its driver, whose editable install names the old path."""
    return "\n".join([lock_sha256(env_file), *local_requirements(env_file)])


def python_pin(env_file):
    """The `python=X.Y` pin of the env file, or None."""
    for line in Path(env_file).read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- python="):
            return stripped.split("=", 1)[1].strip()
    return None


def venv_prefix(venv_root, env_file):
    """Where the venv for this exact lock lives."""
    return Path(venv_root) / f"{Path(env_file).stem}-{lock_sha256(env_file)[:12]}"


# Run by the interpreter a venv is made with: its Python X.Y and platform, what a lock is made for.
TARGET = "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sysconfig.get_platform())"


def build_interpreter(env_file):
    """The interpreter that makes the env file's venv, with its (platform, Python X.Y): the pinned Python where PATH
    has it (python3.11), else this one, so which Python runs this script (and so the workflow's driver path) does
    not decide what the venv is made with."""
    pin = python_pin(env_file)
    python = (shutil.which(f"python{pin}") if pin else None) or sys.executable
    version, platform_name = subprocess.run(
        [python, "-c", TARGET], capture_output=True, text=True, check=True
    ).stdout.split()
    if pin and version != pin:
        print(f"WARNING: {shown(env_file)} pins python={pin} but its venv is made with Python {version}", flush=True)
    return python, (platform_name, version)


def index_arguments(wheels):
    """pip's arguments for a folder of wheels instead of any package index (an offline machine), or none."""
    return ["--no-index", "--find-links", str(Path(wheels).absolute())] if wheels else []


def write_lock(env_file, wheels=None):
    """Resolve the env file's requirements as pip installs them here (a dry run, reported) and write its lock: every
    package with the sha256 of the file pip chose, and a header naming the env file's digest, the platform and
    Python it is for and the command that regenerates it. Local requirements (`-e ..`) are not locked."""
    env_file = Path(env_file)
    python, target = build_interpreter(env_file)
    requirements = [line for line in pip_requirements(env_file) if not is_local(line)]
    environment = None
    if GPU_ENV.search(env_file.stem) and not wheels:
        kept = {name: value for name, value in os.environ.items() if name != "PIP_FIND_LINKS"}
        environment = dict(kept, PIP_CONFIG_FILE=os.devnull)
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        resolve = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        subprocess.run(
            [*resolve, "--report", str(report), *index_arguments(wheels), *pip_arguments(requirements)],
            check=True,
            cwd=env_file.absolute().parent,
            env=environment,
        )
        installs = json.loads(report.read_text())["install"]
    pins = []
    for item in sorted(installs, key=lambda item: normalized(item["metadata"]["name"])):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        sha256 = item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256")
        if not sha256:
            raise SystemExit(f"{shown(env_file)}: pip reports no sha256 for {name} {version}, so it cannot be locked")
        pins.append(f"{name}=={version} \\\n    --hash=sha256:{sha256}\n")
    header = (
        f"# The lock of {shown(env_file)}: every package its venv installs, each pinned with the sha256 of its file;\n"
        "# scripts/build_env.py installs it with hashes required and no dependency resolution. Made by pip from the\n"
        "# env file's requirements; regenerate it after editing the env file, with the command below.\n"
        f"# command: {lock_command(env_file)}\n"
        f"# env-file-sha256: {file_sha256(env_file)}\n"
        f"# platform: {target[0]}\n"
        f"# python: {target[1]}\n"
    )
    write_text_atomic(lock_path(env_file), header + "".join(pins))
    print(f"locked {shown(env_file)} in {shown(lock_path(env_file))}: {len(pins)} packages", flush=True)


def lock_all(paths, wheels=None):
    """Lock each env file (every one in envs/ where none is named: one whose lock file says why it cannot be locked
    stays so where it still cannot); the failures are listed at the end."""
    failed = []
    for env_file in paths or env_files():
        try:
            write_lock(env_file, wheels)
        except (subprocess.CalledProcessError, SystemExit) as error:
            if not paths and unlocked_reason(env_file):
                print(f"{shown(env_file)} stays without a lock: {unlocked_reason(env_file)}", flush=True)
                continue
            print(f"cannot lock {shown(env_file)}: {error}", file=sys.stderr, flush=True)
            failed.append(shown(env_file))
    if failed:
        raise SystemExit("not locked (see above): " + ", ".join(failed))


def pip_install(python, arguments, cwd, lock):
    """pip install into a venv; a failure ends the build in one line, which names the packages whose files do not
    match the lock's hashes where that is why, else pip's first error (pip's whole report stays in the log above)."""
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--progress-bar", "off", *arguments],
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
    )
    sys.stderr.write(done.stderr)
    if done.returncode == 0:
        return
    if HASH_MISMATCH in done.stderr:
        mismatched = re.findall(r"^\s+(\S+==\S+) from ", done.stderr, flags=re.MULTILINE)
        raise SystemExit(
            f"{shown(lock)}: the file of {', '.join(mismatched) or 'a package'} does not match the lock's sha256: a"
            " changed or tampered file, or a lock made from other files; regenerate the lock only where the new file"
            " is trusted"
        )
    errors = [line.strip() for line in done.stderr.splitlines() if line.startswith("ERROR:") or "[Errno" in line]
    raise SystemExit(
        f"pip install failed (exit status {done.returncode}) building from {shown(lock)}: "
        + (errors[0] if errors else "see above")
    )


@contextlib.contextmanager
def locked(path):
    """An exclusive lock, so two workflows sharing a venv root never build the same venv at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def installed_versions(prefix):
    """{normalized name: version} of the distributions in a venv's site-packages, read from their .dist-info folders
    (no interpreter started: the workflow checks every venv this way each time it starts)."""
    versions = {}
    for info in Path(prefix).glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        versions[normalized(name)] = version
    return versions


def venv_problem(prefix, env_file):
    """What keeps the venv at prefix from standing for the env file's lock, or None: gone, not built whole (an
    interrupted or failed build), built from another lock, its interpreter missing, or a locked package missing or
    changed since."""
    prefix = Path(prefix)
    if not prefix.is_dir():
        return f"{prefix} is gone"
    marker = prefix / COMPLETE_MARKER
    if not marker.exists():
        return f"{prefix} was not built whole (an interrupted or failed build)"
    if marker.read_text().strip() != build_key(env_file):
        return f"{prefix} was built from another {shown(lock_path(env_file))} or from paths that have moved"
    python = prefix / "bin" / "python"
    if not (python.exists() and os.access(python, os.X_OK)):
        return f"{prefix} has lost its interpreter ({python})"
    installed = installed_versions(prefix)
    for name, version in lock_pins(lock_path(env_file)).items():
        if installed.get(name) != version:
            found = f"holds {name} {installed[name]}" if name in installed else f"lacks {name}"
            return f"{prefix} {found}, where {shown(lock_path(env_file))} pins {name}=={version}"
    return None


def remove(prefix):
    """A venv's folder gone (a link to one: the link alone)."""
    if prefix.is_symlink():
        prefix.unlink()
    elif prefix.exists():
        shutil.rmtree(prefix)


def build_venv(env_file, prefix, wheels=None):
    """Create the venv at prefix from the env file's lock (then its local requirements), unless a whole one stands
    there; from a folder of wheels instead of any package index where `wheels` names one. A build succeeds whole or
    leaves nothing behind."""
    prefix = Path(prefix).absolute()
    python, target = build_interpreter(env_file)
    problem = lock_problem(env_file, target)
    if problem:
        raise SystemExit(problem)
    lock = lock_path(env_file).absolute()
    with locked(prefix.parent / f".{prefix.name}.lock"):
        problem = venv_problem(prefix, env_file)
        if problem is None:
            print(f"reusing {prefix}", flush=True)
            return prefix
        if prefix.is_symlink() or (prefix.exists() and any(prefix.iterdir())):  # not Snakemake's empty folder
            print(f"{problem}: removing it to build it again", flush=True)
        remove(prefix)
        try:
            install_venv(env_file, prefix, python, target, lock, wheels)
        except BaseException:
            remove(prefix)
            raise
        return prefix


def install_venv(env_file, prefix, python, target, lock, wheels):
    """Make the venv at prefix and install the lock into it, then the env file's local requirements; the marker
    last, so that only a whole build carries it."""
    print(f"creating {prefix} for {shown(env_file)} with {python} (Python {target[1]})", flush=True)
    subprocess.run([python, "-m", "venv", str(prefix)], check=True)
    folder, venv_python = Path(env_file).absolute().parent, prefix / "bin" / "python"
    print(f"installing {shown(lock)}: {len(lock_pins(lock))} packages, hashes required", flush=True)
    exact = ["--require-hashes", "--no-deps", *index_arguments(wheels), "-r", str(lock)]
    pip_install(venv_python, exact, folder, lock)
    local = [line for line in pip_requirements(env_file) if is_local(line)]
    if local:
        print("installing from this checkout: " + " ".join(local), flush=True)
        # built by the lock's setuptools, not by one an isolated build would fetch: nothing resolved at build time
        isolation = ["--no-deps", "--no-build-isolation", *index_arguments(wheels)]
        pip_install(venv_python, [*isolation, *pip_arguments(local)], folder, lock)
    (prefix / COMPLETE_MARKER).write_text(build_key(env_file) + "\n")


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
        # what a venv was installed from exactly; conda and existing environments have no lock
        "lock_sha256": lock_sha256(env_file) if deployment == "venv" else None,
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
    where.add_argument("--venv-root", help="build under this folder, in a subfolder named by the lock's hash")
    where.add_argument("--prefix", help="build exactly here")
    where.add_argument("--current", action="store_true", help="describe the running interpreter (conda deployment)")
    where.add_argument("--existing", help="describe this interpreter of an environment that already exists")
    where.add_argument(
        "--lock", nargs="*", metavar="ENV_FILE", help="write the lock of these env files (none named: of every one)"
    )
    parser.add_argument("--describe", help="write a JSON description of the env here")
    parser.add_argument("--wheels", help="install (or lock) from this folder of wheels, with no package index")
    args = parser.parse_args()
    if args.lock is not None:
        if args.env_file:
            parser.error("name the env files to lock after --lock")
        return lock_all(args.lock, args.wheels)
    if (args.env_file is None) != bool(args.existing):
        parser.error("give an env file, or --existing PYTHON without one")
    if args.existing:
        python, deployment = args.existing, "existing"
    elif args.current:
        python, deployment = sys.executable, "conda"
    else:
        prefix = Path(args.prefix) if args.prefix else venv_prefix(args.venv_root, args.env_file)
        python, deployment = build_venv(args.env_file, prefix, args.wheels) / "bin" / "python", "venv"
    if args.describe:
        write_json_atomic(args.describe, describe(args.env_file, python, deployment))


if __name__ == "__main__":
    run_main(main)
