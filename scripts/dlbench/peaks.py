"""Model FLOPs utilisation: achieved training FLOP/s over the device's peak for the precision that ran.

Convention (stated in docs/run-record.md and the report): a training step costs 3 x the forward FLOPs (forward, and a
backward pass of twice the forward), a multiply-add counts as 2, so achieved FLOP/s = 3 x flops_per_image x
steady images/s. Peaks are dense tensor throughputs (no structured sparsity) from NVIDIA's datasheets, per GPU
name as NVML reports it; the first pattern that the name contains wins. Where no peak is known (CPUs, other
GPUs), aggregation still relates the achieved FLOP/s to the GEMM ceiling measured by the operator benchmark.
Standard library only.
"""

TRAIN_FLOPS_PER_FORWARD_FLOP = 3

HOPPER_SXM = {"fp32": 66.9e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12}  # H100 SXM and H200 alike

# (pattern in the NVML name, {precision: peak FLOP/s}, source)
PEAKS = (
    (
        "H100 PCIe",
        {"fp32": 51.2e12, "tf32": 378e12, "fp16": 756e12, "bf16": 756e12},
        "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe (dense)",
    ),
    ("H100", HOPPER_SXM, "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM (dense)"),
    ("H200", HOPPER_SXM, "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM (dense)"),
    (
        "A100",
        {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
        "NVIDIA A100 Tensor Core GPU datasheet (dense)",
    ),
    (
        "L4",
        {"fp32": 30.3e12, "tf32": 60e12, "fp16": 121e12, "bf16": 121e12},
        "NVIDIA L4 Tensor Core GPU datasheet (dense)",
    ),
    (
        "A10",
        {"fp32": 31.2e12, "tf32": 62.5e12, "fp16": 125e12, "bf16": 125e12},
        "NVIDIA A10 Tensor Core GPU datasheet (dense)",
    ),
    (
        "V100",
        {"fp32": 15.7e12, "tf32": 15.7e12, "fp16": 125e12},
        "NVIDIA V100 Tensor Core GPU datasheet, SXM2 (no TF32: float32 runs in float32)",
    ),
    (
        "T4",
        {"fp32": 8.1e12, "tf32": 8.1e12, "fp16": 65e12},
        "NVIDIA T4 Tensor Core GPU datasheet (no TF32: float32 runs in float32)",
    ),
)


# No CPU core computes faster than this, per logical CPU, at a precision: float32 at two AVX-512 FMA units of 16 lanes
# and 2 FLOPs each at 6 GHz is 384 GFLOP/s; bfloat16 and float16 on AMX tiles (1,024 multiply-adds a cycle) about
# ten times that. Not a peak to measure against (the operator benchmark measures the machine's GEMM ceiling): a bound
# that a CPU run's FLOP/s exceed only when the record is wrong.
CPU_CORE_BOUND = {"fp32": 4e11, "bf16": 4e12, "fp16": 4e12}


def precision(engaged, device):
    """The precision the matmuls and convolutions ran in: fp16, bf16, tf32 (float32 with TF32 engaged on a GPU)
    or fp32, from what the run read back."""
    dtype = engaged.get("matmul_dtype")
    if dtype in ("float16", "bfloat16"):
        return {"float16": "fp16", "bfloat16": "bf16"}[dtype]
    return "tf32" if device == "gpu" and engaged.get("tf32") else "fp32"


def peak(gpu_name, precision_name):
    """(peak FLOP/s, source) for this GPU at this precision, or (None, why not)."""
    if not gpu_name:
        return None, "no GPU name (CPU run, or NVML unavailable): no datasheet peak"
    for pattern, peaks, source in PEAKS:
        if pattern in gpu_name:
            if precision_name in peaks:
                return peaks[precision_name], source
            return None, f"{source} lists no {precision_name} peak"
    return None, f"no datasheet peak for {gpu_name!r} in dlbench/peaks.py"


def utilisation(flops_per_image, images_per_s, engaged, device, gpu_name, devices=1):
    """The record's MFU fields: achieved training FLOP/s, the precision, the peak and its source, and their ratio;
    with data-parallel replicas on `devices` GPUs, the peak of them all."""
    achieved = TRAIN_FLOPS_PER_FORWARD_FLOP * flops_per_image * images_per_s if images_per_s else None
    ran_in = precision(engaged, device)
    peak_flops, source = peak(gpu_name, ran_in)
    if peak_flops and devices > 1:
        peak_flops, source = peak_flops * devices, f"{devices} x {source}"
    return {
        "train_flops_per_s": achieved,
        "mfu_precision": ran_in,
        "peak_flops_per_s": peak_flops,
        "peak_flops_source": source,
        "model_flops_utilisation": achieved / peak_flops if achieved and peak_flops else None,
    }
