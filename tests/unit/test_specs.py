"""The neutral specs: parameter counts (equal to the published ones), FLOPs, initial weights, layouts."""

import numpy as np
import pytest
from dlbench import specs
from reference import forward

# Hand-computed: mlp 784*128+128 + 128*10+10; cnn 1*64*9+64 + 64*32*9+32 + 24*24*32*10+10;
# lenet 1*6*25+6 + 6*16*9+16 + 400*120+120 + 120*84+84 + 84*10+10; lstm 4*(28*128 + 128*128 + 128) + 128*10+10.
EXPECTED_AT_MNIST = {"mlp": 101_770, "cnn": 203_434, "lenet": 60_170, "lstm": 81_674}
# Published: He et al. 2016 (ResNet-20 0.27M, ResNet-56 0.85M; the option-A counts of the reference CIFAR
# implementations) and torchvision (resnet18, resnet50, vgg16 at 224x224 with 1000 classes).
PUBLISHED = {
    ("resnet20", (32, 32, 3), 10): 269_722,
    ("resnet56", (32, 32, 3), 10): 853_018,
    ("resnet18", (224, 224, 3), 1000): 11_689_512,
    ("resnet50", (224, 224, 3), 1000): 25_557_032,
    ("vgg16", (224, 224, 3), 1000): 138_357_544,
    # timm's vit_small_patch16_224 and vit_base_patch16_224; GPT-2 124M (OpenAI's, nanoGPT's with its tied head and
    # the position embeddings counted).
    ("vit-s16", (224, 224, 3), 1000): 22_050_664,
    ("vit-b16", (224, 224, 3), 1000): 86_567_656,
    ("gpt2-small", (1024,), 50257): 124_439_808,
}


@pytest.mark.parametrize("name", sorted(EXPECTED_AT_MNIST))
def test_parameter_counts_of_the_small_specs(name):
    assert specs.parameter_count(specs.model_spec(name, 10), (28, 28, 1)) == EXPECTED_AT_MNIST[name]


@pytest.mark.parametrize("name, shape, classes", sorted(PUBLISHED))
def test_parameter_counts_equal_the_published_ones(name, shape, classes):
    assert specs.parameter_count(specs.model_spec(name, classes), shape) == PUBLISHED[(name, shape, classes)]


def test_flops_per_image():
    assert specs.flops_per_image(specs.model_spec("mlp", 10), (28, 28, 1)) == 2 * (784 * 128 + 128 * 10)
    # ResNet-50 is quoted at 4.1 G multiply-adds per 224x224 image, ResNet-18 at 1.8 G; FLOPs count 2 per multiply-add.
    assert specs.flops_per_image(specs.model_spec("resnet50", 1000), (224, 224, 3)) / 2e9 == pytest.approx(
        4.1, rel=0.01
    )
    assert specs.flops_per_image(specs.model_spec("resnet18", 1000), (224, 224, 3)) / 2e9 == pytest.approx(
        1.82, rel=0.01
    )


def transformer_hand_count(tokens, width, depth, mlp):
    """Forward FLOPs of `depth` pre-LN blocks on one sequence, counted by hand: the projections (qkv 3 d^2, output
    d^2, MLP 2 d * mlp) at 2 FLOPs per multiply-add per token, attention's scores and weighted sum 2 * 2 T^2 d,
    two LayerNorms (2 per element) and two residual additions per block."""
    projections = 2 * tokens * (3 * width * width + width * width + 2 * width * mlp)
    return depth * (projections + 4 * tokens * tokens * width + 2 * 2 * tokens * width + 2 * tokens * width)


def test_flops_of_the_attention_models_by_hand():
    # vit-tiny at 32x32x3: 64 patches of 4x4x3 plus the class token, width 128, 4 blocks, 10 classes.
    tokens, width = 65, 128
    patches = 2 * 64 * (4 * 4 * 3) * width
    head = 2 * width * tokens + tokens * width + 2 * width * 10  # final LayerNorm, positions, classifier
    expected = patches + transformer_hand_count(tokens, width, 4, 4 * width) + head
    assert specs.flops_per_image(specs.model_spec("vit-tiny", 10), (32, 32, 3)) == expected
    # gpt-tiny: context 64, width 128, 2 blocks, a vocabulary of 256 in the tied head (the look-up costs none).
    tokens, vocabulary = 64, 256
    expected = tokens * width + transformer_hand_count(tokens, width, 2, 4 * width) + 2 * tokens * width
    expected += 2 * tokens * width * vocabulary
    assert specs.flops_per_image(specs.model_spec("gpt-tiny", vocabulary), (tokens,)) == expected


def test_training_flops_per_token_follow_nanogpt():
    """nanoGPT's GPT-2 124M: 123.65 M parameters without the position embeddings, 6 N + 12 L T d = 0.855 GFLOP per
    token at context 1024; three forward passes of the spec's own count agree within what it adds (LayerNorms,
    residuals) and leaves out (biases)."""
    spec, shape = specs.model_spec("gpt2-small", 50257), (1024,)
    per_token = specs.training_flops_per_token(spec, shape)
    assert per_token == 6 * (124_439_808 - 1024 * 768) + 12 * 12 * 1024 * 768
    assert 3 * specs.flops_per_image(spec, shape) / 1024 == pytest.approx(per_token, rel=2e-3)


@pytest.mark.parametrize(
    "spec, shape, message",
    [
        ([specs.PatchEmbed(5, 8)], (32, 32, 3), "patch divides"),
        ([specs.PatchEmbed(4, 6), specs.Attention(4)], (8, 8, 3), "4 heads do not divide the width 6"),
        ([specs.TokenEmbedding(10, 8)], (32, 32, 3), "reads a sequence of token ids"),
        ([specs.Flatten(), specs.LayerNorm()], (4, 4, 1), r"needs a sequence \(tokens, width\)"),
        ([specs.TokenEmbedding(10, 8), specs.LMHead(12)], (16,), "tied to a token embedding"),
    ],
)
def test_shapes_a_transformer_leaf_cannot_take_are_refused(spec, shape, message):
    with pytest.raises(ValueError, match=message):
        specs.layer_shapes(spec, shape)


def test_a_tied_head_has_no_weights_of_its_own():
    spec, shape = specs.model_spec("gpt-tiny", 32), (16,)
    untied = [*spec[:-1], specs.LMHead(32, tied=False)]
    assert specs.initial_weights(spec, shape, 0)[-1] == []
    assert specs.parameter_count(untied, shape) - specs.parameter_count(spec, shape) == 128 * 32


def test_the_plan_numbers_the_leaves_in_the_weights_order_and_resolves_option_a():
    spec, shape = specs.model_spec("resnet20", 10), (32, 32, 3)

    def leaf_steps(steps):
        for layer, first, second in steps:
            if not isinstance(layer, specs.Residual):
                yield layer, first, second
                continue
            yield from leaf_steps(first)
            if layer.shortcut != "zero_pad":
                yield from leaf_steps(second)

    planned = specs.plan(spec, shape)
    hash(planned)  # static: part of a jitted graph's definition
    expected = [(layer, in_shape, index) for index, (layer, in_shape, _) in enumerate(specs.leaves(spec, shape))]
    assert list(leaf_steps(planned)) == expected
    option_a = [second for layer, _, second in planned if getattr(layer, "shortcut", None) == "zero_pad"]
    assert option_a == [(2, 8), (2, 16)]  # (stride, channels padded each side): 16 -> 32 -> 64


def test_lstm_hidden_size_is_in_the_name():
    assert specs.model_spec("lstm256", 10)[0] == specs.LSTM(256)
    assert specs.known_model("lstm64") and not specs.known_model("lstmx")


def test_unknown_model_names_the_known_ones():
    with pytest.raises(ValueError, match="known models: cnn, gpt-tiny, gpt2-small, lenet, lstm, mlp, resnet18"):
        specs.model_spec("resnet9000", 10)


def test_too_small_input_is_refused():
    with pytest.raises(ValueError, match="too small"):
        specs.layer_shapes(specs.model_spec("lenet", 10), (8, 8, 1))


def test_residual_body_and_shortcut_must_agree():
    block = specs.Residual((specs.Conv(8, 3, stride=2, padding=1),), ())
    with pytest.raises(ValueError, match="shortcut"):
        specs.layer_shapes([block], (8, 8, 4))


def test_initial_weights_depend_on_the_seed_only():
    spec = specs.model_spec("resnet20", 10)
    first, again = specs.initial_weights(spec, (32, 32, 3), 3), specs.initial_weights(spec, (32, 32, 3), 3)
    other = specs.initial_weights(spec, (32, 32, 3), 4)
    assert all(np.array_equal(a, b) for pa, pb in zip(first, again) for a, b in zip(pa, pb))
    assert not np.array_equal(first[0][0], other[0][0])


def test_dropout_removal_keeps_the_weights_aligned():
    spec = specs.model_spec("vgg16-cifar", 10)
    stripped = specs.without_dropout(spec)
    assert not any(isinstance(layer, specs.Dropout) for layer in stripped)
    assert specs.parameter_count(stripped, (32, 32, 3)) == specs.parameter_count(spec, (32, 32, 3))


@pytest.mark.parametrize("name", ["lenet", "vgg16", "resnet20", "vit-tiny"])
def test_channels_first_conversion_round_trips(name):
    spec, shape = specs.model_spec(name, 5), (32, 32, 3)
    weights = specs.initial_weights(spec, shape, 0)
    there = specs.channels_first_weights(spec, shape, weights)
    back = specs.channels_first_weights(spec, shape, there, inverse=True)
    assert all(np.array_equal(a, b) for pa, pb in zip(weights, back) for a, b in zip(pa, pb))


def test_tensorflow_same_padding_is_not_the_specs_padding():
    """Documented difference: for a stride-2 3x3 conv on an even size, TensorFlow's/Keras' "SAME" pads 0 before and
    1 after; PyTorch, MXNet and the spec pad 1 on both sides. The TF and Keras adapters therefore pad explicitly."""
    spec, shape = [specs.Conv(4, 3, stride=2, padding=1)], (8, 8, 2)
    weights = specs.initial_weights(spec, shape, 0)
    images = np.random.default_rng(0).normal(size=(1, *shape))
    symmetric = forward(spec, shape, weights, images)
    after_only = np.pad(images, [(0, 0), (0, 1), (0, 1), (0, 0)])  # "SAME": 0 before, 1 after
    same = forward([specs.Conv(4, 3, stride=2)], (9, 9, 2), weights, after_only)
    assert symmetric.shape == same.shape and np.abs(symmetric - same).max() > 0.1


def test_same_padding_equals_the_specs_only_where_symmetric():
    assert specs.same_padding_is_symmetric(specs.Conv(16, 3, padding=1), (32, 32, 3))
    assert not specs.same_padding_is_symmetric(specs.Conv(16, 3, stride=2, padding=1), (32, 32, 3))
    assert specs.same_padding_is_symmetric(specs.Conv(16, 3, stride=2, padding=1), (33, 33, 3))
    assert not specs.same_padding_is_symmetric(specs.Conv(64, 7, stride=2, padding=3), (224, 224, 3))


# What the adapters' equivalence tests (tests/support/probe_adapter.py, every stack's venv) may build per model and
# input on a CPU: VGG-16 at 32x32x3, the largest here, has 34 M parameters and 0.7 GFLOPs per image.
CPU_TEST_BUDGET = {"parameters": 50e6, "flops_per_image": 1e9}


@pytest.mark.parametrize("name", sorted(specs.MODELS))
def test_every_model_is_tested_at_inputs_a_cpu_affords_or_the_registry_says_it_is_not(name):
    """The registry names each model's test inputs (default CIFAR-10's); a model too large for them says so there
    (test_shapes=()), not in a list of the tests."""
    model = specs.MODELS[name]
    for shape in model.test_shapes:
        spec = model.layers(10)
        specs.layer_shapes(spec, shape)  # raises where the input is too small for the model
        assert specs.parameter_count(spec, shape) <= CPU_TEST_BUDGET["parameters"], (name, shape)
        assert specs.flops_per_image(spec, shape) <= CPU_TEST_BUDGET["flops_per_image"], (name, shape)


def test_the_adapter_probe_builds_every_model_of_the_registry_at_its_test_inputs():
    from probe_adapter import CASES

    registry = [(name, shape) for name, model in specs.MODELS.items() for shape in model.test_shapes]
    assert [case for case in CASES if case[0] in specs.MODELS] == registry
