"""The math-mode policy (config `math_mode`), one policy applied alike by every adapter:

    tf32      float32 matrix multiplications and convolutions may run in TensorFloat-32 on tensor-core GPUs
              (PyTorch's matmul and cuDNN TF32 switches, TensorFlow's TensorFloat-32 execution, JAX's default
              matmul precision, MXNet's tensor-core math)
    autotune  convolution algorithms are chosen by timing them (cudnn.benchmark, TF_CUDNN_USE_AUTOTUNE, XLA's
              GPU autotuning, MXNET_CUDNN_AUTOTUNE_DEFAULT)

The default, both on, is what each framework's practitioners run on a tensor-core GPU. On CPU neither exists and
float32 stays float32. The variables below are read when a framework loads, so the runner sets them before the
import (process.prepare_process); each adapter's configure() sets the runtime switches and reads both back into
the record's `engaged`. Standard library only.
"""

import os

DEFAULT = {"tf32": True, "autotune": True}
XLA_NO_AUTOTUNE = "--xla_gpu_autotune_level=0"


def environment(policy, inherited=None):
    """The variables that carry the policy into a framework's runtime, given the variables already set."""
    inherited = os.environ if inherited is None else inherited
    flag = {True: "1", False: "0"}
    variables = {
        "TF_CUDNN_USE_AUTOTUNE": flag[policy["autotune"]],
        "MXNET_CUDNN_AUTOTUNE_DEFAULT": flag[policy["autotune"]],
        "MXNET_CUDA_ALLOW_TENSOR_CORE": flag[policy["tf32"]],
    }
    if not policy["tf32"]:
        # NVIDIA's own switch: cuBLAS and cuDNN keep float32 in every framework, whatever its defaults.
        variables["NVIDIA_TF32_OVERRIDE"] = "0"
    xla_flags = inherited.get("XLA_FLAGS", "").replace(XLA_NO_AUTOTUNE, "").split()
    if not policy["autotune"]:
        xla_flags.append(XLA_NO_AUTOTUNE)
    variables["XLA_FLAGS"] = " ".join(xla_flags)
    return variables


def environment_engaged(variable, default):
    """A variable the policy set, read back from this process's environment as a bool."""
    return os.environ.get(variable, default) != "0"


def xla_autotune_engaged():
    return XLA_NO_AUTOTUNE not in os.environ.get("XLA_FLAGS", "")


def tensorflow_autotune_engaged():
    """TensorFlow autotunes cuDNN convolutions (eager, tf.function) and XLA's (jit_compile): both, or not at all."""
    return environment_engaged("TF_CUDNN_USE_AUTOTUNE", "1") and xla_autotune_engaged()


def tf32_engaged(framework_switch):
    """TF32 as it takes effect: the framework's switch, unless NVIDIA's override turns it off for everyone."""
    return bool(framework_switch) and environment_engaged("NVIDIA_TF32_OVERRIDE", "1")
