"""JAX adapter for operator microbenchmarks (dlbench/ops.py), with jax.numpy ops dispatched eagerly.

It times JAX itself in the keras-3-jax stack's env; models in that stack train through the keras3 adapter.
"""

import jax
import jax.numpy as jnp

FRAMEWORK = "jax"


def version():
    return jax.__version__


def _jax_device(device):
    return jax.devices("gpu" if device == "gpu" else "cpu")[0]


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
