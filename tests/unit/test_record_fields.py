"""The typed run record (dlbench/record_fields.py): a new record holds its fields and no others, valid against the
schema generated from it, and a field's unit is stated where its name carries one."""

import re

import jsonschema
from dlbench import record_fields
from dlbench.record import base_record
from runs import ENV_DESCRIPTION, RECORD_SCHEMA, experiment

from conftest import REPO

# A name's ending and the unit it promises, most specific first.
UNIT_OF_SUFFIX = (
    ("_images_per_s", "images/s"),
    ("_tokens_per_s", "tokens/s"),
    ("_flops_per_s", "FLOP/s"),
    ("_mhz", "MHz"),
    ("_hz", "Hz"),
    ("_mb", "MiB"),
    ("_j", "J"),
    ("_w", "W"),
    ("_s", "s"),
)


def every_field(cls, prefix=""):
    """(dotted name, field) of a class's fields and of the classes they hold, depth first."""
    for field in record_fields.fields(cls):
        yield prefix + field.name, field
        for held in re.findall(r"\b([A-Z]\w+)\b", str(field.type)):
            inner = getattr(record_fields, held, None)
            if inner is not None and inner is not cls and hasattr(inner, "__dataclass_fields__"):
                yield from every_field(inner, f"{prefix}{field.name}.")


def test_a_new_record_holds_every_field_of_the_typed_record_valid_against_its_schema():
    record = base_record(experiment(), ENV_DESCRIPTION, REPO)
    assert sorted(record) == sorted(record_fields.names())
    assert record["provenance"]["experiment_sha256"] and record["status"] == "error"
    jsonschema.validate(record, RECORD_SCHEMA)


def test_a_field_whose_name_carries_a_unit_states_that_unit_and_every_field_has_a_meaning():
    problems = []
    for section in record_fields.SECTIONS:
        for name, field in every_field(section):
            if not field.metadata["description"].strip():
                problems.append(f"{name}: no meaning")
            promised = next((unit for suffix, unit in UNIT_OF_SUFFIX if name.endswith(suffix)), None)
            if promised and field.metadata["unit"] != promised:
                problems.append(f"{name}: unit {field.metadata['unit']!r}, its name says {promised!r}")
    assert not problems, "\n".join(problems)
