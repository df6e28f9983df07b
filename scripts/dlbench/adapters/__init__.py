"""Framework adapters: one module per framework, the same small interface, read side by side.

Each module imports its framework at import time (timed as the `imports` phase) and defines:

    version() -> str                          framework version read inside the env
    configure(device, threads, seed) -> dict  threads, seeds, device; returns what actually took effect
    stage(arrays, experiment)                 the dataset for the experiment's data_placement: `device`, framework
                                              tensors on the training device, batches gathered there; `host`,
                                              NumPy arrays, each batch gathered in NumPy and handed over per step;
                                              in the layout the variant runs in
    stream(meta, experiment, workers)         data placement `stream` instead of stage: the framework's own loader
                                              over a streamed image folder (data.py) with `workers` workers;
                                              train_epoch, fixed_batch_steps and evaluate take it as staged data,
                                              the `order` of train_epoch then being data.stream_order's items
    LOADER                                    that loader, in words (the record's stream.loader)
    loader_pass(staged, order, batch_size)    the streamed batches of `order` placed on the device, no model (the
                                              loader's own throughput)
    loader_batches(staged, order, batch_size) the loader's host batches (uint8 NHWC, labels) of `order`, or of
                                              the evaluation split for None (tests compare them across frameworks)
    build(spec, input_shape, weights, experiment) -> model
                                              model from the neutral spec with the neutral initial weights,
                                              optimiser and loss, in the requested variant (dlbench/variants.py);
                                              ValueError for a variant the adapter does not implement
    parameter_count(model) -> int             trainable parameters
    weights(model, spec, input_shape)         the current weights, one list per spec leaf, in the neutral layout
    engaged(model) -> dict                    what actually ran, read back: variant state (compiled graph, XLA,
                                              graph breaks), parameter and matmul dtypes, layout
    train_epoch(model, staged, order, batch_size) -> float-like
                                              one epoch over the batches in `order`; no blocking host reads
                                              inside the loop; returns the mean loss (read after sync)
    fixed_batch_steps(model, staged, order, batch_size) -> run(steps)
                                              the first batch of `order`, assembled and on the device before
                                              any timing; run(steps) trains `steps` steps on it: the epoch
                                              without its input work (train.py's input share)
    INPUT_WORK                                what that removes from an epoch, in words
    evaluate(model, staged, batch_size) -> (loss, accuracy)   on the test split, host floats
    logits(model, images) -> np.ndarray       inference on host NHWC float32 images (equivalence tests)
    sync(device)                              wait for all queued device work
    allocator_peak_mb(device) -> float | None the framework allocator's peak (None on CPU or where unavailable)
    cuda_versions() -> (str | None, str | None)  the CUDA and cuDNN versions the framework reports (None where it
                                              reports none, e.g. a CPU build)
    is_oom(error) -> bool                     whether an exception is this framework's out-of-memory error

Adapters that run the operator microbenchmarks (dlbench/ops.py; the `ops_adapter` of a stack in
envs/stacks.yaml, which may be a module of its own such as jax_numpy) also define:

    operators(device, dtype) -> {name: callable}   the operators of ops.OPERATORS, plus "copy"
    ops_input(array, device, dtype)               a host array as a device tensor
    ops_output(value) -> np.ndarray               a result on the host, as float32
    ops_sync(device, value)                       wait for queued work (JAX: for `value`)

Only the adapter imports its framework; everything else is in the shared library. Keras on TensorFlow or PyTorch
calls those frameworks' adapters for their math-mode switches and CUDA versions rather than copying them.
"""

# What a fixed-batch epoch leaves out where the adapter runs its own step loop, and with streamed data.
GATHER_AND_PLACE = "gathering every batch and placing it on the device"
STREAM_INPUT_WORK = "the loader's reading, decoding and augmenting of every batch, and placing it on the device"

# Adam's betas, RMSprop's decay and both epsilons, the same in every framework (each has its own defaults).
OPTIMIZER_DEFAULTS = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}
RMSPROP_RHO = 0.9
