"""The documentation against the code: config/README.md is what the schema gives, every config key is described with
its default, the pages' links and the section references in comments resolve, and the lists of docs/extending.md
(files to touch, stack fields, models, datasets, figures, where things are) match the repository."""

import re

import pytest
import yaml
from dlbench import specs
from dlbench.study import config_docs, record_docs
from dlbench.study.configuration import REPO, STACKS, config_schema, load_stacks

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, REPO / "config" / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
# Places outside the docs that send a reader to a section: `docs/page.md, "Section"` or `README, "Section"`.
SECTION_REFERENCE = re.compile(r'((?:docs/[\w-]+|config/README|README)(?:\.md)?),?\s+(?:#\s*)?"([^"]+)"')
REPOSITORY_FOLDERS = ("scripts/", "workflow/", "envs/", "config/", "benchmarks/", "report/", "profiles/", "docs/")


def text(path):
    return path.read_text()


def section(page, title):
    """The text of a page's `## title` section, up to the next heading of the same level."""
    body = text(page).split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page):
    return {slug(line.lstrip("#")) for line in text(page).splitlines() if re.match(r"#{1,6} ", line)}


def headings(page):
    return {line.lstrip("#").strip() for line in text(page).splitlines() if re.match(r"#{1,6} ", line)}


def test_config_readme_is_generated_from_the_schema():
    assert text(config_docs.OUTPUT) == config_docs.render(), (
        f"config/README.md is not what {config_docs.SCHEMA.relative_to(REPO)} gives: run `{config_docs.COMMAND}`"
    )


def test_every_config_key_has_a_description_and_a_default():
    """The Snakemake catalog's convention. Without a default only a key its mapping requires, and the keys of a grid
    entry, whose absence means the top-level list (a default there would be filled into every grid): their
    descriptions say what absence means."""
    schema = config_schema()
    problems = []
    for key, key_schema, parent in config_docs.entries(schema["properties"], "", schema, schema):
        resolved = config_docs.resolve(key_schema, schema)
        if not resolved.get("description", "").strip():
            problems.append(f"{key}: no description")
        if "default" not in key_schema:
            required = key.rsplit(".", 1)[-1] in parent.get("required", ())
            if not (required or (key.startswith("grids[].") and "absent" in resolved.get("description", ""))):
                problems.append(f"{key}: no default")
    assert not problems, "\n".join(problems)


def test_a_mappings_default_is_the_defaults_of_its_keys():
    schema = config_schema()
    problems = [
        key
        for key, key_schema, _ in config_docs.entries(schema["properties"], "", schema, schema)
        if "properties" in key_schema
        and key_schema.get("default")
        != {name: child.get("default") for name, child in key_schema["properties"].items()}
    ]
    assert not problems, problems


def test_the_generator_checks_the_page(tmp_path, capsys):
    stale = tmp_path / "README.md"
    stale.write_text("stale\n")
    assert config_docs.main(["--check", "--out", str(stale)]) == 1
    assert config_docs.COMMAND in capsys.readouterr().err
    assert config_docs.main(["--out", str(stale)]) == 0
    assert config_docs.main(["--check", "--out", str(stale)]) == 0


def test_the_config_reference_names_every_study_config():
    page = text(config_docs.OUTPUT)
    assert [path.name for path in (REPO / "config").glob("*.yaml") if path.name not in page] == []


def test_the_readme_is_a_front_page():
    assert len(text(README).splitlines()) <= 150
    for page in DOCS.glob("*.md"):
        assert f"(docs/{page.name})" in text(README), f"README.md does not point to docs/{page.name}"


def test_links_between_pages_resolve():
    problems = []
    for page in PAGES:
        for target in LINK.findall(CODE.sub("", text(page))):  # a link written as code is an example
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                problems.append(f"{page.relative_to(REPO)}: {target}: no such file")
            elif anchor and anchor not in anchors(linked):
                problems.append(f"{page.relative_to(REPO)}: {target}: no such section")
    assert not problems, "\n".join(problems)


def test_repository_paths_named_in_the_pages_exist():
    problems = []
    for page in PAGES:
        for token in CODE.findall(text(page)):
            path = token.split()[0].rstrip(",.:;)")
            named = path.startswith(REPOSITORY_FOLDERS) and not re.search(r"[<*{$]", path)
            if named and not (REPO / path).exists():
                problems.append(f"{page.relative_to(REPO)}: {path}")
    assert not problems, "\n".join(problems)


def test_section_references_outside_the_docs_resolve():
    """Comments and messages that send a reader to a page's section name a section that exists."""
    places = [
        REPO / "Snakefile",
        REPO / "envs" / "stacks.yaml",
        REPO / "envs" / "driver.yaml",  # not the stacks' env files: an edit rebuilds the env's venv and reruns its jobs
        *(REPO / "config").glob("*.yaml"),
        *(REPO / "profiles").rglob("*.yaml"),
        *(REPO / "workflow").rglob("*.smk"),
        *(REPO / "scripts").rglob("*.py"),
        *(REPO / "benchmarks").rglob("*.py"),
        REPO / "report" / "report.qmd",
    ]
    problems = []
    for place in places:
        for page, title in SECTION_REFERENCE.findall(text(place)):
            title = re.sub(r"\s*\n\s*#?\s*", " ", title)  # a title broken across comment lines
            path = REPO / (page if page.endswith(".md") else f"{page}.md")
            if not path.exists() or title not in headings(path):
                problems.append(f'{place.relative_to(REPO)}: {page}, "{title}"')
    assert not problems, "\n".join(problems)


def test_no_page_refers_to_internal_tracking():
    pattern = re.compile(r"\bissues?\b|\bsessions?\b|(?<![\w/])#\d+\b", re.IGNORECASE)
    found = [
        f"{page.relative_to(REPO)}:{number}: {line.strip()}"
        for page in PAGES
        for number, line in enumerate(text(page).splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "\n".join(found)


def documented_stack_fields():
    return set(re.findall(r"^   - `(\w+)`:", section(DOCS / "extending.md", "A stack"), re.MULTILINE))


def test_the_stack_fields_to_fill_are_those_stacks_yaml_uses():
    header = set(re.findall(r"^#   (\w+)\s", text(STACKS), re.MULTILINE))
    used = {field for entry in load_stacks().values() for field in entry}
    assert documented_stack_fields() == used == header


def test_every_stack_names_files_that_exist_and_is_listed():
    adapters = REPO / "scripts" / "dlbench" / "adapters"
    table = text(DOCS / "stacks.md")
    problems = []
    for name, entry in load_stacks().items():
        files = [REPO / "envs" / f"{env}.yaml" for env in entry["env"].values()]
        files += [adapters / f"{module}.py" for module in (entry["adapter"], entry["ops_adapter"]) if module]
        problems += [f"{name}: {path.relative_to(REPO)} missing" for path in files if not path.exists()]
        if not re.search(rf"^\| {re.escape(name)}\b", table, re.MULTILINE):
            problems.append(f"{name}: no row in docs/stacks.md")
    assert not problems, "\n".join(problems)


def test_every_model_is_documented_and_proven():
    schema_models = config_schema()["properties"]["models"]["description"]
    methodology = section(DOCS / "methodology.md", "Models, and the proof that every framework trains the same one")
    from probe_adapter import CASES  # derived from the registry: a model with test shapes is proven

    proven = {case[0] for case in CASES}
    proven_leaves = {leaf_kind(case[0], case[1]) for case in CASES if case[0] in specs.MODELS}
    proven_leaves = set().union(*proven_leaves)
    problems = []
    for name, model in specs.MODELS.items():
        problems += [f"{name}: not in the schema's `models`"] if not re.search(rf"\b{name}\b", schema_models) else []
        problems += [f"{name}: not in docs/methodology.md"] if f"`{name}`" not in methodology else []
        # Too large for a CPU test: proven through its leaves, each of which a tested model has.
        if name not in proven and not leaf_kind(name, None) <= proven_leaves:
            problems += [f"{name}: no test shapes in specs.MODELS, and leaves no tested model has"]
    assert not problems, "\n".join(problems)


def leaf_kind(name, shape):
    """The kinds of leaf a registry model is made of: each leaf's type and activation (its sizes aside)."""
    spec = specs.model_spec(name, 10)
    shape = shape or (specs.TOKENS_SHAPE if specs.reads_tokens(spec) else (224, 224, 3))
    return frozenset(
        (type(layer).__name__, getattr(layer, "activation", None), getattr(layer, "causal", None))
        for layer, _, _ in specs.leaves(spec, shape)
    )


def test_every_dataset_is_documented():
    registry = yaml.safe_load((REPO / "workflow" / "resources" / "datasets.yaml").read_text())
    table = text(DOCS / "datasets.md")
    names = [
        *registry,
        "digits",
        "imagenet",
        "synthetic-imagenet",
        "synthetic-<H>x<W>x<C>",
        "synthetic-tokens-<vocabulary>x<context>",
    ]
    assert [name for name in names if f"| `{name}` |" not in table] == []
    fields = set(CODE.findall(section(DOCS / "extending.md", "A dataset")))
    used = {field for entry in registry.values() for field in entry}
    assert used <= fields, used - fields


def test_every_figure_of_the_report_is_drawn_by_the_section_that_shows_it_and_every_section_is_listed():
    """One convention: a section module draws its figures (`figures / "<name>.svg"`) and writes their links; report.md
    lists every section, and the document's body is the sections."""
    sections = sorted((REPO / "scripts" / "dlbench" / "study" / "report").glob("*.py"))
    titles = []
    for module in sections:
        source = text(module)
        linked = re.findall(r"\(figures/(\w+)\.svg\)", source)
        assert [name for name in linked if f'figures / "{name}.svg"' not in source] == [], module.name
        titles += re.findall(r'^TITLE = "(.+)"$', source, re.MULTILINE)
    assert len(titles) > 10
    folded = re.search(
        r'^NOT_IN_STUDY = "(.+?)"', text(REPO / "scripts" / "dlbench" / "study" / "report" / "__init__.py"), re.M
    )
    listed = section(DOCS / "report.md", "The report")
    assert [title for title in [*titles, folded[1]] if f"**{title}**" not in listed] == []
    assert "{{< include body.md >}}" in text(REPO / "report" / "report.qmd")


def test_where_things_are_names_every_module():
    layout = section(DOCS / "extending.md", "Where things are")
    files = [
        *(REPO / "scripts").glob("*.py"),
        *(REPO / "scripts").glob("*.sh"),
        *(REPO / "scripts" / "dlbench").glob("*.py"),
        *(REPO / "scripts" / "dlbench" / "study").glob("*.py"),
        *(REPO / "scripts" / "dlbench" / "study" / "analysis").glob("*.py"),
        *(REPO / "scripts" / "dlbench" / "study" / "report").glob("*.py"),
        *(REPO / "scripts" / "dlbench" / "measure").glob("*.py"),
        *(REPO / "workflow" / "rules").glob("*.smk"),
        *(REPO / "benchmarks").glob("*.py"),
        *(REPO / "config").glob("*.yaml"),
        *(REPO / "profiles").iterdir(),
    ]
    missing = [
        str(path.relative_to(REPO))
        for path in files
        if path.stem != "__init__" and not re.search(rf"(?<![\w-]){re.escape(path.stem)}(?![\w-])", layout)
    ]
    assert not missing, "not in docs/extending.md, 'Where things are': " + ", ".join(missing)


def test_the_run_record_schema_and_page_are_generated_from_the_typed_record():
    for path, generated in (
        (record_docs.SCHEMA_FILE, record_docs.schema_text()),
        (record_docs.PAGE_FILE, record_docs.page_text()),
    ):
        assert text(path) == generated, (
            f"{path.relative_to(REPO)} is not what the typed record gives: run `{record_docs.COMMAND}`"
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_code_blocks_are_closed(page):
    assert text(page).count("```") % 2 == 0
