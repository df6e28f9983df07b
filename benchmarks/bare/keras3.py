import keras
from keras import layers


def conv_bn(x, filters, kernel, stride=1):
    # "same" with stride 2 pads bottom/right only, the framework's own: the FLOPs and shapes are the spec's.
    return layers.BatchNormalization()(layers.Conv2D(filters, kernel, stride, padding="same", use_bias=False)(x))


def resnet20(inputs):
    x, channels = layers.ReLU()(conv_bn(inputs, 16, 3)), 16
    for outputs in (16, 32, 64):
        for _ in range(3):
            stride = 2 if outputs != channels else 1
            y = conv_bn(layers.ReLU()(conv_bn(x, outputs, 3, stride)), outputs, 3)
            shortcut = x
            if outputs != channels:  # option A: subsample, zero-pad the new channels
                pad = (outputs - channels) // 2
                subsampled = layers.MaxPooling2D(1, stride)(x)
                shortcut = layers.Lambda(lambda t, pad=pad: keras.ops.pad(t, [[0, 0], [0, 0], [0, 0], [pad, pad]]))(
                    subsampled
                )
            x, channels = layers.ReLU()(layers.Add()([y, shortcut])), outputs
    return x


def resnet50(inputs):
    x = layers.MaxPooling2D(3, 2, padding="same")(layers.ReLU()(conv_bn(inputs, 64, 7, 2)))
    channels = 64
    for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            y = layers.ReLU()(conv_bn(layers.ReLU()(conv_bn(x, width, 1)), width, 3, stride))
            shortcut = conv_bn(x, 4 * width, 1, stride) if stride != 1 or channels != 4 * width else x
            x, channels = layers.ReLU()(layers.Add()([conv_bn(y, 4 * width, 1), shortcut])), 4 * width
    return x


class TokenAndPositionEmbedding(layers.Layer):
    """keras.io's miniature GPT: token and learned position embeddings; the token embedding, a ReversibleEmbedding,
    called in reverse is the head tied to it."""

    def __init__(self, vocabulary, context, width):
        super().__init__()
        self.tokens = layers.ReversibleEmbedding(vocabulary, width)
        self.positions = layers.Embedding(context, width)

    def call(self, x):
        return self.tokens(x) + self.positions(keras.ops.arange(keras.ops.shape(x)[-1]))


def gpt(inputs, vocabulary=256, width=128, depth=2, heads=4):
    """Pre-LN blocks with layers.MultiHeadAttention (use_causal_mask: Keras' fused dot_product_attention, causal)."""
    embedding = TokenAndPositionEmbedding(vocabulary, inputs.shape[-1], width)
    x = embedding(inputs)
    for _ in range(depth):
        y = layers.LayerNormalization(epsilon=1e-5)(x)
        x = layers.Add()([x, layers.MultiHeadAttention(heads, width // heads)(y, y, use_causal_mask=True)])
        y = layers.Dense(4 * width, activation="gelu")(layers.LayerNormalization(epsilon=1e-5)(x))
        x = layers.Add()([x, layers.Dense(width)(y)])
    logits = embedding.tokens(layers.LayerNormalization(epsilon=1e-5)(x), reverse=True)
    return keras.Model(inputs, layers.Activation("linear", dtype="float32")(logits))


def build_network(model, input_shape):
    if model == "gpt-tiny":
        return gpt(keras.Input(input_shape, dtype="int32"))
    if model == "gpt2-small":  # GPT-2 124M
        return gpt(keras.Input(input_shape, dtype="int32"), vocabulary=50257, width=768, depth=12, heads=12)
    inputs = keras.Input(input_shape)
    if model == "lenet":
        x = layers.AveragePooling2D(2)(layers.Conv2D(6, 5, activation="relu")(inputs))
        x = layers.Flatten()(layers.AveragePooling2D(2)(layers.Conv2D(16, 3, activation="relu")(x)))
        x = layers.Dense(84, activation="relu")(layers.Dense(120, activation="relu")(x))
        return keras.Model(inputs, layers.Dense(10)(x))
    features = resnet20(inputs) if model == "resnet20" else resnet50(inputs)
    return keras.Model(inputs, layers.Dense(10, dtype="float32")(layers.GlobalAveragePooling2D()(features)))


def make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last):
    """`fit` as Keras' guides train: on NumPy arrays, and on the TensorFlow backend on a tf.data pipeline
    (from_tensor_slices, shuffle, batch, prefetch), which runs LeNet's CPU epoch about 1.2 times as fast as fit on
    the arrays there; mixed_float16 (GPU) or mixed_bfloat16 (CPU) policy when asked, which makes compile() scale the
    loss for float16; jit_compile left to Keras ("auto": XLA where it applies)."""
    if mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16" if device == "gpu" else "mixed_bfloat16")
    network = build_network(model, arrays["train_x"].shape[1:])
    network.compile(
        keras.optimizers.Adam(learning_rate, epsilon=1e-7), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )

    train = {"x": arrays["train_x"], "y": arrays["train_y"], "batch_size": batch_size, "shuffle": True}
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        dataset = tf.data.Dataset.from_tensor_slices((train["x"], train["y"])).shuffle(len(train["x"]))
        train = {"x": dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)}

    def epoch(order):  # Keras or tf.data shuffles (the training set is a whole number of batches)
        network.fit(**train, epochs=1, verbose=0)

    return epoch, sum(int(keras.ops.size(weight)) for weight in network.trainable_weights)
