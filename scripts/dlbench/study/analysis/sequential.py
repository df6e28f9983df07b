"""The race's confidence sequence: an interval for a paired log ratio that stays valid however many times it is looked
at and whenever the race stops, so that a group can run round after round until it is decided, tied or out of reach,
and a study can be continued with a larger budget after it was read, at the same error rate.

Why this and not alpha spending: a Lan-DeMets spending function holds the error only against a maximum information
fixed before the data. A race within a budget has no such maximum (its rounds depend on each group's measured cost,
and a user who reads "the budget ran out" raises the budget and runs on), so the planned maximum would be chosen after
the data, which is what spending forbids. A confidence sequence (Howard, Ramdas, McAuliffe & Sekhon 2021) needs none.

The sequence is the mixture martingale of the paired t-test (Lai 1976; the Bayes factor of Gönen, Johnson, Lu &
Westfall 2005, an e-process by the scale invariance shown by Pérez-Ortiz, Lardy, de Heide & Grünwald 2024). Per round
the log ratio d_i ~ N(mu, sigma^2); to test mu = mu0, mix the alternative over mu - mu0 ~ N(0, g sigma^2) and the scale
over sigma: with n rounds, t the t statistic of mu0 and nu its degrees of freedom,

    E_n(mu0) = (1 + n g)^(-1/2) * ((1 + t^2 / nu) / (1 + t^2 / (nu (1 + n g))))^((nu + 1) / 2)

is a nonnegative martingale with mean 1 when mu = mu0, so by Ville's inequality it ever reaches 1 / level with chance
at most `level`: the set of mu0 with E_n(mu0) < 1 / level, at every n at once, covers mu with chance 1 - level. Because
E_n depends on mu0 only through |t|, that set is the t interval with a wider critical value (boundary), which is what
the race and the comparisons table compute with. Under the right-Haar (1 / sigma) scale mixture nu is n - 1; with a
pooled variance (dlbench.study.analysis.pooling: the prior s0^2 on d0 degrees of freedom, an inverse-gamma mixture
over sigma^2) the same formula holds on the moderated t with nu = d0 + n - 1, valid where the comparisons' variances
are drawn from the prior (limma's own model; the A/A studies check it with the prior fitted from the data).

One interval decides both ways a rival can leave: wholly below 0, it is slower (eliminated); wholly within +-log(1 +
margin), it is equivalent (retired). Both claims are wrong only when the interval misses the true ratio, so a pair's
level covers both, and a group's ALPHA is shared among every pair the group could compare (the leader is picked from
the data): any false claim in a group stays at or below ALPHA however the race stops.

MIXTURE, g, sets where the boundary is tightest: leads between CPU stacks are mostly 2 to 10 per-round spreads, and
g = 16 (mixing over leads of about 4 spreads) keeps the boundary within about 10 % of the narrowest any g gives for 3 to
12 rounds at the pooled freedoms studies show (10 to 30); benchmarks/race_simulation.py measures what it costs against
fixed rounds. Plain Python: the planner of rounds uses it too.
"""

import math

from dlbench.study.analysis.statistics import fewest_rounds
from dlbench.study.analysis.student import t_critical

MIXTURE = 16.0  # g: the variance of the mixed-over lead, in per-round spreads squared
POWER = 0.8  # of a projected count of rounds: the chance it decides, if the ratio and spread stay as observed


def boundary(level, freedom, rounds):
    """The critical |t| of the confidence sequence at `level` after `rounds` rounds with `freedom` degrees of freedom
    (the t statistic on the log ratio's error): inf where no t reaches it, as with 2 rounds and no pooled prior."""
    spread_of_mixture = 1 + rounds * MIXTURE
    reach = (1 / level) ** (2 / (freedom + 1)) * spread_of_mixture ** (1 / (freedom + 1))
    if reach >= spread_of_mixture:
        return math.inf
    return math.sqrt(freedom * (reach - 1) / (1 - reach / spread_of_mixture))


def reach(log_ratio, level):
    """How far the confidence sequence reaches either side of the log ratio's estimate, at `level`."""
    critical = boundary(level, log_ratio.freedom, log_ratio.rounds)
    if log_ratio.error == 0:  # no spread: a point, where the sequence can claim at all at these rounds
        return 0.0 if critical < math.inf else math.inf
    return critical * log_ratio.error


def interval(log_ratio, level):
    """(low, high) on the log scale: the confidence sequence at `level`, at the rounds the log ratio rests on."""
    half = reach(log_ratio, level)
    return log_ratio.estimate - half, log_ratio.estimate + half


def e_value(log_ratio, null=0.0):
    """The evidence against a log ratio of `null` (E_n above): the race claims at `level` where it reaches 1 / level.
    Without noise, 1 at the null and for any other estimate the most evidence these rounds can give, (1 + n g)^(nu / 2),
    the limit of E_n as t grows."""
    freedom, spread_of_mixture = log_ratio.freedom, 1 + log_ratio.rounds * MIXTURE
    if log_ratio.error == 0:
        return 1.0 if log_ratio.estimate == null else spread_of_mixture ** (freedom / 2)
    t_squared = ((log_ratio.estimate - null) / log_ratio.error) ** 2
    ratio = (1 + t_squared / freedom) / (1 + t_squared / (freedom * spread_of_mixture))
    return math.exp(-0.5 * math.log(spread_of_mixture) + (freedom + 1) / 2 * math.log(ratio))


def difference_p(log_ratio):
    """The always-valid p of no difference: 1 / e_value, at most 1 (below a level exactly where the sequence at that
    level excludes a ratio of 1)."""
    return min(1.0, 1 / e_value(log_ratio))


def equivalence_p(log_ratio, bound):
    """The always-valid p that the log ratio lies beyond +-bound: where the estimate is inside, the larger of the two
    bounds' 1 / e_value (below a level exactly where the sequence at that level lies within the bounds), else 1."""
    if abs(log_ratio.estimate) >= bound:
        return 1.0
    return min(1.0, max(1 / e_value(log_ratio, bound), 1 / e_value(log_ratio, -bound)))


def after(log_ratio, rounds):
    """The log ratio as it would stand after `rounds` rounds, if its estimate and spread stay as observed: one degree
    of freedom more per round (a pooled comparison keeps the prior's)."""
    freedom = log_ratio.freedom + rounds - log_ratio.rounds
    return log_ratio._replace(error=log_ratio.spread / math.sqrt(rounds), freedom=freedom, rounds=rounds)


def decides_after(log_ratio, bound, rounds, level, lean=0.0, power=POWER):
    """Whether `rounds` rounds decide with probability `power` at the observed spread and the observed ratio, or one
    `lean` standard errors nearer a decision: the estimate at least the sequence's reach plus the power's share of
    chance away from 0 (a difference) or from the nearer bound (an equivalence)."""
    future = after(log_ratio, rounds)
    needed = reach(future, level) + t_critical(1 - power, future.freedom) * future.error
    distance, leaning = abs(log_ratio.estimate), lean * log_ratio.error
    return distance + leaning >= needed or bound - distance + leaning >= needed


def rounds_to_decide(log_ratio, bound, level, most, lean=0.0):
    """The fewest rounds, from the ones it rests on, that decide the comparison at `level` with probability POWER
    at the observed ratio and spread (or a ratio `lean` standard errors nearer a decision); None where not even
    `most` would (it is out of reach)."""
    return fewest_rounds(log_ratio.rounds, most, lambda rounds: decides_after(log_ratio, bound, rounds, level, lean))


def resolvable_ratio(log_ratio, rounds, level, power=POWER):
    """The smallest lead (a ratio above 1) that `rounds` rounds prove at `level` with probability `power` at the
    observed spread: what the machine's noise lets that many rounds resolve."""
    future = after(log_ratio, rounds)
    return math.exp(reach(future, level) + t_critical(1 - power, future.freedom) * future.error)
