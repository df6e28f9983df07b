"""One run's set-up with its adapter, as scripts/train.py, the max-batch probe and the benchmarks do it: the adapter
configured, the data loaded and placed, the model built from the neutral spec with the neutral initial weights; each
step on the clock with the device synchronised around every read of it (clock.py), its seconds kept by phase."""

from . import clock, data, parallel, specs


class Run:
    """The set-up of one experiment (a plan row, or any dict with the keys the adapter and these steps read: device,
    seed, math_mode, variant, data_placement, optimizer...). `phases` ({phase: seconds}, given or new) gets the
    seconds of data_loading, data_staging and build as each finishes, so a failure keeps what was measured."""

    def __init__(self, adapter, experiment, phases=None):
        self.adapter, self.experiment, self.device = adapter, experiment, experiment["device"]
        self.phases = {} if phases is None else phases

    def configure(self, threads):
        """The adapter configured for the experiment's device, seed, math mode and replicas; what took effect."""
        experiment = self.experiment
        return self.adapter.configure(
            self.device, threads, experiment["seed"], experiment["math_mode"], parallel.replicas(experiment)
        )

    def sync(self):
        self.adapter.sync(self.device)

    def timed(self, work, *args):
        """(result, seconds) of work(*args), queued device work drained before both clock reads; in a multi-process
        run the slowest process's seconds, so that every process takes the same decisions from them."""
        result, seconds = clock.timed(self.sync, work, *args)
        return result, self.adapter.replica_max(seconds)

    def phase(self, name, work, *args):
        """work(*args), timed; its seconds kept as phases[name]."""
        result, self.phases[name] = self.timed(work, *args)
        return result

    def load(self, dataset_dir):
        """(arrays, meta) of a prepared dataset (data_loading); verifying its files is the caller's, off the clock."""
        return self.phase("data_loading", data.load, dataset_dir)

    def stage(self, arrays):
        """The arrays placed as the experiment's data placement puts them (data_staging)."""
        return self.phase("data_staging", self.adapter.stage, arrays, self.experiment)

    def stream(self, meta, workers):
        """A streamed image folder's loaders, with `workers` workers (data_staging)."""
        return self.phase("data_staging", self.adapter.stream, meta, self.experiment, workers)

    def build(self, spec, input_shape):
        """The model of `spec` with the neutral initial weights of the experiment's seed (build)."""
        weights = specs.initial_weights(spec, input_shape, self.experiment["seed"])
        return self.phase("build", self.adapter.build, spec, input_shape, weights, self.experiment)
