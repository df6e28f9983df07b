"""Epochs of two kinds timed in alternating pairs, and the share of work one kind leaves out: the input share's and
the communication share's method."""

import statistics


def removed_share(without_seconds, with_seconds):
    """(share, [low, high]): the share of the work of epochs timed `with_seconds` that epochs timed `without_seconds`
    leave out, 1 - median without / median with, and the range of that ratio over the pairs the two were timed in
    (each pair's epochs next to each other, their order alternating), so the noise of single epochs is stated beside
    it and the machine's drift between far-apart epochs is not (a share below zero that the range does not exclude
    from zero is noise, not work). The share always lies in the range: each side's median is bounded by the pairs'."""
    share = 1 - statistics.median(without_seconds) / statistics.median(with_seconds)
    ratios = [1 - without / with_ for without, with_ in zip(without_seconds, with_seconds, strict=True)]
    return share, [min(ratios), max(ratios)]


def timed_in_pairs(run, sampler, pair, rounds, label=""):
    """{kind: [seconds]} of `rounds` pairs of epochs, `pair` being ((kind, work(round index)), (kind, work)): each
    pair's order alternating, so that the machine's drift falls on both kinds alike (removed_share's pairs)."""
    timed = {kind: [] for kind, _ in pair}
    for index in range(rounds):
        for kind, work in pair if index % 2 == 0 else reversed(pair):
            sampler.mark(f"{label}{kind} epoch {index + 1}")
            timed[kind].append(run.timed(work, index)[1])
    return timed
