"""The measurements after training (dlbench/measure) on a fake clock that drifts, as a GPU's does over its first
seconds of work: real and fixed-batch epochs alternate, so drift falls on both sides alike; each pass reads shuffles
no other pass read, and runs in its place in the order."""

import numpy as np
import pytest
from dlbench import measure
from dlbench.adapters.contract import StagedData
from dlbench.data import Shuffles
from dlbench.measure import communication, input_share, latency


class Adapter:
    INPUT_WORK = "gathering every batch"

    def __init__(self):
        self.calls = []

    def train_epoch(self, model, staged, order, batch_size):
        self.calls.append("real")

    def fixed_batch_steps(self, model, staged, order, batch_size):
        return lambda steps: self.calls.append("fixed")


class DriftingRun:
    """Every epoch costs `real_s` or `fixed_s` on a machine whose speed changes by `drift` per timed call."""

    def __init__(self, real_s, fixed_s, drift):
        self.adapter = Adapter()
        self.experiment = {"epochs": 3, "batch_size": 4, "measure_input_share": True, "data_placement": "device"}
        self.cost, self.drift = {"real": real_s, "fixed": fixed_s}, drift

    def timed(self, work, *args):
        work(*args)
        calls = self.adapter.calls
        return None, self.cost[calls[-1]] * (1 + self.drift) ** len(calls)


class Sampler:
    def mark(self, phase):
        pass


def trained(run, window_epochs, read):
    """The passes' input after 3 training epochs: `read` collects the epochs whose shuffles the passes read."""

    def order_of(epoch):
        read.append(epoch)
        return np.arange(64)

    shuffles = Shuffles(order_of, run.experiment["epochs"])
    return measure.Trained(
        run, None, StagedData(), shuffles, 4, [1.0] * window_epochs, 1000.0, Sampler(), lambda line: None
    )


def measured(real_s, fixed_s, drift, steady_epochs):
    run = DriftingRun(real_s, fixed_s, drift)
    return run.adapter.calls, input_share.measure(trained(run, steady_epochs, []))


@pytest.mark.parametrize("drift", [-0.02, 0.02])
def test_drift_alone_reads_as_no_input_work(drift):
    calls, record = measured(1.0, 1.0, drift, steady_epochs=2)
    assert calls == ["fixed", "real", "fixed", "fixed", "real"]  # a warm-up step, then pairs in alternating order
    low, high = record["input_share_interval"]
    assert abs(record["input_share"]) < 0.001 and low < 0 < high
    assert len(record["input_share_epochs_s"]) == len(record["fixed_batch_epochs_s"]) == 2


def test_input_work_reads_through_drift():
    """Fixed-batch epochs 10 % shorter than real ones, on a machine slowing by 2 % an epoch."""
    calls, record = measured(1.0, 0.9, 0.02, steady_epochs=7)
    assert calls.count("real") == calls.count("fixed") - 1 == 4  # ceil(7 / 2) pairs and the warm-up step
    assert record["input_share"] == pytest.approx(0.1, abs=0.01)
    low, high = record["input_share_interval"]  # the pairs' range: each pair's epochs adjacent, drift one epoch's
    assert 0.07 < low < record["input_share"] < high < 0.13
    assert record["input_share_covers"] == Adapter.INPUT_WORK


def test_the_communication_share_alternates_its_pairs_too():
    """Fixed-batch epochs without the gradients' reduction 20 % shorter than with it, on a machine slowing by 2 % an
    epoch (the adapter's fixed-batch steps are the reduced ones)."""
    run = DriftingRun(None, 1.0, 0.02)
    run.cost["unreduced"] = 0.8
    calls = run.adapter.calls
    run.adapter.unreduced_steps = lambda model, staged, order, batch_size: lambda steps: calls.append("unreduced")
    record = communication.measure(trained(run, 3, []))
    # the two warm-up calls, then pairs reduced first, unreduced first, reduced first
    assert calls == ["fixed", "unreduced", "fixed", "unreduced", "unreduced", "fixed", "fixed", "unreduced"]
    assert record["communication_share"] == pytest.approx(0.2, abs=0.02)
    low, high = record["communication_share_interval"]
    assert 0.15 < low <= record["communication_share"] <= high < 0.25


def test_the_passes_run_in_order_each_on_shuffles_no_one_read_and_skip_what_the_adapter_cannot_do():
    """After 3 training epochs (shuffles 0-2), the input share's 2 pairs read shuffles 3 and 4 and the loader then
    reads 5; an adapter without a loader pass leaves that pass out and the passes after it still run."""
    run, read = DriftingRun(1.0, 0.9, 0.0), []
    run.experiment.update(data_placement="stream", stream={"loader_batches": 2})
    run.adapter.LOADER, run.adapter.stream, run.adapter.loader_batches = "a loader", None, None
    run.adapter.loader_pass = lambda staged, order, batch_size: run.adapter.calls.append("real")
    sections = {}
    measure.after_training(trained(run, 3, read), sections)
    assert read == [3, 4, 5] and sections["loader_images_per_s"] == 8 / 1.0  # each order made once
    assert sections["input_bound_share"] == 1000.0 / 8
    del run.adapter.loader_pass
    lines, read[:] = [], []
    bare = trained(run, 3, read)
    bare.log = lines.append
    sections = {}
    measure.after_training(bare, sections)
    assert "loader_images_per_s" not in sections and "input_share" in sections and read == [3, 4]
    assert lines[-1] == "loader: left out, the adapter lacks Streaming"


def test_a_pass_that_fails_leaves_the_sections_of_those_before_it_in_the_record():
    """The communication share raising (a collective that times out) keeps the input share already measured."""
    run, record = DriftingRun(1.0, 0.9, 0.0), {}
    run.experiment.update(replicas=2)

    def failing(model, staged, order, batch_size):
        raise RuntimeError("collective timed out")

    run.adapter.unreduced_steps = failing
    with pytest.raises(RuntimeError, match="collective timed out"):
        measure.after_training(trained(run, 3, []), record)
    assert record["input_share"] == pytest.approx(0.1) and "communication_share" not in record


@pytest.mark.parametrize(
    ("asked", "rep", "applies"),
    [(True, 2, True), ("first", 1, True), ("first", 2, False), (False, 1, False)],
)
def test_the_input_share_is_measured_in_the_repeats_the_config_asks(asked, rep, applies):
    """`first` (the default): each experiment's first repeat alone; true: every repeat."""
    run = DriftingRun(1.0, 1.0, 0.0)
    run.experiment.update(measure_input_share=asked, rep=rep)
    assert input_share.applies(trained(run, 2, [])) is applies
    assert not input_share.applies(trained(run, 0, []))  # no steady window: nothing to pair with


class ServingRun:
    """A run whose adapter answers one example, each call's input shape recorded, where the experiment asks for the
    latency pass."""

    def __init__(self, asked, rep=1, replicas=1, example=np.zeros((1, 8, 8, 1), np.float32)):
        self.calls = []
        self.adapter = type("Serving", (), {"logits": lambda _, model, images: self.calls.append(images.shape)})()
        self.experiment = {"measure_latency": asked, "rep": rep, "replicas": replicas, "epochs": 3}
        self.example = example


def test_latency_is_timed_at_batch_1_after_untimed_calls_with_its_median_and_99th_percentile():
    """Where asked (the first repeat by default), one host example through `logits`: 5 untimed calls, then up to 100
    timed ones; not for replicas or streamed data (no example kept)."""
    run = ServingRun("first")
    assert latency.applies(trained(run, 2, []))
    section = latency.measure(trained(run, 2, []))
    assert set(run.calls) == {(1, 8, 8, 1)} and len(run.calls) == latency.WARMUP + section["latency_calls"]
    assert 0 <= section["latency_ms_median"] <= section["latency_ms_p99"]
    assert not latency.applies(trained(ServingRun("first", rep=2), 2, []))
    assert latency.applies(trained(ServingRun(True, rep=2), 2, []))
    assert not latency.applies(trained(ServingRun(True, replicas=2), 2, []))
    assert not latency.applies(trained(ServingRun(True, example=None), 2, []))
    assert latency.percentile([5, 1, 3, 2, 4], 0.99) == 5 and latency.percentile([5, 1, 3, 2, 4], 0.5) == 3
