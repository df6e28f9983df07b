"""Fetch one dataset file, verified against its pinned sha256, atomically. Standard library only.

Tried in order: the offline folder (<offline-dir>/<dataset>/<name>), then each URL; each URL up to --retries
times with backoff. A file whose checksum differs is deleted, never kept or parsed.

    python scripts/fetch_archive.py --dataset mnist --name train-images-idx3-ubyte.gz --sha256 440f... \
        --url https://mirror/mnist/train-images-idx3-ubyte.gz --offline-dir resources/offline --out PATH
"""

import argparse
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from dlbench.cli import run_main
from dlbench.io import file_sha256

CHUNK = 1 << 20


def download(url, target, timeout):
    """Stream url into target, logging progress about every 10%."""
    with urllib.request.urlopen(url, timeout=timeout) as response, open(target, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0)
        done, next_report = 0, 0.1
        while block := response.read(CHUNK):
            out.write(block)
            done += len(block)
            if total and done / total >= next_report:
                print(f"  {done / 1e6:.1f} / {total / 1e6:.1f} MB", flush=True)
                next_report += 0.1
        if total and done != total:
            raise OSError(f"connection closed after {done} of {total} bytes")


def verified(path, expected):
    """True if path has the expected sha256; otherwise the file is deleted."""
    actual = file_sha256(path)
    if actual == expected:
        return True
    print(f"checksum mismatch for {path}: expected sha256 {expected}, got {actual}; file removed", flush=True)
    path.unlink()
    return False


def fetch(args):
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    offline = Path(args.offline_dir) / args.dataset / args.name
    if offline.exists():
        print(f"using the offline copy {offline}", flush=True)
        shutil.copyfile(offline, partial)
        if verified(partial, args.sha256):
            partial.replace(out)
            return
        raise SystemExit(f"{args.dataset}: the offline copy {offline} does not have sha256 {args.sha256}; replace it")
    problems = []
    for url in args.url:
        for attempt in range(1, args.retries + 1):
            print(f"downloading {url} (attempt {attempt}/{args.retries})", flush=True)
            try:
                download(url, partial, args.timeout)
            except (OSError, urllib.error.URLError) as error:
                partial.unlink(missing_ok=True)
                problems.append(f"{url}: {error}")
                print(f"  failed: {error}", flush=True)
                time.sleep(min(2**attempt, 30) * args.backoff)
                continue
            if verified(partial, args.sha256):
                partial.replace(out)
                print(f"verified {out} (sha256 {args.sha256})", flush=True)
                return
            problems.append(f"{url}: checksum mismatch (expected sha256 {args.sha256})")
    raise SystemExit(
        f"{args.dataset}: could not fetch {args.name}.\n  tried: "
        + "\n  tried: ".join(problems)
        + f"\n  On a machine without network, place the file at {offline} (sha256 {args.sha256}) and rerun."
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--url", action="append", default=[], help="full URL; repeat for fallbacks")
    parser.add_argument("--offline-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds without data before giving up")
    parser.add_argument("--backoff", type=float, default=1.0, help="scale of the wait between retries")
    fetch(parser.parse_args())


if __name__ == "__main__":
    run_main(main)
