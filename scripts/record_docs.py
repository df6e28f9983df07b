"""Write workflow/schemas/run_record.schema.yaml and docs/run-record.md from the typed record
(dlbench/study/record_docs.py). Run with the driver from the repository root:

    .venv/bin/python scripts/record_docs.py [--check]
"""

from dlbench.cli import run_main
from dlbench.study.record_docs import main

if __name__ == "__main__":
    run_main(main)
