"""Where the jobs of `--profile profiles/slurm` go: the Slurm account and partitions, resolved and checked against
the cluster before any job is submitted, so that a missing or wrong setting is one message naming it rather than
a failed submission per job.

    account        config `slurm.account`, else $SBATCH_ACCOUNT (sbatch's own variable), else the user's default
                   account in Slurm's accounting; none is an error only where the cluster enforces associations
    partition      config `slurm.partition`, else $SBATCH_PARTITION, else the cluster's default partition
    gpu_partition  config `slurm.gpu_partition`, else the partition; it must have nodes with a `gpu` GRES when any
                   job needs a GPU (each such job asks Slurm for one per replica: `--gres=gpu:N`, and for several
                   nodes where its replicas exceed `slurm.gpus_per_node`)

`run(argv) -> stdout` runs a Slurm client command (raising CalledProcessError or OSError when it fails), so that
the checks can be tested on a real cluster and on recorded outputs alike.
"""

import getpass
import subprocess

NOT_SUBMITTED = {"account": "", "partition": "", "gpu_partition": ""}  # resolve's answer where nothing is submitted


def device_resources(device, scheduler, submission, replicas=1, gpus_per_node=None):
    """A timed job's Snakemake resources on its device, only those in effect, as each costs planning work per job.
    Here: `gpu`, one per replica, which `--resources gpu=N` (profiles/default: the machine's GPUs) holds GPU jobs
    to. On Slurm none of that, as a workflow-wide gpu limit would hold the whole cluster to it: each job asks sbatch
    for its own GPUs, with the account and partition of `submission` (resolve), on as many nodes of
    `gpus_per_node` GPUs as its replicas fill (nodes_of)."""
    if scheduler == "slurm":
        nodes = nodes_of(replicas, gpus_per_node) if device == "gpu" else 1
        return {
            "gres": f"gpu:{replicas // nodes}" if device == "gpu" else "",
            "nodes": nodes,
            "slurm_account": submission["account"],
            "slurm_partition": submission["gpu_partition" if device == "gpu" else "partition"],
        }
    return {"gpu": replicas if device == "gpu" else 0}


def nodes_of(replicas, gpus_per_node):
    """The nodes a run of `replicas` GPUs spans: one, unless they exceed a node's GPUs (config slurm.gpus_per_node)."""
    return 1 if not gpus_per_node or replicas <= gpus_per_node else replicas // gpus_per_node


class SlurmSettingError(ValueError):
    pass


def run_command(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def _optional(run, argv):
    """The command's stdout, or None where it fails (e.g. sacctmgr on a cluster without accounting)."""
    try:
        return run(argv)
    except (subprocess.CalledProcessError, OSError):
        return None


def partitions(run):
    """{partition: set of its nodes' GRES}, and the default partition (sinfo marks it with '*') or None."""
    listing = _optional(run, ["sinfo", "--noheader", "--format=%P|%G"])
    if listing is None:
        raise SlurmSettingError(
            "`sinfo` failed: the Slurm client commands cannot reach a controller "
            "(check SLURM_CONF and that slurmctld is running)"
        )
    found, default = {}, None
    for line in listing.splitlines():
        name, _, gres = line.strip().partition("|")
        if name.endswith("*"):
            name = default = name[:-1]
        if name:
            found.setdefault(name, set()).update(item for item in gres.split(",") if item and item != "(null)")
    return found, default


def enforces_associations(run):
    config = _optional(run, ["scontrol", "show", "config"]) or ""
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageEnforce":
            return "associations" in value
    return False


def user_accounts(run, user):
    """(accounts the user may submit under, the user's default account); ([], None) without accounting."""
    listing = _optional(
        run, ["sacctmgr", "--noheader", "--parsable2", "show", "associations", f"user={user}", "format=Account"]
    )
    default = _optional(run, ["sacctmgr", "--noheader", "--parsable2", "show", "user", user, "format=DefaultAccount"])
    accounts = sorted({line.strip() for line in (listing or "").splitlines() if line.strip()})
    return accounts, (default or "").strip() or None


def has_gpus(gres):
    return any(item.split(":")[0] == "gpu" for item in gres)


def resolve(settings, environ, needs_gpu, run=run_command, user=None):
    """{account, partition, gpu_partition} for sbatch from config `slurm` (settings) and the environment, checked
    against the cluster; SlurmSettingError lists every problem, each naming the setting that fixes it."""
    user = user or getpass.getuser()
    found, default_partition = partitions(run)
    accounts, default_account = user_accounts(run, user)
    problems = []
    account = settings.get("account") or environ.get("SBATCH_ACCOUNT") or default_account
    if account and accounts and account not in accounts:
        problems.append(
            f"config error in `slurm.account` (or $SBATCH_ACCOUNT): {account!r} is not an account of "
            f"user {user} on this cluster; sacctmgr lists {', '.join(accounts)}"
        )
    if not account and enforces_associations(run):
        problems.append(
            f"config error in `slurm.account`: this cluster requires an account "
            f"(AccountingStorageEnforce=associations) and user {user} has no default one; set "
            f"slurm.account in the config or export SBATCH_ACCOUNT"
        )
    partition = settings.get("partition") or environ.get("SBATCH_PARTITION") or default_partition
    named = ", ".join(sorted(found)) or "none"
    if partition is None:
        problems.append(
            f"config error in `slurm.partition`: this cluster has no default partition; set "
            f"slurm.partition (or export SBATCH_PARTITION) to one of: {named}"
        )
    elif partition not in found:
        problems.append(
            f"config error in `slurm.partition` (or $SBATCH_PARTITION): no partition {partition!r}; "
            f"this cluster has: {named}"
        )
    gpu_partition = settings.get("gpu_partition") or partition
    if needs_gpu and gpu_partition in found and not has_gpus(found[gpu_partition]):
        with_gpus = ", ".join(sorted(name for name, gres in found.items() if has_gpus(gres))) or "none"
        problems.append(
            f"config error in `slurm.gpu_partition`: GPU experiments are planned but partition "
            f"{gpu_partition!r} has no node with a `gpu` GRES; partitions with GPUs: {with_gpus}"
        )
    elif needs_gpu and settings.get("gpu_partition") and gpu_partition not in found:
        problems.append(
            f"config error in `slurm.gpu_partition`: no partition {gpu_partition!r}; this cluster has: {named}"
        )
    if problems:
        raise SlurmSettingError("\n".join(problems))
    return {"account": account or "", "partition": partition, "gpu_partition": gpu_partition}


def job_rate_limit(scheduler, limit):
    """Snakemake's job rate limit (--max-jobs-per-timespan) under a scheduler. On Slurm the one given: it spares the
    controller a burst of submissions. On this machine none: while any job runs, the limit has Snakemake wake once
    per timespan and re-evaluate every ready job's params and resources (CPU taken from the timed job running), and
    its last wake-up holds the exit until the timespan ends; a finished job wakes the scheduler by itself."""
    return limit if scheduler == "slurm" else None
