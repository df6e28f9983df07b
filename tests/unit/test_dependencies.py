"""The library files a script imports are found from the code (dlbench/study/dependencies.py): imports wherever they
stand, modules loaded by name, each followed transitively, and the adapters a stack's process loads by name for its
backend and streamed data, so that an edit changes the code of exactly the jobs whose process imports the file (every
job's inputs in a planned workflow: tests/workflow/test_job_inputs.py)."""

import shutil
from hashlib import sha256
from pathlib import Path

import pytest
from dlbench import adapters
from dlbench.study.configuration import load_stacks
from dlbench.study.dependencies import REPOSITORY, code_files, code_name, library_files

FAKE_PACKAGE = {
    "scripts/main.py": "import json\nimport pkg.sub.beta\nfrom pkg import alpha\nfrom helper import HELP\n\n\n"
    "def later():\n    try:\n        from pkg import gamma\n    except ImportError:\n"
    "        gamma = None\n",
    "scripts/helper.py": "HELP = 1\n",
    "scripts/pkg/__init__.py": "",
    "scripts/pkg/alpha.py": "from . import delta, CONSTANT\n",
    "scripts/pkg/delta.py": "from .alpha import CONSTANT\n",
    "scripts/pkg/gamma.py": "",
    "scripts/pkg/unused.py": "",
    "scripts/pkg/sub/__init__.py": "",
    "scripts/pkg/sub/beta.py": "from ..gamma import *\nfrom numpy import linalg\n",
    "scripts/pkg/plugins/__init__.py": "",
    "scripts/pkg/plugins/plug.py": "import pkg.unused\n",
}


@pytest.fixture
def fake_repository(tmp_path):
    for name, text in FAKE_PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_imports_are_followed_wherever_they_stand(fake_repository):
    """Absolute, relative, dotted and function-level imports, a top-level script, the packages' __init__.py files;
    standard-library and third-party modules, attributes and unimported modules are not files of the script."""
    assert library_files("scripts/main.py", repository=fake_repository) == (
        "scripts/helper.py",
        "scripts/main.py",
        "scripts/pkg/__init__.py",
        "scripts/pkg/alpha.py",
        "scripts/pkg/delta.py",
        "scripts/pkg/gamma.py",
        "scripts/pkg/sub/__init__.py",
        "scripts/pkg/sub/beta.py",
    )


def test_an_import_cycle_ends(fake_repository):
    assert library_files("scripts/pkg/delta.py", repository=fake_repository) == (
        "scripts/pkg/__init__.py",
        "scripts/pkg/alpha.py",
        "scripts/pkg/delta.py",
    )


def test_modules_loaded_by_name_are_followed_like_imports(fake_repository):
    files = library_files("scripts/helper.py", extra_modules=("pkg.plugins.plug",), repository=fake_repository)
    assert files == (
        "scripts/helper.py",
        "scripts/pkg/__init__.py",
        "scripts/pkg/plugins/__init__.py",
        "scripts/pkg/plugins/plug.py",
        "scripts/pkg/unused.py",
    )


def test_a_module_named_for_loading_that_does_not_exist_is_refused(fake_repository):
    with pytest.raises(ModuleNotFoundError, match="module pkg.plugins.missing is not under"):
        library_files("scripts/main.py", extra_modules=("pkg.plugins.missing",), repository=fake_repository)


def test_the_answer_is_cached_per_arguments(fake_repository):
    first = library_files("scripts/main.py", repository=fake_repository)
    assert library_files("scripts/main.py", repository=fake_repository) is first


def test_an_adapter_brings_what_it_imports_in_turn():
    """Keras 3 on TensorFlow runs tensorflow_raw's pipeline and math mode: editing those reruns its jobs."""
    files = code_files(code_name("scripts/run_experiment.py", "keras3", "tensorflow"))
    assert {
        "scripts/train.py",
        "scripts/dlbench/adapters/keras3.py",
        "scripts/dlbench/adapters/tensorflow_raw.py",
        "scripts/dlbench/mathmode.py",
        "scripts/dlbench/peaks.py",
    } <= set(files)


# The adapters a training process of each adapter on each backend imports, read by hand from their code, and the one
# it streams through besides with streamed data.
IMPORTED_ADAPTERS = {
    ("mxnet_gluon", "gluon"): {"mxnet_gluon"},
    ("pytorch", "eager"): {"pytorch"},
    ("tensorflow_raw", "tf.nn"): {"tensorflow_raw"},
    ("keras3", "jax"): {"keras3", "jax_numpy"},
    ("keras3", "tensorflow"): {"keras3", "tensorflow_raw"},
    ("keras3", "torch"): {"keras3", "pytorch"},
    ("flax_nnx", "jax"): {"flax_nnx", "jax_numpy"},
    ("paddle_dygraph", "dygraph"): {"paddle_dygraph"},
}
STREAMS_THROUGH = {"keras3": "tensorflow_raw", "flax_nnx": "tensorflow_raw"}
STACKS = load_stacks()


def imported_adapters(stack, streamed):
    entry = STACKS[stack]
    stream = {STREAMS_THROUGH[entry["adapter"]]} if streamed and entry["adapter"] in STREAMS_THROUGH else set()
    return IMPORTED_ADAPTERS[entry["adapter"], entry["backend"]] | stream


def jobs_code():
    """{(script, stack, streamed): (code_name's arguments, the adapters its process imports)} of every job that loads
    an adapter: training (host or device data, and streamed), max_batch's probes and the operator benchmarks."""
    jobs = {}
    for stack, entry in STACKS.items():
        for streamed in (False, True):
            jobs["run_experiment", stack, streamed] = (
                ("scripts/run_experiment.py", entry["adapter"], entry["backend"], streamed),
                imported_adapters(stack, streamed),
            )
        jobs["max_batch", stack, False] = (
            ("scripts/max_batch.py", entry["adapter"], entry["backend"]),
            imported_adapters(stack, False),
        )
        if entry["ops_adapter"]:
            jobs["run_ops", stack, False] = (
                ("scripts/run_ops.py", entry["ops_adapter"], entry["backend"]),
                {entry["ops_adapter"]},
            )
    return jobs


def adapter_files(files):
    return {
        Path(file).stem
        for file in files
        if file.startswith("scripts/dlbench/adapters/") and Path(file).stem in adapters.names()
    }


@pytest.mark.parametrize("job", sorted(jobs_code()), ids=lambda job: f"{job[0]}-{job[1]}{'-stream' * job[2]}")
def test_a_job_depends_on_the_adapters_its_stack_imports_and_no_other(job):
    """Keras 3 reaches its backend's adapter only (BACKEND_ADAPTERS), Keras 3 and Flax tensorflow_raw's tf.data only
    with streamed data (STREAM_ADAPTER)."""
    arguments, imported = jobs_code()[job]
    assert adapter_files(code_files(code_name(*arguments))) == imported


def test_the_table_covers_every_stack():
    assert {(entry["adapter"], entry["backend"]) for entry in STACKS.values()} == set(IMPORTED_ADAPTERS)


def test_an_edit_changes_exactly_the_code_of_the_jobs_whose_process_imports_the_file(tmp_path):
    """In a copy of scripts/: each file edited in turn (and one that nothing imports, added), the hashes of every job's
    code files (as rule code_manifest writes them) change for exactly the jobs whose process imports it: the script's
    imports and those of the adapters the table above says its stack imports, followed by library_files."""
    shutil.copytree(REPOSITORY / "scripts", tmp_path / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "scripts" / "dlbench" / "imported_by_none.py").write_text("")
    jobs = jobs_code()
    covered = {
        job: code_files(code_name(*arguments, repository=tmp_path), tmp_path) for job, (arguments, _) in jobs.items()
    }
    expected = {
        job: library_files(
            arguments[0], extra_modules=tuple(f"dlbench.adapters.{name}" for name in imported), repository=tmp_path
        )
        for job, (arguments, imported) in jobs.items()
    }
    edited = sorted(str(path.relative_to(tmp_path)) for path in (tmp_path / "scripts").rglob("*.py"))
    digests = {path: sha256((tmp_path / path).read_bytes()).hexdigest() for path in edited}

    def manifests():
        return {job: "".join(f"{digests[file]}  {file}\n" for file in files) for job, files in covered.items()}

    before, changed = manifests(), {}
    for path in edited:
        with open(tmp_path / path, "a") as file:
            file.write("# edited\n")
        digests[path] = sha256((tmp_path / path).read_bytes()).hexdigest()
        after = manifests()
        changed[path] = {job for job in jobs if after[job] != before[job]}
        assert changed[path] == {job for job in jobs if path in expected[job]}, path
        before = after
    training = {(stack, streamed) for script, stack, streamed in changed["scripts/dlbench/adapters/pytorch.py"]}
    assert training == {
        (stack, streamed)
        for stack in ("torch-2.11", "torch-2.13", "torch-2.14", "keras-3-torch")
        for streamed in (False, True)
    }
    tensorflow = changed["scripts/dlbench/adapters/tensorflow_raw.py"]
    assert ("run_experiment", "keras-3-jax", True) in tensorflow and ("run_experiment", "flax-0.12", True) in tensorflow
    assert not {job for job in tensorflow if job[1] in ("keras-3-jax", "flax-0.12") and not job[2]}
    assert changed["scripts/dlbench/adapters/keras3.py"] == {
        job for job in jobs if STACKS[job[1]]["adapter"] == "keras3" and job[0] != "run_ops"
    }
    assert not changed["scripts/dlbench/imported_by_none.py"] and not changed["scripts/aggregate.py"]


def test_a_backend_an_adapter_declares_nothing_for_is_refused():
    with pytest.raises(ValueError, match="adapter keras3 declares no BACKEND_ADAPTERS entry for backend 'numpy'"):
        code_name("scripts/run_experiment.py", "keras3", "numpy")


# What code run inside a framework's environment may import beyond the standard library and the library itself: NumPy,
# Pillow (streamed images decoded in the loaders) and pynvml (GPU telemetry, imported on a GPU only); each adapter its
# own framework too. The driver's packages (Snakemake, pandas, PyYAML, jsonschema, matplotlib) are not in those envs.
IN_ENV_PACKAGES = {"numpy", "PIL", "pynvml", "dlbench"}
FRAMEWORKS = {"torch", "tensorflow", "keras", "jax", "jaxlib", "flax", "optax", "mxnet", "paddle"}


def top_level_imports(path):
    """The top-level names of the absolute imports in a file, wherever they stand."""
    import ast

    names = set()
    for node in ast.walk(ast.parse((REPOSITORY / path).read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_package_keeps_the_study_apart_from_what_runs_in_a_framework_env():
    """The package's boundary, as its layout shows it: what a training, max-batch or operator job runs inside a
    stack's env (the scripts, every library module they import and every adapter) is dlbench outside dlbench/study,
    and everything there imports the standard library and NumPy only (each adapter its framework), never the study's
    side (planning, aggregation, the report), so that no stack env needs the driver's packages."""
    import sys

    modules = tuple(f"dlbench.adapters.{name}" for name in adapters.names())
    in_env = library_files(
        "scripts/run_experiment.py", "scripts/max_batch.py", "scripts/run_ops.py", extra_modules=modules
    )
    library = sorted(str(path.relative_to(REPOSITORY)) for path in (REPOSITORY / "scripts/dlbench").rglob("*.py"))
    outside_study = [path for path in library if not path.startswith("scripts/dlbench/study/")]
    assert {path for path in in_env if path.startswith("scripts/dlbench/")} == set(outside_study)
    imported = library_files(*outside_study)
    problems = [f"{path}, of the study, is imported from outside it" for path in imported if "/study/" in path]
    for path in outside_study:
        allowed = set(sys.stdlib_module_names) | IN_ENV_PACKAGES | (FRAMEWORKS if "/adapters/" in path else set())
        problems += [f"{path} imports {name}" for name in sorted(top_level_imports(path) - allowed)]
    assert not problems, problems
    assert "pandas" in top_level_imports("scripts/dlbench/study/analysis/summary.py")  # the study's side has it
