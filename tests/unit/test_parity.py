"""The pieces of GPU parity that are plain arithmetic, tested on CPU: the math-mode policy's variables, model FLOPs
utilisation against datasheet peaks and the input share with its interval (PyTorch's pinned host-to-GPU copy:
tests/frameworks/test_pytorch_transfer.py)."""

import pytest
from dlbench import mathmode, peaks
from dlbench.measure.paired import removed_share


def test_the_math_mode_policy_sets_each_frameworks_variables():
    default = mathmode.environment(mathmode.DEFAULT, inherited={})
    assert default["TF_CUDNN_USE_AUTOTUNE"] == default["MXNET_CUDNN_AUTOTUNE_DEFAULT"] == "1"
    assert default["MXNET_CUDA_ALLOW_TENSOR_CORE"] == "1" and "NVIDIA_TF32_OVERRIDE" not in default
    assert mathmode.XLA_NO_AUTOTUNE not in default["XLA_FLAGS"]
    off = mathmode.environment({"tf32": False, "autotune": False}, inherited={"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    assert off["NVIDIA_TF32_OVERRIDE"] == "0" and off["MXNET_CUDA_ALLOW_TENSOR_CORE"] == "0"
    assert off["TF_CUDNN_USE_AUTOTUNE"] == off["MXNET_CUDNN_AUTOTUNE_DEFAULT"] == "0"
    assert off["XLA_FLAGS"].split() == ["--xla_dump_to=/tmp/x", mathmode.XLA_NO_AUTOTUNE]  # the user's flags stay
    again = mathmode.environment({"tf32": False, "autotune": False}, inherited={"XLA_FLAGS": off["XLA_FLAGS"]})
    assert again["XLA_FLAGS"].split().count(mathmode.XLA_NO_AUTOTUNE) == 1
    on = mathmode.environment(mathmode.DEFAULT, inherited={"XLA_FLAGS": off["XLA_FLAGS"]})
    assert on["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"


@pytest.mark.parametrize(
    "engaged, device, expected",
    [
        ({"matmul_dtype": "float16"}, "gpu", "fp16"),
        ({"matmul_dtype": "bfloat16"}, "cpu", "bf16"),
        ({"matmul_dtype": "float32", "tf32": True}, "gpu", "tf32"),
        ({"matmul_dtype": "float32", "tf32": False}, "gpu", "fp32"),
        ({"matmul_dtype": "float32", "tf32": True}, "cpu", "fp32"),
    ],
)
def test_the_precision_that_ran_comes_from_what_was_read_back(engaged, device, expected):
    assert peaks.precision(engaged, device) == expected


def test_model_flops_utilisation_against_the_datasheet_peak():
    # ResNet-50 at 224x224: 8.2 GFLOPs forward; 1,900 images/s in TF32 on an H100 SXM.
    fields = peaks.utilisation(8.2e9, 1900.0, {"matmul_dtype": "float32", "tf32": True}, "gpu", "NVIDIA H100 80GB HBM3")
    assert fields["train_flops_per_s"] == pytest.approx(3 * 8.2e9 * 1900)
    assert fields["peak_flops_per_s"] == 494.7e12 and "H100 SXM" in fields["peak_flops_source"]
    assert fields["model_flops_utilisation"] == pytest.approx(3 * 8.2e9 * 1900 / 494.7e12)
    assert peaks.peak("NVIDIA H100 PCIe", "fp16")[0] == 756e12  # the PCIe card, not the SXM one
    cpu = peaks.utilisation(8.2e9, 10.0, {"matmul_dtype": "float32"}, "cpu", None)
    assert cpu["model_flops_utilisation"] is None and "no datasheet peak" in cpu["peak_flops_source"]
    assert "no fp16 peak" not in peaks.peak("Tesla V100-SXM2-16GB", "fp16")[1]
    assert "lists no bf16 peak" in peaks.peak("Tesla V100-SXM2-16GB", "bf16")[1]


def test_a_removed_share_carries_the_noise_of_single_epochs():
    share, (low, high) = removed_share([0.9, 0.92], [1.0, 1.02])  # timed in pairs: (0.9, 1.0), (0.92, 1.02)
    assert share == pytest.approx(1 - 0.91 / 1.01) and low <= share <= high
    assert low == pytest.approx(1 - 0.92 / 1.02) and high == pytest.approx(1 - 0.9 / 1.0)
    noise, (low, high) = removed_share([1.01, 0.97], [0.99, 1.0])  # no input work: the interval holds zero
    assert low < 0 < high
