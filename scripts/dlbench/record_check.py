"""Whether a run record stands for its run: every number within the bounds its field declares
(dlbench/record_fields.py) and finite, the tables its run wrote beside it (epochs.csv, telemetry.csv) there and
unchanged (their digests in the record), its epoch times those of epochs.csv, and every figure the record derives from
its epochs following from them within rounding; no CPU run faster than its cores could compute. Older records,
without digests, are checked for their bounds, tables and epoch times only: their figures were derived by the
formulas of their day. A record that does not is no measurement: read() (dlbench/record.py) names it and the
aggregation counts it as an error run. Standard library only: the driver and the tools env read records.
"""

import csv
import math
from pathlib import Path

from .io import file_sha256
from .peaks import CPU_CORE_BOUND
from .record_fields import RUN_TABLES, record_schema, schema_types

# Figures derived from the epochs are written with full precision (repr) in both files: equal but for summation order.
ROUNDING = 1e-9
BOUNDS = {
    "minimum": (lambda value, bound: value >= bound, "below its least value"),
    "exclusiveMinimum": (lambda value, bound: value > bound, "not above its bound"),
    "maximum": (lambda value, bound: value <= bound, "above its greatest value"),
    "exclusiveMaximum": (lambda value, bound: value < bound, "not below its bound"),
}
NUMBERS = {"number", "integer", "null"}  # a field of these types holds a number, or null where "null" is among them


def tables_sha256(tables):
    """{table: sha256} of a run's tables ({table: path}), for its record (run_experiment.py, before the record)."""
    return {name: file_sha256(path) for name, path in tables.items()}


def problem(path, record):
    """What keeps the record at path from standing for its run, or None."""
    return (
        bounds_problem(record, record_schema())
        or attempts_problem(record)
        or tables_problem(Path(path).parent, record)
        or (figures_problem(Path(path).parent, record) if record["status"] == "ok" else None)
    )


def attempts_problem(record):
    """The first bound broken in the contended tries the record keeps, each a whole record of its own."""
    for index, attempt in enumerate(record.get("contended_attempts") or []):
        if found := bounds_problem(attempt, record_schema(), f"contended_attempts[{index}]"):
            return found
    return None


def bounds_problem(value, schema, name="record"):
    """The first number under `value` (a record, or a field's value as its `schema` describes it) that is not finite
    or lies outside the bounds its schema declares, or a value where its schema wants a number, named by its path in
    the record."""
    types = schema_types(schema)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if types and types <= NUMBERS and not number and not (value is None and "null" in types):
        return f"its {name} {value!r} is not a number"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return f"its {name} {value} is not finite"
        for keyword, (holds, words) in BOUNDS.items():
            if keyword in schema and not holds(value, schema[keyword]):
                return f"its {name} {value} is {words} {schema[keyword]}"
        return None
    if isinstance(value, list):
        parts = [(f"{name}[{index}]", item, schema.get("items") or {}) for index, item in enumerate(value)]
    elif isinstance(value, dict):
        nested = schema.get("properties") or {}
        other = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else {}
        prefix = "" if name == "record" else f"{name}."
        parts = [(f"{prefix}{key}", item, nested.get(key, other)) for key, item in value.items()]
    else:
        return None
    return next(filter(None, (bounds_problem(item, part, path) for path, item, part in parts)), None)


def tables_problem(folder, record):
    digests = record.get("tables_sha256") or {}
    for name in RUN_TABLES:
        if not (folder / name).is_file():
            return f"its {name} is gone"
        if name in digests and file_sha256(folder / name) != digests[name]:
            return f"its {name} changed since the run wrote it (sha256 differs from the record's tables_sha256)"
    return None


def epoch_table(folder):
    with open(folder / "epochs.csv", newline="") as handle:
        return [{key: float(value) if value else None for key, value in row.items()} for row in csv.DictReader(handle)]


def differs(value, expected):
    if value is None or expected is None:
        return value is not expected
    return not math.isclose(value, expected, rel_tol=ROUNDING, abs_tol=ROUNDING)


def figures_problem(folder, record):
    """The first figure of an ok record that its epochs.csv (and its own extra steady epochs) contradict."""
    try:
        rows = epoch_table(folder)
    except (ValueError, KeyError, csv.Error) as error:
        return f"its epochs.csv cannot be read ({error})"
    if [row["train_s"] for row in rows] != record["epoch_train_s"] or not rows:
        return f"its epochs.csv holds {len(rows)} epoch(s) whose train_s differ from the record's epoch_train_s"
    if not record.get("tables_sha256"):  # older records: derived by the formulas of their day
        return None
    images = record["images_per_epoch"]
    if any(row["images"] != images for row in rows):
        return f"its epochs.csv counts other images per epoch than the record's images_per_epoch {images}"
    window = [row["train_s"] for row in rows[1:]] + list(record.get("extra_steady_epochs_s") or [])
    derived = {
        "train_images_per_s": steady_throughput(images, [rows[0]["train_s"], *window]),
        "first_epoch_images_per_s": images / rows[0]["train_s"] if rows[0]["train_s"] else None,
        "time_to_target_s": time_to_target(rows, record),
        "final_test_accuracy": rows[-1]["test_accuracy"],
        "final_test_loss": rows[-1]["test_loss"],
    }
    if record.get("tokens_per_example"):
        derived["train_tokens_per_s"] = (derived["train_images_per_s"] or 0) * record["tokens_per_example"] or None
    for field, expected in derived.items():
        if differs(record.get(field), expected):
            return f"its {field} {record.get(field)} does not follow from its epochs.csv ({expected})"
    return ceiling_problem(record)


def steady_throughput(images_per_epoch, epoch_seconds):
    """Images/s over epochs 2..N (None with a single epoch: the first epoch carries compilation)."""
    steady = epoch_seconds[1:]
    return images_per_epoch * len(steady) / sum(steady) if steady and sum(steady) else None


def ceiling_problem(record):
    """A training rate no CPU computes: beyond what its cores could at the precision that ran
    (peaks.CPU_CORE_BOUND). On a GPU, its datasheet peak bounds model_flops_utilisation at 1 (record_fields)."""
    achieved, cores = record.get("train_flops_per_s"), (record.get("provenance") or {}).get("cpu_cores")
    bound = CPU_CORE_BOUND.get(record.get("mfu_precision"), CPU_CORE_BOUND["fp32"]) * (cores or 0)
    if record.get("device") == "cpu" and achieved and cores and achieved > bound:
        return (
            f"its train_flops_per_s {achieved:.3g} is more than {cores} CPU cores can compute "
            f"({bound:.3g} FLOP/s at most at {record.get('mfu_precision')})"
        )
    return None


def reached_target(row, accuracy, loss):
    """Whether an epoch's row reached the target: its test accuracy at least `accuracy`, or a language model's test
    loss at most `loss`, never with a loss that was not finite (NaN as trained, an empty cell as epochs.csv reads)."""
    finite = all(row[key] is not None and math.isfinite(row[key]) for key in ("train_loss", "test_loss"))
    return finite and (
        (accuracy is not None and row["test_accuracy"] >= accuracy) or (loss is not None and row["test_loss"] <= loss)
    )


def time_to_target(rows, record):
    """Training seconds to the first epoch that reached the record's target."""
    for index, row in enumerate(rows):
        if reached_target(row, record.get("target_accuracy"), record.get("target_loss")):
            return sum(previous["train_s"] for previous in rows[: index + 1])
    return None
