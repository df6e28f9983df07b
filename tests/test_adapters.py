"""Every adapter builds every model as the neutral spec declares it: equal parameter counts and, from the same
neutral initial weights, the same logits (float32 on CPU: sums in another order differ by ~1e-6, so 1e-4)."""

import numpy as np
import pytest
from conftest import STACKS
from dlbench import specs

LOGIT_TOLERANCE = 1e-4


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_parameter_counts_equal_the_spec(probes, stack):
    for result in probes[stack]["results"]:
        if "unsupported" in result:
            continue
        spec = specs.model_spec(result["model"], 10)
        assert result["parameters"] == specs.parameter_count(spec, tuple(result["shape"])), result["model"]


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_variants_built_are_those_the_stack_declares(probes, stack):
    built = {result["variant"] for result in probes[stack]["results"] if "unsupported" not in result}
    assert built == set(STACKS[stack]["variants"])
    for result in probes[stack]["results"]:
        if "unsupported" not in result:
            assert result["engaged"]["variant"] == result["variant"]


def test_all_frameworks_compute_the_same_logits(probes):
    reference_stack = "torch-2.13"
    reference = {(r["model"], tuple(r["shape"])): np.array(r["logits"])
                 for r in probes[reference_stack]["results"] if "unsupported" not in r}  # fmt: skip
    compared = 0
    for stack, probe in probes.items():
        for result in probe["results"]:
            if "unsupported" in result:
                continue
            expected = reference[(result["model"], tuple(result["shape"]))]
            difference = np.abs(np.array(result["logits"]) - expected).max()
            assert difference < LOGIT_TOLERANCE, (stack, result["model"], result["shape"], result["variant"])
            compared += 1
    assert compared >= len(specs.MODELS) * 2 * len(STACKS)


def test_framework_versions_are_the_pinned_ones(probes):
    versions = {stack: probe["version"] for stack, probe in probes.items()}
    assert versions["mxnet-1.9"] == "1.9.1"
    assert versions["torch-2.13"].startswith("2.13.0")
    assert versions["tensorflow-2.21"] == "2.21.0"
    assert versions["keras-3-jax"] == versions["keras-3-tensorflow"] == "3.15.1"


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_out_of_memory_is_recognised(probes, stack):
    """Each framework's own OOM exception (scripted) is an OOM; an ordinary error is not."""
    assert probes[stack]["oom_detection"] == {"oom": True, "other": False}
