"""No config value can run a command: every value a rule's shell command interpolates is shell-quoted (`:q`), and
the config schema refuses what a name, a path or a URL cannot hold. (The quoting at work, in a real run:
tests/workflow/test_hostile_config.py.)"""

import ast
import io
import string
import tokenize

import pytest
import yaml
from conftest import REPO
from dlbench.study import configuration

RULE_FILES = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]


def shell_commands(path):
    """(line, command) of every `shell:` directive of a Snakemake file: the string literals that follow it, joined
    as Snakemake joins them. Snakemake's grammar is Python's tokens, so Python's tokenizer reads it."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for index, token in enumerate(tokens[:-1]):
        if token.type == tokenize.NAME and token.string == "shell" and tokens[index + 1].string == ":":
            pieces = []
            for following in tokens[index + 2 :]:
                if following.type == tokenize.STRING:
                    pieces.append(ast.literal_eval(following.string))
                elif following.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.COMMENT):
                    break
            yield token.start[0], "".join(pieces)


def unquoted_fields(command):
    """The `{...}` fields of a shell command that Snakemake does not shell-quote (no `:q` format spec)."""
    return [
        field
        for _, field, spec, _ in string.Formatter().parse(command)
        if field is not None and not (spec or "").endswith("q")
    ]


def test_every_field_of_every_shell_command_is_quoted():
    commands = {(path.name, line): command for path in RULE_FILES for line, command in shell_commands(path)}
    directives = sum(line.strip() == "shell:" for path in RULE_FILES for line in path.read_text().splitlines())
    assert len(commands) == directives >= 10  # every directive read, none missed by the reader
    unquoted = {place: unquoted_fields(command) for place, command in commands.items() if unquoted_fields(command)}
    assert unquoted == {}, "quote these with :q, e.g. {params.python:q}"


def test_the_check_finds_an_unquoted_field(tmp_path):
    rule = tmp_path / "rule.smk"
    rule.write_text('rule a:\n    shell:\n        "{params.python:q} x.py"\n        " --out {output} > {log:q}"\n')
    ((_, command),) = shell_commands(rule)
    assert unquoted_fields(command) == ["output"]


def load(tmp_path, override):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(override))
    return configuration.load(workflow_config=tmp_path / "config.yaml")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"downloads": {"mirror": "file:///etc/"}},
            "config error in `downloads.mirror`: 'file:///etc/' is not an http:// or https:// URL",
        ),
        ({"downloads": {"mirror": "http://host/a b"}}, "(others percent-encoded: a space is %20)"),
        (
            {"existing_envs": {"torch-2.13": "python3"}},
            "config error in `existing_envs.torch-2.13`: 'python3' is not an absolute path",
        ),
        (
            {"venv_root": "venvs\n$(reboot)"},
            "config error in `venv_root`: 'venvs\\n$(reboot)' holds a control character",
        ),
        ({"downloads": {"offline_dir": "offline\t"}}, "config error in `downloads.offline_dir`:"),
        ({"report": {"title": "A\x1b[2Jtitle"}}, "config error in `report.title`:"),
        ({"slurm": {"account": "lab;rm -rf ~"}}, "config error in `slurm.account`: 'lab;rm -rf ~' is not a Slurm name"),
        (
            {"image_folders": {"a b": {"path": "/data"}}},
            "config error in `image_folders`: 'a b' is not a name of letters, digits",
        ),
    ],
)
def test_what_a_name_a_path_or_a_url_cannot_hold_is_refused(tmp_path, override, message):
    with pytest.raises(configuration.ConfigError) as refused:
        load(tmp_path, override)
    assert message in str(refused.value)


def test_free_text_may_span_lines(tmp_path):
    config = load(tmp_path, {"grids": [{"description": "Two lines\nof text\n"}]})
    assert config["grids"][0]["description"] == "Two lines\nof text\n"


def test_a_registry_is_refused_what_its_urls_names_and_digests_cannot_hold(tmp_path):
    entry = {
        "format": "idx",
        "shape": [28, 28, 1],
        "classes": 10,
        "urls": ["ftp://host/"],
        "files": {"images": {"name": "../images.gz", "sha256": "$(reboot)"}},
    }
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump({"mnist": entry, "a;b": entry}))
    with pytest.raises(configuration.ConfigError) as refused:
        configuration.load_registry({"downloads": {"registry": str(tmp_path / "registry.yaml")}})
    problems = str(refused.value)
    for key in ("mnist.urls.0", "mnist.files.images.name", "mnist.files.images.sha256", "(top level)"):
        assert f"config error in `downloads.registry`: {tmp_path / 'registry.yaml'}: `{key}`:" in problems
