"""Data-parallel replicas: how many, what batch each gets, and how a run's processes are launched. Standard library
only: planning, scripts/run_experiment.py, scripts/train.py and the adapters all import it.

An experiment runs on `replicas` devices (config axis `replicas`; 1 unless given). Scaling `weak` (the default, as
the published multi-GPU references run) keeps the config's batch size per replica, so the global batch grows with the
replicas; `strong` keeps it as the global batch, which the replicas split. Every replica gets an equal, contiguous
slice of each global batch, so one step with N replicas sees exactly the examples of one step with one replica.

A stack's `data_parallel` entry in envs/stacks.yaml names its mechanism and launcher: `process` (one process drives
every replica: tf.distribute, Keras' sharding, MXNet's context lists), `process-per-node` (one process drives its
node's replicas, and across the nodes of a Slurm job the processes join through the framework's own coordination
service: jax.distributed for Flax's mesh) or `torchrun` (one process per replica, PyTorch's
DistributedDataParallel); on CPU, replicas are logical devices or processes sharing the cores. Every process of a
multi-process run knows its place from RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE (torchrun sets them; for
`process-per-node`, slurm_launch does, with the coordinator's address in COORDINATOR_VARIABLE).
"""

import os
import shlex
from pathlib import Path

LAUNCHERS = ("process", "process-per-node", "torchrun")  # envs/stacks.yaml data_parallel.launcher
SPANNING_LAUNCHERS = ("process-per-node", "torchrun")  # those whose replicas span a Slurm job's nodes
# A PyTorch collective that waits longer than this for a replica raises (and JAX gives up joining its cluster after
# it): a replica that dies or hangs ends the run `error` instead of leaving the others waiting forever.
COLLECTIVE_TIMEOUT_S = 300
# The first node's port where the processes of a multi-node run meet (torchrun's rendezvous, JAX's coordinator): the
# base plus the Slurm job's id modulo PORT_SPREAD, so that two jobs sharing a first node do not collide.
RENDEZVOUS_PORT, PORT_SPREAD = 29500, 1000
COORDINATOR_VARIABLE = "DLBENCH_COORDINATOR"  # host:port of a process-per-node run's coordination service
# Set to 1, a run of one replica goes through its stack's data-parallel mechanism all the same (DDP over a process
# group of one, a mesh of one device, ...): the mechanism's own cost against the plain run (benchmarks/
# gpu_acceptance.py). Runs of the workflow never set it.
ONE_REPLICA_MECHANISM_VARIABLE = "DLBENCH_ONE_REPLICA_MECHANISM"


def replicas(experiment):
    """The experiment's replicas (1 for a row without the axis: probes, benchmarks, max-batch searches)."""
    return experiment.get("replicas", 1)


def through_mechanism(count):
    """Whether `count` replicas train through the stack's data-parallel mechanism: above one always, at one only
    under ONE_REPLICA_MECHANISM_VARIABLE."""
    return count > 1 or os.environ.get(ONE_REPLICA_MECHANISM_VARIABLE) == "1"


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


def launcher(experiment):
    """How the experiment's processes start (LAUNCHERS; `process` for a row without the field)."""
    return experiment.get("launcher", "process")


def processes(experiment, nodes=1):
    """The processes a run on `nodes` nodes starts: one per replica under torchrun, one per node for a
    process-per-node stack, else one."""
    if launcher(experiment) == "torchrun":
        return replicas(experiment)
    return nodes if launcher(experiment) == "process-per-node" else 1


def spanning_problem(experiment, scheduler, gpus_per_node):
    """Why a run cannot span the Slurm nodes its replicas need (more than `gpus_per_node`): a `process` stack drives
    one node's devices from one process. None where it fits one node or its launcher spans nodes."""
    count = replicas(experiment)
    if scheduler != "slurm" or experiment["device"] != "gpu" or not gpus_per_node or count <= gpus_per_node:
        return None
    if launcher(experiment) in SPANNING_LAUNCHERS:
        return None
    return (
        f"{count} replicas span nodes of {gpus_per_node} GPUs (`slurm.gpus_per_node`), and this stack's mechanism "
        "drives one node's devices from one process; only torchrun (PyTorch) and process-per-node (Flax) stacks "
        "span nodes"
    )


def process_rank():
    """This process's rank among a multi-process run's processes (RANK); 0 in a single-process run."""
    return int(os.environ.get("RANK", "0"))


def process_count():
    """The processes of this run (WORLD_SIZE); 1 in a single-process run."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank():
    """This process's index among its node's processes: its GPU under torchrun (LOCAL_RANK)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def local_process_count():
    """This run's processes on this node (LOCAL_WORLD_SIZE), which share its cores; 1 in a single-process run."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def coordinator():
    """host:port of a process-per-node run's coordination service, on the job's first node."""
    return os.environ[COORDINATOR_VARIABLE]


def sampled_gpus(experiment):
    """The GPUs this process's telemetry samples: its node's replicas' in the node's first process, none in the
    node's other processes (torchrun's)."""
    return replicas(experiment) // process_count() * local_process_count() if local_rank() == 0 else 0


def process_share(order, batch_size):
    """(this process's items of the index array `order`, its batch size): its contiguous slice of every global
    batch, in order; in a single-process run, `order` itself."""
    count = process_count()
    if count == 1:
        return order, batch_size
    starts = range(0, len(order) - batch_size + 1, batch_size)
    batches = (range(start, start + batch_size) for start in starts)
    return order[[at for batch in batches for at in replica_slice(batch, process_rank(), count)]], batch_size // count


def schedulable_cpus():
    """The CPUs this process may run on (its affinity, which Slurm and taskset narrow), the count that TensorFlow's
    and XLA's default thread pools take one thread per."""
    return len(os.sched_getaffinity(0))


def threads_per_process(threads, processes, cores=None):
    """A process's CPU threads when `processes` of a run share a node (torchrun's): the pinned `threads`, or
    with each framework's own default (None) the `cores` the job holds, split over them, so that N replicas use the
    cores one replica uses. Left to itself each process would take every core (PyTorch: the physical cores), N-fold
    oversubscription, which measured 5 times slower than one process on a 2-core machine. One process: unchanged."""
    if processes == 1:
        return threads
    held = threads if threads is not None else (cores or schedulable_cpus())
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


def slurm_launch(python, script, argv, experiment, nodes):
    """The shell command of a Slurm multi-node run: srun starts one task per node, which meet at the job's first node
    (scontrol's expansion of $SLURM_JOB_NODELIST) on a port of the job's own: under torchrun each task is the node's
    torchrun (a c10d rendezvous under the job's id); for a process-per-node stack each task is the node's process,
    told its rank (srun's SLURM_PROCID), the process count and the coordinator. Untested on a cluster of several
    nodes (the test cluster has one); tests/frameworks/test_replicas.py runs both on loopback under a stand-in srun."""
    head = '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    meeting = f"{head}:$(({RENDEZVOUS_PORT} + SLURM_JOB_ID % {PORT_SPREAD}))"
    if launcher(experiment) == "torchrun":
        inner = launch(python, script, argv, experiment, nodes, rendezvous=meeting)
        inner.insert(inner.index("--rdzv-backend=c10d"), "--rdzv-id=$SLURM_JOB_ID")
    else:
        place = ["RANK=$SLURM_PROCID", f"WORLD_SIZE={nodes}", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1"]
        inner = [*place, f"{COORDINATOR_VARIABLE}={meeting}", *launch(python, script, argv, experiment)]
    quoted = " ".join(word if "$" in word else shlex.quote(word) for word in inner)
    # --overlap: the job's own step (the one running this command) holds its resources; without it a nested step
    # waits for them (Slurm 20.11 and later). --kill-on-bad-exit: a node's task that fails stops the others at once.
    return f"srun --overlap --kill-on-bad-exit=1 --nodes={nodes} --ntasks-per-node=1 bash -c {shlex.quote(quoted)}"


def stack_environment(stack, device, count):
    """A stack's variables (envs/stacks.yaml `environment`), with, for replicas on a CPU, those of its
    `data_parallel.cpu_environment` that make the replicas' devices (XLA's host device count), filled in."""
    extra = stack.get("data_parallel", {}).get("cpu_environment", {}) if device == "cpu" and count > 1 else {}
    return {**stack["environment"], **{name: value.format(replicas=count) for name, value in extra.items()}}


def job_nodes(experiment, environ):
    """The nodes a run spans: those of its Slurm job where its launcher spans nodes (the profile asks for several
    only where GPU replicas exceed one node's GPUs: slurm.nodes_of), else one."""
    spans = launcher(experiment) in SPANNING_LAUNCHERS and replicas(experiment) > 1
    return int(environ.get("SLURM_JOB_NUM_NODES", "1")) if spans else 1


def training_command(python, script, argv, experiment, environ):
    """The argv of a run's training: launch's, or inside a Slurm job that spans several nodes, bash running
    slurm_launch's srun."""
    nodes = job_nodes(experiment, environ)
    if nodes > 1:
        return ["bash", "-c", slurm_launch(python, script, argv, experiment, nodes)]
    return launch(python, script, argv, experiment)
