"""Data-parallel replicas: how many, what batch each gets, and how a run's processes are launched. Standard library
only: planning, scripts/run_experiment.py, scripts/train.py and the adapters all import it.

An experiment runs on `replicas` devices (config axis `replicas`; 1 unless given). Scaling `weak` (the default, as
the published multi-GPU references run) keeps the config's batch size per replica, so the global batch grows with the
replicas; `strong` keeps it as the global batch, which the replicas split. Every replica gets an equal, contiguous
slice of each global batch, so one step with N replicas sees exactly the examples of one step with one replica.

A stack's `data_parallel` entry in envs/stacks.yaml names its mechanism and launcher: `process` (one process drives
every replica: tf.distribute, Keras' and JAX's sharding, MXNet's context lists) or `torchrun` (one process per
replica, PyTorch's DistributedDataParallel); on CPU, replicas are logical devices or processes sharing the cores.
"""

import os
import shlex
from pathlib import Path

LAUNCHERS = ("process", "torchrun")  # envs/stacks.yaml data_parallel.launcher (tests/unit/test_parallel.py)
# A collective that waits longer than this for a replica raises: a replica that dies or hangs ends the run `error`
# instead of leaving the others waiting forever.
COLLECTIVE_TIMEOUT_S = 300
RENDEZVOUS_PORT = 29500


def replicas(experiment):
    """The experiment's replicas (1 for a row without the axis: probes, benchmarks, max-batch searches)."""
    return experiment.get("replicas", 1)


def global_batch_size(experiment):
    """Images per training step over all replicas."""
    count = replicas(experiment)
    return experiment["batch_size"] * count if experiment.get("scaling", "weak") == "weak" else experiment["batch_size"]


def replica_batch_size(experiment):
    """Images per step on each replica."""
    return global_batch_size(experiment) // replicas(experiment)


def batch_problem(batch_size, count, scaling):
    """Why strong scaling cannot split this batch over `count` replicas; None where it can."""
    if scaling == "strong" and batch_size % count:
        return (
            f"batch size {batch_size} is not divisible by {count} replicas (strong scaling splits the global batch "
            f"equally); choose batch sizes that are multiples of every replica count, or scaling: weak"
        )
    return None


def replica_slice(batch, rank, count):
    """Replica `rank`'s contiguous share of one global batch (an index array or a list): equal shares, in order."""
    share = len(batch) // count
    return batch[rank * share : (rank + 1) * share]


def processes(experiment):
    """The processes a run starts: one per replica under torchrun, else one."""
    return replicas(experiment) if experiment.get("launcher", "process") == "torchrun" else 1


def spanning_problem(experiment, scheduler, gpus_per_node):
    """Why a run cannot span the Slurm nodes its replicas need (more than `gpus_per_node`): a `process` stack drives
    one node's devices from one process. None where it fits one node or its launcher spans nodes (torchrun)."""
    count = replicas(experiment)
    if scheduler != "slurm" or experiment["device"] != "gpu" or not gpus_per_node or count <= gpus_per_node:
        return None
    if processes(experiment) > 1:
        return None
    return (
        f"{count} replicas span nodes of {gpus_per_node} GPUs (`slurm.gpus_per_node`), and this stack's mechanism "
        "drives one node's GPUs from one process; only one-process-per-replica stacks (torchrun) span nodes"
    )


def process_rank():
    """This process's rank among a multi-process run's replicas (torchrun's RANK); 0 in a single-process run."""
    return int(os.environ.get("RANK", "0"))


def process_count():
    """The processes of this run (torchrun's WORLD_SIZE); 1 in a single-process run."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank():
    """This process's device index on its node (torchrun's LOCAL_RANK)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def sampled_gpus(experiment):
    """The GPUs this process's telemetry samples: in a one-process run every replica's; under torchrun the node's
    local rank 0 samples its node's (LOCAL_WORLD_SIZE) and the other processes none."""
    if processes(experiment) == 1:
        return replicas(experiment)
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1")) if local_rank() == 0 else 0


def threads_per_process(threads, processes, cores=None):
    """A process's CPU threads when a run has `processes` (one per replica under torchrun): the pinned `threads`, or
    with each framework's own default (None) the `cores` the job holds, split over them, so that N replicas use the
    cores one replica uses. Left to itself each process would take every core (PyTorch: the physical cores), N-fold
    oversubscription, which measured 5 times slower than one process on a 2-core machine. One process: unchanged."""
    if processes == 1:
        return threads
    held = threads if threads is not None else (cores or len(os.sched_getaffinity(0)))
    return max(1, held // processes)


def rank_output(path, rank):
    """Where rank `rank` of a multi-process run writes a file that rank 0 writes to `path`: beside it, prefixed."""
    path = Path(path)
    return path if rank == 0 else path.with_name(f"rank{rank}.{path.name}")


def launch(python, script, argv, experiment, nodes=1, rendezvous=None):
    """The argv that runs `script` for an experiment: the script itself, or, for a torchrun stack with more than one
    replica, torchrun starting one process per replica. On one node it rendezvouses on loopback (--standalone); on
    `nodes` nodes (a Slurm multi-node job, slurm_launch) each node's torchrun meets the others at `rendezvous`
    (host:port) and starts replicas / nodes processes."""
    command = [str(python), str(script), *argv]
    count = processes(experiment)
    if count == 1:
        return command
    if count % nodes:
        raise ValueError(f"{count} replicas cannot be spread evenly over {nodes} nodes")
    torchrun = [str(python), "-m", "torch.distributed.run", f"--nproc-per-node={count // nodes}"]
    if nodes == 1:
        torchrun += ["--standalone"]
    else:
        torchrun += [f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rendezvous}"]
    return [*torchrun, str(script), *argv]


def slurm_launch(python, script, argv, experiment, nodes, job_id="$SLURM_JOB_ID"):
    """The shell command of a Slurm multi-node run: srun starts one torchrun per node (one task each), which meet at
    the job's first node (scontrol's expansion of $SLURM_JOB_NODELIST) under the job's id. Untested on a cluster of
    several nodes (the test cluster has one); tests/frameworks/test_replicas.py runs the rendezvous on loopback."""
    head = '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    inner = launch(python, script, argv, experiment, nodes, rendezvous=f"{head}:{RENDEZVOUS_PORT}")
    inner.insert(inner.index("--rdzv-backend=c10d"), f"--rdzv-id={job_id}")
    quoted = " ".join(word if "$" in word else shlex.quote(word) for word in inner)
    # --overlap: the job's own step (the one running this command) holds its resources; without it a nested step
    # waits for them (Slurm 20.11 and later).
    return f"srun --overlap --nodes={nodes} --ntasks-per-node=1 bash -c {shlex.quote(quoted)}"


def stack_environment(stack, device, count):
    """A stack's variables (envs/stacks.yaml `environment`), with, for replicas on a CPU, those of its
    `data_parallel.cpu_environment` that make the replicas' devices (XLA's host device count), filled in."""
    extra = stack.get("data_parallel", {}).get("cpu_environment", {}) if device == "cpu" and count > 1 else {}
    return {**stack["environment"], **{name: value.format(replicas=count) for name, value in extra.items()}}


def job_nodes(experiment, environ):
    """The nodes a run spans: those of its Slurm job for a torchrun stack (whose replicas exceed one node's GPUs),
    else one."""
    return int(environ.get("SLURM_JOB_NUM_NODES", "1")) if processes(experiment) > 1 else 1


def training_command(python, script, argv, experiment, environ):
    """The argv of a run's training: launch's, or inside a Slurm job that spans several nodes, bash running
    slurm_launch's srun."""
    nodes = job_nodes(experiment, environ)
    if nodes > 1:
        return ["bash", "-c", slurm_launch(python, script, argv, experiment, nodes)]
    return launch(python, script, argv, experiment)
