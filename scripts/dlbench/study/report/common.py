"""What the report's sections share: labels and panels, the figure grid and its saving, cells and tables, the texts
of a ratio and a verdict. The sections print the aggregation's tables; nothing here computes a statistic."""

import math
import re
import textwrap

import matplotlib

from dlbench.axes import PANEL
from dlbench.study.analysis.recommendation import percent_words, ratio_words
from dlbench.study.analysis.statistics import is_equivalence
from dlbench.study.analysis.tables import GROUP
from dlbench.study.palette import series_style, stack_colour, variant_marker

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "dlbench"  # the same figure gives the same ids: no spurious diffs
# Figures are drawn at the width they print at (the PDF's text width), so that these sizes are the printed ones: no
# label below 7 pt.
TEXT_WIDTH = 6.7  # inches: A4 less its 1.8 cm margins
matplotlib.rcParams.update(
    {
        "font.size": 8,
        "axes.titlesize": 8,
        "axes.labelsize": 8,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 7,
    }
)
import matplotlib.pyplot as plt  # after the backend is chosen
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

STATUS_LABEL = {"oom": "OOM", "error": "ERROR", "unavailable": "N/A", "contended": "BUSY", "diverged": "DIVERGED"}


def variant_label(variant, placement):
    """The variant, and the data placement where it is not the default (the dataset staged on the device)."""
    return variant if placement == "device" else f"{variant}, {placement} data"


def variant_labels(frame):
    return pd.Series(map(variant_label, frame["variant"], frame["data_placement"]), index=frame.index, dtype=object)


# The summary's columns a figure's lines are named, coloured and panelled by: merged onto epochs and traces.
LINE_KEYS = ["stack", "framework", "variant", "data_placement", *PANEL]


def label(frame):
    return frame["stack"] + " · " + variant_labels(frame)


def panel_titles(summary):
    return sorted(set(zip(*(summary[key] for key in PANEL))))


def on_devices(device, replicas):
    """Where a panel or group ran: the device, or its data-parallel replicas."""
    return f"{replicas} {device} replicas" if replicas > 1 else device


def panel_title(panel):
    """A panel's title from its key (a tuple of PANEL's values)."""
    named = dict(zip(PANEL, panel))
    on = on_devices(named["device"], named["replicas"])
    return f"{named['model']} on {named['dataset']}, batch {named['batch_size']}, {on} on {named['machine']}"


def figure_titles(panels):
    """{panel: its title in a figure}: without the machine where every panel of its device ran on one machine (page 1
    names it), so that the title fits on a line of its panel."""
    device, machine = PANEL.index("device"), PANEL.index("machine")
    machines = {}
    for panel in panels:
        machines.setdefault(panel[device], set()).add(panel[machine])
    return {
        panel: panel_title(panel) if len(machines[panel[device]]) > 1 else panel_title(panel).rsplit(" on ", 1)[0]
        for panel in panels
    }


def panel_rows(frame, panel, keys=PANEL):
    """The rows of frame that belong to one panel: by default a tuple of PANEL's values."""
    return frame[(frame[keys] == pd.Series(panel, index=keys)).all(axis=1)]


def figure_grid(count, max_columns=2, panel_height=2.2):
    """A figure as wide as the page's text with `count` visible panels, at most max_columns a row; with none (no run
    finished anything to draw), one that says so, so that a study of failed runs still gets its report."""
    columns = max(1, min(count, max_columns))
    rows = max(1, (count + columns - 1) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(TEXT_WIDTH, 0.3 + panel_height * rows), squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    if count == 0:
        axes.flat[0].set_visible(True)
        axes.flat[0].set_axis_off()
        axes.flat[0].text(0.5, 0.5, "no finished run to draw", ha="center", va="center")
    return figure, axes.flat


def panel_heading(axis, text):
    """A panel's title, wrapped to the width of the panel's cell of the grid (a longer one would run into its
    neighbour's)."""
    inches = axis.figure.get_figwidth() / axis.get_subplotspec().get_gridspec().ncols
    axis.set_title(textwrap.fill(text, max(20, int(inches * 15))))


def styled_lines(part, names, releases):
    """(name, rows, style) per line of a panel, lines named by `names` (a Series beside part), styled by
    dlbench.study.palette: the stack family's colour, the release's line style (releases: release_styles over the whole
    figure, so that a stack keeps its style in every panel), the variant's marker and the placement's fill."""
    for name, line in part.groupby(names, sort=True):
        first = line.iloc[0]
        style = series_style(first["stack"], first["variant"], first["data_placement"], releases[first["stack"]])
        yield name, line, style


def stack_rows(part, rank):
    """A dot plot's rows: (y per row of part, tick positions, stack names). A row per stack, in the order of its best
    `rank` (a Series beside part; the highest on top, a stack with none at the bottom), its variants and placements
    side by side within the row: a panel needs a line per stack, not per experiment."""
    best = rank.groupby(part["stack"]).max().fillna(float("-inf")).sort_values(kind="stable")
    row = {stack: index for index, stack in enumerate(best.index)}
    series = variant_labels(part)
    ys = pd.Series(0.0, index=part.index)
    for stack, members in part.groupby("stack"):
        names = sorted(set(series[members.index]))
        step = min(0.25, 0.75 / len(names))
        for index in members.index:
            ys[index] = row[stack] + (names.index(series[index]) - (len(names) - 1) / 2) * step
    return ys, list(row.values()), list(row)


def spans_a_decade(values):
    """Whether a panel's positive values span more than 10x: then a linear axis flattens all but the largest."""
    positive = pd.Series(values, dtype=float).dropna()
    positive = positive[positive > 0]
    return len(positive) > 0 and positive.max() > 10 * positive.min()


def legend_below(figure, extra=()):
    """One legend for the whole figure, below its panels: never over the data, each line named once however many
    panels draw it (and `extra` handles after them), in as many columns as the names fit across the page."""
    named = {}
    for axis in figure.axes:
        for handle, name in zip(*axis.get_legend_handles_labels()):
            named.setdefault(name, handle)
    named.update({handle.get_label(): handle for handle in extra})
    if named:
        longest = max(map(len, named))
        columns = max(1, min(5, int(TEXT_WIDTH * 72 / (longest * 3.8 + 24))))
        figure.legend(
            named.values(),
            named.keys(),
            loc="upper center",
            bbox_to_anchor=(0.5, 0),
            ncol=columns,
            frameon=False,
        )


def key_legend(figure, frame, extra=()):
    """The legend of a dot plot whose rows name the stacks: each stack's colour and each variant's marker (and each
    placement's fill where the figure has more than one, then `extra` handles), so that a dot reads as stack and
    variant."""
    handles = [
        Line2D([], [], color=stack_colour(stack), marker="s", linestyle="", label=stack)
        for stack in sorted(set(frame["stack"]))
    ]
    handles += [
        Line2D([], [], color="#555555", marker=variant_marker(variant), linestyle="", label=f"variant {variant}")
        for variant in sorted(set(frame["variant"]))
    ]
    placements = sorted(set(frame["data_placement"]))
    if len(placements) > 1:
        handles += [
            Line2D([], [], **series_style("", "eager", placement, linestyle=""), label=f"{placement} data")
            for placement in placements
        ]
    legend_below(figure, [*handles, *extra])


def save(figure, path):
    """SVG (glyphs drawn as paths): vector in the PDF, sharp in the HTML, no font needed where it is read. The
    bounding box takes in the legend below the panels."""
    figure.tight_layout()
    right = 1.0
    # A title or tick label past the right edge gets room inside it, so that the figure prints at its size; each
    # layout moves what it makes room for, so a pass or two more settles it.
    for _ in range(3):
        overflow = figure.get_tightbbox(figure.canvas.get_renderer()).x1 - figure.get_figwidth()  # inches
        if overflow <= 0:
            break
        right -= overflow / figure.get_figwidth()
        figure.tight_layout(rect=(0, 0, right, 1))
    # No timestamp: a redrawn figure is the same file.
    figure.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)


def group_parts(row):
    """An experiment group's title in parts: the workload, the batch, where it ran, the optimiser, the epochs, the
    data's placement and the machine."""
    scaling = "" if row["replicas"] == 1 else f" ({row['scaling']})"
    return [
        f"{row['model']} on {row['dataset']}",
        f"batch {row['batch_size']}",
        on_devices(row["device"], row["replicas"]) + scaling,
        f"{row['optimizer']} lr {row['learning_rate']:g}",
        f"{row['epochs']} epochs",
        f"{row['data_placement']} data",
        f"on {row['machine']}",
    ]


DEVICE_DATA = "device data"  # the default placement, named only where it sets a group apart from another


def joined(parts):
    return ", ".join(part for part in parts if part)


def group_title(row):
    """An experiment group: what its members share (comparisons are made within one)."""
    return joined(part for part in group_parts(row) if part != DEVICE_DATA)


def group_titles(groups):
    """(what every group shares, {index: what sets each apart}): a table of groups names the shared parts once
    instead of in every row; a single group keeps its whole title."""
    parts = {index: group_parts(row) for index, row in groups.iterrows()}
    if len(parts) < 2:
        return "", {index: group_title(row) for index, row in groups.iterrows()}
    same = [len(set(column)) == 1 for column in zip(*parts.values())]
    first = next(iter(parts.values()))
    shared = joined(part for part, alike in zip(first, same) if alike and part != DEVICE_DATA)
    return shared, {
        index: joined(part for part, alike in zip(each, same) if not alike) for index, each in parts.items()
    }


def comparison_groups(comparisons):
    return comparisons.groupby(GROUP, sort=True, dropna=False)


DECIDED, EQUIVALENT, UNDECIDED = "#4C72B0", "#55A868", "#9A9A9A"  # blue, green, grey


def verdict_colour(verdict):
    """Blue for a proven difference, green for a proven equivalence, grey for inconclusive or not tested."""
    if verdict in ("faster", "slower"):
        return DECIDED
    return EQUIVALENT if is_equivalence(verdict) else UNDECIDED


def ratio_axis(axis, part, labels, title, xlabel):
    """Ratios with their intervals (at the level each verdict was tested at, so that a bar wholly off 1 is a proven
    difference) on a log axis around 1, coloured by verdict (verdict_colour)."""
    for y, (ratio, low, high, verdict) in enumerate(
        zip(part["ratio"], part["ratio_low"], part["ratio_high"], part["verdict"])
    ):
        colour = verdict_colour(verdict)
        below, above = (0, 0) if pd.isna(low) else (ratio - low, high - ratio)
        axis.errorbar(ratio, y, xerr=[[below], [above]], fmt="o", color=colour, capsize=3)
    axis.set_yticks(range(len(part)), labels)
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_xscale("log")
    log_ticks(axis.xaxis, "x")
    panel_heading(axis, title)
    axis.set_xlabel(xlabel)


def on_steps(value, subs):
    """Whether a value is one of the steps `subs` of its decade: over less than a decade, LogLocator gives a linear
    axis' ticks instead (0.175, 0.2, 0.225), which crowd a narrow panel."""
    step = value / 10 ** math.floor(math.log10(value))
    return any(math.isclose(step, sub, rel_tol=1e-6) for sub in subs)


def spreads_over_the_axis(ticks, low, high):
    """Whether ticks span at least a third of a log axis: two steps side by side (0.09 and 0.1) at one end of a
    short panel run into each other."""
    return math.log(ticks[-1] / ticks[0]) >= math.log(high / low) / 3


def log_ticks(axis, suffix=""):
    """Plain labels on a log axis ("0.2", "5", "2x" with suffix "x"), at least two in view and never crowded: the
    decades where two are in view, else the 1, 2 and 5 of each decade, else every step of the decade (each where
    they spread over the axis), else evenly spaced values. Matplotlib's default labels every minor tick of a short span, and they run into each other; call it
    after the data are drawn (it reads the axis' span)."""
    low, high = sorted(axis.get_view_interval())
    for subs in ((1.0,), (1.0, 2.0, 5.0), tuple(float(step) for step in range(1, 10))):
        ticks = [
            tick
            for tick in LogLocator(subs=subs).tick_values(low, high)
            if low <= tick <= high and on_steps(tick, subs)
        ]
        if len(ticks) >= 2 and spreads_over_the_axis(ticks, low, high):
            break
    else:
        ticks = [tick for tick in MaxNLocator(3).tick_values(low, high) if low <= tick <= high]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.3g}{suffix}"))
    axis.set_minor_locator(LogLocator(subs="auto"))
    axis.set_minor_formatter(NullFormatter())


def ratio_figure(groups, labeller, titler, xlabel, empty, path):
    """One ratio panel per group (a list of (key, rows)), rows sorted by ratio."""
    rows = max((len(part) for _, part in groups), default=1)
    figure, axes = figure_grid(max(len(groups), 1), panel_height=1.0 + 0.16 * rows)
    for axis, (_, part) in zip(axes, groups):
        part = part.sort_values("ratio")
        ratio_axis(axis, part, labeller(part), titler(part.iloc[0]), xlabel)
    if not groups:
        axes[0].text(0.5, 0.5, empty, ha="center", va="center")
        axes[0].set_axis_off()
    save(figure, path)


def number(value, digits=0):
    return "–" if pd.isna(value) else f"{value:,.{digits}f}"


def throughput_unit(part):
    """(the throughput columns' stem, its unit) that a figure's panel plots: a language model's tokens/s where its
    experiments measured them (a panel holds one model), else images/s."""
    tokens = "train_tokens_per_s_gmean" in part and part["train_tokens_per_s_gmean"].notna().any()
    return ("train_tokens_per_s", "tokens") if tokens else ("train_images_per_s", "images")


def throughput_cell(row):
    """Images/s, or a language model's tokens/s (named: a table's throughput column is in images/s)."""
    unit = "train_tokens_per_s" if pd.notna(row.get("train_tokens_per_s_gmean")) else "train_images_per_s"
    low, high = row[f"{unit}_ci95_low"], row[f"{unit}_ci95_high"]
    return bracketed(row[f"{unit}_gmean"], low, high, ",.0f") + (" tokens/s" if unit == "train_tokens_per_s" else "")


def ok_runs(runs, row):
    """The finished repeats of the row's experiment on the row's machine: the runs table's rows behind a statistic,
    drawn as a figure's points."""
    mine = runs[(runs["experiment_id"] == row["experiment_id"]) & (runs["machine"] == row["machine"])]
    return mine[mine["status"] == "ok"]


def bracketed(value, low, high, spec):
    """A figure and, where it has one, its 95% interval: "1,234 [1,100, 1,300]"; a dash for a missing figure."""
    if pd.isna(value):
        return "–"
    interval = "" if pd.isna(low) or pd.isna(high) else f" [{low:{spec}}, {high:{spec}}]"
    return f"{value:{spec}}{interval}"


def percent(value, digits=0):
    return "–" if pd.isna(value) else f"{value:.{digits}%}"


def share(value, digits):
    """A share of the work that fixed-batch epochs leave out (input work, communication); a negative one (they ran
    slower than the epochs they are compared with) is noise, not a share, and says so instead of printing as a
    result."""
    if pd.notna(value) and value < 0:
        return "noise (below 0)"
    return percent(value, digits)


def cell(row, column, digits=0, formatter=number):
    """A figure, or the failure it stands for (OOM, ERROR) when no run of the experiment succeeded."""
    if row["runs_ok"] == 0:
        return STATUS_LABEL.get(row["statuses"].split(",")[0], "failed")
    return formatter(row[column], digits)


NUMBER = re.compile(r"[-+−]?\d")  # a cell that starts with a number: a figure, a ratio, an interval, a count


def numeric(column):
    """Whether a column holds figures: every cell a number, a dash or a failure's label (OOM, ERROR)."""
    cells = [str(cell) for cell in column if str(cell) not in ("–", *STATUS_LABEL.values())]
    return bool(cells) and all(NUMBER.match(cell) for cell in cells)


# Where a cell's line may break: at a space, and after an underscore (the PDF and the HTML break long ids there).
BREAKS = re.compile(r"[\s_]+")
# The characters a table line holds in the PDF (text width over 8 pt characters, less each cell's padding).
LINE_CHARACTERS = 112


def column_dashes(header, columns):
    """The dashes under each column's title, which pandoc sizes the columns of a table wider than the page by: each
    column its longest word's characters (a word never breaks, and a narrower column would print it over the next
    one; an id's parts between underscores are words), then what is left of the line shared out to the columns with longer cells, up to their longest."""
    cells = [[title, *map(str, column)] for title, column in zip(header, columns)]
    least = [max([5, *(len(word) for cell in column for word in BREAKS.split(cell))]) for column in cells]
    most = [max([needed, *map(len, column[1:])]) for needed, column in zip(least, cells)]  # a title wraps
    spare = LINE_CHARACTERS - 2 * len(header) - sum(least)
    wanted = sum(most) - sum(least)
    if spare <= 0 or wanted <= spare:
        return most if spare > 0 else least
    return [needed + round((longest - needed) * spare / wanted) for needed, longest in zip(least, most)]


def lead_in(text):
    """A paragraph that introduces the table or figure after it, kept on that one's page in the PDF (a sticky typst
    block, as headings are: report.qmd) rather than left at the foot of the page before it; the HTML shows the
    paragraph alone."""
    return f"```{{=typst}}\n#block(sticky: true)[\n```\n\n{text}\n\n```{{=typst}}\n]\n```\n\n"


def markdown_table(header, rows):
    """A pipe table; columns of figures right-aligned, so that digits line up; each column as wide as its content
    needs, within the page (column_dashes)."""
    columns = list(zip(*rows)) if rows else [() for _ in header]
    rule = [
        "-" * (dashes - 1) + ":" if numeric(column) else ":" + "-" * (dashes - 1)
        for dashes, column in zip(column_dashes(header, columns), columns)
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(value).replace("|", "/") for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def ratio_text(row, column="ratio"):
    """The ratio in `column` and its interval (`column`_low, `column`_high) at the level its verdict was tested at:
    "1.15x [1.02, 1.30]"."""
    return ratio_words(row[column], row[f"{column}_low"], row[f"{column}_high"])


def groups_text(count):
    """A count of comparison groups with its noun in number: "1 group", "4 groups"."""
    return f"{count} group" if count == 1 else f"{count} groups"


def confidence_text(value):
    return "–" if pd.isna(value) else percent_words(value)


def p_text(value):
    return "–" if pd.isna(value) else f"{value:.3g}"


def margin_text(table):
    """The equivalence margin the table was tested with, as the verdicts print it ("5 %")."""
    return f"{table['equivalence_margin'].iloc[0] * 100:g} %"


def deciding_text(row):
    """What would decide an inconclusive comparison."""
    if pd.isna(row["repeats_to_decide"]):
        return "no practical number of repeats would decide"
    return f"about {row['repeats_to_decide']} repeats would decide"


def verdict_text(row):
    """The verdict, and for an inconclusive one the repeats that would decide it."""
    return f"inconclusive ({deciding_text(row)})" if row["verdict"] == "inconclusive" else row["verdict"]


METHOD_WORD = {"paired by round": "paired", "unpaired (Welch)": "unpaired"}  # none: not tested


def method_word(row):
    """ ", paired" or ", unpaired": how a comparison's repeats were compared (nothing where it was not tested)."""
    return f", {METHOD_WORD[row['method']]}" if row["method"] in METHOD_WORD else ""
