import keras
from keras import layers


def make_epoch(arrays, batch_size, learning_rate):
    network = keras.Sequential([
        keras.Input(arrays["train_x"].shape[1:]), layers.Conv2D(6, 5, activation="relu"), layers.AveragePooling2D(2),
        layers.Conv2D(16, 3, activation="relu"), layers.AveragePooling2D(2), layers.Flatten(),
        layers.Dense(120, activation="relu"), layers.Dense(84, activation="relu"), layers.Dense(10),
    ])  # fmt: skip
    network.compile(keras.optimizers.Adam(learning_rate, epsilon=1e-7),
                    keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    jit_compile=keras.backend.backend() == "jax")  # fmt: skip

    def epoch(order):  # Keras shuffles itself: the idiomatic loop (the training set is a whole number of batches)
        network.fit(arrays["train_x"], arrays["train_y"], batch_size=batch_size, epochs=1, shuffle=True, verbose=0)

    return epoch
