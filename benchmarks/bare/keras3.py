import keras
from keras import layers


def build_network(model, input_shape):
    inputs = keras.Input(input_shape)
    if model == "lenet":
        x = layers.AveragePooling2D(2)(layers.Conv2D(6, 5, activation="relu")(inputs))
        x = layers.Flatten()(layers.AveragePooling2D(2)(layers.Conv2D(16, 3, activation="relu")(x)))
        x = layers.Dense(84, activation="relu")(layers.Dense(120, activation="relu")(x))
        return keras.Model(inputs, layers.Dense(10)(x))
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)))
    channels = 16
    for outputs in (16, 32, 64):  # resnet20 (stride-2 "same" pads bottom/right only: a bare loop does not care)
        for _ in range(3):
            stride = 2 if outputs != channels else 1
            y = layers.Conv2D(outputs, 3, stride, padding="same", use_bias=False)(x)
            y = layers.Conv2D(outputs, 3, padding="same", use_bias=False)(layers.ReLU()(layers.BatchNormalization()(y)))
            shortcut = x
            if outputs != channels:
                pad = (outputs - channels) // 2
                subsampled = layers.MaxPooling2D(1, stride)(x)
                shortcut = layers.Lambda(lambda t, pad=pad: keras.ops.pad(t, [[0, 0], [0, 0], [0, 0], [pad, pad]]))(subsampled)
            x, channels = layers.ReLU()(layers.Add()([layers.BatchNormalization()(y), shortcut])), outputs
    return keras.Model(inputs, layers.Dense(10)(layers.GlobalAveragePooling2D()(x)))


def make_epoch(arrays, batch_size, learning_rate, model):
    network = build_network(model, arrays["train_x"].shape[1:])
    network.compile(keras.optimizers.Adam(learning_rate, epsilon=1e-7),
                    keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    jit_compile=keras.backend.backend() == "jax")  # fmt: skip

    def epoch(order):  # Keras shuffles itself: the idiomatic loop (the training set is a whole number of batches)
        network.fit(arrays["train_x"], arrays["train_y"], batch_size=batch_size, epochs=1, shuffle=True, verbose=0)

    return epoch
