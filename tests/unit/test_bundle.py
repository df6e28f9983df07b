"""Result bundles (dlbench/study/bundle.py): written and read back equal, and every way an untrusted bundle can be bad
refused with its path and the reason before anything is written."""

import hashlib
import io
import json
import tarfile

import pytest
from dlbench.record import read as read_record
from dlbench.record_fields import SCHEMA_VERSION
from dlbench.study import bundle
from report_fixture import experiments, write_run

CONFIG = {"stacks": ["mxnet-1.9", "torch-2.13"], "repeats": 3}


def study(folder, count=2, speed_factor=1.0):
    """The records of the fixture's first `count` experiments, 3 repeats each, under folder/runs."""
    return [
        write_run(folder / "runs", experiment, speed * speed_factor, rep, start=10 * index + rep)
        for index, (experiment, speed) in enumerate(experiments()[:count])
        for rep in (1, 2, 3)
    ]


def written(folder, records):
    target = folder / "bundle.tar.gz"
    bundle.write(target, records, [], [], CONFIG, "f" * 40)
    return target


def members(path):
    with tarfile.open(path) as archive:
        return {info.name: archive.extractfile(info).read() for info in archive if info.isfile()}


def rewritten(path, members, manifest_of=None):
    """A bundle file holding these members, its manifest listing `manifest_of` (default: the members as they are)."""
    listed = {name: data for name, data in (manifest_of or members).items() if name != bundle.MANIFEST}
    manifest = json.loads(members[bundle.MANIFEST]) if bundle.MANIFEST in members else {}
    manifest["members"] = {
        name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)} for name, data in listed.items()
    }
    with tarfile.open(path, "w:gz") as archive:
        for name, data in {**members, bundle.MANIFEST: json.dumps(manifest).encode()}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_a_bundle_is_read_back_as_it_was_written(tmp_path):
    records = study(tmp_path)
    target = written(tmp_path, records)
    checked = bundle.check(target)
    assert len(checked.runs) == 6
    machine = checked.manifest["machines"][0]
    assert machine["runs"] == 6 and machine["cpu_model"] == read_record(records[0])["provenance"]["cpu_model"]
    assert (
        checked.manifest["workflow_commit"] == "f" * 40 and checked.manifest["record_schema_version"] == SCHEMA_VERSION
    )
    unpacked = bundle.unpack(target, checked.digest, tmp_path / "imports" / checked.name)
    assert len(unpacked) == 6
    for path in records:
        run = tmp_path / "imports" / checked.name / "runs" / path.split("/runs/")[1]
        for name in bundle.RUN_FILES:
            assert (run.parent / name).read_bytes() == (tmp_path / "runs" / path.split("/runs/")[1]).with_name(
                name
            ).read_bytes()
    assert json.loads((tmp_path / "imports" / checked.name / "config.json").read_text()) == CONFIG
    # unpacked as it is, a folder is the same bundle
    assert bundle.check(tmp_path / "imports" / checked.name).digest == checked.digest


def test_a_member_changed_after_writing_is_refused(tmp_path):
    target = written(tmp_path, study(tmp_path, count=1))
    contents = members(target)
    name = next(name for name in contents if name.endswith("epochs.csv"))
    contents[name] = contents[name].replace(b"0.1", b"0.2")
    with tarfile.open(target, "w:gz") as archive:  # the old manifest, a changed member
        for member, data in contents.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    with pytest.raises(bundle.BundleError, match=f"{target}: member {name} does not match its manifest"):
        bundle.check(target)


def test_records_of_a_newer_schema_are_refused_naming_both_versions(tmp_path):
    target = written(tmp_path, study(tmp_path, count=1))
    contents = members(target)
    name = next(name for name in contents if name.endswith("record.json"))
    record = json.loads(contents[name])
    contents[name] = json.dumps(dict(record, schema_version=SCHEMA_VERSION + 1)).encode()
    rewritten(target, contents)
    with pytest.raises(bundle.BundleError, match=f"schema {SCHEMA_VERSION + 1}; this workflow reads records up to "):
        bundle.check(target)


def test_a_run_imported_twice_with_different_contents_is_refused(tmp_path):
    first = written(tmp_path / "a", study(tmp_path / "a", count=1))
    second = written(tmp_path / "b", study(tmp_path / "b", count=1, speed_factor=1.5))
    assert list(bundle.check_all([first, first])) == [bundle.check(first).name]  # the same bundle twice: once
    with pytest.raises(bundle.BundleError, match=f"{second}: its run .* rep 1 on .* is also in {first} with other"):
        bundle.check_all([first, second])


@pytest.mark.parametrize(
    "member, why",
    [("../outside.txt", "points outside the bundle"), ("/etc/passwd", "points outside the bundle")],
)
def test_a_member_outside_the_bundle_is_refused(tmp_path, member, why):
    contents = members(written(tmp_path, study(tmp_path, count=1)))
    target = rewritten(tmp_path / "evil.tar.gz", {**contents, member: b"x"})
    with pytest.raises(bundle.BundleError, match=why):
        bundle.check(target)


def test_links_are_refused_in_a_bundle_file_and_in_an_unpacked_one(tmp_path):
    contents = members(written(tmp_path, study(tmp_path, count=1)))
    target = tmp_path / "linked.tar.gz"
    with tarfile.open(target, "w:gz") as archive:
        for name, data in contents.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("runs/secret")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        archive.addfile(link)
    with pytest.raises(bundle.BundleError, match="member 'runs/secret' is not a plain file"):
        bundle.check(target)
    folder = tmp_path / "unpacked"
    for name, data in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / "runs" / "secret").symlink_to("/etc/hostname")
    with pytest.raises(bundle.BundleError, match="member 'runs/secret' is not a plain file"):
        bundle.check(folder)


def test_a_member_the_manifest_does_not_list_and_a_missing_one_are_refused(tmp_path):
    contents = members(written(tmp_path, study(tmp_path, count=1)))
    extra = rewritten(tmp_path / "extra.tar.gz", {**contents, "runs/notes.txt": b"x"}, manifest_of=contents)
    with pytest.raises(bundle.BundleError, match=r"members not in its manifest: \['runs/notes.txt'\]"):
        bundle.check(extra)
    name = next(name for name in contents if name.endswith("telemetry.csv"))
    missing = rewritten(
        tmp_path / "missing.tar.gz", {key: data for key, data in contents.items() if key != name}, manifest_of=contents
    )
    with pytest.raises(bundle.BundleError, match=f"missing members: \\['{name}'\\]"):
        bundle.check(missing)


def test_what_is_no_bundle_is_named(tmp_path):
    (tmp_path / "notes.tar.gz").write_text("not a tar")
    with pytest.raises(bundle.BundleError, match="notes.tar.gz: not a readable bundle"):
        bundle.check(tmp_path / "notes.tar.gz")
    with pytest.raises(bundle.BundleError, match="no such bundle"):
        bundle.check(tmp_path / "absent.tar.gz")
    (tmp_path / "empty").mkdir()
    with pytest.raises(bundle.BundleError, match="empty: holds no bundle"):
        bundle.sources(["empty"], tmp_path)


def test_a_bundle_whose_record_does_not_stand_for_its_run_is_refused_when_unpacked(tmp_path):
    target = written(tmp_path, study(tmp_path, count=1))
    contents = members(target)
    name = next(name for name in contents if name.endswith("record.json"))
    record = json.loads(contents[name])
    contents[name] = json.dumps(dict(record, epoch_train_s=[2 * s for s in record["epoch_train_s"]])).encode()
    checked = bundle.check(rewritten(target, contents))  # digests agree: only reading the run shows it
    with pytest.raises(bundle.BundleError, match="record inconsistent: runs/.*/rep1/record.json"):
        bundle.unpack(target, checked.digest, tmp_path / "imports" / checked.name)
    assert not (tmp_path / "imports" / checked.name).exists()


def test_an_import_of_a_local_run_is_taken_once_and_a_different_one_refused(tmp_path):
    local = [(path, read_record(path)) for path in study(tmp_path / "local", count=1)]
    same = [(path, read_record(path)) for path in study(tmp_path / "same", count=1)]
    assert bundle.merged(local, same) == local
    other = [(path, read_record(path)) for path in study(tmp_path / "other", count=1, speed_factor=2)]
    with pytest.raises(bundle.BundleError, match="is also a local run"):
        bundle.merged(local, other)
