"""Pooled variance (dlbench/study/analysis/pooling.py, limma's moderated t): its special functions against SciPy, the
prior against a hand computation and against limma's fitFDist formulas evaluated with SciPy, and the pooled
comparisons."""

import math

import numpy as np
import pytest
from dlbench.study.analysis.pooling import (
    PRIOR_FREEDOM_CAP,
    Prior,
    digamma,
    fit_prior,
    moderated,
    pooled,
    pooled_across,
    trigamma,
    trigamma_inverse,
)
from dlbench.study.analysis.race import ELIMINATED, LIVE, judged
from dlbench.study.analysis.statistics import PAIRED, UNPAIRED, LogRatio, paired_log_ratio
from scipy import optimize, special

EULER_GAMMA = 0.5772156649015329


@pytest.mark.parametrize("x", [0.05, 0.5, 1.0, 2.5, 9.9, 10.0, 40.0, 1e4])
def test_digamma_and_trigamma_match_scipy(x):
    assert digamma(x) == pytest.approx(special.digamma(x), rel=1e-10, abs=1e-11)
    assert trigamma(x) == pytest.approx(special.polygamma(1, x), rel=1e-10)
    assert trigamma(trigamma_inverse(trigamma(x))) == pytest.approx(trigamma(x), rel=1e-9)


def test_equal_variances_spread_no_more_than_sampling_so_the_prior_is_infinitely_sure():
    """By hand: four variances of 0.02 on 2 degrees of freedom. log s^2 - digamma(1) + log(1) = log 0.02 + gamma for
    each, so their spread is 0, below trigamma(1) = pi^2 / 6: d0 is infinite and s0^2 = exp(log 0.02 + gamma)."""
    prior = fit_prior([0.02] * 4, [2] * 4)
    assert prior.freedom == math.inf and prior.variance == pytest.approx(0.02 * math.exp(EULER_GAMMA))


def test_the_prior_follows_limmas_fit_f_dist_formulas():
    """Variances a decade apart on 2, 2, 3, 4 degrees of freedom: limma's method of moments, written out with SciPy's
    digamma, trigamma and a root finder for the trigamma inverse."""
    variances, freedoms = np.array([0.001, 0.01, 0.1, 1.0]), np.array([2.0, 2.0, 3.0, 4.0])
    centred = np.log(variances) - special.digamma(freedoms / 2) + np.log(freedoms / 2)
    beyond = centred.var(ddof=1) - special.polygamma(1, freedoms / 2).mean()
    half = optimize.brentq(lambda x: special.polygamma(1, x) - beyond, 1e-6, 1e6)
    expected = Prior(2 * half, math.exp(centred.mean() + special.digamma(half) - math.log(half)), freedoms.sum())
    assert fit_prior(variances, freedoms) == pytest.approx(expected, rel=1e-7)


def test_too_few_positive_variances_fit_no_prior():
    assert fit_prior([0.01, 0.0, 0.02], [2, 2, 2]) is None


def test_a_variance_is_shrunk_toward_the_prior_and_gains_its_freedom():
    """By hand: (4 x 0.02 + 2 x 0.05) / (4 + 2) = 0.03 on 6 degrees of freedom; an infinite prior held at the cap."""
    assert moderated(0.05, 2, Prior(4.0, 0.02)) == pytest.approx((0.03, 6.0))
    variance, freedom = moderated(0.05, 2, Prior(math.inf, 0.02))
    assert freedom == PRIOR_FREEDOM_CAP + 2 and variance == pytest.approx((1000 * 0.02 + 2 * 0.05) / 1002)
    log_ratio = pooled(LogRatio(0.1, 0.05 / math.sqrt(3), 2, math.sqrt(0.05), 3), Prior(4.0, 0.02))
    assert log_ratio == pytest.approx(LogRatio(0.1, math.sqrt(0.03 / 3), 6.0, math.sqrt(0.03), 3))


def test_a_prior_lends_no_more_freedom_than_the_independent_information_it_was_fitted_over():
    """Four equal variances on 2 degrees of freedom each: d0 is infinite, but the prior holds 8 degrees of freedom,
    or 8 / (1 + 3 / 4) = 4.57 where all four are against one reference."""
    apart, shared = fit_prior([0.02] * 4, [2] * 4), fit_prior([0.02] * 4, [2] * 4, ["base"] * 4)
    assert apart.freedom == shared.freedom == math.inf
    assert apart.information == 8 and shared.information == pytest.approx(8 / 1.75)
    assert moderated(0.05, 2, shared)[1] == pytest.approx(2 + 8 / 1.75)


def test_only_paired_comparisons_are_pooled_and_only_with_their_own_sources():
    paired = [LogRatio(0.0, 0.1, 2, spread, 3) for spread in (0.1, 0.2, 0.15)]
    welch = LogRatio(0.0, 0.1, 3.4, 0.2, 3)
    methods = [PAIRED, PAIRED, UNPAIRED, None, PAIRED]
    result = pooled_across(methods, [paired[0], paired[1], welch, None, paired[2]], ["cpu"] * 5, list(range(5)))
    assert result[2] is welch and result[3] is None
    assert all(log_ratio.freedom > 2 for log_ratio in (result[0], result[1], result[4]))
    apart = pooled_across(
        methods, [paired[0], paired[1], welch, None, paired[2]], ["cpu", "cpu", "cpu", "cpu", "gpu"], list(range(5))
    )
    assert apart[4] is paired[2] and apart[0] is paired[0]  # no source has the 3 paired variances a prior needs


def test_a_race_look_decides_with_pooled_variance_what_three_rounds_alone_cannot():
    """A rival 20 % slower over 3 rounds: on 2 degrees of freedom not proven by the race's confidence sequence at the
    look's level; with a prior as tight as its own spread on 20 degrees of freedom, eliminated."""
    leader, rival = {1: 100.0, 2: 100.0, 3: 100.0}, {1: 85.0, 2: 76.0, 3: 80.0}
    spread = paired_log_ratio(list(rival.values()), list(leader.values())).spread
    assert judged(rival, leader, 3, 0.005, 0.05) == LIVE
    assert judged(rival, leader, 3, 0.005, 0.05, Prior(20.0, spread**2)) == ELIMINATED
