"""The repository files a script imports, found from its code: as rule inputs they make a library change rerun exactly
the jobs that run it, with no hand-kept list to drift. Standard library only (the driver imports it while planning).

A file's imports are read from its syntax tree, wherever they stand (inside functions too, so a lazy import counts):
absolute imports of modules under scripts/ (`dlbench...`, a top-level script such as `build_env`) and relative imports
inside its packages, followed transitively, with each package's __init__.py that Python executes on the way. Modules a
script loads by name at run time (importlib) cannot be read from its code: the caller names them; nor can the scripts a
script starts in a child process: CHILD_SCRIPTS names those.

The adapters are such modules: a job loads its stack's adapter by name, and an adapter that reaches another adapter
only on some backends or for streamed data (Keras 3: its backend's; streaming: tensorflow_raw's tf.data) loads that one
by name too, from the literals it declares at its top level, BACKEND_ADAPTERS ({backend: adapter}) and STREAM_ADAPTER,
which adapter_modules reads from its syntax tree (no framework imported). A job's files are then what its stack's
process imports: editing pytorch.py reruns Keras on torch, not Keras on JAX.

A job's code is one input, a manifest of those files' hashes (workflow/rules/code.smk) named by code_name: a rule's many
library files would make planning thousands of jobs several times slower, each input costing Snakemake work per job.
"""

import ast
import functools
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
ADAPTERS = "dlbench.adapters"
# Scripts that start another script in a child process, which imports show nothing of.
CHILD_SCRIPTS = {"scripts/run_experiment.py": "scripts/train.py"}


def code_name(script, adapter=None, backend=None, streamed=False, repository=REPOSITORY):
    """The name of a job's code (its manifest's, results/code/<name>.sha256): the script's stem, then the adapter
    modules the job loads by name (adapter_modules) joined by '+', e.g. run_experiment.keras3+jax_numpy; code_files
    reads it back."""
    stem = Path(script).stem
    if adapter is None:
        return stem
    return f"{stem}.{'+'.join(adapter_modules(adapter, backend, streamed, repository))}"


def code_files(name, repository=REPOSITORY):
    """The files the code code_name named covers: library_files of its script and its adapter modules."""
    stem, _, modules = name.partition(".")
    loaded = tuple(f"{ADAPTERS}.{module}" for module in modules.split("+") if module)
    return library_files(f"scripts/{stem}.py", extra_modules=loaded, repository=repository)


def adapter_modules(adapter, backend=None, streamed=False, repository=REPOSITORY):
    """The adapters a job of this adapter loads by name: itself, the one its BACKEND_ADAPTERS names for the stack's
    backend, and with streamed data its STREAM_ADAPTER; the adapter first, then the others sorted. ValueError for
    a backend an adapter with BACKEND_ADAPTERS declares none for: planning fails, not the job."""
    declared = adapter_declarations(Path(repository) / "scripts" / Path(*ADAPTERS.split(".")) / f"{adapter}.py")
    reached = {declared["STREAM_ADAPTER"]} if streamed and "STREAM_ADAPTER" in declared else set()
    if "BACKEND_ADAPTERS" in declared:
        backends = declared["BACKEND_ADAPTERS"]
        if backend not in backends:
            raise ValueError(
                f"adapter {adapter} declares no BACKEND_ADAPTERS entry for backend {backend!r}: {backends}"
            )
        reached.add(backends[backend])
    return (adapter, *sorted(reached - {adapter}))


@functools.cache
def adapter_declarations(path):
    """{name: value} of the top-level literals BACKEND_ADAPTERS and STREAM_ADAPTER an adapter assigns, if any
    (FileNotFoundError for an adapter that does not exist)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    return {
        target.id: ast.literal_eval(statement.value)
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        for target in statement.targets
        if isinstance(target, ast.Name) and target.id in ("BACKEND_ADAPTERS", "STREAM_ADAPTER")
    }


@functools.lru_cache(maxsize=None)
def library_files(*scripts, extra_modules=(), repository=REPOSITORY):
    """Sorted repository-relative paths of the scripts and of every file under scripts/ they import, transitively;
    extra_modules: a tuple of the dotted names of modules they load by name at run time, followed the same way.
    Cached per arguments: planning asks again for every job."""
    repository = Path(repository)
    root = repository / "scripts"
    pending = [repository / script for script in scripts]
    pending += [repository / CHILD_SCRIPTS[script] for script in scripts if script in CHILD_SCRIPTS]
    for name in extra_modules:
        pending.extend(named_module_files(name, root))
    reached = set()
    while pending:
        path = pending.pop()
        if path not in reached:
            reached.add(path)
            pending.extend(imported_files(path, root))
    return tuple(sorted(str(path.relative_to(repository)) for path in reached))


def named_module_files(name, root):
    """module_files of a module the caller names, which must exist: a misspelt adapter fails planning, not a job."""
    files = module_files(name, root)
    if len(files) < len(name.split(".")):  # one file per part of the name, each package's and then the module's
        raise ModuleNotFoundError(f"module {name} is not under {root}", name=name)
    return files


@functools.lru_cache(maxsize=None)
def imported_files(path, root):
    """The files under root that importing what `path` imports executes (one level)."""
    tree, package = ast.parse(path.read_bytes(), filename=str(path)), package_of(path, root)
    names = [name for statement in import_statements(tree.body) for name in imported_names(statement, package)]
    return tuple(file for name in names for file in module_files(name, root))


def import_statements(statements):
    """The imports among these statements and nested in them (functions, classes, if, try, with, loops, match).
    Statements only, as an import is one: the expressions, most of a tree, are not visited."""
    for statement in statements:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            yield from import_statements(getattr(statement, field, ()))


def package_of(path, root):
    """The dotted package a file under root belongs to (relative imports start there); None outside packages."""
    if not path.is_relative_to(root) or path.parent == root:
        return None
    return ".".join(path.parent.relative_to(root).parts)


def imported_names(node, package):
    """Dotted names an import statement may load: the module, and for `from m import a, b` also m.a and m.b, which
    are submodules where such files exist (`from . import data`) and attributes otherwise."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = absolute_base(node, package)
    if base is None:
        return []
    return [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]


def absolute_base(node, package):
    """The absolute module of `from <module> import ...`; None for a relative import that leaves the packages."""
    if node.level == 0:
        return node.module
    if package is None:
        return None
    parts = package.split(".")
    if node.level > len(parts):
        return None
    base = parts[: len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


@functools.lru_cache(maxsize=None)
def module_files(name, root):
    """The files under root that `import name` executes: each package's __init__.py on the way, then the module;
    those found before the name leaves root (a standard-library or framework module has none)."""
    files, folder = [], root
    parts = name.split(".")
    for position, part in enumerate(parts):
        package, module = folder / part / "__init__.py", folder / f"{part}.py"
        if package.is_file():
            files.append(package)
            folder = folder / part
        elif module.is_file() and position == len(parts) - 1:
            files.append(module)
        else:
            break
    return tuple(files)
