"""An epoch's loss as the record keeps it: a cross-entropy is never below 0, so a mean a rounding's width below 0 (MXNet's
oneDNN log-softmax returns log-probability 1.43e-6 for a sample predicted with certainty) is recorded as 0; one further
below is no rounding and is kept as the framework computed it, as is a loss that is not finite (the run diverged)."""

import math

import pytest
from dlbench.losses import LOSS_ROUNDING, Diverged, check_finite, recorded_loss


def test_a_loss_a_rounding_below_zero_is_recorded_as_zero():
    assert recorded_loss(-1.4305115e-06) == 0.0  # MXNet's test loss once every sample is predicted with certainty
    assert recorded_loss(-LOSS_ROUNDING) == 0.0
    assert recorded_loss(0.0) == 0.0 and recorded_loss(2.5e-7) == 2.5e-7


def test_a_loss_further_below_zero_or_not_finite_is_kept():
    assert recorded_loss(-0.01) == -0.01  # no rounding: a sign error would show
    assert math.isnan(recorded_loss(float("nan")))
    with pytest.raises(Diverged):
        check_finite(recorded_loss(float("inf")), 0.1, 2, 0.001)
