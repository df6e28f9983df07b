"""Whose run holds a working folder. Snakemake's lock says only that some run left its files; on a machine where
that run is still going, its advice to remove the lock (--unlock) would have two runs train and write the same
records. So each invocation that runs jobs notes its process, host and start in MARKER, and an invocation that finds
that process still going says so and stops, before Snakemake's own lock message; a marker whose process has ended
(a crash, kill -9) is stale and ignored, and Snakemake's advice then holds."""

import json
import os
import socket

from ..io import write_json_atomic
from ..process import process_alive

MARKER = ".snakemake/dlbench-run.json"


def note_run(pid, started, path=MARKER):
    """Note this invocation, which runs jobs from now on (the workflow's onstart hook)."""
    write_json_atomic(path, {"pid": pid, "host": socket.gethostname(), "started": started})


def live_run(path=MARKER):
    """The noted run ({pid, host, started}) where it is still going on this machine, else None."""
    try:
        with open(path) as handle:
            run = json.load(handle)
    except (OSError, ValueError):
        return None
    if run.get("host") != socket.gethostname() or not process_alive(run.get("pid"), "snakemake"):
        return None
    return run


def still_going(run):
    """What an invocation that would run jobs, or remove the lock, is told while `run` is going."""
    return (
        f"a run started at {run['started']} by pid {run['pid']} is still going in this folder: wait for it to end, "
        f"or stop it (Ctrl-C in its terminal, or kill -INT {run['pid']}) and run again; two runs at once would train "
        "and write the same records, so do not remove its lock (--unlock). A dry run (-n) works meanwhile."
    )


def snakemake_arguments(argv):
    """Snakemake's command-line arguments as its own parser reads them (so that `-np` counts as a dry run)."""
    from snakemake.cli import get_argument_parser

    return get_argument_parser().parse_known_args(argv)[0]


def takes_the_folder(argv):
    """Whether Snakemake, given these command-line arguments, writes in the folder or removes its lock: not a dry
    run, a lint or a listing."""
    reading = ("dryrun", "lint", "list_rules", "list_target_rules", "summary", "detailed_summary", "dag", "rulegraph")
    return not any(getattr(snakemake_arguments(argv), name, None) for name in reading)


def dry_run(argv):
    return bool(getattr(snakemake_arguments(argv), "dryrun", False))


def forget_run(path=MARKER):
    """The run ended (the workflow's onsuccess and onerror hooks)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
