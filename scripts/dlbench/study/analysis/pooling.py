"""Pooled variance across a study's comparisons: limma's moderated t (Smyth 2004), in plain Python so that whatever
decides with the comparisons' tests can pool without SciPy.

At three rounds a paired log ratio's variance rests on 2 degrees of freedom, so its t test needs a statistic above 4.3
at 5 % and far more at a Holm step. The comparisons of one study ran on one machine through one harness, so their
variances are alike: an empirical Bayes prior fitted over them lends each the others' information. Each comparison's
sample variance s^2 on d degrees of freedom is taken to be drawn as s0^2 F(d, d0) around a prior variance s0^2 with d0
degrees of freedom (Smyth's model, a scaled inverse chi-square prior on the true variances). fit_prior estimates d0
and s0^2 by the method of moments on log variances, as limma's fitFDist does without covariates: the mean and variance
of log s^2, corrected by the digamma and trigamma of d / 2, give log s0^2 and trigamma(d0 / 2). The moderated variance
(d0 s0^2 + d s^2) / (d0 + d) then takes Student's t on d0 + d degrees of freedom. Where the log variances spread no
more than sampling alone would, d0 is infinite: every comparison takes the prior's variance; its t is then held at
PRIOR_FREEDOM_CAP degrees of freedom, which differs from the normal by under 0.1 %.
"""

import math
from typing import NamedTuple

from dlbench.study.analysis.statistics import PAIRED

PRIOR_FREEDOM_CAP = 1000.0
MIN_COMPARISONS = 3  # fewer variances cannot estimate a variance of log variances worth lending
# Two comparisons against one shared reference (a group's baseline or leader), with equal variances, have log ratios
# correlated 0.5 and sample variances correlated about 0.5^2: n of them hold the information of n / (1 + (n - 1) / 4)
# independent ones.
SHARED_REFERENCE_CORRELATION = 0.25


class Prior(NamedTuple):
    freedom: float  # d0, possibly infinite
    variance: float  # s0^2
    information: float = math.inf  # the independent degrees of freedom it was fitted over: it lends no more


def digamma(x):
    """psi(x) for x > 0: the recurrence up to 10, then the asymptotic series (error under 1e-12)."""
    shift = 0.0
    while x < 10:
        shift -= 1 / x
        x += 1
    inverse = 1 / (x * x)
    series = inverse * (1 / 12 - inverse * (1 / 120 - inverse * (1 / 252 - inverse * (1 / 240 - inverse / 132))))
    return shift + math.log(x) - 0.5 / x - series


def trigamma(x):
    """psi'(x) for x > 0: the recurrence up to 10, then the asymptotic series (error under 1e-12)."""
    shift = 0.0
    while x < 10:
        shift += 1 / (x * x)
        x += 1
    inverse = 1 / (x * x)
    series = 1 / x + inverse / 2 + inverse / x * (1 / 6 - inverse * (1 / 30 - inverse * (1 / 42 - inverse / 30)))
    return shift + series


def trigamma_inverse(value):
    """The x with trigamma(x) = value (> 0): bisection on the log scale, trigamma decreasing from infinity to 0."""
    low, high = 1e-8, 1e8
    for _ in range(200):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if trigamma(middle) > value else (low, middle)
    return math.sqrt(low * high)


def information(freedoms, references):
    """The independent degrees of freedom in sample variances of comparisons, those against one reference counted
    as n / (1 + (n - 1) rho) of them (SHARED_REFERENCE_CORRELATION)."""
    by_reference = {}
    for freedom, reference in zip(freedoms, references):
        by_reference.setdefault(reference, []).append(freedom)
    return sum(sum(shared) / (1 + (len(shared) - 1) * SHARED_REFERENCE_CORRELATION) for shared in by_reference.values())


def fit_prior(variances, freedoms, references=None):
    """The Prior (d0, s0^2) fitted over sample variances with their degrees of freedom, as limma's fitFDist; None with
    fewer than MIN_COMPARISONS positive variances. references: what each comparison is against (None: each its own);
    the prior lends no more degrees of freedom than the independent information it was fitted over, so that a prior
    fitted over a few comparisons, or many against one reference, is not taken as known (at the small levels of a
    race's early looks a t on too many degrees of freedom claims falsely)."""
    references = list(range(len(variances))) if references is None else references
    kept = [
        (variance, freedom, reference)
        for variance, freedom, reference in zip(variances, freedoms, references)
        if variance > 0 and freedom > 0
    ]
    if len(kept) < MIN_COMPARISONS:
        return None
    pairs = [(variance, freedom) for variance, freedom, _ in kept]
    held = information([freedom for _, freedom, _ in kept], [reference for *_, reference in kept])
    # log s^2 has mean log sigma^2 + digamma(d / 2) - log(d / 2) and variance trigamma(d / 2) around each truth
    centred = [math.log(variance) - digamma(freedom / 2) + math.log(freedom / 2) for variance, freedom in pairs]
    mean = sum(centred) / len(centred)
    spread = sum((value - mean) ** 2 for value in centred) / (len(centred) - 1)
    beyond_sampling = spread - sum(trigamma(freedom / 2) for _, freedom in pairs) / len(pairs)
    if beyond_sampling <= 0:
        return Prior(math.inf, math.exp(mean), held)
    freedom = 2 * trigamma_inverse(beyond_sampling)
    return Prior(freedom, math.exp(mean + digamma(freedom / 2) - math.log(freedom / 2)), held)


def moderated(variance, freedom, prior):
    """(variance, freedom) of one comparison shrunk toward the prior: (d0 s0^2 + d s^2) / (d0 + d) on d0 + d degrees
    of freedom (the prior's freedom held at the information it was fitted over and at PRIOR_FREEDOM_CAP)."""
    prior_freedom = min(prior.freedom, prior.information, PRIOR_FREEDOM_CAP)
    pooled = (prior_freedom * prior.variance + freedom * variance) / (prior_freedom + freedom)
    return pooled, prior_freedom + freedom


def pooled(log_ratio, prior):
    """A paired log ratio with its variance moderated toward the prior: its error, spread and freedom; the estimate
    and rounds as they were."""
    variance, freedom = moderated(log_ratio.spread**2, log_ratio.freedom, prior)
    return log_ratio._replace(error=math.sqrt(variance / log_ratio.rounds), freedom=freedom, spread=math.sqrt(variance))


def priors_by_source(methods, log_ratios, sources, references):
    """{source: the Prior fitted to its paired comparisons (fit_prior), None where too few are paired to fit one}.
    sources: one per comparison, such as its machine and device, whose runs share a noise process; references: what
    each is against. Welch's are left out: their variance adds two experiments' and their freedom is an
    approximation, not a sample variance's."""
    priors = {}
    for source in set(sources):
        paired = [i for i, method in enumerate(methods) if method == PAIRED and sources[i] == source]
        priors[source] = fit_prior(
            [log_ratios[i].spread ** 2 for i in paired],
            [log_ratios[i].freedom for i in paired],
            [references[i] for i in paired],
        )
    return priors


def pooled_across(methods, log_ratios, sources, references, priors=None):
    """The study's log ratios with each paired one pooled over its noise source's prior (priors_by_source, fitted
    here unless given); Welch's and untested ones (None) as they were, and all of a source's where it has no
    prior."""
    priors = priors if priors is not None else priors_by_source(methods, log_ratios, sources, references)
    return [
        pooled(log_ratio, priors[source]) if method == PAIRED and priors.get(source) is not None else log_ratio
        for method, log_ratio, source in zip(methods, log_ratios, sources)
    ]


def prior_columns(prior):
    """A comparison's record of the prior its variance was shrunk toward: the prior's standard deviation of
    per-round log ratios and the degrees of freedom it lent (held as moderated holds them); empty where none."""
    if prior is None:
        return {"pooled_prior_sd": None, "pooled_prior_freedom": None}
    lent = min(prior.freedom, prior.information, PRIOR_FREEDOM_CAP)
    return {"pooled_prior_sd": math.sqrt(prior.variance), "pooled_prior_freedom": lent}
