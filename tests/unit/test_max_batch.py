"""The largest-batch search: the search itself on a scripted memory limit, and how probe outcomes are read,
including a probe killed by the out-of-memory killer (a scripted out-of-memory error in a real framework:
tests/frameworks/test_max_batch_probe.py)."""

import signal

import max_batch
import pytest
from dlbench.process import Outcome
from max_batch import ProbeFailed, largest_fitting, run_probe


def scripted(capacity):
    """fits(batch) for a device that holds batches up to `capacity`, recording every batch tried."""
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= capacity

    return fits, tried


@pytest.mark.parametrize(
    ("capacity", "resolution", "expected"),
    [(700, 8, (696, 704)), (700, 1, (700, 701)), (10**6, 8, (4096, None)), (5, 1, (5, 6)), (0, 8, (0, 1))],
)
def test_the_search_finds_the_largest_batch_to_the_resolution(capacity, resolution, expected):
    fits, tried = scripted(capacity)
    assert largest_fitting(fits, 16, 4096, resolution) == expected
    assert len(tried) == len(set(tried)) and len(tried) <= 2 * 12  # no batch twice; logarithmic in the range


def test_a_failure_other_than_memory_ends_the_search():
    def fits(batch):
        raise ProbeFailed("ValueError: bad shape")

    with pytest.raises(ProbeFailed):
        largest_fitting(fits, 16, 64, 8)


def test_a_probe_killed_by_sigkill_counts_as_out_of_memory(monkeypatch):
    killed = Outcome(-signal.SIGKILL, stdout="", stderr="", seconds=1.0)
    monkeypatch.setattr(max_batch, "run_child", lambda *args, **kwargs: killed)
    outcome = run_probe({}, 256, type("Arguments", (), {"dataset_dir": "d", "threads": 1}))
    assert (outcome["status"], outcome["batch_size"]) == ("oom", 256)
    assert "out-of-memory killer" in outcome["error"]
