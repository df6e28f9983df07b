"""Every job that runs a repository script has exactly the library files it imports as inputs (through its code
manifest), as a forced dry run of the workflow plans them, so a library change reruns exactly the jobs it touches
(how the files are found: tests/unit/test_dependencies.py)."""

import functools
import json
import modulefinder
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import SNAKEMAKE, copy_repository
from dlbench.study.dependencies import adapter_modules

# A script that runs another script in a child process: imports do not show it.
CHILD_SCRIPTS = {"scripts/run_experiment.py": "scripts/train.py"}
# Every rule that runs a repository script, each planned by the study below (describe_existing_env needs a real
# existing environment at planning, so it is left out).
SCRIPT_RULES = {
    "build_env",
    "download_archive",
    "prepare_dataset",
    "index_image_folder",
    "train",
    "max_batch",
    "ops_benchmark",
    "aggregate",
    "aggregate_ops",
    "report",
}
# Rules rerun by their missing output alone, never by code: install_venv installs a venv whose marker is gone (a
# change to the builder must not reinstall every venv; rule build_env, which has the builder as input, runs after).
NOT_RERUN_BY_CODE = {"install_venv"}


def study_config(root):
    """The default config plus the rules it leaves out: the operator sweep (its schema default), max_batch searches,
    a downloaded dataset, an image folder both prepared to arrays and streamed (its folders only: planning reads no
    image)."""
    for split in ("train", "val"):
        for name in ("cat", "dog"):
            (root / "tiny" / split / name).mkdir(parents=True)
    config = yaml.safe_load((root / "config.yaml").read_text())
    config.pop("ops")
    config |= {
        "repeats": 1,
        "race": {"enabled": False},
        "max_batch": {"enabled": True},
        "image_folders": {"tiny": {"path": str(root / "tiny"), "resolution": 16}},
        "grids": [{}, {"datasets": ["tiny", "mnist"], "models": ["mlp"], "data_placements": ["device", "stream"]}],
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))


def planned_jobs(root):
    """{job: (rule, the files under scripts/ among its inputs, its shell command)} of a forced dry run in root; a
    job's code manifest (results/code/*.sha256) stands for the files among the inputs of the job that writes it."""
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "-F", "--printshellcmds", "--cores", "1"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    jobs, manifests = {}, {}
    for block in re.split(r"^(?=(?:local)?rule \w+:$)", result.stdout, flags=re.M)[1:]:
        rule = re.match(r"(?:local)?rule (\w+):", block)[1]
        fields = dict(re.findall(r"^ {4}(\w+): (.*)$", block, flags=re.M))
        command = re.search(r"^Shell command: (.*)$", block, flags=re.M)
        inputs = fields.get("input", "").split(", ")
        if rule == "code_manifest":
            manifests[fields["output"]] = inputs
        else:
            jobs[f"{rule} {fields.get('output')}"] = (rule, inputs, command[1] if command else "")

    def files(inputs):
        return {path for name in inputs for path in manifests.get(name, [name]) if path.startswith("scripts/")}

    return {job: (rule, files(inputs), command) for job, (rule, inputs, command) in jobs.items()}


def executed(command):
    """The repository scripts a shell command runs (with the scripts they start), and the adapter modules they load
    by name: those named by the JSON arguments (an experiment, a search, the ops options), with the adapters these
    load by name for the backend and streamed data (which tests/unit/test_dependencies.py holds to a table)."""
    words = shlex.split(command)
    scripts = {word for word in words if word.startswith("scripts/") and word.endswith(".py")}
    scripts |= {CHILD_SCRIPTS[script] for script in scripts if script in CHILD_SCRIPTS}
    arguments = [json.loads(word) for word in words if word.startswith("{")]
    modules = {
        f"dlbench.adapters.{module}"
        for argument in arguments
        if "adapter" in argument
        for module in adapter_modules(
            argument["adapter"], argument.get("backend"), argument.get("data_placement") == "stream"
        )
    }
    return tuple(sorted(scripts)), tuple(sorted(modules))


@functools.lru_cache(maxsize=None)
def imported_by_python(root, scripts, modules):
    """The files under root/scripts that the scripts and modules import, as the standard library's modulefinder
    finds them from the compiled code: a second opinion, independent of dependencies.py."""
    finder = modulefinder.ModuleFinder(path=[str(root / "scripts")])
    for script in scripts:
        finder.load_file(str(root / script))
    for module in modules:
        finder.import_hook(module)
    return {str(Path(module.__file__).relative_to(root)) for module in finder.modules.values() if module.__file__}


def input_mismatches(root):
    """Per file under scripts/: the jobs that import it without having it as an input, and the reverse."""
    jobs = planned_jobs(root)
    assert SCRIPT_RULES <= {rule for rule, _, _ in jobs.values()}
    assert all(not inputs for rule, inputs, _ in jobs.values() if rule in NOT_RERUN_BY_CODE)
    jobs = {job: planned for job, planned in jobs.items() if planned[0] not in NOT_RERUN_BY_CODE}
    expected = {job: imported_by_python(root, *executed(command)) for job, (_, _, command) in jobs.items()}
    problems = []
    for path in sorted(str(path.relative_to(root)) for path in (root / "scripts").rglob("*.py")):
        missing = sorted(job for job, (_, inputs, _) in jobs.items() if path in expected[job] - inputs)
        extra = sorted(job for job, (_, inputs, _) in jobs.items() if path in inputs - expected[job])
        problems += [f"{path} not an input of {len(missing)} jobs that import it, e.g. {missing[0]}"] if missing else []
        problems += [f"{path} an input of {len(extra)} jobs that do not import it, e.g. {extra[0]}"] if extra else []
    return jobs, problems


@pytest.fixture
def repository(tmp_path):
    copy_repository(tmp_path)
    study_config(tmp_path)
    return tmp_path


def test_every_job_has_exactly_the_library_files_it_imports_as_inputs(repository):
    jobs, problems = input_mismatches(repository)
    assert not problems, "\n".join(problems)
    # The drift this guards against: lazy and transitive imports, and the data rules' own library.
    keras = next(inputs for job, (_, inputs, _) in jobs.items() if job.startswith("train results/runs/keras-3-tensor"))
    assert {"scripts/dlbench/adapters/tensorflow_raw.py", "scripts/dlbench/mathmode.py"} <= keras
    prepare = next(inputs for rule, inputs, _ in jobs.values() if rule == "prepare_dataset")
    assert {"scripts/dlbench/io.py", "scripts/dlbench/study/image_folder.py"} <= prepare


def test_a_module_an_adapter_starts_importing_becomes_an_input_of_the_jobs_that_run_it(repository):
    (repository / "scripts" / "dlbench" / "newly_added.py").write_text("")
    with open(repository / "scripts" / "dlbench" / "adapters" / "tensorflow_raw.py", "a") as adapter:
        adapter.write("\n\ndef uses_a_new_module():\n    from .. import newly_added\n\n    return newly_added\n")
    jobs, problems = input_mismatches(repository)
    assert not problems, "\n".join(problems)
    reached = [job for job, (_, inputs, _) in jobs.items() if "scripts/dlbench/newly_added.py" in inputs]
    assert {job.split()[0] for job in reached} == {"train", "max_batch", "ops_benchmark"}
    assert any(job.startswith("train results/runs/keras-3-tensorflow") for job in reached)


def test_an_edited_library_module_reruns_exactly_the_code_manifests_that_cover_it(repository):
    """Each manifest written, then one library module edited: a dry run plans those manifests whose files include it
    and no other (a manifest rewritten is newer than the outputs of the jobs it is an input of, which run again)."""
    covered = {output: set() for output in re.findall(r"^ {4}output: (results/code/\S+)$", dry_run(repository), re.M)}
    result = subprocess.run([*SNAKEMAKE, "--cores", "1", *covered], cwd=repository, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    for manifest in covered:
        covered[manifest] = {line.split()[1] for line in (repository / manifest).read_text().splitlines()}
    assert "Nothing to be done" in dry_run(repository, *covered)
    for module in ("scripts/dlbench/mathmode.py", "scripts/dlbench/peaks.py", "scripts/dlbench/adapters/pytorch.py"):
        path = repository / module
        original, modified = path.read_bytes(), path.stat().st_mtime_ns
        path.write_bytes(original + b"# edited\n")
        planned = set(re.findall(r"^ {4}output: (results/code/\S+)$", dry_run(repository, *covered), re.M))
        assert planned == {manifest for manifest, files in covered.items() if module in files}, module
        assert planned, f"no manifest covers {module}"
        # The edit undone, its modification time too: the next module's edit is then the only change (no rerun).
        path.write_bytes(original)
        os.utime(path, ns=(modified, modified))


def dry_run(root, *targets):
    result = subprocess.run([*SNAKEMAKE, "-n", *targets], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
