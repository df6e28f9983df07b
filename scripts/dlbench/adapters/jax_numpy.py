"""JAX adapter for operator microbenchmarks (dlbench/ops.py), with jax.numpy ops dispatched eagerly.

It times JAX itself in the keras-3-jax stack's env; models in that stack train through the keras3 adapter. Its JAX
switches (threads, math mode, CUDA versions, allocator peak) are also those of Keras on JAX and of Flax: shared,
contract.JaxBackend.
"""

import jax
import jax.numpy as jnp

from .. import mathmode, parallel

FRAMEWORK = "jax"


def version():
    return jax.__version__


def replica_devices(devices, replicas, device):
    """The first `replicas` of the `devices` JAX lists (every process's, process 0's first), refused where it lists
    fewer, or, across processes, other than all of them: every process drives its own (shared, contract.JaxBackend)."""
    if len(devices) < replicas or (jax.process_count() > 1 and len(devices) != replicas):
        made = " (XLA_FLAGS=--xla_force_host_platform_device_count=N, set before JAX is imported)" * (device == "cpu")
        raise RuntimeError(
            f"{replicas} replicas need {replicas} {device} devices, but JAX sees {len(devices)} over "
            f"{jax.process_count()} process(es){made}"
        )
    return devices[:replicas]


def _jax_device(device):
    """This process's first device (across processes, jax.devices() lists process 0's first, which others cannot
    address)."""
    return jax.local_devices(backend="gpu" if device == "gpu" else "cpu")[0]


def apply_threads(threads):
    """XLA's CPU threads cannot be pinned at run time: its default, recorded as 0 (one thread per schedulable CPU,
    whose count is recorded beside it) (also Keras on JAX and Flax: shared, contract.JaxBackend)."""
    return {"xla_threads": 0, "schedulable_cpus": parallel.schedulable_cpus()}


def apply_math_mode(math_mode):
    """JAX's default matmul precision (TensorFloat-32 or float32) set and read back; XLA's GPU autotuning as the
    XLA_FLAGS set before the import leave it (shared, contract.JaxBackend)."""
    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if math_mode["tf32"] else "float32")
    tf32 = jax.config.jax_default_matmul_precision == "tensorfloat32"
    return {"tf32": mathmode.tf32_engaged(tf32), "conv_autotune": mathmode.xla_autotune_engaged()}


def cuda_versions():
    """(CUDA, cuDNN) as jaxlib's CUDA plugin reports the versions it loaded; (None, None) without one (shared,
    contract.JaxBackend)."""
    try:
        from jax._src.lib import cuda_versions as loaded
    except ImportError:
        return None, None
    if loaded is None:
        return None, None
    return str(loaded.cuda_runtime_get_version()), str(loaded.cudnn_get_version())


def cpu_kernels():
    """XLA compiles its own CPU kernels (calling Eigen or YNNPACK for some), which no version names apart from
    jaxlib's (shared, contract.JaxBackend)."""
    import jaxlib

    return f"XLA:CPU (jaxlib {jaxlib.__version__})"


def allocator_peak_mb(device):
    """The GPU allocator's peak in MiB; None on CPU (shared, contract.JaxBackend)."""
    if device != "gpu":
        return None
    return _jax_device(device).memory_stats()["peak_bytes_in_use"] / 2**20


def operators(device, dtype):
    target, kind = _jax_device(device), jnp.dtype(dtype)

    def create(values):
        with jax.default_device(target):
            return jnp.asarray(values, dtype=kind)

    return {
        "from_numpy": create,
        "from_list": create,
        "sigmoid": jax.nn.sigmoid,
        "relu": jax.nn.relu,
        "tanh": jnp.tanh,
        "softrelu": jax.nn.softplus,
        "softsign": jax.nn.soft_sign,
        "dot": jnp.dot,
        "gemm": jnp.matmul,
        "flatten": lambda x: x.reshape(x.shape[0], -1),
        "normalize": lambda x: x / jnp.linalg.norm(x, axis=1, keepdims=True),
        "copy": jnp.copy,
    }


def ops_input(array, device, dtype):
    return jax.device_put(jnp.asarray(array, dtype=jnp.dtype(dtype)), _jax_device(device))


def ops_output(value):
    return jax.device_get(value.astype(jnp.float32))


def ops_sync(device, value):
    # JAX has no device-wide barrier: block on the last result (earlier calls ran before it, in order).
    if value is not None:
        jax.block_until_ready(value)
