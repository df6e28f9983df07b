"""Every adapter builds every model as the neutral spec declares it, in every variant its stack declares.

Inference: from the same neutral initial weights, each framework's logits equal a float64 NumPy forward pass
(tests/support/reference.py) within float32 rounding. Training: one plain SGD step on the same batch gives the same
loss and the same weights in every framework. Differences a framework cannot avoid are documented by the tests below.
"""

import functools
import math

import numpy as np
import pytest
from conftest import STACKS, cpu_variants
from dlbench import specs, variants
from probe_adapter import CLASSES, OPTIMIZER_CASES, STEP_BATCH, model_inputs, model_spec
from reference import forward

# Logits, relative to the largest reference logit. float32 sums of ~10^3-10^4 products round at ~1e-6 of the scale
# (measured worst: 3.4e-7, ResNet-56); bfloat16 keeps 8 significant bits (2^-8 = 3.9e-3; measured worst 6.5e-3).
LOGIT_TOLERANCE = {"float32": 1e-5, "bfloat16": 3e-2}
# One SGD step, the difference from PyTorch's weights relative to the step's largest update. Shallow or batch-norm
# free networks agree to float32 rounding (measured worst 1.1e-5, the MXNet LSTM). The deep batch-norm networks at
# initialisation amplify rounding: in float64, a 1e-7 relative perturbation of the input changes ResNet-18's update
# by 8e-3 and ResNet-50's float32 update differs from its own float64 one by 2.6e-2 (PyTorch alone), so between
# frameworks that sum in other orders, agreement within a few percent is all rounding allows (measured worst 5e-2,
# ResNet-50 in MXNet). Their batch-norm constructs are proven exactly by the shallow `constructs` model.
WELL_CONDITIONED = {"constructs", "mlp", "cnn", "lenet", "lstm", "vgg16"}
STEP_TOLERANCE = {True: 1e-4, False: 6e-2}
LOSS_TOLERANCE = {True: 1e-5, False: 1e-4}  # measured worst: 1.9e-5, ResNet-50 in TensorFlow
# Three optimiser steps of the MLP, relative to the largest update. SGD: float32 rounding (measured worst 3e-6).
# Adam and RMSprop divide each gradient by its own running magnitude, so an element whose gradient is near zero
# turns the rounding of that gradient (absolute, ~1e-9) into a visible update difference (measured worst 2.6e-3).
OPTIMIZER_TOLERANCE = {False: 1e-4, True: 1e-2}
# Paddle's Adam against PyTorch's: its CPU kernels round near-zero gradients differently by processor (measured
# 6.9e-3 on an AMD EPYC, 1.2e-2 on an Intel Xeon, run to run the same).
PADDLE_ADAM_TOLERANCE = 2e-2
REFERENCE_STACK = "torch-2.13"


def results(probes, stack):
    return probes[stack][0]["results"]


def case_spec(result):
    return model_spec(result["model"], CLASSES), tuple(result["shape"])


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_parameter_counts_equal_the_spec(probes, stack):
    for result in results(probes, stack):
        assert result["parameters"] == specs.parameter_count(*case_spec(result)), result["model"]


@functools.cache
def reference_logits(model, shape):
    """The float64 NumPy forward pass of a probe's case, computed once for every stack (seconds per deep model)."""
    spec = model_spec(model, CLASSES)
    return forward(spec, shape, specs.initial_weights(spec, shape, seed=7), model_inputs(spec, shape, 4, 1))


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_logits_equal_the_numpy_reference(probes, stack):
    for result in results(probes, stack):
        expected = reference_logits(result["model"], tuple(result["shape"]))
        scale = max(np.abs(expected).max(), 1e-3)
        tolerance = LOGIT_TOLERANCE[result["engaged"]["matmul_dtype"]]
        difference = np.abs(np.array(result["logits"]) - expected).max() / scale
        assert difference < tolerance, (result["model"], result["shape"], result["variant"], difference)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_declared_variants_are_built_and_engaged(probes, stack):
    """Engagement is read back from the built model, not assumed from the request."""
    built = [result for result in results(probes, stack) if result["model"] == "lenet"]
    lenet = model_spec("lenet", CLASSES)
    meaningful = [variant for variant in cpu_variants(STACKS[stack]) if variants.model_problem(variant, lenet) is None]
    assert [result["variant"] for result in built][: len(meaningful)] == meaningful
    for result in built:
        variant, engaged = variants.parse(result["variant"]), result["engaged"]
        assert engaged["variant"] == result["variant"]
        assert engaged["graph"] == (variant.mode != "eager")
        assert engaged["matmul_dtype"] == variants.compute_dtype(variant, "cpu"), result["variant"]
        assert engaged["dtype"] == "float32"  # mixed precision keeps float32 weights
        if variant.mode == "xla":
            assert engaged["xla"] is True
        if variant.mode == "compile":
            assert engaged["compiled_graphs"] >= 1 and engaged["graph_breaks"] == 0
            assert engaged["compile_mode"] == variant.compile_mode
            assert not engaged.get("cuda_graphs"), "CUDA graphs cannot capture CPU work"
        if stack == REFERENCE_STACK and result["shape"][-1] == 3:
            assert engaged["layout"] == ("NHWC" if variant.channels_last else "NCHW")


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_attention_runs_fused_by_default_and_written_out_when_composed(probes, stack):
    """Every attention model is built with the stack's default attention and, where the stack declares it, composed
    (matmul, softmax, matmul); both meet the reference (test_logits_equal_the_numpy_reference), and the record names
    which ran. A stack without a fused kernel says so in stacks.yaml (`composed` unsupported)."""
    attending = [result for result in results(probes, stack) if specs.attention_layers(case_spec(result)[0])]
    assert {result["model"] for result in attending} >= {"vit-tiny", "gpt-tiny"}
    for result in attending:
        kernel = result["engaged"]["attention"]
        composed = variants.parse(result["variant"]).composed_attention
        assert kernel.startswith("composed") == (composed or "composed" in STACKS[stack]["unsupported"]), result
    if "composed" not in STACKS[stack]["unsupported"]:
        assert any(variants.parse(result["variant"]).composed_attention for result in attending), stack


def own_framework_modules(entry):
    """The framework modules a stack's process may hold once configured: its framework's, or Keras' backend's."""
    if entry["framework"] == "keras":
        return [entry["backend"]]
    return ["jax"] if entry["framework"] == "flax" else [entry["framework"]]


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_stack_configured_holds_its_own_framework_alone(probes, stack):
    """No framework imports another to set itself up: Keras seeds TensorFlow wherever it is installed, which in a
    Keras-on-JAX env (TensorFlow there for tf.data) cost every run 1.6 s and a second runtime's threads."""
    assert probes[stack][0]["frameworks_configured"] == own_framework_modules(STACKS[stack])


# What each framework's CPU build names among its kernel libraries (cpu_kernels, the record's provenance). TensorFlow
# turns oneDNN on by default only on CPUs with AVX512_VNNI, AVX512_BF16 or AMX; Eigen runs the rest on every CPU.
CPU_KERNELS = {"torch": "oneDNN 3.", "tensorflow": "Eigen", "mxnet": "oneDNN", "paddle": "oneDNN", "jax": "XLA:CPU"}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_a_stack_names_the_cpu_kernel_libraries_its_framework_runs(probes, stack):
    """Frameworks on one machine can run different kernels (oneDNN, MKL, OpenBLAS, XLA's own): each run's record
    says which, as the framework names them."""
    (framework,) = own_framework_modules(STACKS[stack])
    assert CPU_KERNELS[framework] in probes[stack][0]["cpu_kernels"]


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_variants_a_stack_lacks_are_refused_not_run_as_another(probes, stack):
    """What stacks.yaml calls unsupported, the adapter refuses to build (the matrix never runs it in disguise)."""
    entry = STACKS[stack]
    for variant, refusal in probes[stack][0]["unsupported"].items():
        if variant not in entry["variants"] and variant.split("-")[0] in entry.get("unsupported", {}):
            assert refusal is not None, f"{stack} built {variant} although stacks.yaml says it cannot"


def saved_weights(probes, stack, filename):
    with np.load(probes[stack][1] / filename) as saved:
        return [saved[f"arr_{index}"] for index in range(len(saved.files))]


def step_weights(probes, stack, name, shape):
    return saved_weights(probes, stack, f"{name}_{shape[0]}x{shape[-1]}_step.npz")


def leaf_roles(spec, shape):
    """Per saved array: (role, elements per channel) with role trainable, running_mean or running_variance."""
    roles = []
    for layer, in_shape, _ in specs.leaves(spec, shape):
        arrays, trainable = specs.parameter_shapes(layer, in_shape)
        roles += [("trainable", None)] * trainable
        if isinstance(layer, specs.BatchNorm):
            per_channel = STEP_BATCH * math.prod(in_shape[:-1])
            roles += [("running_mean", per_channel), ("running_variance", per_channel)]
    return roles


def step_loss(probes, stack, name, shape):
    return next(
        result["step_loss"]
        for result in results(probes, stack)
        if result["model"] == name and tuple(result["shape"]) == shape and "step_loss" in result
    )


def step_cases(probes):
    return [
        (result["model"], tuple(result["shape"]))
        for result in results(probes, REFERENCE_STACK)
        if "step_loss" in result
    ]


def test_one_sgd_step_gives_the_same_loss_and_weights(probes):
    compared = 0
    for name, shape in step_cases(probes):
        spec = specs.without_dropout(model_spec(name, CLASSES))
        initial = [array for params in specs.initial_weights(spec, shape, seed=7) for array in params]
        roles = leaf_roles(spec, shape)
        expected = step_weights(probes, REFERENCE_STACK, name, shape)
        largest_update = max(
            np.abs(a - b).max() for a, b, (role, _) in zip(expected, initial, roles) if role == "trainable"
        )
        expected_loss = step_loss(probes, REFERENCE_STACK, name, shape)
        for stack in STACKS:
            # the training-mode forward pass (batch statistics), rounding-amplified like the step in the deep nets
            loss = step_loss(probes, stack, name, shape)
            assert loss == pytest.approx(expected_loss, rel=LOSS_TOLERANCE[name in WELL_CONDITIONED]), (stack, name)
            stepped = step_weights(probes, stack, name, shape)
            assert len(stepped) == len(expected)
            for got, want, (role, _) in zip(stepped, expected, roles):
                if role == "trainable":
                    difference = np.abs(got - want).max() / largest_update
                    assert difference < STEP_TOLERANCE[name in WELL_CONDITIONED], (stack, name, difference)
                elif role == "running_mean":
                    np.testing.assert_allclose(
                        got, want, atol=1e-4 * max(np.abs(want).max(), 1e-3), err_msg=f"{stack} {name}"
                    )
            compared += 1
    assert compared >= 12 * len(STACKS)


def test_batch_norm_running_variance_differs_only_by_pytorchs_bessel_correction(probes):
    """Documented difference: PyTorch updates the running variance with the unbiased batch variance (n / (n - 1)),
    the others with the biased one. The spec follows the majority; PyTorch's is the same update rescaled, which
    only evaluation after training sees (by a factor under 1 + 1/n: 1.0001 for 32x32 inputs at batch 8)."""
    spec, shape = model_spec("constructs", CLASSES), (8, 8, 3)
    roles = leaf_roles(spec, shape)
    initial = [array for params in specs.initial_weights(spec, shape, seed=7) for array in params]
    torch_stepped = step_weights(probes, REFERENCE_STACK, "constructs", shape)
    for stack in set(STACKS) - {REFERENCE_STACK}:
        stepped = step_weights(probes, stack, "constructs", shape)
        pytorch = STACKS[stack]["framework"] == "torch"  # another PyTorch release: the same (unbiased) update
        for got, torch_value, start, (role, count) in zip(stepped, torch_stepped, initial, roles):
            if role == "running_variance":
                update = (got - 0.9 * start) * (1 if pytorch else count / (count - 1))
                np.testing.assert_allclose(torch_value - 0.9 * start, update, rtol=1e-4, err_msg=stack)


@pytest.mark.parametrize("case", sorted(OPTIMIZER_CASES))
def test_optimisers_and_weight_decay_update_alike(probes, case):
    """Three steps of SGD with momentum and coupled weight decay, Adam with weight decay, and RMSprop give the same
    MLP weights in every framework. Documented differences, both in where epsilon goes, which matters for elements
    whose gradients are near epsilon (weight decay on weights near zero makes many): PyTorch's Adam adds it to the
    bias-corrected sqrt(v_hat), the others to the uncorrected sqrt(v) (Keras' "epsilon hat"); PyTorch's RMSprop
    adds it outside the square root, the others inside. For those two PyTorch is left out and MXNet is compared;
    Paddle's Adam places epsilon as PyTorch's does."""
    pytorch_differs = case.startswith(("adam", "rmsprop"))
    reference = "mxnet-1.9" if pytorch_differs else REFERENCE_STACK
    initial = specs.initial_weights(specs.model_spec("mlp", CLASSES), (28, 28, 1), seed=7)
    expected = saved_weights(probes, reference, f"optimizer_{case}.npz")
    largest_update = max(np.abs(a - b).max() for a, b in zip(expected, [x for p in initial for x in p]))
    for stack in STACKS:
        # Another PyTorch release places epsilon as PyTorch does, and Paddle's Adam adds epsilon * sqrt(1 - beta_2^t)
        # to sqrt(v), which is PyTorch's placement: compared with the PyTorch reference.
        pytorch = STACKS[stack]["framework"] == "torch" or (
            STACKS[stack]["framework"] == "paddle" and case == "adam-decay"
        )
        want_weights = saved_weights(probes, REFERENCE_STACK, f"optimizer_{case}.npz") if pytorch else expected
        for got, want in zip(saved_weights(probes, stack, f"optimizer_{case}.npz"), want_weights):
            tolerance = OPTIMIZER_TOLERANCE[pytorch_differs and STACKS[stack]["framework"] != "torch"]
            if STACKS[stack]["framework"] == "paddle" and case == "adam-decay":
                tolerance = PADDLE_ADAM_TOLERANCE
            assert np.abs(got - want).max() / largest_update < tolerance, (
                stack,
                case,
            )


def test_pytorch_adam_differs_only_where_epsilon_matters(probes):
    """PyTorch's Adam agrees with the others on every weight whose update is not epsilon-dominated."""
    expected = saved_weights(probes, "mxnet-1.9", "optimizer_adam-decay.npz")
    got = saved_weights(probes, REFERENCE_STACK, "optimizer_adam-decay.npz")
    agreeing = [np.mean(np.isclose(a, b, rtol=0, atol=1e-5)) for a, b in zip(got, expected)]
    assert min(agreeing) > 0.75, agreeing  # measured: 80-96% of each array


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_data_placements_and_fixed_batch_steps_train_alike(probes, stack):
    """Three SGD steps of the MLP on one batch give the same weights, loss and evaluation whether the data is staged
    on the device or gathered from host arrays, and whether the steps run through train_epoch or through
    fixed_batch_steps (the input-share measurement must train exactly like an epoch, minus its input work)."""
    placements = probes[stack][0]["placements"]
    expected = saved_weights(probes, stack, "placement_device_epoch.npz")
    initial = specs.initial_weights(specs.model_spec("mlp", CLASSES), (28, 28, 1), seed=7)
    largest_update = max(np.abs(a - b).max() for a, b in zip(expected, [x for p in initial for x in p]))
    assert largest_update > 1e-3  # the steps did train
    for case in ("device_fixed", "host_epoch", "host_fixed"):
        for got, want in zip(saved_weights(probes, stack, f"placement_{case}.npz"), expected):
            assert np.abs(got - want).max() / largest_update < 1e-5, (stack, case)
        assert placements[case]["loss"] == pytest.approx(placements["device_epoch"]["loss"], rel=1e-5), case
        assert placements[case]["evaluation"] == pytest.approx(placements["device_epoch"]["evaluation"], rel=1e-5), case
    assert probes[stack][0]["input_work"]


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_math_mode_policy_is_applied_and_read_back(probes, stack):
    """Every adapter applies the config's math mode with its framework's own switches and reads it back: on by
    default (what practitioners run on a tensor-core GPU), off when the policy says so."""
    math_modes = probes[stack][0]["math_modes"]
    assert {key: math_modes["default"][key] for key in ("tf32", "conv_autotune")} == {
        "tf32": True,
        "conv_autotune": True,
    }
    assert {key: math_modes["off"][key] for key in ("tf32", "conv_autotune")} == {"tf32": False, "conv_autotune": False}
