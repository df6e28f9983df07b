"""The one clock every adapter is timed with: the device is synchronised before every read of it."""

import time


def timed(sync, work, *args):
    """(result, seconds) of work(*args), with queued device work drained before both clock reads."""
    sync()
    start = time.perf_counter()
    result = work(*args)
    sync()
    return result, time.perf_counter() - start
