import tensorflow as tf

GLOROT = tf.initializers.GlorotUniform(seed=0)
NORMAL = tf.initializers.RandomNormal(stddev=0.02, seed=0)  # GPT-2's embeddings
LOSS_SCALE = 1024.0  # float16 only: a fixed scale, cheaper than dynamic scaling, so the bare side is not slowed


class Net:
    """A forward function over variables created on its first (eager) call and reused in call order after."""

    def __init__(self, forward, compute_dtype):
        self.forward, self.dtype, self.trainable, self.moving = forward, compute_dtype, [], []

    def __call__(self, x, training):
        self.cursor = {"trainable": 0, "moving": 0}
        return self.forward(self, x if x.dtype.is_integer else tf.cast(x, self.dtype), training)  # token ids stay

    def variable(self, kind, shape, initial):
        store, index = getattr(self, kind), self.cursor[kind]
        self.cursor[kind] += 1
        if index == len(store):
            store.append(tf.Variable(initial(shape), trainable=kind == "trainable"))
        return store[index]

    def conv(self, x, filters, kernel, stride=1, bias=False, padding=None):
        weights = self.variable("trainable", (kernel, kernel, x.shape[-1], filters), GLOROT)
        pad = kernel // 2 if padding is None else padding
        x = tf.nn.conv2d(x, tf.cast(weights, self.dtype), stride, [[0, 0], [pad, pad], [pad, pad], [0, 0]])
        return x + tf.cast(self.variable("trainable", (filters,), tf.zeros), self.dtype) if bias else x

    def batch_norm(self, x, training):  # statistics in float32, as mixed precision keeps them
        gamma, beta = (
            self.variable("trainable", x.shape[-1:], tf.ones),
            self.variable("trainable", x.shape[-1:], tf.zeros),
        )
        mean, variance = self.variable("moving", x.shape[-1:], tf.zeros), self.variable("moving", x.shape[-1:], tf.ones)
        x32 = tf.cast(x, tf.float32)
        if training:
            batch_mean, batch_variance = tf.nn.moments(x32, [0, 1, 2])
            mean.assign(0.9 * mean + 0.1 * batch_mean)
            variance.assign(0.9 * variance + 0.1 * batch_variance)
            mean, variance = batch_mean, batch_variance
        return tf.cast(tf.nn.batch_normalization(x32, mean, variance, beta, gamma, 1e-5), self.dtype)

    def layer_norm(self, x):  # in float32, as mixed precision keeps it
        gamma, beta = (
            self.variable("trainable", x.shape[-1:], tf.ones),
            self.variable("trainable", x.shape[-1:], tf.zeros),
        )
        x32 = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(x32, [-1], keepdims=True)
        return tf.cast(tf.nn.batch_normalization(x32, mean, variance, beta, gamma, 1e-5), self.dtype)

    def dense(self, x, units):
        weights = self.variable("trainable", (x.shape[-1], units), GLOROT)
        return x @ tf.cast(weights, self.dtype) + tf.cast(self.variable("trainable", (units,), tf.zeros), self.dtype)


def lenet(net, x, training):
    x = tf.nn.avg_pool2d(tf.nn.relu(net.conv(x, 6, 5, bias=True, padding=0)), 2, 2, "VALID")
    x = tf.nn.avg_pool2d(tf.nn.relu(net.conv(x, 16, 3, bias=True, padding=0)), 2, 2, "VALID")
    x = tf.reshape(x, [tf.shape(x)[0], -1])
    return net.dense(tf.nn.relu(net.dense(tf.nn.relu(net.dense(x, 120)), 84)), 10)


def resnet20(net, x, training):
    x = tf.nn.relu(net.batch_norm(net.conv(x, 16, 3), training))
    for outputs in (16, 32, 64):
        for _ in range(3):
            channels = x.shape[-1]
            stride = 2 if outputs != channels else 1
            y = tf.nn.relu(net.batch_norm(net.conv(x, outputs, 3, stride), training))
            y = net.batch_norm(net.conv(y, outputs, 3), training)
            if stride > 1:  # option A: subsample, zero-pad the new channels
                pad = (outputs - channels) // 2
                x = tf.pad(x[:, ::stride, ::stride], [[0, 0], [0, 0], [0, 0], [pad, pad]])
            x = tf.nn.relu(y + x)
    return net.dense(tf.reduce_mean(x, [1, 2]), 10)


def resnet50(net, x, training):
    x = tf.nn.relu(net.batch_norm(net.conv(x, 64, 7, 2), training))
    x = tf.nn.max_pool2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=float("-inf")), 3, 2, "VALID")
    for stage, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            y = tf.nn.relu(net.batch_norm(net.conv(x, width, 1), training))
            y = tf.nn.relu(net.batch_norm(net.conv(y, width, 3, stride), training))
            y = net.batch_norm(net.conv(y, 4 * width, 1), training)
            if stride != 1 or x.shape[-1] != 4 * width:
                x = net.batch_norm(net.conv(x, 4 * width, 1, stride), training)
            x = tf.nn.relu(y + x)
    return net.dense(tf.reduce_mean(x, [1, 2]), 10)


def causal_attention(net, x, heads):
    """Self-attention written out as Keras' MultiHeadAttention composes it (TensorFlow has no fused attention op):
    einsum over the (N, tokens, heads, head width) split of the qkv projection, later keys masked, softmax, einsum."""
    tokens, width = x.shape[1:]
    qkv = tf.reshape(net.dense(x, 3 * width), [-1, tokens, 3, heads, width // heads])
    query, key, value = tf.unstack(qkv, axis=2)
    scores = tf.einsum("nqhd,nkhd->nhqk", query * (width // heads) ** -0.5, key)
    earlier = tf.range(tokens)[:, None] >= tf.range(tokens)
    weights = tf.nn.softmax(tf.where(earlier, scores, float("-inf")))
    return net.dense(tf.reshape(tf.einsum("nhqk,nkhd->nqhd", weights, value), [-1, tokens, width]), width)


def gpt_tiny(net, tokens, training, vocabulary=256, width=128, depth=2, heads=4):
    """nanoGPT's GPT-2: token and position embeddings, pre-LN blocks (exact GELU), a final LayerNorm, a head tied to
    the token embedding."""
    table = net.variable("trainable", (vocabulary, width), NORMAL)
    positions = net.variable("trainable", (tokens.shape[1], width), NORMAL)
    x = tf.cast(tf.gather(table, tokens) + positions, net.dtype)  # the rows looked up, then cast
    for _ in range(depth):
        x += causal_attention(net, net.layer_norm(x), heads)
        x += net.dense(tf.nn.gelu(net.dense(net.layer_norm(x), 4 * width)), width)
    return tf.einsum("ntw,vw->ntv", net.layer_norm(x), tf.cast(table, net.dtype))


def make_epoch(arrays, batch_size, learning_rate, model, device, mixed_precision, channels_last):
    """tf.function over tf.nn ops and Adam written out; mixed precision: float16 (GPU, fixed loss scale) or bfloat16
    (CPU) compute on float32 variables. TensorFlow runs NHWC only (channels_last changes nothing)."""
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        images, labels = tf.constant(arrays["train_x"]), tf.constant(arrays["train_y"])
    compute = (tf.float16 if device == "gpu" else tf.bfloat16) if mixed_precision else tf.float32
    scale = LOSS_SCALE if compute == tf.float16 else 1.0
    net = Net({"lenet": lenet, "resnet20": resnet20, "resnet50": resnet50, "gpt-tiny": gpt_tiny}[model], compute)
    net(images[:1], False)  # creates the variables
    moments = [(tf.Variable(tf.zeros_like(p)), tf.Variable(tf.zeros_like(p))) for p in net.trainable]
    step_count = tf.Variable(0.0)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            logits = tf.cast(net(tf.gather(images, batch), True), tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(tf.gather(labels, batch), logits))
            scaled = loss * scale
        step_count.assign_add(1.0)
        rate = learning_rate * tf.sqrt(1 - 0.999**step_count) / (1 - 0.9**step_count)
        for param, (m, v), grad in zip(net.trainable, moments, tape.gradient(scaled, net.trainable)):
            grad = grad / scale
            m.assign(0.9 * m + 0.1 * grad)
            v.assign(0.999 * v + 0.001 * grad * grad)
            param.assign_sub(rate * m / (tf.sqrt(v) + 1e-7))
        return loss

    def epoch(order):
        order = tf.constant(order)
        for start in range(0, len(order), batch_size):
            loss = step(order[start : start + batch_size])
        loss.numpy()

    return epoch, sum(int(tf.size(p)) for p in net.trainable)
