"""Failed runs: every run that ended other than ok or contended, with its error."""

from dlbench.study.report.common import STATUS_LABEL, markdown_table

TITLE = "Failed runs"


def markdown(study, figures):
    failed = study.runs[~study.runs["status"].isin(["ok", "contended"])]
    if failed.empty:
        return "No run failed (a run the machine's other load kept from a clean measurement: next section).\n"
    rows = [
        [row["experiment_id"], row["rep"], STATUS_LABEL.get(row["status"], row["status"]), str(row["error"])[:300]]
        for _, row in failed.iterrows()
    ]
    return markdown_table(["experiment", "repeat", "status", "error"], rows)
