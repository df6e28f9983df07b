"""Write a study's result bundle, or unpack an imported one (dlbench/study/bundle.py says what a bundle holds and
how an import is checked).

    python scripts/bundle.py write --records results/runs/*/rep*/record.json --envs results/envs/*.json \
        --config '{...}' --out results/bundle.tar.gz
    python scripts/bundle.py unpack --bundle other.tar.gz --digest SHA256 --into results/imports/<name>
"""

import argparse
import json
import sys
import time
from pathlib import Path

from build_env import lock_path
from dlbench.cli import run_main
from dlbench.record import workflow_commit
from dlbench.study.bundle import BundleError, machines_words, unpack, write

CHECKOUT = Path(__file__).resolve().parents[1]  # the workflow's own checkout, whose commit the manifest names


def env_files(descriptions):
    """The env file and the lock of each env description that names one (an existing env names none)."""
    files = []
    for description in descriptions:
        env_file = json.loads(Path(description).read_text()).get("env_file")
        if env_file:
            files += [Path(env_file), lock_path(Path(env_file))]
    return sorted({path for path in files if path.exists()})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    writing = commands.add_parser("write", help="the study's bundle")
    writing.add_argument("--records", nargs="+", required=True)
    writing.add_argument("--envs", nargs="*", default=[], help="env descriptions (results/envs/*.json)")
    writing.add_argument("--config", required=True, help="the effective config, as JSON")
    writing.add_argument("--out", required=True)
    unpacking = commands.add_parser("unpack", help="an imported bundle, checked, into its folder")
    unpacking.add_argument("--bundle", required=True)
    unpacking.add_argument("--digest", required=True, help="its manifest's sha256 when the workflow checked it")
    unpacking.add_argument("--into", required=True)
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        if args.command == "write":
            manifest = write(
                args.out,
                args.records,
                args.envs,
                env_files(args.envs),
                json.loads(args.config),
                workflow_commit(CHECKOUT),
            )
            size = Path(args.out).stat().st_size / 1e6
            print(f"{len(manifest['members'])} files -> {args.out} ({size:.2f} MB): runs on {machines_words(manifest)}")
        else:
            records = unpack(args.bundle, args.digest, args.into)
            print(f"{len(records)} runs of {args.bundle} checked and unpacked -> {args.into}")
    except BundleError as error:
        print(f"bundle refused: {error}", file=sys.stderr)
        return 1
    print(f"in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    run_main(main)
