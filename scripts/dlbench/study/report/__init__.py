"""The report's sections, one module each, in the order the reader meets them.

A section module has:
- TITLE: its heading;
- markdown(study, figures): its text - prose, tables, and the figures it draws into the `figures` folder with their
  links (`![caption](figures/<name>.svg)`) - or None when this study has nothing for it;
- ABSENT (where markdown can return None): why, one sentence, listed under "Not part of this study".
The sections print the aggregation's tables (Study); a statistic belongs in the aggregation, never here.
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dlbench.study.analysis.tables import OPS_TABLE, TABLES
from dlbench.study.report import (
    answer,
    batch_size,
    comparisons,
    contended,
    convergence,
    drift,
    end_to_end,
    engagement,
    epoch_time,
    failures,
    input_pipeline,
    machines,
    max_batch,
    method,
    ops,
    provenance,
    relative,
    resources,
    results,
    scaling,
    summary,
    throughput,
    versions,
    workload,
)

RESULT_SECTIONS = [
    answer,
    workload,
    summary,
    throughput,
    relative,
    machines,
    end_to_end,
    batch_size,
    epoch_time,
    drift,
    convergence,
    comparisons,
    results,
    engagement,
    resources,
    input_pipeline,
    versions,
    scaling,
    max_batch,
    failures,
    contended,
    ops,
]
NOT_IN_STUDY = "Not part of this study"  # the one list of the sections this study had nothing for
CLOSING_SECTIONS = [provenance, method]


@dataclass(frozen=True)
class Study:
    """The aggregation's tables as the sections read them. `runs` holds each run's final try; `tries` every try,
    contended ones before a run's final try included (listed apart, never averaged); `origin` what the study was run
    from: {"arguments": the --configfile and --config arguments, "config_sha256": ..., "exclusions": the config's
    `exclude` entries}, as far as known."""

    tries: pd.DataFrame
    runs: pd.DataFrame
    summary: pd.DataFrame
    epochs: pd.DataFrame
    comparisons: pd.DataFrame
    fastest: pd.DataFrame
    relative: pd.DataFrame
    versions: pd.DataFrame
    scaling: pd.DataFrame
    telemetry: pd.DataFrame
    max_batch: pd.DataFrame
    ops: pd.DataFrame
    workload: pd.DataFrame
    machines: pd.DataFrame
    rounds: pd.DataFrame
    origin: dict

    @classmethod
    def read(cls, folder, origin):
        tables = {name: pd.read_parquet(Path(folder) / f"{name}.parquet") for name in (*TABLES, OPS_TABLE)}
        tries = tables.pop("runs")
        return cls(tries=tries, runs=tries[tries["final_try"]], origin=origin, **tables)


def body(study, figures):
    """The document's body: every section with something to show, then one list of those without, each with why."""
    shown, absent = [], []
    for section in RESULT_SECTIONS:
        text = section.markdown(study, figures)
        if text is None:
            absent.append(f"- **{section.TITLE}**: {section.ABSENT}")
        else:
            shown.append(f"## {section.TITLE}\n\n{text}")
    if absent:
        shown.append(f"## {NOT_IN_STUDY}\n\n" + "\n".join(absent) + "\n")
    shown += [f"## {section.TITLE}\n\n{section.markdown(study, figures)}" for section in CLOSING_SECTIONS]
    return "\n".join(shown)
