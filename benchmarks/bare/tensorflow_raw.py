import tensorflow as tf

LENET = [(5, 5, 1, 6), (6,), (3, 3, 6, 16), (16,), (400, 120), (120,), (120, 84), (84,), (84, 10), (10,)]


def lenet(params, x, training):
    x = tf.nn.avg_pool2d(tf.nn.relu(tf.nn.conv2d(x, params[0], 1, "VALID") + params[1]), 2, 2, "VALID")
    x = tf.nn.avg_pool2d(tf.nn.relu(tf.nn.conv2d(x, params[2], 1, "VALID") + params[3]), 2, 2, "VALID")
    x = tf.reshape(x, [tf.shape(x)[0], -1])
    x = tf.nn.relu(x @ params[4] + params[5])
    x = tf.nn.relu(x @ params[6] + params[7])
    return x @ params[8] + params[9]


def resnet20_shapes():
    """Kernel, gamma, beta per conv (stem, then two per block), then the dense layer."""
    shapes, channels = [(3, 3, 3, 16), (16,), (16,)], 16
    for outputs in (16, 32, 64):
        for _ in range(3):
            shapes += [(3, 3, channels, outputs), (outputs,), (outputs,), (3, 3, outputs, outputs), (outputs,), (outputs,)]
            channels = outputs
    return shapes + [(64, 10), (10,)]


def make_resnet20(moving):
    def conv_bn(x, kernel, gamma, beta, stride, training, index):
        x = tf.nn.conv2d(x, kernel, stride, [[0, 0], [1, 1], [1, 1], [0, 0]])
        mean, variance = tf.nn.moments(x, [0, 1, 2]) if training else moving[index]
        if training:
            moving[index][0].assign(0.9 * moving[index][0] + 0.1 * mean)
            moving[index][1].assign(0.9 * moving[index][1] + 0.1 * variance)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-5)

    def forward(params, x, training):
        x = tf.nn.relu(conv_bn(x, *params[:3], 1, training, 0))
        index = 1
        for block in range(9):
            channels, stride = x.shape[-1], 2 if block in (3, 6) else 1
            y = tf.nn.relu(conv_bn(x, *params[3 * index : 3 * index + 3], stride, training, index))
            y = conv_bn(y, *params[3 * index + 3 : 3 * index + 6], 1, training, index + 1)
            if stride > 1:
                pad = (y.shape[-1] - channels) // 2
                x = tf.pad(x[:, ::stride, ::stride], [[0, 0], [0, 0], [0, 0], [pad, pad]])
            x = tf.nn.relu(y + x)
            index += 2
        return tf.reduce_mean(x, [1, 2]) @ params[-2] + params[-1]

    return forward


def make_epoch(arrays, batch_size, learning_rate, model):
    images, labels = tf.constant(arrays["train_x"]), tf.constant(arrays["train_y"])
    glorot = tf.initializers.GlorotUniform(seed=0)
    shapes = LENET if model == "lenet" else resnet20_shapes()
    params = [tf.Variable(glorot(shape) if len(shape) > 1 else tf.zeros(shape)) for shape in shapes]
    moving = [(tf.Variable(tf.zeros(shape)), tf.Variable(tf.ones(shape))) for shape in shapes[1::3][:19]]
    forward = lenet if model == "lenet" else make_resnet20(moving)
    moments = [(tf.Variable(tf.zeros_like(p)), tf.Variable(tf.zeros_like(p))) for p in params]
    step_count = tf.Variable(0.0)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            logits = forward(params, tf.gather(images, batch), True)
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
