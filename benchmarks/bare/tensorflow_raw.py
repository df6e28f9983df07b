import tensorflow as tf


def make_epoch(arrays, batch_size, learning_rate):
    images, labels = tf.constant(arrays["train_x"]), tf.constant(arrays["train_y"])
    glorot = tf.initializers.GlorotUniform(seed=0)
    shapes = [(5, 5, 1, 6), (6,), (3, 3, 6, 16), (16,), (400, 120), (120,), (120, 84), (84,), (84, 10), (10,)]
    params = [tf.Variable(glorot(shape) if len(shape) > 1 else tf.zeros(shape)) for shape in shapes]
    moments = [(tf.Variable(tf.zeros_like(p)), tf.Variable(tf.zeros_like(p))) for p in params]
    step_count = tf.Variable(0.0)

    def forward(x):
        x = tf.nn.avg_pool2d(tf.nn.relu(tf.nn.conv2d(x, params[0], 1, "VALID") + params[1]), 2, 2, "VALID")
        x = tf.nn.avg_pool2d(tf.nn.relu(tf.nn.conv2d(x, params[2], 1, "VALID") + params[3]), 2, 2, "VALID")
        x = tf.reshape(x, [tf.shape(x)[0], -1])
        x = tf.nn.relu(x @ params[4] + params[5])
        x = tf.nn.relu(x @ params[6] + params[7])
        return x @ params[8] + params[9]

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            logits = forward(tf.gather(images, batch))
            labels_batch = tf.gather(labels, batch)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels_batch, logits))
        step_count.assign_add(1.0)
        rate = learning_rate * tf.sqrt(1 - 0.999**step_count) / (1 - 0.9**step_count)
        for param, (m, v), grad in zip(params, moments, tape.gradient(loss, params)):
            m.assign(0.9 * m + 0.1 * grad)
            v.assign(0.999 * v + 0.001 * grad * grad)
            param.assign_sub(rate * m / (tf.sqrt(v) + 1e-7))
        return loss

    def epoch(order):
        order = tf.constant(order)
        for start in range(0, len(order), batch_size):
            loss = step(order[start : start + batch_size])
        loss.numpy()

    return epoch
