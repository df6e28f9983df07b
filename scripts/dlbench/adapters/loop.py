"""The training loop of the stacks whose experts write their own (PyTorch, MXNet Gluon, PaddlePaddle, Flax NNX,
TensorFlow), over each adapter's primitives: a loss total begun on the device, one training step on a placed batch,
the mean read from the total. What differs stays in the adapter (how a batch is placed, what a step does, where the
loss sum lives); the epoch, the fixed-batch pass and the step count are this module's. Keras is trained the way its
users train it, with fit (keras3.train_epoch), not with this loop."""

import contextlib
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any


def _no_scope(model):
    return contextlib.nullcontext()


@dataclasses.dataclass(frozen=True)
class Loop:
    begin: Callable[[Any], Any]
    """model -> the epoch's running loss total, zero, where the steps add to it (the model put in training mode)."""
    step: Callable[[Any, Any, Any], Any]
    """(model, placed batch, total) -> the total after one training step on the batch; no blocking host read."""
    mean: Callable[[Any, Any, int], Any]
    """(model, total, steps) -> the mean loss of the steps, float-like (the caller reads it after sync)."""
    scope: Callable[[Any], Any] = _no_scope
    """model -> a context the whole loop runs in, batches made included (TensorFlow's device scope)."""

    def epoch(self, model, batches):
        """The mean loss of one training step per placed batch of `batches` (the adapter's train_epoch)."""
        with self.scope(model):
            total, steps = self.begin(model), 0
            for batch in batches:
                total = self.step(model, batch, total)
                steps += 1
            return self.mean(model, total, steps)

    def repeating(self, model, batch):
        """run(steps): the mean loss of `steps` training steps on the one placed `batch` (the adapter's
        fixed_batch_steps, the input share's pass without input work)."""
        return lambda steps: self.epoch(model, itertools.repeat(batch, steps))
