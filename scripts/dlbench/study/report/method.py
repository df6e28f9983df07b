"""How it was measured: the clock's rules, the same for every study."""

TITLE = "How it was measured"

RULES = """\
- Every repeat is a fresh process; timed jobs never overlap (each takes all cores; GPU jobs also take the GPU).
- Phases are timed apart: imports, data loading and staging, model build, first epoch, steady epochs.
- The device is synchronised before every clock read; there are no blocking host reads inside the step loop.
- Training time excludes evaluation; evaluation is timed separately after each epoch.
- Throughput is taken over a steady window of at least `min_steady_seconds`: short epochs are followed by more
  timed passes after the last evaluation.
- Every framework builds the same network from one neutral spec and starts from the same initial weights.
- Each epoch uses the same shuffled order in every framework and whole batches only.
- Data placement is part of the experiment: by default the dataset is staged on the device once and batches are
  gathered there; "host data" keeps it in NumPy and hands each batch over per step; "stream data" reads an image
  folder every epoch through the framework's own loader, with the same crop boxes in every framework.
- What actually ran (graph/eager state, dtype, layout, threads) is recorded per run, not what was asked.
- Operators are checked against NumPy before they are timed; each timed sample lasts at least a few
  milliseconds and is synchronised on both ends; the median and interquartile range of at least 10 samples
  are reported, beside a ceiling measured in the same job.
"""


def markdown(study, figures):
    return RULES
