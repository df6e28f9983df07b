"""The rendered report (HTML + PDF) from the aggregated tables.

The document is report/report.qmd, whose body is the sections of dlbench/study/report (one module each: its prose,
tables and the figures it draws). With `quarto` on PATH it renders with Quarto (html + typst formats); otherwise the
same document renders with pandoc (self-contained HTML) and pandoc -> typst -> PDF.
"""

import argparse
import json
import shutil
from pathlib import Path

from dlbench.cli import run_main
from dlbench.io import replacing_all
from dlbench.study.report import Study, body
from dlbench.study.report.render import render


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", required=True)
    parser.add_argument("--document", required=True)
    parser.add_argument("--style", required=True, help="the HTML's stylesheet (embedded)")
    parser.add_argument("--title", required=True)
    parser.add_argument("--html", required=True)
    parser.add_argument("--pdf", required=True)
    parser.add_argument("--arguments", default="", help="the study's config arguments (--configfile, --config)")
    parser.add_argument("--config-sha256", help="the hash of the study's whole config, for its reproduce line")
    parser.add_argument(
        "--exclusions", default="[]", help="JSON: the config's `exclude` entries, each with its `why` where given"
    )
    args = parser.parse_args()
    build = Path(args.html).parent / "build"
    if build.exists():
        shutil.rmtree(build)
    figures = build / "figures"
    figures.mkdir(parents=True)
    origin = {
        "arguments": args.arguments,
        "config_sha256": args.config_sha256,
        "exclusions": json.loads(args.exclusions),
    }
    (build / "body.md").write_text(body(Study.read(args.tables, origin), figures))
    document = build / "report.qmd"
    shutil.copy(args.document, document)
    shutil.copy(args.style, build / "report.css")
    render(document, args.title)
    # together or not at all: a failed rendering or copy leaves the previous report (the rule's outputs are `update()`)
    with replacing_all([args.html, args.pdf]) as temporaries:
        shutil.copy(build / "report.html", temporaries[args.html])
        shutil.copy(build / "report.pdf", temporaries[args.pdf])
    print(json.dumps({"html": args.html, "pdf": args.pdf}))


if __name__ == "__main__":
    run_main(main)
