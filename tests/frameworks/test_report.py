"""The report as a reader gets it, rendered from the fixture study's records (tests/support/report_fixture.py): every
figure drawn in vector form, the comparisons' verdicts and the version study flagged, the PDF read page by page with
poppler (every table row printed once, long tables continued under their header, no word printed over another or
off the page), and the HTML loaded in headless Chromium with nothing fetched from the network."""

import html
import json
import os
import re
import shutil
import subprocess
from itertools import combinations
from pathlib import Path

import pytest
from conftest import REPO, read_csv
from report_fixture import (
    CONTENDED_REASON,
    CONTENTION,
    DEMOTED,
    FLIPPED_BATCH,
    OOM_PANEL,
    OTHER_MACHINE,
    REPEATS,
    experiments,
    two_machines,
    write_records,
    write_run,
)

FIGURES = [
    "throughput",
    "end_to_end",
    "batch_size",
    "epoch_time",
    "drift",
    "convergence",
    "telemetry",
    "energy",
    "versions",
    "scaling",
]
EXCLUSION = {"stack": ["keras-3-jax", "keras-3-tensorflow"], "variant": "eager", "why": "a debugging mode"}
GPU_PRICE = {"cpu": None, "gpu": 2.5}  # the fixture's price of a GPU-hour; its CPU-hours are unpriced
WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>')
PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', re.S)


def debian_command(command, package):
    """The path of a command from a Debian package, installed with apt-get where it is missing (CI runs as root)."""
    if shutil.which(command) is None and shutil.which("apt-get") and os.geteuid() == 0:
        environment = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=environment, stdout=subprocess.DEVNULL)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", package], check=True, env=environment, stdout=subprocess.DEVNULL
        )
    path = shutil.which(command)
    if path is None:
        pytest.fail(
            f"the report tests need `{command}`: install Debian's {package} package (apt-get install {package})"
        )
    return path


def render_study(root, records, tools, prices=None):
    """Tables and report of a study's records under root: as the workflow's aggregate and report rules make them
    (prices: the config's `price_per_hour`, none set where not given)."""
    tables, scripts = root / "tables", REPO / "scripts"
    subprocess.run(
        [tools, scripts / "aggregate.py", "--records", *records, "--price-per-hour", json.dumps(prices or {})]
        + ["--out", tables],
        check=True,
        capture_output=True,
    )
    subprocess.run([tools, scripts / "aggregate_ops.py", "--out", tables / "ops.csv"], check=True, capture_output=True)
    subprocess.run(
        [
            tools,
            scripts / "render_report.py",
            "--tables",
            tables,
            "--document",
            REPO / "report/report.qmd",
            "--style",
            REPO / "report/report.css",
            "--title",
            "Fixture study",
            "--html",
            root / "report.html",
            "--pdf",
            root / "report.pdf",
            "--arguments",
            "--configfile config/fixture.yaml",
            "--config-sha256",
            "f" * 64,
            "--exclusions",
            json.dumps([EXCLUSION]),
        ],
        check=True,
        capture_output=True,
    )
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory, env_python):
    root = tmp_path_factory.mktemp("report")
    return render_study(root, write_records(root / "runs"), str(env_python("tools")), prices=GPU_PRICE)


@pytest.fixture(scope="module")
def pdf_pages(report):
    """[(width, height, [(x0, y0, x1, y1, word)])] per page of the PDF, from poppler's pdftotext."""
    pdftotext = debian_command("pdftotext", "poppler-utils")
    boxes = subprocess.run(
        [pdftotext, "-bbox", report / "report.pdf", "-"], capture_output=True, text=True, check=True
    ).stdout
    return [
        (float(width), float(height), [(*map(float, word[:4]), word[4]) for word in WORD.findall(body)])
        for width, height, body in PAGE.findall(boxes)
    ]


def document_markdown(report):
    """The document as rendered: report.qmd with every generated piece included."""
    build = report / "build"
    return re.sub(
        r"\{\{<\s*include\s+(\S+)\s*>\}\}",
        lambda match: (build / match[1]).read_text(),
        (build / "report.qmd").read_text(),
    )


def section_markdown(report, title):
    """One section of the document as rendered, from its heading to the next."""
    return document_markdown(report).split(f"\n## {title}\n")[1].split("\n## ")[0]


def count(token, text):
    return len(re.findall(rf"(?<![\w,.]){re.escape(token)}(?![\w,])", text))


TEXT_WIDTH_PT = (21 - 2 * 1.8) / 2.54 * 72  # the PDF's text width (A4, 1.8 cm margins)


def test_every_figure_is_drawn_as_a_vector_image_and_embedded(report):
    """Vector figures no wider than the PDF's text, so that they print at their size: their 7 pt legends and tick
    labels are 7 pt on paper, not scaled down to fit."""
    html = (report / "report.html").read_text()
    for name in FIGURES:
        svg = (report / "build/figures" / f"{name}.svg").read_text()
        assert svg.startswith("<?xml") and "<path" in svg and "<image" not in svg, name  # vector, no raster inside
        width = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg)[1])
        assert width <= TEXT_WIDTH_PT, (name, width)
        assert f"figures/{name}.svg" in (report / "build/report.typ").read_text()
    assert html.count("data:image/svg+xml") == len(FIGURES) and "data:image/png" not in html


def test_page_one_is_the_answer_each_groups_fastest_with_its_lead_and_confidence(report, pdf_pages):
    """Against each group's fastest (the comparisons' default baseline): the CPU groups decisive, the GPU ResNet-20
    group equivalent with torch-2.13 first to target accuracy (keras-3-jax compiles), the noisy streamed group
    inconclusive, the group whose every run ran out of memory failed. All ten groups' answers fit on page 1, the parts
    of their titles every group shares said once above the table; what else changes a reader's choice follows the
    table, then the machine, versions and command, the measurements' quality and the legend."""
    table = read_csv(report / "tables/fastest.csv")
    answer_md = section_markdown(report, "The answer: fastest per group")
    fastest = {(row["model"], row["batch_size"], row["device"], row["replicas"]): row for row in table}
    resnet20 = fastest[("resnet20", "128", "gpu", "1")]
    assert (resnet20["fastest_stack"], resnet20["runner_up_stack"], resnet20["confidence"]) == (
        "keras-3-jax",
        "torch-2.13",
        "equivalent",
    )
    assert resnet20["to_target_stack"] == "torch-2.13" and float(resnet20["fastest_to_target_s"]) > 5 * float(
        resnet20["to_target_s"]
    )
    assert fastest[("resnet50", "128", "gpu", "1")]["confidence"] == "inconclusive"
    assert (
        fastest[("resnet20", "128", "gpu", "2")]["fastest_stack"],
        fastest[("resnet20", "128", "gpu", "2")]["confidence"],
    ) == ("torch-2.13", "decisive")
    assert fastest[("resnet20", "128", "gpu", "4")]["confidence"] == "equivalent"
    assert fastest[("lenet", "128", "cpu", "1")]["confidence"] == "failed"
    decisive = [row for row in fastest.values() if row["device"] == "cpu" and row["confidence"] != "failed"]
    assert len(decisive) == 5 and {row["confidence"] for row in decisive} == {"decisive"}
    # The answer: the first page, and those its table runs on to, up to the legend below it.
    pages = [" ".join(word for *_, word in words) for _, _, words in pdf_pages]
    last = next(index for index, text in enumerate(pages) if "Confidence:" in text)
    page = " ".join(pages[: last + 1])
    assert "Every group: adam lr 0.001, 3 epochs." in pages[0] and pages[0].count("adam lr") == 1
    assert "Bottom line:" in pages[0]  # then what else changes a choice, then where and how it was measured
    assert re.search(
        r"\*\*Scope\*\*: each training here lasted [\d.]+ to [\d.]+ s, the first epoch a median", answer_md
    )
    advice = [row["recommendation"] for row in fastest.values()]  # what to use, group by group, under the table
    assert [sum(text.startswith(word) for text in advice) for word in ("Use ", "Either ", "Undecided ")] == [6, 2, 1]
    assert all(text in section_markdown(report, "The answer: fastest per group") for text in advice)
    assert page.index("Bottom line:") < page.index("At inference") < page.index("Machine:") < page.index("Versions:")
    assert page.index("Versions:") < page.index("Reproduce:") < page.index("Measurement quality.")
    assert "keras 3.15.0 on jax 0.10.2, NumPy" in page and "torch 2.13.0, NumPy" in page
    assert "--configfile config/fixture.yaml" in page and "(config sha256 ffffffffffff)" in page
    command = "`snakemake --cores all --resources gpu=1 --configfile config/fixture.yaml`"  # the PDF breaks its lines
    answer = section_markdown(report, "The answer: fastest per group")
    assert command in answer
    # the commit, the config's digest and each env's lock digest: what reproduces a cell (docs/stacks.md)
    assert re.search(r"at commit [0-9a-f]{40} \(config sha256 f{12}\), with the env locks fixture c{12}:", answer)
    assert "Contents" not in page.split("Confidence:")[0]  # the table of contents follows the answer
    for row in fastest.values():
        if row["confidence"] != "failed":
            assert f"{float(row['lead']):.2f}x" in page and f"{float(row['train_images_per_s_gmean']):,.0f}" in page
    rows = page.split("Confidence:")[0]  # the legend below names every flag once
    # The replicated ResNet-20 groups: on 2 GPUs torch-2.13 leads decisively (keras-3-jax scales worse), on 4 the two
    # are equivalent, keras-3-jax the faster in steady state and torch-2.13 first to the target (as on one GPU).
    assert (count("decided after", rows), count("tie after", rows), count("undecided after", rows)) == (6, 2, 1)
    assert "of 10 groups, a winner proven in 6, a tie proven in 2, undecided in 1, no contest in 1" in rows
    assert "2 gpu replicas (weak)" in page and "4 gpu replicas (weak)" in page
    assert "torch-2.13 (eager) 0.37 s;" in page
    # beside the streamed group's lead, what sets its fastest apart: keras-3-jax spent 30% of an epoch on input
    assert fastest[("resnet50", "128", "gpu", "1")]["differs"] == "input share 1% vs 30%"
    assert "over keras-3-jax (eager); input share 1% vs 30% |" in section_markdown(
        report, "The answer: fastest per group"
    )
    answer = section_markdown(report, "The answer: fastest per group")
    assert "In 2 of 10 groups the fastest in steady state" in answer
    # torch-2.13 serves twice as fast in the fixture: named where another experiment trains fastest
    serving = [row for row in fastest.values() if row["inference_stack"] and row["fastest_stack"] != "torch-2.13"]
    assert serving and {row["inference_stack"] for row in serving} == {"torch-2.13"}
    assert f"the fastest is another experiment in {len(serving)} of 10 groups" in answer
    assert "torch-2.13 (eager) 7,200 images/s; the fastest to train, keras-3-jax" in answer
    replying = [row for row in fastest.values() if row["latency_stack"] and row["fastest_stack"] != "torch-2.13"]
    assert replying and {row["latency_stack"] for row in replying} == {"torch-2.13"}
    assert f"the lowest latency is another experiment in {len(replying)} of 10 groups" in answer
    assert "torch-2.13 (eager) 0.25 ms; the fastest to train, keras-3-jax (eager), 0.50 ms" in answer
    heavy = [row for row in fastest.values() if row["input_heavy"]]  # the streamed group's slow feeds
    assert (
        heavy
        and f"of a steady epoch (the mean over repeats; Input share, memory, utilisation and energy) in {len(heavy)} of 10"
        in answer
    )


def test_page_one_costs_the_fastest_where_its_device_has_a_price(report):
    """Priced GPU-hours: each GPU group's fastest costs a million images at its throughput (with the throughput's
    interval, inverted; per GPU on replicas) and the summary costs each experiment to target, both printed beside
    energy per image; the unpriced CPU groups say so."""
    answer = section_markdown(report, "The answer: fastest per group")
    assert "cost per million images [95%]" in answer and "`price_per_hour`" in answer
    for row in read_csv(report / "tables/fastest.csv"):
        if row["device"] == "cpu":
            assert row["cost_per_million_images"] == ""
            continue
        hourly = GPU_PRICE["gpu"] * int(row["replicas"])
        cost = hourly / 3600 * 1e6 / float(row["train_images_per_s_gmean"])
        assert float(row["cost_per_million_images"]) == pytest.approx(cost)
        low = hourly / 3600 * 1e6 / float(row["train_images_per_s_ci95_high"])
        assert float(row["cost_per_million_images_ci95_low"]) == pytest.approx(low)
        assert f"{cost:,.3g} [{low:,.3g}, " in answer
    assert "| unpriced |" in answer
    for row in read_csv(report / "tables/summary.csv"):
        if row["device"] == "gpu" and row["time_to_target_s_mean"]:
            cost = GPU_PRICE["gpu"] * int(row["replicas"]) * float(row["time_to_target_s_mean"]) / 3600
            assert float(row["cost_to_target"]) == pytest.approx(cost)
            low = GPU_PRICE["gpu"] * int(row["replicas"]) * float(row["time_to_target_s_ci95_low"]) / 3600
            assert float(row["cost_to_target_ci95_low"]) == pytest.approx(low)
    resources = section_markdown(report, "Input share, memory, utilisation and energy")
    assert "| J/image | MFU | cost per million images [95%] | cost to target [95%] |" in resources
    # the model's arithmetic per second of training, on every device, in GFLOP/s; per busy core where CPU runs are
    assert "| CPU % | images/s per busy core | training GFLOP/s |" in resources
    assert "| CPU % | training GFLOP/s | GPU % |" in resources  # a GPU panel: no per-core column
    summary = read_csv(report / "tables/summary.csv")
    gflops = next(float(row["train_flops_per_s_mean"]) / 1e9 for row in summary if row["train_flops_per_s_mean"])
    assert f"| {gflops:,.2f} |" in resources
    assert re.search(r"\| \d+\.\d{3} \[\d+\.\d{3}, \d+\.\d{3}\] \|\n", resources)  # cost to target, last


def test_page_one_says_how_noisy_the_measurements_were(report):
    """The measurement-quality box under the answer: the noisy streamed keras-3-jax runs still sped up across their
    steady windows (warming up), every other run with a window long enough to test was steady."""
    answer = section_markdown(report, "The answer: fastest per group")
    assert "**Measurement quality.**" in answer and "Contended tries, kept apart and run again: 1." in answer
    assert "(3 still warming up, 0 slowing down" in answer
    summary = read_csv(report / "tables/summary.csv")
    warming = {(row["stack"], row["data_placement"]) for row in summary if row["runs_warming_up"] not in ("", "0")}
    assert warming == {("keras-3-jax", "stream")}


def test_the_math_mode_is_said_once_and_sections_with_nothing_to_show_are_one_list(report):
    """The fixture has no largest-batch search and no operator sweep: both are named, with why, under one heading
    after the results, and have no section of their own; the math mode is one line of page 1, before the summary."""
    document = document_markdown(report)
    assert document.count("Math mode") == 1
    assert document.index("Math mode") < document.index("## Summary")
    folded = section_markdown(report, "Not part of this study")
    assert "**Largest batch**: no largest-batch search" in folded and "**Operator microbenchmarks**" in folded
    assert "## Largest batch" not in document and "## Operator microbenchmarks" not in document
    assert "## Version regression" in document and "**Version regression**" not in folded


def test_page_one_says_what_ran_without_contradicting_itself(report):
    """The machine with its generation, cores, SMT and memory; the math mode per device (a CPU has no TF32 switch);
    the threads each framework's default read back; the target accuracy beside its column."""
    answer = section_markdown(report, "The answer: fastest per group")
    machine = next(line for line in answer.splitlines() if line.startswith("**Machine**"))
    assert re.search(r"\(\d+ (cores, no SMT|cores, \d+ threads \(SMT\)|logical CPUs)(, [\d,]+ GiB memory)?\)", machine)
    math_mode = next(line for line in answer.splitlines() if line.startswith("**Math mode**"))
    assert "on GPU TF32 on, convolution autotuning on (keras-3-jax, torch-2.11, torch-2.13)" in math_mode
    assert "on CPU float32 throughout" in math_mode and "neither exists" not in math_mode
    assert "| to target (accuracy 0.9), mean, untested |" in answer


def test_the_workload_describes_each_dataset_and_when_the_target_was_reached(report):
    workload = section_markdown(report, "The workload")
    assert "| digits | 1,437 | 360 | 10 | 8x8x1 |" in workload
    assert "| synthetic-32x32x3 | 2,048 | 512 | 10 | 32x32x3 |" in workload
    assert workload.count("every run after epoch 1") == 2  # the synthetic CPU panel's two finished batch sizes
    assert "In 2 of 9 groups every run reached the target accuracy after its first epoch" in workload
    assert "in 2 of 9 groups the first epoch" in workload and "compilation dominates" in workload


def test_the_report_says_what_the_config_left_out_and_why_cpu_energy_is_missing(report):
    summary = section_markdown(report, "Summary")
    assert "- stack keras-3-jax or keras-3-tensorflow, variant eager: a debugging mode." in summary
    assert "246 runs of 82 experiments over 6 stacks" in summary and "; 210 ok, 36 oom (Failed runs)." in summary
    resources = section_markdown(report, "Input share, memory, utilisation and energy")
    assert "CPU package energy (RAPL, read through /sys/class/powercap) was not measured in" in resources


def test_versions_are_paired_and_a_slowdown_beyond_noise_is_a_regression(report):
    versions = read_csv(report / "tables/versions.csv")
    assert {row["framework"] for row in versions} == {"torch"}  # the two keras stacks: one release, two backends
    assert {(row["older_version"], row["newer_version"]) for row in versions} == {("2.11.0", "2.13.0")}
    (flagged,) = [row for row in versions if row["regression"] == "True"]
    assert (flagged["model"], flagged["batch_size"], flagged["variant"]) == ("mlp", "64", "eager")
    assert float(flagged["ratio"]) == pytest.approx(0.8, rel=0.01) and float(flagged["ratio_high"]) < 1
    others = {(row["device"], row["verdict"]) for row in versions if row is not flagged}
    assert others == {("cpu", "faster"), ("gpu", "equivalent within 5 %")}  # the GPU panels' releases: 1 % apart
    assert all(row["older_packages_sha256"].startswith("t") for row in versions)
    overview = section_markdown(report, "Summary")
    assert overview.count("**Regression**") == 1 and "torch 2.13.0 trains at 0.80x" in overview


def test_comparisons_are_paired_by_round_and_decide_or_say_what_would(report):
    """Every comparison of the fixture is paired by round: the CPU panels' clear differences are slower than the
    fastest, the GPU panels' stacks 1 % apart equivalent within 5 %, and the noisy streamed keras-3-jax runs
    inconclusive, with the repeats that would decide them, in the Comparisons table: the one place each verdict is
    printed (page 1 gives each group's answer); the summary points there instead of repeating them."""
    comparisons = read_csv(report / "tables/comparisons.csv")
    assert {(row["method"], row["pairs"]) for row in comparisons} == {("paired by round", str(REPEATS))}
    assert {row["verdict"] for row in comparisons if row["device"] == "cpu"} == {"slower"}
    gpu = {(row["model"], row["stack"]): row["verdict"] for row in comparisons if row["device"] == "gpu"}
    assert gpu[("resnet20", "torch-2.13")] == gpu[("resnet50", "torch-2.11")] == "equivalent within 5 %"
    (unsure,) = [row for row in comparisons if row["verdict"] == "inconclusive"]
    assert (unsure["stack"], unsure["data_placement"]) == ("keras-3-jax", "stream")
    needed = int(unsure["repeats_to_decide"])
    assert needed > REPEATS and float(unsure["ratio_low"]) < 1 < float(unsure["ratio_high"])
    section = section_markdown(report, "Comparisons")
    (line,) = [line for line in section.splitlines() if line.startswith("|") and "inconclusive" in line]
    assert line.endswith(f"| inconclusive (about {needed} repeats would decide) | {REPEATS} rounds, paired |"), line
    assert "Baseline: torch-2.13 (eager), the fastest." in section
    # the pooled-variance prior behind the paired verdicts, printed under each group's tables
    assert re.search(r"shrunk toward a prior of standard deviation \d\.\d{3} \(\d+ degrees of freedom lent\)", section)
    document = document_markdown(report)
    ratio = f"{float(unsure['ratio']):.2f}x [{float(unsure['ratio_low']):.2f}, {float(unsure['ratio_high']):.2f}]"
    # the verdict's one table; page 1 names it again only as an unproven rival of its group's fastest
    assert document.count(ratio) == 2 and ratio in section_markdown(report, "The answer: fastest per group")
    assert "every experiment's verdict against its group's baseline" in section_markdown(report, "Summary")
    assert "against the baseline |" not in section_markdown(report, "Results per experiment")


def test_what_ran_is_a_row_per_stack_with_its_variants(report):
    """What each variant read back, one row per stack (its variants side by side), and each model's size apart."""
    section = section_markdown(report, "What ran")
    stacks = {row["stack"] for row in read_csv(report / "tables/runs.csv") if row["status"] == "ok"}
    rows = [line for line in section.splitlines() if line.startswith("| ") and line.split(" | ")[0][2:] in stacks]
    assert sorted(line.split(" | ")[0][2:] for line in rows) == sorted(stacks)
    assert (
        "| torch-2.13 | eager: eager (float32, NCHW); graph: graph (float32, NCHW) | oneDNN 3.12, BLAS MKL |" in section
    )
    assert "| keras-3-jax |" in section and "| XLA:CPU (jaxlib 0.10.2) |" in section


def test_a_contended_try_is_listed_with_its_figures_and_never_averaged(report):
    """The fixture's first experiment ran its second repeat twice: a busy loop contended the first try."""
    tries = read_csv(report / "tables/runs.csv")
    (busy,) = [row for row in tries if row["status"] == "contended"]
    (final,) = [
        row
        for row in tries
        if row["experiment_id"] == busy["experiment_id"] and row["rep"] == "2" and row["final_try"] == "True"
    ]
    assert busy["final_try"] == "False" and busy["attempt"] == "1" and final["attempt"] == "2"
    assert float(busy["train_images_per_s"]) == pytest.approx(float(final["train_images_per_s"]) / 4)
    (summary,) = [
        row for row in read_csv(report / "tables/summary.csv") if row["experiment_id"] == busy["experiment_id"]
    ]
    assert summary["runs"] == str(REPEATS) and summary["tries_contended"] == "1" and not summary["measurement_note"]
    section = section_markdown(report, "Contended runs")
    assert "1 tries were contended and run again; 0 runs never measured clean" in section
    assert f"| {busy['experiment_id']} | 2 | 1 |" in section and CONTENDED_REASON in section


def test_streamed_runs_get_their_input_pipeline_verdict_in_the_table_and_the_report(report):
    verdicts = {
        row["stack"]: row["input_bound"]
        for row in read_csv(report / "tables/summary.csv")
        if row["data_placement"] == "stream"
    }
    assert verdicts == {"torch-2.11": "input-bound", "torch-2.13": "compute-bound", "keras-3-jax": "partly input-bound"}
    table = section_markdown(report, "Input pipelines")
    assert "### resnet50 on imagenet, batch 128, gpu on NVIDIA H100 80GB HBM3 / " in table, table[:300]
    for stack, verdict in verdicts.items():
        (line,) = [line for line in table.splitlines() if line.startswith(f"| {stack} |")]
        assert line.endswith(f"| {verdict} |") and "| the fixture's loader | 16 |" in line and "| 95 |" in line, line


def test_telemetry_table_holds_each_finished_experiments_first_repeat(report):
    telemetry = read_csv(report / "tables/telemetry.csv")
    finished = {row["experiment_id"] for row in read_csv(report / "tables/summary.csv") if row["runs_ok"] != "0"}
    assert {row["experiment_id"] for row in telemetry} == finished and {row["rep"] for row in telemetry} == {"1"}
    for row in telemetry:
        assert (row["power_w"] != "") == ("_gpu_" in row["experiment_id"])


def test_the_pdf_prints_every_table_row_once_and_nothing_over_anything(report, pdf_pages):
    assert 12 <= len(pdf_pages) <= 40, f"{len(pdf_pages)} pages"
    markdown = document_markdown(report)
    text = "\n".join(" ".join(word[4] for word in words) for _, _, words in pdf_pages)
    text = re.sub(r"(?<=\w)- ", "-", text)  # a cell's line broken after a hyphen: one word again
    text = re.sub(r"(?<=_) ", "", text.replace("\u200b", ""))  # an id broken after an underscore: one again
    summary = read_csv(report / "tables/summary.csv")
    for row in summary:  # each experiment's throughput cell
        token = f"{float(row['train_images_per_s_gmean']):,.0f}" if row["runs_ok"] != "0" else row["experiment_id"]
        assert count(token, text) == count(token, markdown) >= 1, token
    failed = [row["experiment_id"] for row in summary if (row["model"], int(row["batch_size"])) == OOM_PANEL]
    assert len(failed) == 12
    for experiment in failed:  # the failures table, longer than a page: one row per run
        assert count(experiment, text) == count(experiment, markdown) == REPEATS, experiment
    headed = [
        index
        for index, (_, _, words) in enumerate(pdf_pages)
        if ["experiment", "repeat", "status", "error"]
        in [[word[4] for word in words if word[1] == y] for y in {word[1] for word in words}]
    ]
    assert len(headed) >= 2 and headed == list(range(headed[0], headed[0] + len(headed))), headed  # continued
    for number, (width, height, words) in enumerate(pdf_pages, 1):
        assert words, f"page {number} is empty"
        off = [word[4] for word in words if word[0] < 0 or word[1] < 0 or word[2] > width or word[3] > height]
        assert not off, f"page {number}: printed off the page: {off[:5]}"
        over = [
            (a[4], b[4])
            for a, b in combinations(words, 2)
            if min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5
        ]
        assert not over, f"page {number}: words printed over each other: {over[:5]}"


MARGIN = 2 * 72 / 2.54  # the PDF's top and bottom margins (2 cm): the page number sits in the bottom one


def body_words(words, height):
    """A page's words line by line from the top, less its page number (poppler gives them in the order the PDF
    draws them, which is not always the order they are read in)."""
    return sorted((word for word in words if word[1] < height - MARGIN), key=lambda word: (round(word[1]), word[0]))


def test_no_heading_ends_a_page_and_no_caption_starts_one(report, pdf_pages):
    """A heading stays with what it heads (a figure, a table, a paragraph) and a caption with its figure: no page's
    last words are a heading or a paragraph that leads in to what follows it (ending in a colon), no page opens with
    a caption at its top edge (where its figure would have been on the page before)."""
    headings = [
        line.split(" ", 1)[1].split() for line in document_markdown(report).splitlines() if line[:3] in ("## ", "###")
    ]
    for number, (_, height, words) in enumerate(pdf_pages, 1):
        text = [word[4] for word in body_words(words, height)]
        ends = [" ".join(heading) for heading in headings if text[-len(heading) :] == heading]
        assert not ends, f"page {number} ends with the heading {ends}"
        assert not text[-1].endswith(":"), f"page {number} ends with a lead-in: {' '.join(text[-12:])}"
        first = body_words(words, height)[0]
        assert not (first[4] == "Figure" and first[1] < MARGIN + 12), f"page {number} opens with a caption"


BLANK_SHARE = 0.25  # of a page's text area


def test_no_page_ends_more_than_a_quarter_blank_but_the_last_of_a_section(report, pdf_pages):
    """Tables and figures fill the pages they are on: a table breaks across pages under its repeated header (a short
    one moves whole), so no page ends more than a quarter of its text area above the bottom margin, except the last
    page of a section (the next page opens with the next section's heading), where a figure that did not fit below
    moved whole to the next page."""
    sections = [line[3:].split() for line in document_markdown(report).splitlines() if line.startswith("## ")]

    def opens_a_section(page):
        _, height, words = page
        text = [word[4] for word in body_words(words, height)]
        return any(text[: len(title)] == title for title in sections)

    blank = {}
    for number, (page, following) in enumerate(zip(pdf_pages, pdf_pages[1:]), 1):
        _, height, words = page
        lowest = max((word[3] for word in body_words(words, height)), default=height - MARGIN)  # none: a full page
        if not opens_a_section(following):
            blank[number] = (height - MARGIN - lowest) / (height - 2 * MARGIN)
    assert sum(map(opens_a_section, pdf_pages)) >= 5, "the sections' headings are no longer found on their pages"
    assert max(blank.values()) <= BLANK_SHARE, {
        page: f"{share:.0%}" for page, share in blank.items() if share > BLANK_SHARE
    }


def test_no_two_cells_run_into_one_another(report, pdf_pages):
    """Every word poppler reads from the PDF is printed in the document: two cells of a table printed with no gap
    between them read as one word the document never has ("tensorflow-2.21eager")."""
    printed = re.sub(r"[*`\\]", "", document_markdown(report)) + " Fixture study Contents Figure"
    # typst's curly quotes, and the invisible break and join marks of ids, hyphenated words and the contents' leaders
    marks = str.maketrans(
        {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'} | dict.fromkeys("\u200b\u2060\xad")
    )
    unknown = {
        word
        for _, height, words in pdf_pages
        for *_, word in body_words(words, height)
        if html.unescape(word).translate(marks).strip(".,;:()[]-\u2022 ") not in printed
        and not re.fullmatch(r"\d{4}-\d\d-\d\d", word)  # the date under the title
    }
    assert not unknown, sorted(unknown)[:20]


TABLE_FIT = r"""<script>
window.addEventListener("load", () => {
  const wide = [...document.querySelectorAll("table")].filter((table) => table.scrollWidth > table.clientWidth + 1)
    .map((table) => `${table.rows[1] ? table.rows[1].cells[0].textContent : ""}: ${table.scrollWidth} px in ${table.clientWidth}`);
  const narrow = [...document.querySelectorAll("figure img")].filter((image) => image.getBoundingClientRect().width < 900)
    .map((image) => `figure ${image.alt.slice(0, 40)}: ${Math.round(image.getBoundingClientRect().width)} px wide`);
  wide.push(...narrow);
  const broken = [];
  for (const header of document.querySelectorAll("th")) {
    const text = header.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE) continue;
    for (const match of text.data.matchAll(/[^\s-]+/g)) {
      const word = document.createRange();
      word.setStart(text, match.index);
      word.setEnd(text, match.index + match[0].length);
      const lines = new Set([...word.getClientRects()].map((rect) => Math.round(rect.top)));
      if (lines.size > 1) broken.push(`header word broken across lines: ${match[0]}`);  // at a hyphen: two words
    }
  }
  wide.push(...broken);
  const out = document.createElement("pre");
  out.id = "table-fit";
  out.textContent = JSON.stringify(wide);
  document.body.appendChild(out);
});
</script>"""


def test_every_html_table_fits_a_1280_pixel_window_without_scrolling_sideways(report, tmp_path):
    """At 1280 px, beside the contents sidebar, each table is as wide as the text: no column hidden behind a
    sideways scroll (a table's scrollWidth within its clientWidth), and no header word broken across lines (headless
    Chromium has no hyphenation dictionary: a header wraps at its spaces only); and each figure fills the text column,
    900 px or more, so that its text reads at the size the PDF prints it."""
    chromium = debian_command("chromium", "chromium")
    page = tmp_path / "report.html"
    page.write_text((report / "report.html").read_text().replace("</body>", TABLE_FIT + "</body>"))
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,1000",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    (found,) = re.findall(r'<pre id="table-fit">(.*?)</pre>', dom, re.DOTALL)
    problems = json.loads(html.unescape(found))
    assert problems == [], problems


def test_the_html_renders_in_headless_chromium_and_loads_nothing_from_the_network(report, env_python):
    html = (report / "report.html").read_text()
    loads = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""", html)
    assert not loads, loads
    assert "nav" in html and 'id="TOC"' in html and "system-ui" in html  # the sidebar contents and the style
    chromium = debian_command("chromium", "chromium")
    shot = report / "screenshot.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
            "--window-size=1400,1000",
            f"--screenshot={shot}",
            (report / "report.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    colours = subprocess.run(
        [
            str(env_python("tools")),
            "-c",
            "import sys; from PIL import Image; "
            "image = Image.open(sys.argv[1]); print(image.size[0], image.size[1], "
            "len(image.convert('RGB').getcolors(1 << 24)))",
            shot,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    width, height, distinct = map(int, colours)
    assert (width, height) == (1400, 1000) and distinct > 50, "the screenshot is blank"


TICK_CHECK = """
import json, sys
from itertools import combinations
from pathlib import Path
import matplotlib.figure
from dlbench.study.report import Study, body

overlaps, drawn = [], []
save = matplotlib.figure.Figure.savefig

def saved_and_checked(figure, path, **options):
    save(figure, path, **options)  # drawn: the labels have their places
    renderer = figure.canvas.get_renderer()
    drawn.append(Path(path).name)
    for panel in figure.axes:
        for axis in (panel.xaxis, panel.yaxis):
            labels = [label for label in axis.get_ticklabels(which="both") if label.get_visible() and label.get_text()]
            low, high = sorted(axis.get_view_interval())
            shown = [label for label in labels if low <= label.get_position()[axis is panel.yaxis] <= high]
            if panel.get_visible() and axis.get_scale() == "log" and len(shown) < 2:
                overlaps.append([Path(path).name, "fewer than two labels on a log axis", str(len(shown))])
            for one, other in combinations(labels, 2):
                if one.get_window_extent(renderer).overlaps(other.get_window_extent(renderer)):
                    overlaps.append([Path(path).name, one.get_text(), other.get_text()])

matplotlib.figure.Figure.savefig = saved_and_checked
figures = Path(sys.argv[2])
figures.mkdir(parents=True, exist_ok=True)
body(Study.read(sys.argv[1], {"arguments": "", "config_sha256": None}), figures)
print(json.dumps({"overlaps": overlaps, "drawn": drawn}))
"""


def test_no_tick_label_of_any_figure_runs_into_another(report, env_python, tmp_path):
    """Every figure of the fixture study drawn again with its tick labels' boxes compared: log axes label their
    decades, or the 1, 2 and 5 between them, never every minor tick, and at least two values in view; long stack names
    stay on their own line."""
    result = subprocess.run(
        [str(env_python("tools")), "-c", TICK_CHECK, report / "tables", tmp_path / "figures"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO / "scripts")),
    )
    checked = json.loads(result.stdout.splitlines()[-1])
    assert sorted(checked["drawn"]) == sorted(f"{name}.svg" for name in FIGURES)
    assert checked["overlaps"] == []


def thin_study(kind, folder):
    """Records of a study that gives the report little: one stack with one repeat, every run out of memory, or every
    run contended (never measured clean)."""
    rows = experiments()
    if kind == "one stack, one repeat":
        chosen, repeats = (
            [(row, speed) for row, speed in rows if row["stack"] == "torch-2.13" and row["device"] == "cpu"][:1],
            1,
        )
    elif kind == "every run failed":
        chosen, repeats = [(row, speed) for row, speed in rows if (row["model"], row["batch_size"]) == OOM_PANEL][:2], 2
    else:
        chosen, repeats = [(row, speed) for row, speed in rows if row["device"] == "cpu"][:2], 2
    paths = []
    for index, (experiment, speed) in enumerate(chosen):
        for rep in range(1, repeats + 1):
            path = Path(write_run(folder, experiment, speed, rep, start=index * repeats + rep))
            if kind == "every run contended":
                record = json.loads(path.read_text())
                record.update(
                    status="contended", contention=dict(CONTENTION, foreign_cpu_cores=1.02, reasons=[CONTENDED_REASON])
                )
                path.write_text(json.dumps(record))
            paths.append(str(path))
    return paths


@pytest.mark.parametrize(
    "kind, says",
    [
        ("one stack, one repeat", ["alone", "none (1 ok repeat)", "No group has two experiments with a finished run"]),
        ("every run failed", ["none: no run finished (oom)", "failed", "OutOfMemoryError"]),
        ("every run contended", ["none: no run finished (contended)", "contended", "not measured: machine busy"]),
    ],
)
def test_a_thin_study_still_renders_and_says_what_is_missing(kind, says, tmp_path, env_python):
    root = render_study(tmp_path, thin_study(kind, tmp_path / "runs"), str(env_python("tools")))
    document = document_markdown(root)
    assert [text for text in says if text not in document] == []
    answer = section_markdown(root, "The answer: fastest per group")
    assert "GPU: none." in answer and "TF32 on" not in answer
    assert "--resources gpu=1" not in answer  # a study on CPU alone needs no GPU resource
    assert not [column for column in read_csv(root / "tables/fastest.csv")[0] if "cost" in column]  # no price
    assert "cost per million" not in answer
    assert (root / "report.pdf").stat().st_size > 10_000


def in_tools_venv(env_python, script):
    """The lines a script prints, run by the tools venv's Python with the library importable (the report's code needs
    matplotlib, which the driver venv lacks)."""
    result = subprocess.run(
        [str(env_python("tools")), "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(REPO / "scripts")),
    )
    return result.stdout.splitlines()


GROUP_TITLES = """
import json
import pandas as pd
from dlbench.study.report.common import group_titles

group = dict(model="mlp", dataset="digits", batch_size=64, device="cpu", replicas=1, scaling="weak",
             optimizer="adam", learning_rate=0.001, epochs=3, data_placement="device", machine="cpu-model")
cases = [
    [dict(group, batch_size=32)],
    [dict(group, data_placement="device"), dict(group, data_placement="host")],
    [dict(group, batch_size=32), dict(group, batch_size=64)],
]
for rows in cases:
    shared, titles = group_titles(pd.DataFrame(rows))
    print(json.dumps([shared, list(titles.values())]))
"""


def test_a_table_of_groups_names_what_they_share_once_and_never_leaves_a_group_unnamed(env_python):
    """One group keeps its whole title (the device placement unsaid); two groups that differ only in placement name it
    for each (a device group's cell is never empty); two that differ in batch share the rest, device data unsaid."""
    alone, placements, batches = map(json.loads, in_tools_venv(env_python, GROUP_TITLES))
    assert alone == ["", ["mlp on digits, batch 32, cpu, adam lr 0.001, 3 epochs, on cpu-model"]]
    assert placements == [
        "mlp on digits, batch 64, cpu, adam lr 0.001, 3 epochs, on cpu-model",
        ["device data", "host data"],
    ]
    assert batches == ["mlp on digits, cpu, adam lr 0.001, 3 epochs, on cpu-model", ["batch 32", "batch 64"]]


THREAD_TEXTS = """
from dlbench.study.report.answer import thread_text

print(thread_text(dict(intra_op_threads=0, inter_op_threads=0, schedulable_cpus=2)))
print(thread_text(dict(xla_threads=0, schedulable_cpus=4)))
print(thread_text(dict(intra_op_threads=2, inter_op_threads=1)))
"""


def test_a_framework_default_of_one_thread_per_cpu_is_printed_as_its_count(env_python):
    """TensorFlow reports its default thread pools as 0 and XLA's cannot be read: the report prints the count they
    take, one per schedulable CPU, rather than "its own choice"."""
    tensorflow, xla, pinned = in_tools_venv(env_python, THREAD_TEXTS)
    assert tensorflow == "2 intra-op (its default, one per CPU), 2 inter-op (its default, one per CPU)"
    assert xla == "4 XLA (its default, one per CPU)" and pinned == "2 intra-op, 1 inter-op"


TWO_BASELINES = """
import pandas as pd
from dlbench.study.report.comparisons import comparisons_table

group = dict(machine="cpu-model", dataset="digits", model="lenet", device="cpu", batch_size=64, optimizer="adam",
             learning_rate=0.001, epochs=3, data_placement="device", replicas=1, scaling="weak")
shared = dict(group, method="paired by round", runs_ok=8, baseline_runs_ok=8, ratio_confidence=0.99986, p_holm=0.01,
              p_equivalence_holm=0.9, equivalence_margin=0.05, repeats_to_decide=None, race_state="eliminated")
rows = [
    dict(shared, stack="keras-3-jax", variant="xla", baseline_stack="torch-2.13", baseline_variant="eager",
         baseline_experiment_id="torch", baseline_rule="the race's leader at round 8", ratio=0.6, ratio_low=0.5,
         ratio_high=0.7, verdict="slower", pairs=8),
    dict(shared, stack="tensorflow-2.21", variant="graph", baseline_stack="mxnet-1.9", baseline_variant="graph",
         baseline_experiment_id="mxnet", baseline_rule="the race's leader at round 3", ratio=0.7, ratio_low=0.5,
         ratio_high=0.98, verdict="slower", pairs=3),
]
print(comparisons_table(pd.DataFrame(rows)))
"""


def test_raced_each_comparison_sits_under_the_leader_it_was_judged_against(env_python):
    """A rival that left at round 3 was judged against that look's leader, not the last one: its row sits under its
    own baseline, the p's are named as scaled to the race's looks (not Holm's), and a confidence just below 1 never
    prints as 100 %."""
    text = "\n".join(in_tools_venv(env_python, TWO_BASELINES))
    leader, earlier = text.split("Baseline: torch-2.13 (eager), the race's leader at round 8.")
    assert "| keras-3-jax |" in leader and "tensorflow-2.21" not in leader
    assert "| tensorflow-2.21 |" in earlier and "Baseline: mxnet-1.9 (graph), the race's leader at round 3." in earlier
    assert "p difference (race-adjusted)" in text and "(Holm)" not in text
    assert "99.99 %" in text and "100 %" not in text
    assert "| 0.60x [0.50, 0.70] | −40.0\u00a0% (n=8+8) |" in text  # benchstat's delta and n per side


TOKEN_AXIS = """
import sys
from pathlib import Path
import pandas as pd
from dlbench.axes import PANEL
from dlbench.study.report.throughput import throughput_figure

panel = dict(dataset="synthetic-tokens-256x64", model="gpt-tiny", device="cpu", batch_size=32, optimizer="adam",
             learning_rate=0.001, epochs=3, data_placement="device", replicas=1, scaling="weak", machine="cpu-model")
rows = [dict(panel, stack=stack, variant="eager", experiment_id=stack, statuses="ok", runs_ok=3,
             train_images_per_s_gmean=rate, train_images_per_s_ci95_low=rate * 0.9, train_images_per_s_ci95_high=rate * 1.1,
             train_tokens_per_s_gmean=rate * 64, train_tokens_per_s_ci95_low=rate * 57.6,
             train_tokens_per_s_ci95_high=rate * 70.4) for stack, rate in (("torch-2.13", 400.0), ("mxnet-1.9", 150.0))]
runs = pd.DataFrame([dict(experiment_id=row["experiment_id"], machine="cpu-model", status="ok",
                          train_images_per_s=row["train_images_per_s_gmean"],
                          train_tokens_per_s=row["train_tokens_per_s_gmean"]) for row in rows])
path = Path(sys.argv[1])
throughput_figure(pd.DataFrame(rows)[[*PANEL, *(key for key in rows[0] if key not in PANEL)]], runs, path)
print("training tokens/s" in path.read_text(), "training images/s" in path.read_text())
"""


def test_a_language_models_throughput_is_drawn_in_tokens_per_second(env_python, tmp_path):
    result = subprocess.run(
        [str(env_python("tools")), "-c", TOKEN_AXIS, tmp_path / "throughput.svg"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(REPO / "scripts")),
    )
    assert result.stdout.split() == ["True", "False"]


FIRST_EPOCHS = """
import pandas as pd
from dlbench.study.report.end_to_end import rank_sentences

panel = dict(dataset="digits", model="mlp", device="cpu", batch_size=32, optimizer="adam", learning_rate=0.001,
             epochs=3, data_placement="device", replicas=1, scaling="weak", machine="cpu-model")
rows = [
    dict(panel, stack="torch-2.13", variant="eager", experiment_id="torch", train_images_per_s_gmean=200.0, runs_ok=3,
         first_epoch_s_mean=0.30, first_epoch_s_median=0.20, time_to_target_s_mean=None, time_to_target_runs=0),
    dict(panel, stack="mxnet-1.9", variant="graph", experiment_id="mxnet", train_images_per_s_gmean=100.0, runs_ok=3,
         first_epoch_s_mean=0.25, first_epoch_s_median=0.26, time_to_target_s_mean=None, time_to_target_runs=0),
]
print(rank_sentences(pd.DataFrame(rows))[0])
"""


def test_a_first_epoch_whose_mean_and_median_disagree_is_named_both_ways(env_python):
    """One slow repeat can put a stack first by mean and another first by median: neither order is tested, so the
    section names both rather than the means' alone."""
    (line,) = in_tools_venv(env_python, FIRST_EPOCHS)
    assert line.endswith("quickest first epoch mxnet-1.9 (graph) by mean, torch-2.13 (eager) by median."), line


MACHINES_SECTION = """
from pathlib import Path
from io import StringIO
from types import SimpleNamespace
import pandas as pd
from dlbench.study.report import machines

table = pd.read_json(StringIO(Path({path!r}).read_text()), orient="table")
print(machines.markdown(SimpleNamespace(machines=table), None))
print(machines.markdown(SimpleNamespace(machines=table.iloc[0:0]), None))
"""


def test_the_machines_section_prints_each_machines_throughput_ratio_and_where_the_ranking_differs(env_python, tmp_path):
    """report_fixture.two_machines: the second machine slower alike, but for one stack at batch 32 that falls behind
    the other there; each cell its throughput with its interval and its ratio over the reference machine with its own,
    each machine's page-1 answer (the flip proven where both are decided), the order said with each machine's
    numbers, and no section for one machine."""
    table, reference = two_machines(tmp_path)
    (tmp_path / "machines.json").write_text(table.to_json(orient="table"))  # the driver venv has no Parquet engine
    *lines, empty = in_tools_venv(env_python, MACHINES_SECTION.format(path=str(tmp_path / "machines.json")))
    text = "\n".join(lines)
    assert f"ratio over the reference machine, **{reference}**" in text and empty == "None"
    flipped = table[
        (table["stack"] == DEMOTED) & (table["batch_size"] == FLIPPED_BATCH) & (table["variant"] == "eager")
    ]
    flipped = flipped.set_index("machine")
    row = flipped.loc[OTHER_MACHINE]
    assert (
        f"| {DEMOTED} · eager |" in text
        and f"{row['train_images_per_s_gmean']:,.0f} [{row['train_images_per_s_ci95_low']:,.0f}, "
        f"{row['train_images_per_s_ci95_high']:,.0f}] ({row['ratio']:.2f}x [{row['ratio_ci95_low']:.2f}, "
        f"{row['ratio_ci95_high']:.2f}])"
        in text
    )
    best = table[table["batch_size"] == FLIPPED_BATCH].groupby(["machine", "stack"])["train_images_per_s_gmean"].max()
    assert (
        f"on {OTHER_MACHINE}, mxnet-1.9 ({best[OTHER_MACHINE, 'mxnet-1.9']:,.0f}) > {DEMOTED} "
        f"({best[OTHER_MACHINE, DEMOTED]:,.0f})"
        in text
        and f"on {reference}, {DEMOTED} ({best[reference, DEMOTED]:,.0f}) > mxnet-1.9" in text
    ), "a flip is said with each machine's numbers"
    assert f"The stacks rank alike on every machine: {DEMOTED} > mxnet-1.9" in text
    assert " tokens/s" not in text
    assert f"Page 1's fastest is {DEMOTED} on every machine ({reference}: decided after 3 rounds; " in text
    assert (
        f"**Page 1's fastest differs between machines**: {DEMOTED} on {reference} (decided after 3 rounds); "
        f"mxnet-1.9 on {OTHER_MACHINE} (decided after 3 rounds). Every one of these answers is decided: the fastest "
        "flips between these machines." in text
    )


def test_a_language_models_machines_cells_are_in_tokens_per_second(env_python, tmp_path):
    table, _ = two_machines(tmp_path, sequence_tokens=64)
    (tmp_path / "machines.json").write_text(table.to_json(orient="table"))
    *lines, _ = in_tools_venv(env_python, MACHINES_SECTION.format(path=str(tmp_path / "machines.json")))
    row = table[table["machine"] != table["reference_machine"]].iloc[0]
    assert (
        f"{row['train_tokens_per_s_gmean']:,.0f} [{row['train_tokens_per_s_ci95_low']:,.0f}, "
        f"{row['train_tokens_per_s_ci95_high']:,.0f}] tokens/s ({row['ratio']:.2f}x" in "\n".join(lines)
    )
