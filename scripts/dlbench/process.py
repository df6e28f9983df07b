"""Set-up of a timed process that must happen before its framework is imported. Standard library only."""

import os

from . import mathmode

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_count(argument):
    """A --threads argument (config `cpu_threads`): a number of threads, or None for `framework`, each framework's
    own default."""
    return None if argument == "framework" else int(argument)


def thread_policy(threads):
    """How a record states the thread count: the number pinned, or 'framework'."""
    return "framework" if threads is None else threads


def prepare_process(environment, threads, math_mode):
    """Thread-count variables where threads are pinned (None: left to each framework, as its users get them) and
    the math-mode policy's variables (read by the frameworks' runtimes at import), then the stack's own variables."""
    for name in THREAD_VARIABLES:
        if threads is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(threads)
    os.environ.update(mathmode.environment(math_mode))
    os.environ.update(environment)
