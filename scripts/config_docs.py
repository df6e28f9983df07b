"""Write config/README.md from the config schema (dlbench/study/config_docs.py). Run with the driver from the repository
root:

    .venv/bin/python scripts/config_docs.py [--check]
"""

from dlbench.cli import run_main
from dlbench.study.config_docs import main

if __name__ == "__main__":
    run_main(main)
