"""Where a run's wall time goes: from the start of the job's wrapper process (scripts/run_experiment.py) to its final
record, every second in one named part (PARTS), so that what the harness costs around what it measures is read in
each record, not guessed.

The wrapper and the training process each keep a Timeline: a part ends at each mark and the next begins, so the parts
of a process add up to its life from its start (read from /proc: the interpreter's own start and the imports before
any line of ours runs are counted) to its last mark. The training process's parts go into its record; the wrapper adds
its own and what it saw of the training process from outside (its exit after the record). Snakemake's gap between
one job's end and the next job's start is outside every record: benchmarks/wall_time.py measures it across records.

Standard library only: the wrapper runs it in any stack's interpreter.
"""

import os
import time

CLOCK = time.monotonic  # one clock for every process of the machine (CLOCK_MONOTONIC on Linux)

# Every part of a run's wall time, in order, with what it holds.
PARTS = {
    "wrapper_start": "the wrapper's interpreter start and imports",
    "wrapper_setup": "the wrapper's set-up: its scratch folder, the GPU check, the training process launched",
    "retries": "contended tries and the settle waits after them, before the final try",
    "process_start": "the training process's interpreter start and the harness's imports",
    "setup": "the record begun, threads and math mode set, telemetry started",
    "imports": "the framework's imports (the record's imports phase)",
    "configure": "the framework configured: device, threads, seed, math mode",
    "data": "the dataset verified, loaded and placed (the data_loading and data_staging phases)",
    "build": "the neutral initial weights made and the model built from them (the build phase)",
    "first_epoch": "the first training epoch (compilation included)",
    "steady_epochs": "training epochs 2..N",
    "first_evaluation": "the first epoch's evaluation (the evaluation step's compilation included)",
    "evaluation": "the later epochs' evaluations",
    "steady_extra": "the extra steady epochs that lengthen the steady window to min_steady_seconds",
    "after_training": "the passes after training: the input share, the loader alone, the communication share",
    "failed": "the part an error or a divergence ended, from the last part that finished",
    "telemetry": "telemetry stopped, summarised and its trace written",
    "exit": (
        "what the final try took beyond the training process's own parts: its record and tables written and its exit;"
        " a launcher's start (torchrun, srun) in a multi-process run; its whole life where it died before its record"
    ),
    "wrapper_teardown": "the wrapper's contention verdict and its moving the outputs into place",
}
# The framework's own work, which the harness never cuts: its import, its build, its compilation and the training. The
# first evaluation is counted with it as the first epoch is, for the compilation it holds (the evaluation step's own
# program: on a slow 2-core CPU 0.25 s for TensorFlow's, 0.9 s for Keras on TensorFlow's), with its one pass over the
# test set (0.02-0.17 s there, as the later evaluations take).
FRAMEWORK_PARTS = ("imports", "build", "first_epoch", "first_evaluation", "steady_epochs", "steady_extra")
# The steady window, which a run's throughput (and every decision from it) rests on.
STEADY_PARTS = ("steady_epochs", "steady_extra")


def process_age(proc="/proc"):
    """Seconds since this process started (its fork, so the interpreter's own start is in it), or 0.0 where /proc does
    not say: field 22 of /proc/self/stat is the start in clock ticks after boot, /proc/uptime the seconds since."""
    try:
        with open(f"{proc}/self/stat") as handle:
            started_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open(f"{proc}/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))


class Timeline:
    """A process's parts so far: mark(part) gives `part` the seconds since the last mark (or since `start`); a part
    marked again adds to its seconds (the epochs and evaluations alternate)."""

    def __init__(self, start, clock=CLOCK):
        self.clock, self.last, self.parts = clock, start, {}

    @classmethod
    def of_this_process(cls, clock=CLOCK, age=process_age):
        """A timeline that began when this process did; its first mark holds the interpreter's start."""
        return cls(clock() - age(), clock)

    def mark(self, part):
        if part not in PARTS:
            raise ValueError(f"unknown wall-time part {part!r}: dlbench/walltime.py's PARTS has {', '.join(PARTS)}")
        now = self.clock()
        self.parts[part] = self.parts.get(part, 0.0) + (now - self.last)
        self.last = now


def joined(wrapper, training, launched, ended, teardown):
    """A run's parts in PARTS' order: the wrapper's (start, set-up, retries) and its teardown, the final try's training
    process's own parts (`training`: from its record), and its exit: the seconds from its launch (`launched`) to the
    end the wrapper saw (`ended`) that the process's own parts do not hold. Where the process left no parts (it died
    before its record), the whole of its life is `exit`."""
    parts = dict(wrapper) | dict(training or {})
    parts["exit"] = max(0.0, (ended - launched) - sum((training or {}).values()))
    parts["wrapper_teardown"] = teardown
    return {part: parts[part] for part in PARTS if part in parts}


def harness_seconds(parts):
    """The seconds of a run that are neither the framework's own work (FRAMEWORK_PARTS) nor the timed training."""
    return sum(seconds for part, seconds in parts.items() if part not in FRAMEWORK_PARTS)


def measurement_efficiency(parts):
    """The share of a run's wall time spent in the steady window its throughput is measured over."""
    total = sum(parts.values())
    return sum(parts.get(part, 0.0) for part in STEADY_PARTS) / total if total else None


def summary(parts):
    """One log line: the wall seconds, the harness's share, the steady window's, then every part."""
    total = sum(parts.values())
    each = ", ".join(f"{part} {seconds:.2f}" for part, seconds in parts.items())
    efficiency = measurement_efficiency(parts) or 0.0
    return f"{total:.2f}s, harness {harness_seconds(parts):.2f}s, steady window {efficiency:.0%} ({each})"
