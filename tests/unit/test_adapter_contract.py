"""The adapter contract (scripts/dlbench/adapters/contract.py) holds for every adapter envs/stacks.yaml names, read
from the adapters' source, so no framework is imported: each member of its roles defined with the Protocol's
parameters, no other public name than those (and its imports), and calls into another adapter only to its contract
or its shared surface. Also the one loader, dlbench.adapters.load."""

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from dlbench import adapters, measure
from dlbench.adapters import contract
from dlbench.study.configuration import load_stacks
from dlbench.study.dependencies import adapter_declarations

FOLDER = Path(adapters.__file__).parent
KINDS = (
    ("posonlyargs", inspect.Parameter.POSITIONAL_ONLY),
    ("args", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    ("vararg", inspect.Parameter.VAR_POSITIONAL),
    ("kwonlyargs", inspect.Parameter.KEYWORD_ONLY),
    ("kwarg", inspect.Parameter.VAR_KEYWORD),
)


def source_of(name):
    return (FOLDER / f"{name}.py").read_text()


def claimed_capabilities(source):
    """The capabilities (contract.CAPABILITIES) an adapter's source defines any member of: each must then be whole."""
    defined = definitions(source)[0]
    return {capability for capability in contract.CAPABILITIES if contract.members(capability) & set(defined)}


def stack_roles():
    """{adapter: {Protocol}}: a stack's `adapter` is a TrainingAdapter with the capabilities it claims, its
    `ops_adapter` an OpsAdapter; an adapter other adapters call beyond the contract also has its shared surface
    (contract.SHARED)."""
    roles = {}
    for entry in load_stacks().values():
        roles.setdefault(entry["adapter"], set()).update(
            {contract.TrainingAdapter, *claimed_capabilities(source_of(entry["adapter"]))}
        )
        if entry["ops_adapter"]:
            roles.setdefault(entry["ops_adapter"], set()).add(contract.OpsAdapter)
    for name, surface in contract.SHARED.items():
        roles.setdefault(name, set()).add(surface)
    return roles


def parameters(function):
    """`a, b, *c`: a function's parameters (inspect's for a Protocol method, without self; ast's for a def)."""
    if isinstance(function, ast.AST):
        found = []
        for field, kind in KINDS:
            arguments = getattr(function.args, field)
            for argument in arguments if isinstance(arguments, list) else [arguments] if arguments else []:
                found.append(inspect.Parameter(argument.arg, kind))
    else:
        found = list(inspect.signature(function).parameters.values())[1:]
    return ", ".join(str(parameter) for parameter in found)


def definitions(source):
    """({name: its def, or None for a constant or class} at a module's top level, whether or not under an if or
    try; {names bound by its imports}). Names a function binds inside are its own."""
    defined, imported = {}, set()

    def visit(statements):
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined[statement.name] = statement
            elif isinstance(statement, ast.ClassDef):
                defined[statement.name] = None
            elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                names = [node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)]
                defined.update(dict.fromkeys(names))
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                imported.update((alias.asname or alias.name).split(".")[0] for alias in statement.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(getattr(statement, field, ()))

    visit(ast.parse(source).body)
    return defined, imported


ROLES = stack_roles()


def role_names(roles):
    return ", ".join(sorted(protocol.__name__ for protocol in roles))


def contract_problems(name, source, roles):
    """What in an adapter's source breaks the contract of its roles, one line each naming adapter and member."""
    defined, imported = definitions(source)
    problems, expected = [], set()
    for protocol in sorted(roles, key=lambda protocol: protocol.__name__):
        for member in sorted(contract.members(protocol)):
            expected.add(member)
            declared = getattr(protocol, member, None)
            where = f"{name} ({protocol.__name__}): {member}"
            if member not in defined:
                problems.append(f"{where} is missing")
            elif callable(declared) and defined[member] is None:
                problems.append(f"{where} must be a function ({parameters(declared)})")
            elif callable(declared) and parameters(defined[member]) != parameters(declared):
                problems.append(f"{where} takes ({parameters(defined[member])}), the contract ({parameters(declared)})")
            elif not callable(declared) and defined[member] is not None:
                problems.append(f"{where} must be a constant, not a function")
    for extra in sorted(set(defined) - expected - imported - contract.members(contract.LoadsByName)):
        if not extra.startswith("_"):
            problems.append(
                f"{name}: {extra} is public but no member of {role_names(roles)}: make it private (_{extra})"
            )
    return problems


def test_the_adapters_are_exactly_those_the_stacks_name():
    assert sorted(ROLES) == adapters.names()
    assert adapters.names() == sorted(
        path.stem for path in FOLDER.glob("*.py") if path.stem not in ("__init__", *adapters.SHARED)
    )


@pytest.mark.parametrize("name", sorted(ROLES))
def test_an_adapter_defines_its_contract_and_nothing_else_public(name):
    problems = contract_problems(name, source_of(name), ROLES[name])
    assert not problems, "\n".join(problems)


def loaded_by_name(tree, declared):
    """{id(call): the adapters it may give} of an adapter's calls that load another by name: load(STREAM_ADAPTER),
    load(BACKEND_ADAPTERS[...]), and calls of its functions that return such a load (keras3's _backend_adapter)."""

    def reached(call):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "load"):
            return None
        names = {node.id for node in ast.walk(call) if isinstance(node, ast.Name)}
        return sorted(
            {*(declared.get("BACKEND_ADAPTERS", {}).values() if "BACKEND_ADAPTERS" in names else ())}
            | ({declared["STREAM_ADAPTER"]} if "STREAM_ADAPTER" in names else set())
        )

    returning = {
        node.name: reached(node.body[-1].value)
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and isinstance(node.body[-1], ast.Return)
    }
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            modules = reached(node) or returning.get(getattr(node.func, "id", None))
            if modules:
                found[id(node)] = modules
    return found


@pytest.mark.parametrize("name", sorted(ROLES))
def test_an_adapter_calls_another_only_through_its_contract_or_shared_surface(name):
    """keras3 runs on pytorch's and tensorflow_raw's switches: those calls are the contract or contract.SHARED. A
    call on an adapter loaded by name (contract.LoadsByName) is checked against every adapter it may give."""
    tree = ast.parse(source_of(name))
    siblings = {
        alias.asname or alias.name: [alias.name]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module
        for alias in node.names
        if alias.name in adapters.names()
    }
    by_name = loaded_by_name(tree, adapter_declarations(FOLDER / f"{name}.py"))
    calls = {
        (tuple(siblings.get(getattr(node.value, "id", None)) or by_name.get(id(node.value), ())), node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
    }
    outside = sorted(
        f"{name} calls {' or '.join(modules)}.{attribute}, which is no member of "
        f"{' or '.join(role_names(ROLES[module]) for module in modules)}"
        for modules, attribute in calls
        if modules and attribute not in set().union(*(contract.members(role) for m in modules for role in ROLES[m]))
    )
    assert not outside, "\n".join(outside)
    seen = {modules for modules, _ in calls}
    assert name != "keras3" or ("jax_numpy", "pytorch", "tensorflow_raw") in seen, "keras3's backend calls unseen"


def test_the_check_names_the_adapter_and_the_member():
    """A module that misses a member, takes other parameters, and leaves a helper public fails on each, by name."""
    source = "\n".join(
        [
            "import numpy as np",
            "FRAMEWORK = 'x'",
            "def version(): pass",
            "def operators(device): pass",
            "def ops_input(array, device, dtype): pass",
            "def ops_output(value): pass",
            "def helper(): pass",
            "def _private(): pass",
        ]
    )
    assert contract_problems("fake", source, {contract.OpsAdapter}) == [
        "fake (OpsAdapter): operators takes (device), the contract (device, dtype)",
        "fake (OpsAdapter): ops_sync is missing",
        "fake: helper is public but no member of OpsAdapter: make it private (_helper)",
    ]


def test_the_contract_documents_every_member():
    for protocol in (contract.TrainingAdapter, contract.OpsAdapter, *contract.SHARED.values()):
        for member in contract.members(protocol):
            declared = getattr(protocol, member, None)
            if callable(declared):
                assert declared.__doc__, f"{protocol.__name__}.{member} has no docstring"
    source = (FOLDER / "contract.py").read_text()
    for constant in ("FRAMEWORK", "INPUT_WORK", "LOADER"):
        assert f'    {constant}: str\n    """' in source, f"{constant} has no docstring"


def test_the_loader_refuses_an_unknown_adapter_naming_the_known_ones():
    for name in ("torch", "contract", "__init__"):
        with pytest.raises(
            ValueError, match=f"unknown adapter '{name}': .* has flax_nnx, jax_numpy, keras3, mxnet_gluon"
        ):
            adapters.load(name)


def test_each_stack_has_the_capabilities_its_features_need_and_every_pass_names_what_it_needs():
    """Streamed data needs Streaming unless the stack names `stream-data` under `unsupported`; the input share, on by
    default, needs InputShare of every stack; Communication only applies with replicas, so only a stack with a
    data-parallel mechanism has it (one without the step it needs leaves it out, docs/scaling.md, "Communication"). The
    measurements after training name the capabilities they call (dlbench/measure)."""
    for stack, entry in load_stacks().items():
        roles, unsupported = ROLES[entry["adapter"]], entry.get("unsupported", {})
        if not any(key.split(" on ")[0] == "stream-data" for key in unsupported):
            assert contract.Streaming in roles, f"{stack} streams: {entry['adapter']} lacks Streaming"
        assert contract.InputShare in roles, f"{stack}: {entry['adapter']} lacks InputShare"
        if contract.Communication in roles:
            assert "data_parallel" in entry, f"{stack} runs no replicas: {entry['adapter']} defines Communication"
    for measurement in measure.PASSES:  # an empty NEEDS: the core alone (the latency pass's `logits`)
        assert isinstance(measurement.NEEDS, tuple), measurement.__name__
        assert set(measurement.NEEDS) <= set(contract.CAPABILITIES), measurement.__name__


def test_a_capability_is_whole_or_absent():
    """An adapter that defines part of a capability (a stream without its loader pass) is told what the rest is; one
    that defines none of it has no such role to fill."""
    partial = "LOADER = 'its loader'\ndef stream(meta, experiment, workers): pass\n"
    assert claimed_capabilities(partial) == {contract.Streaming}
    problems = contract_problems("fake", partial, claimed_capabilities(partial))
    assert problems == [
        "fake (Streaming): loader_batches is missing",
        "fake (Streaming): loader_pass is missing",
    ]
    assert claimed_capabilities("def train_epoch(model, staged, order, batch_size): pass\n") == set()


def dataclass_fields(source, name):
    """The annotated fields of the class `name` in a module's source (empty where it has none)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {item.target.id for item in node.body if isinstance(item, ast.AnnAssign)}
    return set()


def attribute_reads(source, variable):
    """(line, attribute) of every `variable.attribute` in a module's source."""
    return [
        (node.lineno, node.attr)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == variable
    ]


# Adapters whose streamed data is another adapter's (Keras and Flax stream through tf.data).
STREAMED_BY = {"keras3": "tensorflow_raw", "flax_nnx": "tensorflow_raw"}


@pytest.mark.parametrize("name", sorted(name for name, roles in ROLES.items() if contract.TrainingAdapter in roles))
def test_an_adapter_reads_only_the_fields_of_its_staged_data_and_model(name):
    """stage returns contract.StagedArrays or the adapter's _Staged, which adds to it; stream its _Streamed, a
    contract.StreamedData; build its _Model where it has one (Keras' is Keras' own model). A misspelt or missing
    field is found here, not in a run on a GPU. The staged and streamed fields are one set: a streamed path that
    reads a staged-only field (after checking STREAM) is not caught here but by the stream tests."""
    source = source_of(name)
    arrays = {field.name for field in dataclasses.fields(contract.StagedArrays)}
    staged = {"STREAM", *arrays, *dataclass_fields(source, "_Staged")}
    staged |= dataclass_fields(source_of(STREAMED_BY.get(name, name)), "_Streamed")
    problems = [
        f"{name}:{line}: staged.{field}" for line, field in attribute_reads(source, "staged") if field not in staged
    ]
    model = dataclass_fields(source, "_Model")
    if model:
        problems += [
            f"{name}:{line}: model.{field}" for line, field in attribute_reads(source, "model") if field not in model
        ]
    assert re.search(r"\b(_Staged|contract\.StagedArrays)\(", source), f"{name}: stage returns no StagedArrays"
    assert not problems, "not a field of the adapter's _Staged, _Streamed or _Model:\n" + "\n".join(problems)
