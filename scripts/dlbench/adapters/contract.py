"""The adapter contract, as code: what every module in this package defines, one Protocol per role.

A stack in envs/stacks.yaml names its `adapter` (a TrainingAdapter) and its `ops_adapter` (an OpsAdapter, which may be
the same module or one of its own, such as jax_numpy). An adapter module implements its roles' members as module-level
functions and constants (the `self` below is the module); everything else in it is private (a leading underscore).
A TrainingAdapter is a core (set up, stage, build, train, evaluate, synchronise, read back) plus the CAPABILITIES it
has, each whole or not at all: streamed data (Streaming), the measurements after training that need the framework
(InputShare, Communication; dlbench/measure, each pass declaring what it NEEDS and skipped where it is missing). Which
a stack must have follows from what it runs (tests/unit/test_adapter_contract.py). The data an adapter stages or
streams and the model it builds are small dataclasses: StagedArrays or its own subclass of it, its own StreamedData
(or that of the adapter it streams through, STREAM_ADAPTER), its own _Model (Keras keeps Keras' model); the shared
code reads only whether data is streamed (STREAM). tests/unit/test_adapter_contract.py checks
every adapter named in envs/stacks.yaml against these classes.

Only the adapter imports its framework; everything else is in the shared library. Keras on TensorFlow or PyTorch calls
those frameworks' adapters for their thread and math-mode switches and CUDA versions rather than copying them, Keras
on JAX and Flax call jax_numpy for JAX's, and both stream through tensorflow_raw's tf.data pipelines (its stream): the
small shared surface below (KerasBackend, TorchBackend, TensorFlowBackend, JaxBackend) and the contract's own members.
An adapter that reaches another only on some backends or with streamed data loads it by name and declares it
(LoadsByName), so that a job depends on the adapters its process imports and no other.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol


@dataclasses.dataclass
class StagedData:
    """What `stage` returns: the adapter's own dataclass of the dataset as placed (tensors on the device, or arrays on
    the host), subclassing this one; train_epoch and evaluate take it back."""

    STREAM = False  # read by the shared measurements (the input work a fixed batch leaves out)


@dataclasses.dataclass
class StagedArrays(StagedData):
    """The four splits of a prepared dataset as stage placed them: the framework's tensors on the device, or NumPy
    arrays on the host; an adapter's _Staged adds how it placed them."""

    train_x: object
    train_y: object
    test_x: object
    test_y: object


@dataclasses.dataclass
class StreamedData:
    """What `stream` returns (Streaming): the adapter's own dataclass of its loaders, subclassing this one."""

    STREAM = True


class Adapter(Protocol):
    """What every adapter defines."""

    FRAMEWORK: str
    """The framework's name as the records call it (the module that imports it)."""

    def version(self) -> str:
        """The framework version, read inside the env."""


class TrainingAdapter(Adapter, Protocol):
    """A stack's `adapter`: trains the neutral models (dlbench/specs.py) in the stack's framework (scripts/train.py).
    Importing the module imports the framework (train.py's `imports` phase)."""

    def configure(self, device, threads, seed, math_mode, replicas) -> dict:
        """What took effect, read back, of setting threads, seeds, device and math mode (dlbench/mathmode.py), and
        with replicas > 1 the data-parallel replicas (dlbench/parallel.py): `replicas`, `replica_devices`."""

    # Data-parallel replicas (experiment `replicas` > 1): build wraps the model in the stack's mechanism, and
    # train_epoch, fixed_batch_steps and evaluate take the global batch size, each replica training on its equal
    # slice of every batch (parallel.replica_slice); the loss they return is the global batch's, the same in every
    # process. A multi-process stack (launcher torchrun, or process-per-node across nodes) runs every call below in
    # every process.
    def replica_max(self, value) -> float:
        """The largest of a host float over the run's processes (the value itself in a one-process run): every
        process then takes the same time-based decisions, such as the steady window's extra epochs."""

    # Data placement `device`: framework tensors on the training device, batches gathered there; `host`: NumPy arrays,
    # each batch gathered in NumPy and handed over per step. In the layout the experiment's variant runs in.
    def stage(self, arrays, experiment) -> StagedData:
        """The dataset placed as the experiment's data_placement says: what train_epoch and evaluate take."""

    # A variant the adapter does not implement (dlbench/variants.py) raises ValueError.
    def build(self, spec, input_shape, weights, experiment):
        """The model, optimiser and loss of the spec with the neutral weights, in the experiment's variant."""

    def parameter_count(self, model) -> int:
        """The model's trainable parameters."""

    def weights(self, model, spec, input_shape) -> list:
        """The current weights, one list of arrays per spec leaf, in the neutral layout."""

    def engaged(self, model) -> dict:
        """What ran, read back: variant state (graph, XLA, graph breaks), dtypes, layout, loss scaling; with replicas,
        `data_parallel` (the mechanism), `gradient_reduction` (mean, or sum with the rate scaled) and `collective`
        (what reduces the gradients: NCCL, gloo, a kvstore, XLA's all-reduce)."""

    def train_epoch(self, model, staged, order, batch_size):
        """The mean loss (float-like, read after sync) of one epoch over `order`; no blocking host read inside."""

    def evaluate(self, model, staged, batch_size) -> tuple[float, float]:
        """(loss, accuracy) on the test split, host floats."""

    def logits(self, model, images):
        """The logits (np.ndarray) of inference on host NHWC float32 images (equivalence tests)."""

    def sync(self, device) -> None:
        """Nothing, once all queued device work has finished."""

    def allocator_peak_mb(self, device) -> float | None:
        """The framework allocator's peak in MiB (None on CPU or where unavailable)."""

    def cuda_versions(self) -> tuple[str | None, str | None]:
        """(CUDA, cuDNN) as the framework reports them (None where it reports none, e.g. a CPU build)."""

    def cpu_kernels(self) -> str | None:
        """The CPU kernel libraries the framework's build uses, in words ("oneDNN 3.12, BLAS MKL"; None where it
        names none): the record's provenance of a CPU run, for frameworks on one machine can run different kernels."""

    def is_oom(self, error) -> bool:
        """Whether an exception is this framework's out-of-memory error."""


class Streaming(Protocol):
    """Data placement `stream`, instead of stage: train_epoch, fixed_batch_steps and evaluate take the loader as
    staged data, the `order` of train_epoch then being data.stream_order's items. A stack whose adapter lacks it
    names `stream-data` under `unsupported` in envs/stacks.yaml."""

    LOADER: str
    """The framework's own loader of streamed image folders, in words (the record's stream.loader)."""

    def stream(self, meta, experiment, workers) -> StreamedData:
        """The framework's own loader over a streamed image folder (dlbench/data.py), with `workers` workers."""

    def loader_pass(self, staged, order, batch_size) -> None:
        """Nothing: the streamed batches of `order` placed on the device, no model (the loader's own throughput)."""

    def loader_batches(self, staged, order, batch_size):
        """The loader's host batches (uint8 NHWC, labels) of `order`, or of the evaluation split for None (tests)."""


class InputShare(Protocol):
    """The epoch without its input work, for the input share (dlbench/measure/input_share.py) and as the reduced
    side of the communication share: the first batch is assembled and on the device before any timing."""

    INPUT_WORK: str
    """What fixed_batch_steps leaves out of an epoch, in words (the record's input_share_covers)."""

    def fixed_batch_steps(self, model, staged, order, batch_size):
        """run(steps), which trains `steps` steps on the first batch of `order` and returns the mean loss."""


class Communication(Protocol):
    """With replicas, fixed-batch steps without the gradients' reduction between replicas, for the communication
    share (dlbench/measure/communication.py): each replica then updates its own copy, so that pass runs last. Only
    where the framework has such a step (PyTorch's DDP.no_sync); the one-step mechanisms (MirroredStrategy, Keras'
    and JAX's jitted step over a mesh, Gluon's Trainer) reduce in every step and leave the capability out."""

    def unreduced_steps(self, model, staged, order, batch_size):
        """run(steps) as fixed_batch_steps' but skipping the gradients' all-reduce (called with replicas only)."""


# What a TrainingAdapter may have beyond its core, each whole or not at all.
CAPABILITIES = (Streaming, InputShare, Communication)


class OpsAdapter(Adapter, Protocol):
    """A stack's `ops_adapter`: the operator microbenchmarks (dlbench/ops.py, scripts/run_ops.py)."""

    def operators(self, device, dtype) -> dict:
        """{name: callable}: the operators of ops.OPERATORS, plus "copy"."""

    def ops_input(self, array, device, dtype):
        """A host array as a device tensor."""

    def ops_output(self, value):
        """A result on the host, as a float32 np.ndarray."""

    def ops_sync(self, device, value) -> None:
        """Nothing, once queued work has finished (JAX: the work of `value`)."""


class KerasBackend(Protocol):
    """What keras3 calls in the adapter of the backend it runs on (pytorch, tensorflow_raw, jax_numpy), and Flax in
    jax_numpy, besides cuda_versions, cpu_kernels and allocator_peak_mb."""

    def apply_threads(self, threads) -> dict:
        """The intra-op (TensorFlow: and inter-op) thread counts, pinned where `threads` is a number, read back."""

    def apply_math_mode(self, math_mode) -> dict:
        """{tf32, conv_autotune}: the framework's math-mode switches set, read back."""


class TorchBackend(KerasBackend, Protocol):
    """KerasBackend, and what torch.compile did, which Keras on torch reads back for its jit_compile."""

    def compile_counters(self) -> dict:
        """torch.compile's process-wide counters (graphs, graph breaks, CUDA graph skips), taken at build."""

    def compile_engagement(self, mode, before) -> dict:
        """{compile_mode, compiled_graphs, graph_breaks[, cudagraph_skips, cuda_graphs]} since the counters `before`."""


class TensorFlowBackend(KerasBackend, Protocol):
    """KerasBackend, and the data-parallel replicas, which Keras on TensorFlow makes and reads back as the
    tensorflow_raw adapter does."""

    def mirrored_strategy(self, device, replicas):
        """A tf.distribute.MirroredStrategy over the first `replicas` devices (on a CPU, logical ones)."""

    def strategy_engagement(self, strategy) -> dict:
        """{data_parallel, collective, batch_norm_statistics}: the strategy, its cross-device reduction, read back,
        and where batch norm takes its statistics unsynchronised (each replica's slice)."""


class JaxBackend(KerasBackend, Protocol):
    """KerasBackend for JAX, which the adapters that run on JAX (keras3 on JAX, flax_nnx) call in jax_numpy, and
    what jaxlib reports."""

    def cuda_versions(self) -> tuple[str | None, str | None]:
        """(CUDA, cuDNN) as jaxlib reports them (None where it reports none, e.g. a CPU build)."""

    def cpu_kernels(self) -> str | None:
        """XLA:CPU's kernels, named by jaxlib's version."""

    def allocator_peak_mb(self, device) -> float | None:
        """The JAX allocator's peak in MiB (None on CPU)."""

    def replica_devices(self, devices, replicas, device) -> list:
        """The first `replicas` of the `devices` JAX lists, refused (RuntimeError) where it lists too few."""


class LoadsByName(Protocol):
    """What an adapter may declare, each as a literal at its top level (dlbench/study/dependencies.py reads them without
    importing the adapter), for the other adapters it loads by name (adapters.load) rather than importing them."""

    BACKEND_ADAPTERS: dict
    """{backend: adapter}: the adapter it reaches on each backend a stack runs it on (envs/stacks.yaml `backend`)."""
    STREAM_ADAPTER: str
    """The adapter whose stream it streams through, reached with streamed data only."""


# The shared surface: the adapters other adapters call beyond the contract, and what they call.
SHARED = {"pytorch": TorchBackend, "tensorflow_raw": TensorFlowBackend, "jax_numpy": JaxBackend}


def capabilities(module) -> list:
    """The CAPABILITIES an adapter module (or any object) has every member of."""
    return [capability for capability in CAPABILITIES if all(hasattr(module, name) for name in members(capability))]


def members(protocol):
    """The names a Protocol declares, its bases' included: functions and annotated constants."""
    names = set()
    for cls in protocol.__mro__:
        if cls.__module__ == __name__:
            names |= set(vars(cls).get("__annotations__", {}))
            names |= {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}
    return names
