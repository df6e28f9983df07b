"""One run's set-up with its adapter, as scripts/train.py, the max-batch probe and the benchmarks do it: the adapter
configured, the data loaded and placed, the model built from the neutral spec with the neutral initial weights; each
step on the clock with the device synchronised around every read of it (clock.py), its seconds kept by phase."""

import dataclasses

from . import clock, data, parallel, record, record_fields, specs


class Run:
    """The set-up of one experiment (a plan row, or any dict with the keys the adapter and these steps read: device,
    seed, math_mode, variant, data_placement, optimizer...). `phases` ({phase: seconds}, given or new) gets the
    seconds of data_loading, data_staging and build as each finishes, so a failure keeps what was measured."""

    def __init__(self, adapter, experiment, phases=None):
        self.adapter, self.experiment, self.device = adapter, experiment, experiment["device"]
        self.phases = {} if phases is None else phases
        self.example = None  # one test example on the host, kept by open() for arrays (the latency pass)

    def configure(self, threads):
        """The adapter configured for the experiment's device, seed, math mode and replicas; what took effect."""
        experiment = self.experiment
        return self.adapter.configure(
            self.device, threads, experiment["seed"], experiment["math_mode"], parallel.replicas(experiment)
        )

    def libraries(self, provenance):
        """What the framework itself reports of the libraries its kernels come from: on a GPU the CUDA and cuDNN
        versions, which win over those of the env's wheels (`provenance`'s) where it reports them; on a CPU its CPU
        kernel libraries (oneDNN, the BLAS)."""
        if self.device != "gpu":
            return {"cpu_kernels": self.adapter.cpu_kernels()}
        reported = record.dotted_cuda_versions(*self.adapter.cuda_versions())
        return {key: version or provenance[key] for key, version in zip(("cuda", "cudnn"), reported)}

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

    def open(self, dataset_dir, batch_size):
        """(staged, meta, shuffles, streamed) of the experiment's training data: a prepared dataset's arrays loaded
        (data_loading) and placed (data_staging); or a streamed image folder's index read (data_loading) and the
        framework's loaders made (data_staging), `streamed` describing them for the record (None otherwise).
        shuffles.order_of(epoch) is an epoch's examples of `batch_size` batches (streamed: each with its crop box and
        flip); the training epochs read the first ones."""
        experiment, cap = self.experiment, self.experiment.get("images_per_epoch")
        if experiment["data_placement"] != "stream":
            arrays, meta = self.load(dataset_dir)
            self.example = arrays["test_x"][:1].copy()  # a host copy for the latency pass: staging may move the rest
            staged, streamed = self.stage(arrays), None
            order, examples = data.epoch_order, meta["train_size"]
        else:
            meta = self.phase("data_loading", data.read_meta, dataset_dir)
            workers = experiment["stream"]["workers"] or parallel.schedulable_cpus()
            staged, streamed = self.stream(meta, workers), stream_description(meta, self.adapter.LOADER, workers)
            order, examples = data.stream_order, data.stream_files(meta, "train")[2]

        def order_of(epoch):
            return order(examples, batch_size, experiment["seed"], epoch, cap)

        return staged, meta, data.Shuffles(order_of, experiment["epochs"]), streamed

    def check_parameters(self, built, spec, input_shape):
        """The parameters the framework counted in the model it built (`built`) held to the spec's count: a framework
        that built another network than the spec fails the run here, before any time is measured."""
        expected = specs.parameter_count(spec, input_shape)
        if built != expected:
            raise RuntimeError(f"{self.experiment['adapter']} built {built} parameters, the spec has {expected}")


SKIPPED_LISTED = 20  # a streamed run's record lists this many skipped files (all of them are in the index's meta.json)


def dataset_description(meta):
    """The record's `dataset_description`: the split sizes, classes and image shape the dataset's meta.json gives."""
    return dataclasses.asdict(
        record_fields.DatasetDescription(
            train_images=meta["train_size"],
            test_images=meta["test_size"],
            classes=meta["classes"],
            image_shape=list(meta["shape"]),
        )
    )


def stream_description(meta, loader, workers):
    """The record's `stream`: the image folder as it was read, through which loader with how many workers."""
    return dataclasses.asdict(
        record_fields.Stream(
            workers=workers,
            loader=loader,
            root=meta["root"],
            train_images=meta["train_size"],
            val_images=meta["test_size"],
            skipped_images=len(meta["skipped"]),
            skipped=[record_fields.SkippedFile(**skipped) for skipped in meta["skipped"][:SKIPPED_LISTED]],
        )
    )
