"""An epoch's loss as a run records it, and the end of a run whose loss is no longer a number."""

import math

# A cross-entropy is never below 0, but a framework's float32 log-softmax can overshoot 0 at a sample predicted with
# certainty: MXNet's oneDNN kernel returns log-probability 1.43e-6 there instead of 0 (its logarithm's approximation
# error near 1), so the loss of a well-trained model averages slightly below 0. A mean loss this little below 0 is that
# rounding and is recorded as 0; one further below is no rounding and is recorded as the framework computed it.
LOSS_ROUNDING = 1e-5


def recorded_loss(value):
    """An epoch's mean loss as the record keeps it: 0 for the rounding below 0 (LOSS_ROUNDING), else as measured."""
    value = float(value)
    return 0.0 if -LOSS_ROUNDING <= value < 0 else value


class Diverged(Exception):
    """The loss became NaN or infinite: the run ends with status `diverged`, keeping the epochs that finished."""


def check_finite(train_loss, test_loss, epoch, learning_rate):
    """Raise Diverged where an epoch's training or test loss (each read on the host once per epoch) is not finite."""
    for name, value in (("training loss", train_loss), ("test loss", test_loss)):
        if not math.isfinite(float(value)):
            raise Diverged(
                f"{name} became {float(value)} in epoch {epoch} (learning rate {learning_rate:g}): the run "
                f"diverged; lower the learning rate"
            )
