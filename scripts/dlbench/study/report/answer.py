"""The answer, on page 1: per comparison group the fastest stack and variant, its lead over the runner-up with the
comparisons table's verdict, and the fastest to target accuracy where that is another; under it, what to use, group
by group (the fastest table's recommendations: dlbench.study.analysis.recommendation), and where cost and energy are
absent, why; below, the machine, the versions, the math mode and threads, and how to reproduce the study. Printed
from the fastest table."""

import json
import re
from itertools import starmap
from pathlib import Path

import pandas as pd

from dlbench.study.analysis.fastest import DIFFERENCES
from dlbench.study.analysis.noise import MIN_TREND_EPOCHS, STEADY_DRIFT, measurement_quality
from dlbench.study.cpus import microarchitecture
from dlbench.study.report import resources
from dlbench.study.report.common import (
    bracketed,
    group_titles,
    groups_text,
    lead_in,
    markdown_table,
    number,
    percent,
    ratio_text,
    throughput_cell,
    variant_label,
)

TITLE = "The answer: fastest per group"

# The PDF's table of contents follows the answer (pandoc's --toc would put it first, before the answer).
CONTENTS = "```{=typst}\n#outline(depth: 2)\n```\n"

LEGEND = (
    "The fastest is the quickest experiment with at least 3 ok repeats where the group has any (fewer cannot be "
    "tested); its lead is its geometric-mean throughput over the runner-up's, with the ratio's interval at the "
    "confidence its verdict was tested at (unraced, Holm's step within the group, whose family is every pair of its "
    "experiments: 95% for a group of two, more for larger groups; raced, the race's confidence sequence at the 0.05 "
    "shared among every pair of the group, valid at every round at once; the Comparisons table gives each), so that "
    "the interval agrees with the runner-up's verdict. Confidence: *decided*, the "
    "runner-up and every other tested experiment are proven slower; *tie*, each proven slower or within the "
    "equivalence margin and one within it; *undecided*, a rival proven neither "
    "(with what would decide it; Comparisons gives each rival's); *out of reach*, a race that no count of rounds up "
    "to `race.max_rounds` would decide at the spread it shows; *untested*, the config's `comparison_baseline` makes "
    "the comparisons against another stack; *contended*, an experiment of the group was never measured clean, so a "
    "contender may be missing; *alone*, nothing else in the group finished; *failed*, no run of the group finished. "
    "A decisive lead's interval lies wholly above 1, an equivalent one's inside the margin, an inconclusive one's "
    "contains 1 and reaches past the margin. Raced, the race's own words map onto these: a race *decided* (its "
    "leader proven faster than every rival) reads *decided*, a race *tied* (a rival left proven within the margin) "
    "reads *tie*, a race stopped at the budget reads *undecided* with the budget setting that buys its decision, and "
    "a live rival proven faster than the race's leader is named the fastest. Rounds: "
    'the rounds the group ran; an undecided answer gives the smallest lead those rounds resolve ("resolves 1.15x"), '
    "how many rounds would decide it at the ratio and spread its rivals show, and the minutes those rounds would "
    "take (each run at its own wall time, start to record). To target "
    "accuracy: the training time to the target accuracy, first epoch included, of the experiment that reached it "
    "first in every repeat, where that is not the fastest. What differs: beside the lead, what the runs measured "
    "that sets the fastest apart from the runner-up, the fastest's figure first ("
    + "; ".join(
        f"{words} {shown.format(gap).removesuffix('%')} points apart or more" for _, words, shown, gap in DIFFERENCES
    )
    + "; busy is the share of the machine's CPUs, or of the GPU, the run kept working): where to look for why it "
    "won, not a proven cause. What to use: each group's recommendation, from the same verdicts: use the fastest "
    "where decided; either where tied; where undecided, the rivals still in the running with their ratios, the "
    "smallest lead the rounds resolve and what would decide it; beside a tie or an undecided group the measures on "
    "which a reader can still choose (first epoch, time to target, inference, latency at batch 1), none of them "
    "tested; and a caveat "
    "where the experiments a verdict rests on kept unequal shares of the CPU busy (frameworks left to their own "
    "threads, or XLA, which `cpu_threads: all` cannot pin), with their images/s per busy core."
)
COST_LEGEND = (
    " Cost per million images: the fastest's, at the config's `price_per_hour` for its device (per device on GPU, "
    "times its replicas), over its steady throughput; the interval is its throughput's, inverted; unpriced where the "
    "config sets no price for its device."
)


def distinct(values):
    """The values a column takes, once each; a record's "None" (not recorded) is no value."""
    return ", ".join(sorted({str(value) for value in values.dropna()} - {"None"})) or "not recorded"


def gpu_name(name, driver):
    return name if pd.isna(driver) or driver is None else f"{name} (driver {driver})"


def cpu_text(model, generation, logical, physical, memory):
    """A CPU as the runs recorded it: its model with its microarchitecture where known (dlbench.study.cpus) and its
    family, model and stepping where the name has no model number, its cores (with SMT where a core runs two
    threads) and the memory."""
    generation = None if pd.isna(generation) else generation
    numbers = None if re.search(r"\d{3,}", model) else generation
    named = ", ".join(filter(None, [model, microarchitecture(model, generation), numbers]))
    if pd.isna(physical):
        cores = f"{logical} logical CPUs"
    elif physical == logical:
        cores = f"{logical} cores, no SMT"
    else:
        cores = f"{int(physical)} cores, {logical} threads (SMT)"
    size = "" if pd.isna(memory) else f", {memory / 1024:,.0f} GiB memory"
    return f"{named} ({cores}{size})"


def machine_line(runs):
    gpus = runs.dropna(subset=["provenance_gpu"])
    gpu = ", ".join(sorted(set(map(gpu_name, gpus["provenance_gpu"], gpus["provenance_gpu_driver"])))) or "none"
    unknown = pd.Series(None, index=runs.index, dtype=object)  # records from before these were recorded
    cpus = zip(
        runs["provenance_cpu_model"],
        runs.get("provenance_cpu_generation", unknown),
        runs["provenance_cpu_cores"],
        runs.get("provenance_cpu_physical_cores", unknown),
        runs.get("provenance_memory_mb", unknown),
    )
    return f"**Machine**: {', '.join(sorted(set(starmap(cpu_text, cpus))))}; GPU: {gpu}."


def versions_line(summary, runs):
    """Each stack's framework and backend versions (the first recorded, over devices), and the NumPy of its env where
    the records have it."""
    numpy = runs.get("provenance_numpy", pd.Series(None, index=runs.index, dtype=object))
    firsts = summary.groupby("stack")[["framework", "framework_version", "backend_version"]].first()
    numpy = numpy.groupby(runs["stack"]).first()
    parts = []
    for stack, row in firsts.iterrows():
        version = "–" if pd.isna(row["framework_version"]) else row["framework_version"]
        backend = "" if pd.isna(row["backend_version"]) else f" on {row['backend_version']}"
        with_numpy = "" if pd.isna(numpy.get(stack)) else f", NumPy {numpy[stack]}"
        parts.append(f"{stack}: {row['framework']} {version}{backend}{with_numpy}")
    return "**Versions**: " + "; ".join(parts) + "."


# The thread counts a framework reads back (dlbench.adapters' engaged), and what each counts.
THREAD_COUNTS = {
    "intra_op_threads": "intra-op",
    "inter_op_threads": "inter-op",
    "omp_threads": "OpenMP",
    "xla_threads": "XLA",
}


def thread_count_text(value, name, cpus):
    """One count as read back: "2 intra-op"; 0 is the framework's default of one thread per schedulable CPU, whose
    count `cpus` the run recorded where the framework follows that rule (TensorFlow, XLA). A text is printed as it is:
    records written before that count was kept describe XLA's default in words."""
    if isinstance(value, str):
        return value
    if value != 0:
        return f"{value} {name}"
    return f"its own choice of {name}" if cpus is None else f"{cpus} {name} (its default, one per CPU)"


def thread_text(engaged):
    """The thread counts one run's framework read back ("2 intra-op, 1 inter-op")."""
    cpus = engaged.get("schedulable_cpus")
    counts = [
        thread_count_text(engaged[key], name, cpus)
        for key, name in THREAD_COUNTS.items()
        if engaged.get(key) is not None
    ]
    return ", ".join(counts) or "not read back"


def threads_text(runs):
    """The threads per run: each count pinned, and where runs left it to the framework, the counts each stack's
    default read back."""
    policies = {str(value) for value in runs["provenance_threads"].dropna()} - {"None"}
    if not policies:
        return "not recorded"
    parts = [f"{count} (pinned)" for count in sorted(policies - {"framework"})]
    if "framework" in policies:
        default = runs[(runs["status"] == "ok") & (runs["provenance_threads"] == "framework")]
        default = default.drop_duplicates("stack")
        counts = "; ".join(
            f"{stack} {thread_text(json.loads(engaged))}"
            for stack, engaged in zip(default["stack"], default["engaged"])
        )
        parts.append(f"each framework's default, read back: {counts or 'no finished run'}")
    return "; ".join(parts)


def math_mode_line(runs):
    """The math mode that ran, read back per GPU run (engaged tf32 and conv_autotune); CPU runs have neither
    switch. Then the threads each run used."""
    finished = runs[runs["status"] == "ok"]
    modes = {}
    for _, row in finished[finished["device"] == "gpu"].iterrows():
        engaged = json.loads(row["engaged"])
        mode = (
            f"TF32 {'on' if engaged.get('tf32') else 'off'}, "
            f"convolution autotuning {'on' if engaged.get('conv_autotune') else 'off'}"
        )
        modes.setdefault(mode, set()).add(row["stack"])
    parts = [f"on GPU {mode} ({', '.join(sorted(where))})" for mode, where in sorted(modes.items())]
    if (finished["device"] == "cpu").any():
        parts.append("on CPU float32 throughout (TF32 and convolution autotuning are GPU switches)")
    return (
        f"**Math mode** of every figure and table, as each framework applied it: {'; '.join(parts) or 'no finished run'}"
        f". **Threads** per run: {threads_text(runs)}."
    )


def lock_digests(runs):
    """Each env's lock digest, cut to 12 characters, after its env file's name: what the venvs were installed from
    exactly (conda and existing environments have no lock; older records no digest)."""
    locks = runs.get("provenance_lock_sha256", pd.Series(None, index=runs.index, dtype=object))
    pairs = {
        f"{Path(env).stem} {lock[:12]}"
        for env, lock in zip(runs["provenance_env_file"], locks)
        if isinstance(env, str) and isinstance(lock, str)
    }
    return ", ".join(sorted(pairs)) or "none recorded"


def reproduce_line(runs, origin):
    """The commit the runs were made at, the config's digest, the locks of the envs and the command that runs the
    study again (with the GPU resource where the study ran on a GPU)."""
    resources = "--resources gpu=1" if (runs["device"] == "gpu").any() else ""
    command = " ".join(filter(None, ["snakemake --cores all", resources, origin["arguments"]]))
    digest = f" (config sha256 {origin['config_sha256'][:12]})" if origin["config_sha256"] else ""
    return (
        f"**Reproduce**: at commit {distinct(runs['provenance_workflow_commit'])}{digest}, with the env locks"
        f" {lock_digests(runs)}: `{command}`."
    )


def fastest_cell(row):
    if pd.isna(row["fastest_stack"]):
        return "none: " + row["confidence_reason"]
    return f"{row['fastest_stack']} ({variant_label(row['fastest_variant'], row['data_placement'])})"


def lead_cell(row):
    if pd.isna(row["runner_up_stack"]):
        return "no runner-up"
    differs = "" if pd.isna(row["differs"]) else f"; {row['differs']}"
    return f"{ratio_text(row, 'lead')} over {row['runner_up_stack']} ({row['runner_up_variant']}){differs}"


def shows_tokens(fastest):
    """Whether a group on page 1 is a language model's, whose throughput is its tokens/s."""
    column = "train_tokens_per_s_gmean"
    return column in fastest and fastest[column].notna().any()


def target_cell(row):
    """The fastest to target accuracy where it is another experiment, with the fastest's own time beside it."""
    if pd.isna(row["to_target_stack"]):
        return "not reached"
    if (row["to_target_stack"], row["to_target_variant"]) == (row["fastest_stack"], row["fastest_variant"]):
        return f"the same, {row['to_target_s']:,.2f} s"
    fastest = "not reached" if pd.isna(row["fastest_to_target_s"]) else f"{row['fastest_to_target_s']:,.2f} s"
    return f"{row['to_target_stack']} ({row['to_target_variant']}) {row['to_target_s']:,.2f} s; the fastest {fastest}"


def another_than_fastest(fastest, prefix):
    """The groups where the experiment named by the `prefix`_stack and `prefix`_variant columns is not the fastest."""
    named = fastest[f"{prefix}_stack"]
    return fastest[
        named.notna()
        & ((named != fastest["fastest_stack"]) | (fastest[f"{prefix}_variant"] != fastest["fastest_variant"]))
    ]


def reversal_sentence(fastest):
    reversed_groups = another_than_fastest(fastest, "to_target")
    if reversed_groups.empty:
        return ""
    return (
        f"\nIn {len(reversed_groups)} of {groups_text(len(fastest))} the fastest in steady state is not the first to "
        "reach the target accuracy: time to target also counts the first epoch (compilation, warm-up) and the epochs "
        "the target takes, which steady throughput leaves out (End to end).\n"
    )


# The figures measured beside training that page 1 names where another experiment than the fastest to train has the
# best: the fastest table's prefix -> (the lead-in, its column, how a figure prints). Untested: each is measured once a
# run, not raced.
UNTESTED_BESTS = {
    "inference": (
        "At inference (a pass over the test set as the stack runs it, its fixed cost per pass included; one figure a "
        "run, not tested: geometric means) the fastest is another experiment in",
        "inference_images_per_s",
        lambda value: f"{number(value)} images/s",
    ),
    "latency": (
        "At batch 1 (one test example in, its logits back on the host: the median call of a run, averaged over the "
        "runs that measured it; not tested) the lowest latency is another experiment in",
        "latency_ms",
        lambda value: f"{value:.2f} ms",
    ),
}


def untested_best_sentence(fastest, titles, prefix):
    """The groups whose best at an UNTESTED_BESTS figure is another experiment than the fastest to train, each with
    both figures; `titles`: group_titles' names of the rows."""
    heading, column, shown = UNTESTED_BESTS[prefix]
    other = another_than_fastest(fastest, prefix) if f"{prefix}_stack" in fastest else fastest.iloc[0:0]
    if other.empty:
        return ""
    lines = [
        f"- {titles[index]}: {row[f'{prefix}_stack']} ({row[f'{prefix}_variant']}) {shown(row[column])}; the fastest "
        f"to train, {row['fastest_stack']} ({row['fastest_variant']}), {shown(row[f'fastest_{column}'])}"
        for index, row in other.iterrows()
    ]
    return "\n" + lead_in(f"{heading} {len(other)} of {groups_text(len(fastest))}:") + "\n".join(lines) + "\n"


def input_sentence(fastest, titles):
    """The groups with an experiment whose input work took a tenth or more of a steady epoch."""
    heavy = fastest[fastest["input_heavy"].notna()]
    if heavy.empty:
        return ""
    lines = [f"- {titles[index]}: {row['input_heavy']}" for index, row in heavy.iterrows()]
    return (
        "\n"
        + lead_in(
            "Input work that compute did not hide took a tenth or more of a steady epoch (the mean over repeats; "
            f"{resources.TITLE}) in {len(heavy)} of {groups_text(len(fastest))}: what a real epoch took beyond one "
            "of steps on a batch prepared in advance, measured in pairs of the two (in each experiment's first repeat "
            "by default, `measure_input_share`):"
        )
        + "\n".join(lines)
        + "\n"
    )


def untested_sentence(fastest, titles):
    """The groups where an experiment with too few ok repeats to be tested ran faster than the answer."""
    quicker = fastest[fastest["faster_untested"].notna()]
    lines = [f"- {titles[index]}: {row['faster_untested']}" for index, row in quicker.iterrows()]
    if not lines:
        return ""
    return (
        "\n"
        + lead_in("Faster, but with fewer than 3 ok repeats (not tested, so not the answer):")
        + "\n".join(lines)
        + "\n"
    )


def cost_cell(row):
    """The fastest's cost per million images with its interval (from its throughput's)."""
    column = "cost_per_million_images"
    if pd.isna(row[column]) and pd.notna(row["train_images_per_s_gmean"]):
        return "unpriced"
    return bracketed(row[column], row[f"{column}_ci95_low"], row[f"{column}_ci95_high"], ",.3g")


def priced(fastest):
    """Whether the config set a price for a device the answers ran on (the fastest table has costs there)."""
    return "cost_per_million_images" in fastest and fastest["cost_per_million_images"].notna().any()


def decimal(value):
    return "–" if pd.isna(value) else f"{value:.3f}"


def drift_share(quality):
    """The measurement-quality line's second sentence: how much of the spread across repeats is the machine's drift
    between rounds (none where no experiment has a share)."""
    if pd.isna(quality["round_share_median"]):
        return ""
    return (
        f" Of the spread of throughput across repeats, the machine's drift between rounds accounts for "
        f"{percent(quality['round_share_median'])} (median over experiments; The machine's speed by round), the "
        "processes' own noise for the rest: the paired comparisons leave the drift out."
    )


def quality_box(summary):
    """How noisy the measurements were, in four lines under the answer: the spread across repeats, where the noise
    lives (within or between processes), how many runs were steady, and the contended tries."""
    quality = measurement_quality(summary)
    tested = quality["runs_steady"] + quality["runs_warming_up"] + quality["runs_slowing_down"]
    lines = [
        "**Measurement quality.**",
        f"Throughput across repeats: median coefficient of variation {percent(quality['cv_median'], 1)} "
        f"({quality['cv_10_percent_or_more']} of {quality['experiments']} experiments at 10% or more).",
        f"Log epoch time, median over experiments: standard deviation {decimal(quality['sd_within_median'])} between "
        f"epochs of one process, {decimal(quality['sd_between_median'])} between processes; processes hold "
        f"{percent(quality['between_share_median'])} of a run's variance, which only more repeats reduce (longer runs "
        "reduce the rest)." + drift_share(quality),
        f"Steady state: {quality['runs_steady']} of {tested} runs with {MIN_TREND_EPOCHS} or more steady epochs were "
        f"steady ({quality['runs_warming_up']} still warming up, {quality['runs_slowing_down']} slowing down: a proven "
        f"trend beyond {STEADY_DRIFT:.0%} across the window).",
        f"Contended tries, kept apart and run again: {quality['tries_contended']}.",
    ]
    return "\n".join(f"> {line}  " for line in lines[:-1]) + f"\n> {lines[-1]}\n"


def bottom_line(fastest):
    """One line across groups: how many have a winner, a tie, or no answer yet."""
    if fastest.empty:
        return ""
    counts = fastest["confidence"].value_counts()
    decided, ties = int(counts.get("decisive", 0)), int(counts.get("equivalent", 0))
    undecided = int(counts.get("inconclusive", 0))
    rest = len(fastest) - decided - ties - undecided
    parts = [f"a winner proven in {decided}", f"a tie proven in {ties}", f"undecided in {undecided}"]
    if rest:
        parts.append(f"no contest in {rest} (alone, failed, contended or untested)")
    return f"**Bottom line**: of {groups_text(len(fastest))}, " + ", ".join(parts) + ".\n"


EQUAL_CORES = (
    "Where a caveat says unequal shares of the CPU: this study left each framework its own default threads; to compare "
    "them on equal cores, set `cpu_threads: all` in the config (every framework that can be pinned runs on every core; "
    "JAX's XLA cannot be and keeps its default)."
)


def what_to_use(fastest, runs, titles):
    """Each group's recommendation (dlbench.study.analysis.recommendation), under the table: what to use, or what would
    decide, and the caveats beside it; where a caveat is of unequal cores and the frameworks kept their default
    threads, the setting that evens them, once."""
    if fastest.empty or "recommendation" not in fastest:
        return ""
    lines = [f"- **{titles[index]}**: {row['recommendation']}" for index, row in fastest.iterrows()]
    defaults = (runs["provenance_threads"] == "framework").any()
    switch = f"\n{EQUAL_CORES}\n" if fastest["unequal_cores"].any() and defaults else ""
    return "\n" + lead_in("**What to use**, group by group:") + "\n".join(lines) + "\n" + switch


def absent_line(fastest, runs):
    """Where cost and energy would be and why they are not: unpriced (no `price_per_hour` for the device), no power
    counter readable (NVML on GPU, RAPL on CPU: the records' own reasons)."""
    finished = runs[runs["status"] == "ok"]
    parts = []
    if not priced(fastest):
        parts.append("**Cost**: not priced (the config sets no `price_per_hour` for the devices that ran)")
    gpu, cpu = finished[finished["device"] == "gpu"], finished
    gpu_measured = len(gpu) and gpu["gpu_energy_per_image_j"].notna().any()
    cpu_measured = "cpu_energy_j" in cpu and cpu["cpu_energy_j"].notna().any()
    if not gpu_measured and not cpu_measured:
        reasons = sorted(set(cpu.get("cpu_energy_reason", pd.Series(dtype=object)).dropna()))
        why = f": {'; '.join(reasons)}" if reasons else ""
        parts.append(f"**Energy**: not measured (no power counter readable by the runs{why})")
    return "\n" + ". ".join(parts) + ".\n" if parts else ""


def scope_line(workload):
    """How long the trainings behind the answers lasted and how much of them the first epoch took: steady
    throughput speaks for trainings long enough that the first epoch no longer counts."""
    timed = workload.dropna(subset=["training_s_min", "training_s_max"])
    if timed.empty:
        return ""
    shares = timed["first_epoch_share_median"].dropna()
    first = f", the first epoch a median {shares.min():.0%} to {shares.max():.0%} of it by group" if len(shares) else ""
    return (
        f"\n**Scope**: each training here lasted {timed['training_s_min'].min():,.2f} to "
        f"{timed['training_s_max'].max():,.1f} s{first}. Steady throughput, the measure of every answer above, leaves "
        "the first epoch out: it speaks for trainings long enough that the first epoch no longer counts (where a "
        "fastest starts slower, its recommendation says from what training length it finishes first).\n"
    )


def target_heading(runs):
    """The "to target" column's heading, with the targets the runs were given (each, where they differ): a test
    accuracy, a language model's test loss."""
    named = []
    for column, words in (("target_accuracy", "accuracy"), ("target_loss", "test loss")):
        targets = sorted(set(runs[column].dropna()))
        named += [f"{words} {', '.join(f'{target:g}' for target in targets)}"] * bool(targets)
    targets = f"to target ({'; '.join(named)})" if named else "to target accuracy"
    return f"{targets}, mean, untested"


def answer_table(fastest, runs, shared, titles):
    """The groups' answers, a row each: the parts of the groups' titles they all share (`shared`) said once above
    the table, each row named by what sets it apart (`titles`: group_titles)."""
    if fastest.empty:
        return "No experiment finished with a measured throughput, so no group has an answer (see Failed runs).\n"
    rows = [
        [
            titles[index],
            fastest_cell(row),
            throughput_cell(row),
            lead_cell(row),
            row["decision"],
            target_cell(row),
            *([cost_cell(row)] if priced(fastest) else []),
        ]
        for index, row in fastest.iterrows()
    ]
    header = [
        "group",
        "fastest",
        "images/s (tokens/s where named), geometric mean [95%]"
        if shows_tokens(fastest)
        else "images/s, geometric mean [95%]",
        "lead [interval at its test's level, key below] over the runner-up; what differs",
        "confidence",
        target_heading(runs),
        *(["cost per million images [95%]"] if priced(fastest) else []),
    ]
    every = f"Every group: {shared}.\n\n" if shared else ""
    return every + markdown_table(header, rows)


def markdown(study, figures):
    """Page 1: each group's answer first, with what else changes a reader's choice (faster but untested, first to the
    target, fastest at inference, lowest latency at batch 1, input-heavy), then where and how it was measured, the
    measurements' quality and what the columns mean."""
    lines = [
        machine_line(study.runs),
        versions_line(study.summary, study.runs),
        math_mode_line(study.runs),
        reproduce_line(study.runs, study.origin),
    ]
    shared, titles = group_titles(study.fastest)
    return (
        answer_table(study.fastest, study.runs, shared, titles)
        + "\n"
        + bottom_line(study.fastest)
        + what_to_use(study.fastest, study.runs, titles)
        + absent_line(study.fastest, study.runs)
        + scope_line(study.workload)
        + "\n"
        + untested_sentence(study.fastest, titles)
        + reversal_sentence(study.fastest)
        + untested_best_sentence(study.fastest, titles, "inference")
        + untested_best_sentence(study.fastest, titles, "latency")
        + input_sentence(study.fastest, titles)
        + "\n"
        + "\n\n".join(lines)
        + "\n\n"
        + quality_box(study.summary)
        + "\n"
        + LEGEND
        + (COST_LEGEND if priced(study.fastest) else "")
        + "\n\n"
        + CONTENTS
    )
