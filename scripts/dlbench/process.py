"""Set-up of a timed process that must happen before its framework is imported. Standard library only."""

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def prepare_process(environment, threads):
    """Thread-count variables (read by the frameworks' runtimes at import) and the stack's own variables."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    os.environ.update(environment)
