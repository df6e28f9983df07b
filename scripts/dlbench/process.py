"""Set-up of a timed process that must happen before its framework is imported, and the one launcher of child
processes (run_child): a training run, a max-batch probe, a benchmark's measurement. Standard library only."""

import collections
import dataclasses
import json
import os
import signal
import subprocess
import threading
import time

from . import mathmode

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_count(argument):
    """A --threads argument (config `cpu_threads`): a number of threads, None for `framework` (each framework's own
    default), or for `all` the CPUs this process may run on (its job's share of the machine, under Snakemake or
    Slurm alike)."""
    if argument == "framework":
        return None
    return len(os.sched_getaffinity(0)) if argument == "all" else int(argument)


def thread_policy(threads):
    """How a record states the thread count: the number pinned, or 'framework'."""
    return "framework" if threads is None else threads


def prepare_process(environment, threads, math_mode):
    """Thread-count variables where threads are pinned (None: left to each framework, as its users get them) and
    the math-mode policy's variables (read by the frameworks' runtimes at import), then the stack's own variables."""
    for name in THREAD_VARIABLES:
        if threads is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(threads)
    os.environ.update(mathmode.environment(math_mode))
    stack = dict(environment)
    if "XLA_FLAGS" in stack:  # a stack's XLA flags (its CPU replicas' host devices) join the policy's
        stack["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {stack['XLA_FLAGS']}".strip()
    os.environ.update(stack)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a child process ended (run_child): its exit status (negative: the signal that killed it), what it
    printed on stdout where that was captured (else ""), the last lines of its stderr, and how long it ran;
    timed_out where it was still running after its timeout and was killed."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    timeout: float | None = None

    @property
    def ok(self):
        return self.returncode == 0 and not self.timed_out

    @property
    def signal(self):
        """The signal that ended it (signal.Signals), None where it exited or timed out (run_child killed it)."""
        return signal.Signals(-self.returncode) if self.returncode < 0 and not self.timed_out else None

    @property
    def description(self):
        """Its end in words: `exited with code 1`, `killed by signal SIGKILL`, `timed out after 600 s`."""
        if self.timed_out:
            return f"timed out after {self.timeout:g} s"
        if self.signal is not None:
            return f"killed by signal {self.signal.name}"
        return f"exited with code {self.returncode}"

    def stderr_tail(self, lines):
        """Its last `lines` lines of stderr in one line, joined by ' | ' ("" where it printed nothing)."""
        return " | ".join(line.rstrip() for line in self.stderr.strip().splitlines()[-lines:])

    def result(self):
        """What a child reports as its last line of stdout, one JSON value; None where it printed nothing."""
        lines = self.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else None


def child_environment(environment=None, pythonpath=()):
    """This process's environment with `environment`'s variables, and the folders of `pythonpath` in front of
    PYTHONPATH: for a child that imports the library (scripts/) but is not a script in scripts/ itself."""
    child = dict(os.environ, **(environment or {}))
    folders = [str(folder) for folder in pythonpath] + ([child["PYTHONPATH"]] if child.get("PYTHONPATH") else [])
    if folders:
        child["PYTHONPATH"] = os.pathsep.join(folders)
    return child


def run_child(command, *, environment=None, pythonpath=(), timeout=None, log=None, capture_stdout=False, kept=200):
    """Run `command` (an argv list) to its end; its Outcome. The one way a script or benchmark runs a child process.

    environment, pythonpath: added to this process's environment (child_environment). log: a text stream (the job's
    log: sys.stderr) that gets each line of the child's stderr as it comes; the last `kept` lines are also kept in the
    outcome. capture_stdout: keep its stdout in the outcome (a child reporting a result, Outcome.result), else it
    shares this process's. timeout: seconds after which the child is killed (SIGKILL; what it started itself is left
    to notice) and its outcome says it timed out."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [str(word) for word in command],
        env=child_environment(environment, pythonpath),
        stdout=subprocess.PIPE if capture_stdout else None,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        bufsize=1,
    )
    stderr, stdout = collections.deque(maxlen=kept), []

    def copy_stderr():
        for line in child.stderr:
            stderr.append(line)
            if log is not None:
                log.write(line)
                log.flush()

    readers = [threading.Thread(target=copy_stderr, daemon=True)]
    if capture_stdout:
        readers.append(threading.Thread(target=lambda: stdout.append(child.stdout.read()), daemon=True))
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        timed_out = True
    for reader in readers:  # to the end of its output: a grandchild still holding the pipes holds this too
        reader.join()
    return Outcome(
        returncode=child.returncode,
        stdout="".join(stdout),
        stderr="".join(stderr),
        seconds=time.perf_counter() - started,
        timed_out=timed_out,
        timeout=timeout,
    )


def process_alive(pid, name=""):
    """Whether process `pid` runs on this machine (and, given a name, has it in its command line: a pid the system
    gave again to another program is not the process that was meant). Linux's /proc; False where it cannot tell."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command_line = handle.read()
    except OSError:
        return False
    return name.encode() in command_line
