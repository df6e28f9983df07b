"""Set-up of a timed process that must happen before its framework is imported. Standard library only."""

import os

from . import mathmode

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def prepare_process(environment, threads, math_mode):
    """Thread-count variables and the math-mode policy's variables (read by the frameworks' runtimes at import),
    then the stack's own variables."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    os.environ.update(mathmode.environment(math_mode))
    os.environ.update(environment)
