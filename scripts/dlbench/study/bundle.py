"""Result bundles: a study's results in one file that another study imports (config `imports`), so that one report
sets several machines side by side (docs/machines.md).

A bundle is a gzipped tar holding the study's run records with the epochs.csv and telemetry.csv beside each
(`runs/<experiment>/rep<N>/`), its env descriptions (`envs/`), env files and their locks (`env_files/`), the
effective config (`config.json`) and `manifest.json`: the format's version, the workflow commit, the record schema,
the machines the runs ran on (CPU model and generation, CPUs, memory, GPU, driver, CUDA) and the sha256 and size of
every other member. A bundle unpacked as it is (a folder holding manifest.json) is read the same way.

A bundle is untrusted input. Before any job, check() reads it through: every member a plain file under its own
name (no absolute path, no `..`, no link or device), within MEMBER_LIMIT and the whole within BUNDLE_LIMIT, listed in
the manifest with the digest it has, and every record a JSON object of a record schema this workflow reads; across
bundles, no run of one machine twice with different contents. unpack() checks it again as it writes it into its own
folder (results/imports/<digest>/), where every record must then also stand for its run as a local one must
(dlbench/record_check.py). A bad bundle is refused with its path and the reason; nothing outside its folder is
written. Standard library only: the driver checks bundles while it plans, the tools env writes and unpacks them.
"""

import dataclasses
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from dlbench import record as run_record
from dlbench.io import file_sha256, json_text, replacing
from dlbench.record_fields import SCHEMA_VERSION

FORMAT, VERSION = "dlbench result bundle", 1
MANIFEST = "manifest.json"
MEMBER_LIMIT = 256 << 20  # a telemetry trace of a day-long GPU run at 10 Hz is about 60 MB
BUNDLE_LIMIT = 8 << 30
MEMBER_COUNT_LIMIT = 200_000
RUN_FILES = ("record.json", "epochs.csv", "telemetry.csv")
# What names the machine a run ran on (dlbench/record_fields.py's Provenance): a bundle's fingerprint lists each.
MACHINE_KEYS = (
    "cpu_model",
    "cpu_generation",
    "cpu_cores",
    "cpu_physical_cores",
    "cpus_usable",
    "memory_mb",
    "gpu",
    "gpu_driver",
    "cuda",
)


class BundleError(Exception):
    """A bundle that cannot be imported: its path and why."""


@dataclasses.dataclass(frozen=True)
class Bundle:
    path: Path
    digest: str  # the manifest's sha256: the bundle's contents, whatever its file is called
    manifest: dict
    runs: dict  # {(machine, experiment_id, rep): record sha256}

    @property
    def name(self):
        """The folder the bundle is unpacked into (results/imports/<name>)."""
        return self.digest[:16]


# --- writing ---------------------------------------------------------------------------------------------------------


def machine_of(record):
    """The run's machine as a bundle's fingerprint names it: its provenance's machine keys, in order."""
    return tuple(record["provenance"].get(key) for key in MACHINE_KEYS)


def fingerprint(records):
    """The machines the records ran on, each with its hosts and the count of its runs."""
    machines = {}
    for record in records:
        entry = machines.setdefault(machine_of(record), {"hosts": set(), "runs": 0})
        entry["hosts"].add(record["provenance"].get("host"))
        entry["runs"] += 1
    return [
        dict(zip(MACHINE_KEYS, machine), hosts=sorted(map(str, entry["hosts"])), runs=entry["runs"])
        for machine, entry in machines.items()
    ]


def machines_words(manifest):
    """The machines of a bundle's manifest in a few words: GPU and CPU, with their runs."""
    return "; ".join(
        " / ".join(filter(None, [machine.get("gpu"), machine.get("cpu_model") or "an unnamed CPU"]))
        + f" ({machine.get('cpus_usable') or machine.get('cpu_cores')} of {machine.get('cpu_cores')} CPUs,"
        f" {machine.get('runs')} runs)"
        for machine in manifest.get("machines") or []
    )


def members_of(record_paths, env_descriptions, env_files, config):
    """{member name: bytes} of a bundle: each run's files, the env descriptions and files, the config."""
    members = {}
    for path in map(Path, record_paths):
        run = PurePosixPath("runs", path.parent.parent.name, path.parent.name)
        for name in RUN_FILES:
            if (path.parent / name).exists():
                members[str(run / name)] = (path.parent / name).read_bytes()
    members.update({f"envs/{Path(path).name}": Path(path).read_bytes() for path in env_descriptions})
    members.update({f"env_files/{Path(path).name}": Path(path).read_bytes() for path in env_files})
    members["config.json"] = json_text(config).encode()
    return members


def write(target, record_paths, env_descriptions, env_files, config, commit):
    """The bundle of a study at `target` (written whole or not at all); its manifest. A record that cannot stand for
    its run is left out and named on stderr: no study could import it."""
    records, readable = [], []
    for path in record_paths:
        try:
            records.append(run_record.read(path))
            readable.append(path)
        except run_record.UnreadableRecord as error:
            print(f"left out of the bundle: {error}", file=sys.stderr)
    record_paths = readable
    members = members_of(record_paths, env_descriptions, env_files, config)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "workflow_commit": commit,
        "record_schema_version": SCHEMA_VERSION,
        "created_at": run_record.utc_now(),
        "machines": fingerprint(records),
        "members": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in sorted(members.items())
        },
    }
    members[MANIFEST] = json_text(manifest).encode()
    with replacing(target) as temporary, tarfile.open(temporary, "w:gz") as archive:
        for name in [MANIFEST, *sorted(set(members) - {MANIFEST})]:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(members[name]), 0o644
            archive.addfile(info, io.BytesIO(members[name]))
    return manifest


# --- reading ---------------------------------------------------------------------------------------------------------


def safe_name(name):
    """The member's name if it stays inside its bundle (relative, no `..`, no empty part), else None."""
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("..", "") for part in path.parts) or "\\" in name:
        return None
    return str(path)


def tar_members(path):
    """(name, size, open) of every file of a bundle file, refusing what is not a plain file inside it."""
    try:
        archive = tarfile.open(path, "r:*")
    except (OSError, tarfile.TarError) as error:
        raise BundleError(f"{path}: not a readable bundle ({error})") from None
    with archive:
        for info in archive:
            name = safe_name(info.name)
            if name is None:
                raise BundleError(f"{path}: member {info.name!r} points outside the bundle")
            if info.isdir():
                continue
            if not info.isreg():
                raise BundleError(f"{path}: member {info.name!r} is not a plain file (a link or a device)")
            yield name, info.size, lambda info=info: archive.extractfile(info)


def folder_members(path):
    """The same of an unpacked bundle: every file under the folder, refusing links and what is not a plain file."""
    for folder, subfolders, files in os.walk(path):
        for entry in [*subfolders, *files]:
            full = Path(folder) / entry
            name = full.relative_to(path).as_posix()
            if full.is_symlink() or not (full.is_dir() or full.is_file()):
                raise BundleError(f"{path}: member {name!r} is not a plain file (a link or a device)")
        for entry in files:
            full = Path(folder) / entry
            yield full.relative_to(path).as_posix(), full.stat().st_size, lambda full=full: full.open("rb")


def read_members(path):
    """{name: bytes} of every member, within the limits on count and size."""
    members, total = {}, 0
    for name, size, open_member in folder_members(path) if Path(path).is_dir() else tar_members(path):
        total += size
        if size > MEMBER_LIMIT:
            raise BundleError(f"{path}: member {name} is {size} bytes, over the limit of {MEMBER_LIMIT}")
        if total > BUNDLE_LIMIT or len(members) >= MEMBER_COUNT_LIMIT:
            raise BundleError(f"{path}: over the limit of {BUNDLE_LIMIT} bytes or {MEMBER_COUNT_LIMIT} files")
        if name in members:
            raise BundleError(f"{path}: member {name} appears twice")
        with open_member() as stream:
            members[name] = stream.read(MEMBER_LIMIT + 1)
    return members


def manifest_of(path, members):
    """The bundle's manifest, checked against its members' digests and sizes."""
    try:
        manifest = json.loads(members[MANIFEST])
    except KeyError:
        raise BundleError(f"{path}: no {MANIFEST}: not a result bundle") from None
    except ValueError as error:
        raise BundleError(f"{path}: {MANIFEST} is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: {MANIFEST} is not a result bundle's manifest")
    if not isinstance(manifest.get("version"), int) or manifest["version"] > VERSION:
        raise BundleError(
            f"{path}: bundle format version {manifest.get('version')!r}; this workflow reads up to {VERSION}: "
            "update the workflow to import it"
        )
    listed = manifest.get("members") or {}
    unlisted = sorted(set(members) - set(listed) - {MANIFEST})
    missing = sorted(set(listed) - set(members))
    if unlisted or missing:
        raise BundleError(f"{path}: members not in its manifest: {unlisted}; missing members: {missing}")
    for name, expected in listed.items():
        digest = hashlib.sha256(members[name]).hexdigest()
        if digest != expected.get("sha256") or len(members[name]) != expected.get("bytes"):
            raise BundleError(f"{path}: member {name} does not match its manifest (changed after it was written)")
    return manifest


def records_of(path, members):
    """{member name: record} of every record of the bundle, each of a schema this workflow reads."""
    records = {}
    for name in sorted(members):
        parts = PurePosixPath(name).parts
        if parts[0] != "runs" or parts[-1] != "record.json":
            continue
        if len(parts) != 4 or not parts[2].startswith("rep") or not parts[2][3:].isdigit():
            raise BundleError(f"{path}: {name} is not at runs/<experiment>/rep<N>/record.json")
        try:
            record = json.loads(members[name])
        except ValueError as error:
            raise BundleError(f"{path}: {name} is not JSON ({error})") from None
        version = record.get("schema_version") if isinstance(record, dict) else None
        if not isinstance(version, int) or not isinstance(record.get("provenance"), dict):
            raise BundleError(f"{path}: {name} is not a run record")
        if version > SCHEMA_VERSION:
            raise BundleError(
                f"{path}: {name} is a run record of schema {version}; this workflow reads records up to schema "
                f"{SCHEMA_VERSION}: update the workflow to import it"
            )
        records[name] = record
    return records


def read_through(path):
    """(members, manifest, {member name: record}) of the bundle at path (a bundle file or an unpacked bundle's
    folder), every check above passed."""
    path = Path(path)
    if not path.exists():
        raise BundleError(f"{path}: no such bundle")
    members = read_members(path)
    return members, manifest_of(path, members), records_of(path, members)


def check(path):
    """The bundle at path, read through and checked."""
    members, manifest, records = read_through(path)
    runs = {run_key(record): hashlib.sha256(members[name]).hexdigest() for name, record in records.items()}
    return Bundle(Path(path), hashlib.sha256(members[MANIFEST]).hexdigest(), manifest, runs)


def sources(entries, base="."):
    """The bundles a config's `imports` names: a file, an unpacked bundle's folder, or a folder of bundle files
    (*.tar.gz); relative paths from `base` (the working directory)."""
    found = []
    for entry in entries:
        path = Path(base, entry)
        if path.is_dir() and not (path / MANIFEST).exists():
            inside = sorted(path.glob("*.tar.gz"))
            if not inside:
                raise BundleError(f"{path}: holds no bundle (*.tar.gz) and is no unpacked bundle ({MANIFEST})")
            found.extend(inside)
        else:
            found.append(path)
    return found


def check_all(entries, base="."):
    """{name: Bundle} of every bundle the config imports, each once, none holding a run of a machine that another
    holds with different contents."""
    bundles, owners = {}, {}
    for path in sources(entries, base):
        bundle = check(path)
        if bundle.name in bundles:
            continue  # the same contents named twice
        for run, digest in bundle.runs.items():
            other = owners.setdefault(run, (bundle, digest))
            if other[1] != digest:
                raise BundleError(
                    f"{path}: its run {run[1]} rep {run[2]} on {run[0][0]} is also in {other[0].path} with other "
                    "contents: import one of them"
                )
        bundles[bundle.name] = bundle
    return bundles


def unpack(path, digest, into):
    """The bundle at path, checked again and written into the folder `into` (replaced whole), its records read as
    local ones are; refused if its contents are no longer those its `digest` names."""
    members, _, _ = read_through(path)
    if hashlib.sha256(members[MANIFEST]).hexdigest() != digest:
        raise BundleError(f"{path}: changed since the workflow checked it: run the workflow again")
    into = Path(into)
    into.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=into.parent, prefix=f".{into.name}."))
    try:
        for name, data in members.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(data)
        for record_path in sorted(staging.glob("runs/*/rep*/record.json")):
            try:
                run_record.read(record_path)
            except run_record.UnreadableRecord as error:
                raise BundleError(f"{path}: {str(error).replace(str(staging) + os.sep, '')}") from None
        shutil.rmtree(into, ignore_errors=True)
        staging.rename(into)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return imported_records(into)


def imported_records(folder):
    """The record paths of an unpacked bundle."""
    return sorted(Path(folder).glob("runs/*/rep*/record.json"))


def run_key(record):
    """What names a run across studies: its machine, experiment and repeat."""
    return machine_of(record), record.get("experiment_id"), record.get("rep")


def merged(local, imported):
    """The local (path, record)s and the imported ones no local run stands for: a run in both (a study importing its
    own bundle) is taken once, from the local records; one whose files differ is refused, naming both."""
    own = {run_key(record): path for path, record in local}
    kept = []
    for path, record in imported:
        key = run_key(record)
        if key not in own:
            kept.append((path, record))
        elif file_sha256(path) != file_sha256(own[key]):
            raise BundleError(
                f"{path}: run {key[1]} rep {key[2]} of this machine is also a local run, {own[key]}, with other "
                "contents: remove the bundle from `imports`, or run the study in another folder"
            )
    return [*local, *kept]
