"""Numbers on a shared machine: the default study run to its report on a fresh copy of the workflow, (a) as is and
(b) with a CPU hog (one busy core) injected for `--hog-seconds` in the middle. Printed per scenario: wall time, runs
redone and why, whether every run whose timed window overlapped the hog was caught, and what the statistics decide
after the redone runs: median and largest coefficient of variation of steady throughput across repeats, the widest
95% interval (high over low), the share of comparisons that decide (faster, slower or equivalent), and page 1's
groups with a winner proven, a tie proven or undecided, with the runs racing added.

Goals: every run overlapping the injected load detected and redone; then median CV at most 5 %, no interval wider
than 1.5x, at least 80 % of comparisons decisive; (a) within 15 minutes. Run it alone on the machine (nothing else
of yours running), from the repository root, with the stack venvs built:

    .venv/bin/python benchmarks/contention.py [--config config.yaml] [--hog-at 300] [--hog-seconds 60]
        [--scenarios clean hog] [--keep DIR]
"""

import argparse
import csv
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from dlbench.study.analysis.statistics import is_equivalence
from planning import copy_workflow

REPO = Path(__file__).resolve().parents[1]

DECISIVE = ("faster", "slower")  # and any "equivalent within ..." verdict


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def run_study(root, config, venv_root, hog_at, hog_seconds):
    """Run the workflow in root; (wall seconds, the hog's window as UTC datetimes or None)."""
    copy_workflow(root)
    study = yaml.safe_load(Path(config).read_text()) if config != "config.yaml" else {}
    base = yaml.safe_load((REPO / "config.yaml").read_text())
    (root / "config.yaml").write_text(yaml.safe_dump({**base, **study, "venv_root": str(venv_root)}))
    snakemake = [sys.executable, "-m", "snakemake"]  # the venv's bin/snakemake names the path it was installed at
    started = time.perf_counter()
    workflow = subprocess.Popen(
        [*snakemake, "--cores", "all"], cwd=root, stdout=subprocess.DEVNULL, stderr=open(root / "snakemake.log", "w")
    )
    window = None
    if hog_at is not None:
        try:
            workflow.wait(timeout=hog_at)
        except subprocess.TimeoutExpired:
            begin = datetime.datetime.now(datetime.timezone.utc)
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(hog_seconds)
            hog.kill()
            window = (begin, datetime.datetime.now(datetime.timezone.utc))
    workflow.wait()
    return time.perf_counter() - started, window


def when(text):
    return datetime.datetime.fromisoformat(text)


def overlapping(tries, window):
    """The tries (runs-table rows) whose timed window overlapped the hog's."""
    return [
        row
        for row in tries
        if row["contention_window_started_at"]
        and when(row["contention_window_started_at"]) < window[1]
        and window[0] < when(row["contention_window_finished_at"])
    ]


def scenario_figures(root, wall_s, window):
    tables = root / "results" / "tables"
    if not (tables / "comparisons.csv").exists():
        return {"wall_s": wall_s, "error": f"no tables: see {root / 'snakemake.log'}"}
    tries, summary = read_csv(tables / "runs.csv"), read_csv(tables / "summary.csv")
    comparisons, fastest = read_csv(tables / "comparisons.csv"), read_csv(tables / "fastest.csv")
    first_rounds = yaml.safe_load((root / "config.yaml").read_text())["repeats"]
    cvs = [float(row["train_images_per_s_cv"]) for row in summary if row["train_images_per_s_cv"]]
    widths = [
        float(row["train_images_per_s_ci95_high"]) / float(row["train_images_per_s_ci95_low"])
        for row in summary
        if row["train_images_per_s_ci95_low"]
    ]
    decided = [row for row in comparisons if row["verdict"] in DECISIVE or is_equivalence(row["verdict"])]
    contended = [row for row in tries if row["status"] == "contended"]
    figures = {
        "wall_s": wall_s,
        "runs": sum(row["final_try"] == "True" for row in tries),
        "contended_tries": len(contended),
        "never_clean": sum(row["status"] == "contended" and row["final_try"] == "True" for row in tries),
        "median_cv": statistics.median(cvs) if cvs else None,
        "max_cv": max(cvs, default=None),
        "widest_interval": max(widths, default=None),
        "comparisons": len(comparisons),
        "decisive": len(decided),
        "verdicts": {
            verdict: sum(row["verdict"] == verdict for row in comparisons)
            for verdict in sorted({row["verdict"] for row in comparisons})
        },
        "reasons": sorted({row["contention_reasons"].split(":")[0] for row in contended}),
        "groups": {
            flag: sum(row["confidence"] == flag for row in fastest)
            for flag in sorted({row["confidence"] for row in fastest})
        },
        "raced_runs": sum(row["final_try"] == "True" and int(row["rep"]) > first_rounds for row in tries),
    }
    if window:
        hit = overlapping(tries, window)
        missed = [row for row in hit if row["status"] == "ok"]
        figures.update(
            hog_overlapped=len(hit), hog_missed=[f"{row['experiment_id']} rep {row['rep']}" for row in missed]
        )
    return figures


def report(name, figures):
    print(f"\n== {name}")
    if "error" in figures:
        print(f"   FAILED after {figures['wall_s'] / 60:.1f} min: {figures['error']}")
        return
    print(
        f"   wall time {figures['wall_s'] / 60:.1f} min; {figures['runs']} runs; {figures['contended_tries']} "
        f"contended tries redone ({', '.join(figures['reasons']) or 'none'}); {figures['never_clean']} never clean"
    )
    if "hog_overlapped" in figures:
        print(
            f"   injected hog overlapped {figures['hog_overlapped']} tries; missed (ended ok): "
            f"{len(figures['hog_missed'])} {figures['hog_missed'][:5]}"
        )
    if figures["median_cv"] is not None:
        print(
            f"   steady throughput CV across repeats: median {figures['median_cv']:.1%}, max {figures['max_cv']:.1%} "
            f"(goal: median <= 5 %)"
        )
    if figures["widest_interval"] is not None:
        print(f"   widest 95% interval (high / low): {figures['widest_interval']:.2f}x (goal: <= 1.5x)")
    groups = figures["groups"]
    print(
        f"   page-1 groups: winner proven {groups.get('decisive', 0)}, tie proven {groups.get('equivalent', 0)}, "
        f"undecided {groups.get('inconclusive', 0)} of {sum(groups.values())} {groups}; {figures['raced_runs']} runs "
        "after the first rounds (racing)"
    )
    share = figures["decisive"] / figures["comparisons"] if figures["comparisons"] else 0
    print(
        f"   comparisons decisive: {figures['decisive']} of {figures['comparisons']} ({share:.0%}; goal >= 80 %): "
        f"{figures['verdicts']}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config.yaml", help="a study config layered on config.yaml")
    parser.add_argument("--scenarios", nargs="+", choices=["clean", "hog"], default=["clean", "hog"])
    parser.add_argument("--hog-at", type=float, default=300, help="seconds after the start of the hog scenario")
    parser.add_argument("--hog-seconds", type=float, default=60)
    parser.add_argument("--venv-root", default=str(REPO / ".venvs"))
    parser.add_argument("--keep", help="run in this folder (kept) instead of a temporary one")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as temporary:
        base = Path(args.keep or temporary)
        for name in args.scenarios:
            root = base / name
            root.mkdir(parents=True, exist_ok=False)
            hog = args.hog_at if name == "hog" else None
            print(
                f"{name}: running the study in {root}"
                + (f" (hog at {hog:g}s for {args.hog_seconds:g}s)" if hog is not None else ""),
                flush=True,
            )
            wall_s, window = run_study(root, args.config, Path(args.venv_root).absolute(), hog, args.hog_seconds)
            results[name] = scenario_figures(root, wall_s, window)
            report(name, results[name])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
