"""workflow/schemas/run_record.schema.yaml and docs/run-record.md from the typed record (dlbench/record_fields.py), so
that the contract the tests validate records against and the page a user reads are the classes the code fills.

    .venv/bin/python scripts/record_docs.py            # rewrite both files
    .venv/bin/python scripts/record_docs.py --check    # exit 1 when either is not what the classes give

A unit test regenerates both and compares them with the committed files.
"""

import argparse
import sys

import yaml

from .. import record_fields
from .config_docs import entries, text, type_of
from .configuration import REPO

SCHEMA_FILE = REPO / "workflow" / "schemas" / "run_record.schema.yaml"
PAGE_FILE = REPO / "docs" / "run-record.md"
COMMAND = ".venv/bin/python scripts/record_docs.py"
SOURCE = "scripts/dlbench/record_fields.py"

INTRODUCTION = f"""\
# The run record

<!-- Generated from {SOURCE} by `{COMMAND}`: edit the classes, not this file. -->

Every training run writes `results/runs/<experiment>/rep<r>/record.json` (with `epochs.csv` and the telemetry trace
`telemetry.csv` beside it): one JSON object whose keys are the fields below, section by section, checked against
`workflow/schemas/run_record.schema.yaml` (its `schema_version` is in every record). A field under another, as
`provenance.host`, is a key of that field's object; `gpu_devices[].device` is a key of each object in its list.
A null is a figure not measured on this run, with the reason beside it where there is one. The aggregation turns
the records into the tables of [report.md](report.md); the summary.csv column says how the summary table takes a field
over an experiment's ok repeats: `gmean [95 %]`, the geometric mean with its 95 % interval beside the mean, standard
deviation, coefficient of variation, min and median (`<field>_gmean`, `<field>_ci95_low`, ...); `mean`, the mean alone
(`<field>_mean`); `mean [95 %] where reached`, the mean with its Student t interval over the repeats that have it (a
time to target: those that reached the target). Reading a record refuses a number outside the bounds its type column
gives, or not finite.
"""


def schema():
    """The record's JSON Schema file: every section's fields at the top level."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": (
            "One run record (results/runs/<experiment>/rep<r>/record.json), written by scripts/train.py, or by"
            " scripts/run_experiment.py for a process that died first."
        ),
        **record_fields.record_schema(),
    }


def schema_text():
    header = f"# Generated from {SOURCE}\n# by `{COMMAND}`: edit the classes, not this file.\n"
    # Flow style for the innermost mappings and lists: a field's schema reads on a line or two.
    return header + yaml.safe_dump(schema(), sort_keys=False, width=80, allow_unicode=True, default_flow_style=None)


def cell(value):
    return " ".join(str(value).split()).replace("|", "\\|")


def section_lines(section, root):
    """A section's heading, its prose and the table of its fields (nested keys after their field), read from the
    record's schema `root`."""
    properties = {field.name: root["properties"][field.name] for field in record_fields.fields(section)}
    lines = [
        f"## {section.TITLE}",
        "",
        text(section.__doc__),
        "",
        "| field | type | unit | summary.csv | meaning |",
        "|---|---|---|---|---|",
    ]
    for key, key_schema, _ in entries(properties, "", {}, root):
        unit, description = key_schema.get("unit", ""), key_schema.get("description", "")
        summary = record_fields.SUMMARIES.get(key_schema.get("summary"), "")
        lines.append(
            f"| `{key}` | {cell(type_of(key_schema, root))} | {cell(unit)} | {summary} | {cell(description)} |"
        )
    return [*lines, ""]


def page_text():
    root = schema()
    lines = [INTRODUCTION]
    for section in record_fields.SECTIONS:
        lines += section_lines(section, root)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, content in ((SCHEMA_FILE, schema_text()), (PAGE_FILE, page_text())):
        if args.check:
            if not path.exists() or path.read_text() != content:
                stale.append(str(path.relative_to(REPO)))
            continue
        path.write_text(content)
        print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print(f"out of date: {', '.join(stale)}: run `{COMMAND}`", file=sys.stderr)
        return 1
    return 0
