"""The library files a script imports are found from the code (dlbench/dependencies.py): imports wherever they stand,
modules loaded by name, each followed transitively (every job's inputs in a planned workflow:
tests/workflow/test_job_inputs.py)."""

import pytest
from dlbench.dependencies import library_files

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
    files = library_files("scripts/train.py", extra_modules=("dlbench.adapters.keras3",))
    assert {
        "scripts/dlbench/adapters/keras3.py",
        "scripts/dlbench/adapters/tensorflow_raw.py",
        "scripts/dlbench/mathmode.py",
        "scripts/dlbench/peaks.py",
    } <= set(files)
