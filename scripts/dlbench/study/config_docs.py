"""config/README.md from the config schema (workflow/schemas/config.schema.yaml): every key, nested ones too, with its
type, default, allowed values and description, so that the reference a user reads is the schema the workflow checks.

    .venv/bin/python scripts/config_docs.py            # rewrite config/README.md
    .venv/bin/python scripts/config_docs.py --check    # exit 1 when config/README.md is not what the schema gives

A unit test regenerates the page and compares it with the committed file.
"""

import argparse
import re
import sys
import textwrap
from pathlib import Path

import yaml

from .configuration import REPO, SCHEMA, config_schema

OUTPUT = REPO / "config" / "README.md"
COMMAND = ".venv/bin/python scripts/config_docs.py"
WIDTH = 120
NO_BREAK = "\x00"  # stands for a space inside a code span while the text is wrapped

INTRODUCTION = f"""\
# Configuration

<!-- Generated from {SCHEMA.relative_to(REPO)} by `{COMMAND}`: edit the schema, not this file. -->

Every key the workflow reads, with its type, default and meaning. The workflow reads `config.yaml` (the default
study), then each `--configfile` in turn, then `--config key=value` pairs, merged key by key as Snakemake merges
them; the result is checked against `workflow/schemas/config.schema.yaml` and every key that none of them sets
takes the default below (`config.yaml` sets several keys itself, e.g. `datasets`, `models` and `variants`).

A config that cannot run is refused before any job starts, every problem at once, each naming its key, e.g.
``config error in `batch_sizes.1`: 0 is less than the minimum of 1``;
`.venv/bin/python scripts/plan.py experiments` lists what a config plans without running anything. Change a key
and run again: only the jobs it affects run. On the command line Snakemake reads the items of a list as strings
(`--config batch_sizes=[64,128]` gives `'64'`): put lists of numbers in a file and pass it with `--configfile`.

Ready-made studies in this folder, each run with `.venv/bin/python -m snakemake --configfile config/<name>.yaml`:
`frameworks.yaml` (the frameworks people choose between today: PyTorch eager and torch.compile's modes, Keras 3 on
PyTorch, JAX and TensorFlow, Flax, PaddlePaddle), `transformers.yaml` (a Vision Transformer and a GPT language model in
every stack, fused attention against attention written out), `versions.yaml` (each framework at two releases), `seeds.yaml` (the GPU-sized grids
of earlier framework comparisons), `imagenet.yaml` (ResNet-50 on a local ImageNet copy, streamed), `scaling.yaml`
(ResNet-50 on 1, 2, 4 and 8 GPUs, each framework's data-parallel mechanism), `scaling-cpu.yaml` (LeNet on 1 and 2
CPU replicas: what each mechanism costs where the replicas share the cores), `operators.yaml` (the operator sweep,
11 operators x 4 frameworks, beside LeNet on digits).

## Keys
"""


def flow(value):
    """A value as it is written in a YAML config file, on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def code(value):
    return f"`{flow(value)}`"


def text(description):
    """A schema description as one paragraph at the repository's width (folded YAML keeps a final newline; some
    lines are broken by hand), code spans kept whole on one line."""
    words = re.sub(r"`[^`]+`", lambda span: span[0].replace(" ", NO_BREAK), " ".join(description.split()))
    return textwrap.fill(words, WIDTH, break_long_words=False, break_on_hyphens=False).replace(NO_BREAK, " ")


def resolve(schema, root):
    """The schema a local `$ref` points to, with the referring schema's own keywords over it. Not its default: the
    workflow fills a key's default only from the key's own schema (Snakemake's validate), so a key that refers to
    another has a default only where it states one itself."""
    if "$ref" not in schema:
        return schema
    target = root
    for part in schema["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    own = {key: value for key, value in target.items() if key != "default"}
    return {**own, **{key: value for key, value in schema.items() if key != "$ref"}}


def bounds(schema):
    """A number's range in words: `>= 1`, `> 0`, `1 to 1000`, `> 0, <= 0.5`."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return [f"{flow(low)} to {flow(high)}"]
    parts = []
    for keyword, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if keyword in schema:
            parts.append(f"{sign} {flow(schema[keyword])}")
    return [", ".join(parts)] if parts else []


def type_of(schema, root):
    """The type in words: `integer >= 1`, `list of integer >= 1`, `one of cpu, gpu`, `integer or null`."""
    schema = resolve(schema, root)
    if "const" in schema:
        return code(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(code(value) for value in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(type_of(option, root) for option in schema["oneOf"])
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    words = []
    for name in types:
        if name == "array":
            items = schema.get("items", {})
            words.append("list of " + (type_of(items, root) if items else "values"))
        elif name == "object" and isinstance(schema.get("additionalProperties"), dict):
            words.append("mapping of name to " + type_of(schema["additionalProperties"], root))
        elif name == "object":
            words.append("mapping")
        else:
            words.append(" ".join([name, *bounds(schema)]) if name in ("integer", "number") else name)
    word = " or ".join(words) or "any"
    if "pattern" in schema:
        word += f" matching `{schema['pattern']}`"
    return word


def default_text(name, schema, parent):
    """The default in words: the value as written in a config, or why there is none."""
    if "default" in schema:
        children = schema.get("properties")
        if children and schema["default"] == {key: child.get("default") for key, child in children.items()}:
            return "the defaults of its keys"
        return code(schema["default"])
    if name in parent.get("required", ()):
        return "none: required"
    return "none"


def entries(properties, prefix, parent, root):
    """(key, schema, parent schema) of every key under `properties`, depth first, nested keys after their parent:
    a mapping's keys as `a.b`, the keys of each entry of a list of mappings as `a[].b`, of each value of a mapping
    of named mappings as `a.<name>.b`."""
    for name, schema in properties.items():
        key = f"{prefix}{name}"
        yield key, schema, parent
        if "properties" in schema:
            yield from entries(schema["properties"], f"{key}.", schema, root)
        items = schema.get("items")
        if isinstance(items, dict) and "properties" in items:
            yield from entries(items["properties"], f"{key}[].", items, root)
        named = schema.get("additionalProperties")
        if isinstance(named, dict) and "properties" in named:
            yield from entries(named["properties"], f"{key}.<name>.", named, root)


def section(key, schema, parent, root):
    """The lines of one key's section: heading, type, default, constraints, description."""
    resolved = resolve(schema, root)
    level = "##" if "." not in key and "[]" not in key else "###"
    lines = [f"{level} `{key}`", ""]
    lines.append(f"- type: {type_of(schema, root)}")
    lines.append(f"- default: {default_text(key.rsplit('.', 1)[-1].removeprefix('[]'), resolved, parent)}")
    names = resolved.get("items", {}).get("propertyNames", {}).get("enum")  # a list of mappings with named keys
    if names:
        lines.append("- each entry's keys: " + ", ".join(f"`{name}`" for name in names))
    if resolved.get("minItems"):
        lines.append(f"- at least {resolved['minItems']} item{'s' if resolved['minItems'] > 1 else ''}")
    lines += ["", text(resolved.get("description", "")), ""]
    return lines


def render(schema=None):
    """The text of config/README.md for the schema (the workflow's by default)."""
    schema = schema or config_schema()
    keys = list(entries(schema["properties"], "", schema, schema))
    lines = [INTRODUCTION, text(schema.get("description", "")), "", "| key | type | default |", "|---|---|---|"]
    for key, key_schema, parent in keys:
        if "." in key or "[]" in key:
            continue
        resolved = resolve(key_schema, schema)
        default = default_text(key, resolved, parent)
        cells = [f"`{key}`", type_of(key_schema, schema), default]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    lines.append("")
    for key, key_schema, parent in keys:
        lines += section(key, key_schema, parent, schema)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(OUTPUT), help="where to write the page (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    page = render()
    out = Path(args.out)
    if args.check:
        if not out.exists() or out.read_text() != page:
            print(f"{out} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    out.write_text(page)
    print(f"wrote {out}")
    return 0
