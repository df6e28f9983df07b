"""Contention: what else used the machine while a timed job ran, and whether that disqualifies its figures.

A timed job owns its process tree: the launcher (run_experiment.py, run_ops.py, max_batch.py), the training process,
its loader workers and any child they start; and the processes that launched it and wait for it (the job's shell,
Snakemake polling its jobs, about a tenth of a core) are the workflow's own load, recorded apart. Everything else
that ran on the CPUs in the same window is foreign: the system-wide busy time from /proc/stat (user, nice, system,
irq, softirq; guest time is inside user) minus the CPU time of the tree's processes from /proc/<pid>/stat (utime,
stime, and cutime, cstime for children they reaped) and of the launchers themselves (utime, stime).
Steal is the hypervisor's: time a virtual CPU wanted to run and the host gave to another guest. Both counters are in
clock ticks (USER_HZ, 10 ms on Linux), so a window of a few seconds resolves a few hundredths of a core.

GPU contention (other processes on the job's GPU, clock-throttle reasons) is read through NVML by telemetry.py and
judged here with the CPU figures. Standard library only: the launcher imports it before any framework.
"""

import datetime
import os
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# /proc/stat's aggregate cpu line: user nice system idle iowait irq softirq steal (guest, guest_nice are inside user
# and nice, so they are not added again).
BUSY_FIELDS, STEAL_FIELD, COUNTED_FIELDS = (0, 1, 2, 5, 6), 7, 8
ROOT_VARIABLE = "DLBENCH_JOB_ROOT_PID"  # set by a launcher: the root of the job's process tree
TREE_REFRESH_S = 1.0  # how often the tree's membership is looked up again (loader workers start and stop rarely)


class Unavailable(Exception):
    """A counter this machine does not expose (no /proc, a container that hides it): recorded with the reason."""


def system_cpu_seconds(stat="/proc/stat"):
    """(busy, steal, total) CPU seconds of all CPUs since boot."""
    try:
        with open(stat) as handle:
            fields = handle.readline().split()
    except OSError as error:
        raise Unavailable(f"{stat} is not readable ({error.strerror})") from error
    if not fields or fields[0] != "cpu" or len(fields) < 1 + COUNTED_FIELDS:
        raise Unavailable(f"{stat} has no aggregate cpu line with steal time")
    ticks = [int(value) for value in fields[1 : 1 + COUNTED_FIELDS]]
    busy = sum(ticks[index] for index in BUSY_FIELDS)
    return busy / CLOCK_TICKS, ticks[STEAL_FIELD] / CLOCK_TICKS, sum(ticks) / CLOCK_TICKS


def process_stat(pid, proc="/proc"):
    """(parent pid, CPU seconds of the process itself, CPU seconds of the children it reaped), or None once it has
    exited."""
    try:
        text = Path(proc, str(pid), "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: the fields that follow start after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return int(fields[1]), (utime + stime) / CLOCK_TICKS, (cutime + cstime) / CLOCK_TICKS


def parents(proc="/proc"):
    """{pid: parent pid} of every process."""
    found = {}
    for entry in Path(proc).iterdir():
        if entry.name.isdigit():
            stat = process_stat(entry.name, proc)
            if stat is not None:
                found[int(entry.name)] = stat[0]
    return found


def tree_members(root, proc="/proc", parent_of=None):
    """The pids of root and all its descendants, from every process's parent pid."""
    parent_of = parents(proc) if parent_of is None else parent_of
    members, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parent_of.items() if ppid == parent and pid not in members]
        members.update(children)
        frontier.extend(children)
    return members


def launchers(root, parent_of):
    """The processes that started the job and wait for it (its shell, Snakemake, a test runner), up to init: the
    workflow's own load, not someone else's."""
    chain, pid = [], parent_of.get(root, 0)
    while pid > 1 and pid in parent_of:
        chain.append(pid)
        pid = parent_of[pid]
    return chain


def job_root():
    """The root of this job's process tree: the launcher's pid where a launcher set it, else this process."""
    return int(os.environ.get(ROOT_VARIABLE, os.getpid()))


class CpuMeter:
    """Cumulative CPU counters of the machine, of one process tree (the job) and of the processes that launched it.
    reading() is cheap enough for every telemetry sample: the stat files of the tree and its launchers each time,
    their membership looked up every TREE_REFRESH_S."""

    def __init__(self, root=None, proc="/proc", stat="/proc/stat", clock=time.perf_counter):
        self.root, self.proc, self.stat, self.clock = root or job_root(), proc, stat, clock
        self.members, self.launchers, self.refreshed = set(), [], None

    def refresh(self):
        now = self.clock()
        if self.refreshed is None or now - self.refreshed >= TREE_REFRESH_S:
            parent_of = parents(self.proc)
            self.members = tree_members(self.root, self.proc, parent_of)
            self.launchers, self.refreshed = launchers(self.root, parent_of), now

    def tree_seconds(self):
        """CPU seconds of the tree's processes and of the children they reaped (loader workers that ended)."""
        self.refresh()
        stats = [process_stat(pid, self.proc) for pid in self.members]
        return sum(stat[1] + stat[2] for stat in stats if stat is not None)

    def launcher_seconds(self):
        """CPU seconds of the launchers themselves: not their reaped children, which are earlier jobs."""
        stats = [process_stat(pid, self.proc) for pid in self.launchers]
        return sum(stat[1] for stat in stats if stat is not None)

    def reading(self):
        """{t, busy_s, steal_s, total_s, tree_s, launchers_s}: cumulative seconds, to be differenced over a window."""
        busy, steal, total = system_cpu_seconds(self.stat)
        tree = self.tree_seconds()
        return {
            "t": self.clock(),
            "busy_s": busy,
            "steal_s": steal,
            "total_s": total,
            "tree_s": tree,
            "launchers_s": self.launcher_seconds(),
        }


def cpu_window(start, end):
    """{window_s, foreign_cpu_cores, launcher_cpu_cores, steal_share} between two readings: the CPU time used
    outside the job's tree and its launchers per second of wall time (1.0: one core busy all along), the launchers'
    own (Snakemake polling its jobs: the same for every run), and the share of all CPU time the hypervisor stole."""
    wall = end["t"] - start["t"]
    launchers = end["launchers_s"] - start["launchers_s"]
    foreign = (end["busy_s"] - start["busy_s"]) - (end["tree_s"] - start["tree_s"]) - launchers
    total = end["total_s"] - start["total_s"]
    return {
        "window_s": wall,
        "foreign_cpu_cores": max(0.0, foreign) / wall if wall > 0 else None,
        "launcher_cpu_cores": max(0.0, launchers) / wall if wall > 0 else None,
        "steal_share": (end["steal_s"] - start["steal_s"]) / total if total > 0 else None,
    }


def utc(epoch_seconds):
    return datetime.datetime.fromtimestamp(epoch_seconds, datetime.timezone.utc).isoformat(timespec="milliseconds")


def summary(cpu, gpu=None, cpu_unavailable=None, peak_cores=None, span=None):
    """The record's `contention` section: the CPU window's figures, the GPU's findings, why a part is missing, and
    when the window began and ended (span: wall-clock seconds since the epoch), to set against other processes."""
    unavailable = {}
    if cpu is None:
        unavailable["cpu"] = cpu_unavailable or "no CPU counters were read"
    gpu = gpu or {}
    if gpu.get("reason"):
        unavailable["gpu"] = gpu["reason"]
    cpu = cpu or {}
    return {
        "window_s": cpu.get("window_s"),
        "foreign_cpu_cores": cpu.get("foreign_cpu_cores"),
        "foreign_cpu_peak_cores": peak_cores,
        "launcher_cpu_cores": cpu.get("launcher_cpu_cores"),
        "steal_share": cpu.get("steal_share"),
        "foreign_gpu_processes": gpu.get("foreign_processes"),
        "throttle_reasons": gpu.get("throttle_reasons"),
        "unavailable": unavailable,
        "window_started_at": utc(span[0]) if span else None,
        "window_finished_at": utc(span[1]) if span else None,
    }


# What a reason is about, before its colon: the end-of-run summary counts runs by these.
FOREIGN_CPU, STEAL, FOREIGN_GPU, THROTTLED = (
    "other processes used the CPU",
    "the hypervisor stole CPU time",
    "another process used the GPU",
    "GPU clocks throttled",
)


def reason_kind(reason):
    return reason.split(":")[0]


def reasons(contention, thresholds):
    """Why a run's figures are not its own (empty: clean), against the config's `contention` thresholds (a limit
    of None does not apply)."""
    found = []
    foreign, steal = contention.get("foreign_cpu_cores"), contention.get("steal_share")
    if None not in (foreign, thresholds["max_foreign_cpu_cores"]) and foreign > thresholds["max_foreign_cpu_cores"]:
        found.append(f"{FOREIGN_CPU}: {foreign:.2f} cores (limit {thresholds['max_foreign_cpu_cores']:g})")
    if None not in (steal, thresholds["max_steal_share"]) and steal > thresholds["max_steal_share"]:
        found.append(f"{STEAL}: {steal:.1%} (limit {thresholds['max_steal_share']:.0%})")
    for process in contention.get("foreign_gpu_processes") or []:
        found.append(f"{FOREIGN_GPU}: {describe_gpu_process(process)}")
    throttled = sorted(set(contention.get("throttle_reasons") or []) & set(thresholds["throttle_reasons"]))
    if throttled:
        found.append(f"{THROTTLED}: {', '.join(throttled)}")
    return found


def judge(record, thresholds):
    """The record with its contention reasons, and status `contended` where it finished but its window was shared
    beyond the limits (a run that failed keeps its failure: it measured nothing to disqualify)."""
    if record.get("contention") is not None:
        record["contention"]["reasons"] = reasons(record["contention"], thresholds)
        if record["status"] == "ok" and record["contention"]["reasons"]:
            record["status"] = "contended"
    return record


def settle_wait(settle_seconds, attempt):
    """The wait before try attempt + 1: doubling from settle_seconds, so that the retries of a short run span a
    busy spell of a minute or more (10 s, 20 s, 40 s) instead of falling inside it."""
    return settle_seconds * 2 ** (attempt - 1)


def until_clean(try_once, thresholds, name, tell, set_aside=lambda attempt: None, sleep=time.sleep):
    """Run try_once() (a record with `status` and `contention`) until a try is not contended or `retries` more
    tries ran, waiting settle_wait() between tries; set_aside(attempt) keeps what a contended try wrote. The
    final record carries its try number and the contended tries before it (kept whole, never averaged)."""
    contended = []
    for attempt in range(1, thresholds["retries"] + 2):
        record = judge(try_once(), thresholds)
        record["attempt"] = attempt
        if record["status"] != "contended" or attempt > thresholds["retries"]:
            break
        contended.append(record)
        set_aside(attempt)
        wait = settle_wait(thresholds["settle_seconds"], attempt)
        tell(
            f"{name} contended ({'; '.join(record['contention']['reasons'])}): running it again in "
            f"{wait:g}s (retry {attempt} of {thresholds['retries']})"
        )
        sleep(wait)
    if record["status"] == "contended":
        tell(f"{name} not measured: machine busy in all {attempt} tries ({'; '.join(record['contention']['reasons'])})")
    elif contended:
        tell(f"{name} measured clean on try {attempt} after {len(contended)} contended")
    record["contended_attempts"] = contended
    return record


GPU_POLL_S = 5.0  # how often a job waiting for its GPU looks again


class GpuBusy(Exception):
    """Another process holds the job's GPU before its timed part, and the config's policy does not let it run."""


def process_name(pid, proc="/proc"):
    """A process's command name, or None where this machine's /proc does not show it: it exited, or it lives in
    another pid namespace (NVML lists host pids, which a container does not see)."""
    try:
        return Path(proc, str(pid), "comm").read_text().strip()
    except OSError:
        return None


def gpu_processes(nvml, handle, proc="/proc"):
    """The processes NVML lists on a GPU, compute and graphics, once each: {pid, name, used_memory_mb} (memory None
    where NVML does not report it)."""
    listed = {}
    for process in [
        *nvml.nvmlDeviceGetComputeRunningProcesses(handle),
        *nvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
    ]:
        memory = None if process.usedGpuMemory is None else process.usedGpuMemory / 2**20
        listed.setdefault(
            process.pid, {"pid": process.pid, "name": process_name(process.pid, proc), "used_memory_mb": memory}
        )
    return list(listed.values())


def describe_gpu_process(process):
    """'pid 4242 (python, 1024 MiB)' for messages."""
    memory = "memory not reported" if process["used_memory_mb"] is None else f"{process['used_memory_mb']:.0f} MiB"
    return f"pid {process['pid']} ({process['name'] or 'name not visible here'}, {memory})"


def describe_gpu_processes(processes):
    return ", ".join(describe_gpu_process(process) for process in processes)


def wait_for_free_gpu(nvml, handle, tree, policy, timeout_s, log, sleep=time.sleep, clock=time.monotonic):
    """Before a GPU job's timed part, apply the config's `contention.foreign_gpu_process` policy to the processes on
    its GPU outside `tree` (the pids of the job's process tree): `wait` polls until none is left and raises GpuBusy
    naming them after timeout_s; `refuse` raises GpuBusy at once; `record` lets the run go (its contention section
    then names them). Returns the foreign processes the run starts beside (empty: a free GPU). Where NVML cannot list
    the GPU's processes, the run goes and the reason is logged (its contention section says so too)."""

    def foreign_now():
        return [process for process in gpu_processes(nvml, handle) if process["pid"] not in tree]

    deadline, said = clock() + timeout_s, None
    try:
        foreign = foreign_now()
        while foreign and policy == "wait" and clock() < deadline:
            pids = {process["pid"] for process in foreign}
            if pids != said:  # said again only when the set changes, not at every poll
                log(f"waiting up to {deadline - clock():.0f} s for the GPU: {describe_gpu_processes(foreign)}")
                said = pids
            sleep(min(GPU_POLL_S, max(0.0, deadline - clock())))
            foreign = foreign_now()
    except nvml.NVMLError as error:
        log(f"the GPU's processes cannot be listed (NVML: {error}): not checked before the run")
        return []
    if foreign and policy != "record":
        raise GpuBusy(busy_message(foreign, policy, timeout_s))
    if foreign:
        log(
            f"running beside other processes on the GPU (contention.foreign_gpu_process: record): "
            f"{describe_gpu_processes(foreign)}"
        )
    return foreign


def busy_message(foreign, policy, timeout_s):
    """Why a GPU job did not run, and how to let it."""
    if policy == "wait":
        found = f"the GPU was still in use after waiting {timeout_s:g} s, by"
        other = "refuse (fail at once) or record (run anyway, the run marked contended)"
    else:
        found = "the GPU is in use by"
        other = "wait (up to contention.gpu_wait_seconds) or record (run anyway, the run marked contended)"
    return (
        f"{found} {describe_gpu_processes(foreign)}: stop {'it' if len(foreign) == 1 else 'them'}, or set "
        f"contention.foreign_gpu_process to {other}"
    )
