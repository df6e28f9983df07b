"""The neutral specs: parameter counts, FLOPs, initial weights and the channels-first conversion."""

import numpy as np
import pytest
from dlbench import specs

# Hand-computed: mlp 784*128+128 + 128*10+10; cnn 1*64*9+64 + 64*32*9+32 + 24*24*32*10+10;
# lenet 1*6*25+6 + 6*16*9+16 + 400*120+120 + 120*84+84 + 84*10+10.
EXPECTED_PARAMETERS = {"mlp": 101_770, "cnn": 203_434, "lenet": 60_170}


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_parameter_counts_of_the_specs(name):
    assert specs.parameter_count(specs.model_spec(name, 10), (28, 28, 1)) == EXPECTED_PARAMETERS[name]


def test_flops_of_the_mlp():
    assert specs.flops_per_image(specs.model_spec("mlp", 10), (28, 28, 1)) == 2 * (784 * 128 + 128 * 10)


def test_unknown_model_names_the_known_ones():
    with pytest.raises(ValueError, match="known models: cnn, lenet, mlp"):
        specs.model_spec("resnet9000", 10)


def test_too_small_input_is_refused():
    with pytest.raises(ValueError, match="too small"):
        specs.layer_shapes(specs.model_spec("lenet", 10), (8, 8, 1))


def test_initial_weights_depend_on_the_seed_only():
    spec = specs.model_spec("lenet", 10)
    first, again = specs.initial_weights(spec, (28, 28, 1), 3), specs.initial_weights(spec, (28, 28, 1), 3)
    other = specs.initial_weights(spec, (28, 28, 1), 4)
    assert all(np.array_equal(a, b) for pa, pb in zip(first, again) for a, b in zip(pa, pb))
    assert not np.array_equal(first[0][0], other[0][0])


def forward(spec, shape, weights, images, channels_first):
    """A NumPy reference forward pass in either layout."""
    x = images.transpose(0, 3, 1, 2) if channels_first else images
    for layer, params in zip(spec, weights):
        if isinstance(layer, specs.Conv):
            kernel, bias = params
            k = layer.kernel
            if channels_first:  # OIHW over NCHW
                windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
                x = np.einsum("nchwij,ocij->nohw", windows, kernel) + bias[None, :, None, None]
            else:  # HWIO over NHWC
                windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))
                x = np.einsum("nhwcij,ijco->nhwo", windows, kernel) + bias
        elif isinstance(layer, specs.Pool):
            s = layer.size
            if channels_first:
                n, c, h, w = x.shape
                x = x[:, :, : h // s * s, : w // s * s].reshape(n, c, h // s, s, w // s, s).mean(axis=(3, 5))
            else:
                n, h, w, c = x.shape
                x = x[:, : h // s * s, : w // s * s].reshape(n, h // s, s, w // s, s, c).mean(axis=(2, 4))
        elif isinstance(layer, specs.Flatten):
            x = x.reshape(len(x), -1)
        else:
            x = x @ params[0] + params[1]
        if getattr(layer, "activation", None) == "relu":
            x = np.maximum(x, 0)
    return x


@pytest.mark.parametrize("name", sorted(specs.MODELS))
def test_channels_first_weights_compute_the_same_function(name):
    shape = (12, 12, 3)
    spec = specs.model_spec(name, 5)
    weights = specs.initial_weights(spec, shape, 0)
    images = np.random.default_rng(0).normal(size=(2, *shape)).astype(np.float64)
    expected = forward(spec, shape, weights, images, channels_first=False)
    converted = specs.channels_first_weights(spec, shape, weights)
    np.testing.assert_allclose(forward(spec, shape, converted, images, channels_first=True), expected, rtol=1e-10)
