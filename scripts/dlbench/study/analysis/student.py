"""Student's t distribution in plain Python: its upper tail from the regularized incomplete beta function (by its
continued fraction, in Lentz's form) and its inverse by Newton's method inside a bracket.

The comparisons' statistics and the planner of repeats need nothing more of it, and the planner runs inside
Snakemake's driver, where SciPy is not a dependency: one implementation serves both, so the planner decides exactly
as the aggregation will. The tests hold both functions to SciPy's to many digits, for fractional (Welch) degrees of
freedom too.
"""

import math

TINY = 1e-300  # keeps the continued fraction's terms off zero
PRECISION = 1e-15
STEPS = 500


def beta_fraction(a, b, x):
    """The continued fraction of the regularized incomplete beta function I_x(a, b); it converges fast for
    x < (a + 1) / (a + b + 2)."""
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > TINY else TINY)
    c, fraction = 1.0, d
    for m in range(1, STEPS + 1):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > TINY else TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > TINY else TINY
            fraction *= c * d
        if abs(c * d - 1.0) < PRECISION:
            break
    return fraction


def regularized_beta(a, b, x):
    """I_x(a, b), from whichever side its continued fraction converges on (the other by symmetry)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * beta_fraction(a, b, x) / a
    return 1.0 - front * beta_fraction(b, a, 1.0 - x) / b


def t_tail(t, freedom):
    """P(T > t) for Student's t with `freedom` (positive, not necessarily whole) degrees of freedom."""
    tail = 0.5 * regularized_beta(freedom / 2.0, 0.5, freedom / (freedom + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_density(t, freedom):
    log_scale = math.lgamma((freedom + 1.0) / 2.0) - math.lgamma(freedom / 2.0) - 0.5 * math.log(freedom * math.pi)
    return math.exp(log_scale - (freedom + 1.0) / 2.0 * math.log1p(t * t / freedom))


def t_critical(tail, freedom):
    """The t whose upper tail is `tail` (in (0, 1)): t_critical(0.025, n - 1) is the half-width factor of a 95%
    interval. Newton's steps on the tail, which is convex for t > 0, approach the root from below; the bracket
    catches any step that leaves it."""
    if tail > 0.5:
        return -t_critical(1.0 - tail, freedom)
    low, high = 0.0, 1.0
    while t_tail(high, freedom) > tail:
        low, high = high, 2.0 * high
    t = low
    for _ in range(200):
        excess = t_tail(t, freedom) - tail
        if excess > 0:
            low = t
        else:
            high = t
        step = excess / t_density(t, freedom)
        if abs(step) <= 1e-13 * max(t, 1.0):
            return t + step
        t = t + step if low < t + step < high else (low + high) / 2.0
    return t
