"""The document in two forms: Quarto when `quarto` is on PATH (html + typst formats); otherwise pandoc (a
self-contained HTML) and pandoc -> typst -> PDF, with Quarto's `{{< include >}}` shortcodes expanded here."""

import datetime
import re
import shutil
import subprocess

INCLUDE = re.compile(r"\{\{<\s*include\s+(\S+)\s*>\}\}")

# Pandoc sizes the columns of a pipe table whose lines are longer than --columns by its dash counts
# (common.column_dashes): the characters of a table line at the PDF's table size, so that a wide table spans the page
# with each column in proportion to what it holds, and a narrow one keeps its natural widths.
TABLE_LINE_WIDTH = "--columns=120"


def render(document, title):
    """report.html and report.pdf beside the document."""
    if shutil.which("quarto"):
        print("rendering with Quarto")
        render_with_quarto(document, title)
    else:
        print("quarto not on PATH: rendering with pandoc (HTML) and pandoc + typst (PDF)")
        render_with_pandoc(document, title)


def expand_includes(text, folder):
    return INCLUDE.sub(lambda match: (folder / match[1]).read_text(), text)


def render_with_quarto(document, title):
    for target in ("html", "typst"):
        subprocess.run(
            ["quarto", "render", document.name, "--to", target, "-M", f"title:{title}"], cwd=document.parent, check=True
        )


def render_with_pandoc(document, title):
    import pypandoc
    import typst

    folder = document.parent
    markdown = expand_includes(document.read_text(), folder)
    metadata = [f"--metadata=title:{title}", f"--metadata=date:{datetime.date.today().isoformat()}"]
    pypandoc.convert_text(
        markdown,
        "html",
        format="markdown",
        outputfile=str(folder / "report.html"),
        extra_args=[
            "--standalone",
            "--embed-resources",
            "--toc",
            "--toc-depth=2",
            f"--resource-path={folder}",
            f"--css={folder / 'report.css'}",
            TABLE_LINE_WIDTH,
            *metadata,
        ],
    )
    typst_source = pypandoc.convert_text(
        markdown,
        "typst",
        format="markdown",
        extra_args=["--standalone", TABLE_LINE_WIDTH, *metadata],  # its contents follow the answer (report.answer)
    )
    (folder / "report.typ").write_text(typst_source)
    typst.compile(str(folder / "report.typ"), output=str(folder / "report.pdf"), root=str(folder))
