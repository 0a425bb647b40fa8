"""How a built pipeline runs on fastload (DALI's, and rocAL's built on it): its readers are a fastload source
with the front end's order, and its graph runs per sample in the loader's threads (``GraphPath``, a fastload
path), its batch operators (if any) once per batch in the job's finish; a batch comes back as one batch
object per output, of the front end's kind (DALI's ``TensorList``). The front end hands over what is its own:
the reader order (``order``: DALI's ``ReaderOrder``) and the batch type (``make_batch``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import torch

from ...thread_pool import Job, LoaderPath, Stages, ThreadPool, batches_ahead
from ...read import read_file
from ...sample_reader import SampleReader
from ...sources import Source
from .graph import SKIPPED, Graph, SampleContext


class ReaderSource(Source):
    """A pipeline's reader samples as a fastload source with the front end's reader order (``order(spec,
    batch_size, seed)``: DALI's ``ReaderOrder``, unless the reader's spec brings its own, as rocAL's do);
    its batches are made by ``make_batch(tensors, layout, device)`` (DALI's ``TensorList``).

    Its transform is the graph's ``Plan`` when the graph lowers to one (the
    fast or device path), else None and the graph runs as its own path
    (``GraphPath``). A pipeline with several readers (images and masks, say)
    reads them side by side: the first drives the loader's order, the others
    read their own streams at the same stream positions, as DALI's readers
    each advance by one batch per iteration.
    """

    def __init__(self, readers: list, graph: Graph, seed: int, gpu: torch.device, plan=None, *,
                 order: Callable, make_batch: Callable):
        self.readers = readers  # the reader ops, the first one driving the order
        spec = readers[0].reader
        super().__init__(spec.samples, plan, seed=seed)
        self.spec, self.graph, self.gpu, self.base_seed = spec, graph, gpu, seed
        self.order, self.make_batch = order, make_batch

    def read(self, index: int) -> bytes:
        """The sample's bytes: its file's, or, for a reader of records (rocAL's TFRecord reader), what its
        spec's ``read`` gives."""
        read = getattr(self.spec, "read", None)
        return read(index) if read is not None else super().read(index)

    def reader_order(self, spec, batch_size: int):
        """The reader's order: the one its spec makes where it has one (rocAL's readers), else the front
        end's (``order``)."""
        seed = spec.seed if spec.seed >= 0 else self.base_seed
        own = getattr(spec, "order", None)
        return own(batch_size, seed) if own is not None else self.order(spec, batch_size, seed)

    def make_order(self, batch_size: int, drop_last: bool, **ignored):
        return self.reader_order(self.spec, batch_size)

    def meta(self, spec=None) -> dict:
        """DALI's ``reader_meta`` for a reader (the first by default)."""
        spec = spec or self.spec
        size = len(spec.samples)
        padded = -(-size // spec.num_shards) * spec.num_shards if spec.pad_last_batch else size
        return {"epoch_size": size, "epoch_size_padded": padded, "number_of_shards": spec.num_shards,
                "shard_id": spec.shard_id, "pad_last_batch": int(spec.pad_last_batch),
                "stick_to_shard": int(spec.stick_to_shard or spec.shuffle_after_epoch)}  # DALI's loader implies it

    def fastload_path(self, loader) -> GraphPath | None:
        return GraphPath(loader, self) if self.transform is None else None


class GraphPath(SampleReader, LoaderPath):
    """A fastload path that runs a DALI graph per sample in the loader's threads: read the sample's bytes,
    run the graph with the sample's random streams (seed, epoch, index), and make the batch's
    TensorLists. A sample whose bytes do not decode is a named error, or skipped and replaced as the
    order says under ``on_error="skip"``."""

    fast = on_device = False
    plan = None

    def __init__(self, loader, source: ReaderSource):
        super().__init__(loader, source.samples, None, None, source.read)
        self.graph, self.gpu, self.readers = source.graph, source.gpu, source.readers
        self.make_batch = source.make_batch
        self.others = [(op, source.reader_order(op.reader, loader.batch_size)) for op in source.readers[1:]]

    def stages(self, batches: Iterator[list[tuple[int, int]]], epoch: int, order) -> Stages:
        ctx = self.context(epoch, order)
        return Stages(self._jobs(batches, ctx), in_flight=batches_ahead(self.loader))

    def _jobs(self, batches, ctx) -> Iterator[Job]:
        for batch in batches:
            start = ctx.epoch * ctx.order.num_samples() + batch[0][0]  # the batch's place in the stream
            others = [(op, order.stream(start, len(batch))) for op, order in self.others]  # in stream order
            shared: dict = {}  # what the batch reads once (SampleContext.batch)
            gathered = BatchBuffers(len(batch), len(self.graph.outputs))
            tasks = [_RunSample(self, position, index, ctx, [(op, indices[i]) for op, indices in others], shared,
                                gathered, i) for i, (position, index) in enumerate(batch)]
            yield Job(tasks, lambda results, gathered=gathered: self._finish(results, gathered),
                      what=[self.samples[index][0] for _, index in batch])

    def run(self, index: int, repeat: int, ctx, report, others, shared: dict) -> tuple:
        file, label = self.samples[index]
        report("read", file)
        started = time.perf_counter()
        readers = {self.readers[0].id: (self.read_bytes(index), label)}
        for op, other in others:  # each with its own read where its spec has one (a reader of records)
            other_file, other_label = op.reader.samples[other]
            own = getattr(op.reader, "read", None)
            readers[op.id] = (own(other) if own is not None else read_file(other, other_file), other_label)
        read = time.perf_counter()
        report("graph", file)
        sample = SampleContext(ctx.seed, ctx.epoch, index, name=file, readers=readers, gpu=self.gpu,
                               repeat=repeat, batch=shared)
        outputs = self.graph.run_sample(sample)
        self.stats.add("read", read - started)
        self.stats.add("augment", time.perf_counter() - read)
        return outputs

    def _finish(self, results: list[tuple], gathered: "BatchBuffers") -> tuple:
        self.stats.count_batch(len(results))
        return batch_outputs(self.graph, results, self.make_batch, gathered)


class BatchBuffers:
    """A batch's outputs gathered as each sample ends, by the thread that ran it: an output's samples are
    copied into one tensor (first dimension: the samples) while their shapes and types agree, so that the
    batch comes out dense, as DALI's does (``as_tensor()`` without a copy), and no thread copies a whole
    batch alone. An output whose samples differ (or are not CPU tensors) stays a list of samples."""

    def __init__(self, size: int, outputs: int):
        self.size, self.lock = size, threading.Lock()
        self.buffers: list = [None] * outputs  # per output: the batch tensor, None before a sample, False: ragged
        self.placed = [0] * outputs

    def place(self, slot: int, outputs) -> tuple | object:
        """Sample ``slot``'s finished outputs (a tuple), each copied into its batch tensor where it fits, as
        views of it; anything else (a sample waiting for batch ops) as it is."""
        if not isinstance(outputs, tuple) or len(outputs) != len(self.buffers):
            return outputs
        return tuple(self._place(i, slot, value) for i, value in enumerate(outputs))

    def _place(self, i: int, slot: int, value):
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            with self.lock:
                self.buffers[i] = False
            return value
        with self.lock:
            buffer = self.buffers[i]
            if buffer is None:
                buffer = self.buffers[i] = torch.empty((self.size, *value.shape), dtype=value.dtype)
            fits = buffer is not False and buffer.shape[1:] == value.shape and buffer.dtype == value.dtype
            if not fits:
                self.buffers[i] = False
        if not fits:
            return value
        row = buffer[slot]
        row.copy_(value)
        with self.lock:
            self.placed[i] += 1
        return row

    def dense(self, i: int) -> torch.Tensor | None:
        """Output ``i``'s batch tensor when every sample of the batch was copied into it, else None."""
        buffer = self.buffers[i]
        return buffer if buffer is not None and buffer is not False and self.placed[i] == self.size else None


def batch_outputs(graph: Graph, results: list, make_batch: Callable, gathered: BatchBuffers | None = None) -> tuple:
    """The samples' ``run_sample`` results -> one batch per pipeline output (``make_batch``) (without the samples an
    output does not have: those on the other side of a ``fn._conditional.split``), after the batch ops
    that the samples' runs stopped at (``Graph.finish_batch``). An output whose samples differ in
    type or number of dimensions is refused, as DALI refuses to make such a batch (a RuntimeError).
    ``gathered``: the batch tensors the samples were copied into as they ended, given to ``make_batch``
    as the dense batch (``dense=``) where every sample is in one."""
    results = graph.finish_batch(results)
    outputs = []
    for i, node in enumerate(graph.outputs):
        tensors = [sample[i] for sample in results if sample[i] is not SKIPPED]
        _check_uniform(tensors, i, node)
        dense = gathered.dense(i) if gathered is not None and len(tensors) == gathered.size else None
        if dense is None:
            outputs.append(make_batch(tensors, node.layout(), node.device))
        else:
            outputs.append(make_batch(tensors, node.layout(), node.device, dense=dense))
    return tuple(outputs)


def _check_uniform(tensors: list[torch.Tensor], at: int, node) -> None:
    """DALI's rule for a batch: one type and one number of dimensions for all its samples."""
    if not tensors:
        return
    first = tensors[0]
    for k, sample in enumerate(tensors):
        if sample.dtype != first.dtype:
            raise RuntimeError(f"fastload.compat: output {at} of the pipeline ({node.source.name}): sample {k} "
                               f"is {sample.dtype}, sample 0 {first.dtype}; the samples of a batch must have the "
                               f"same type (DALI refuses it too)")
        if sample.dim() != first.dim():
            raise RuntimeError(f"fastload.compat: output {at} of the pipeline ({node.source.name}): sample {k} "
                               f"has {sample.dim()} dimensions, sample 0 {first.dim()}; all tensors in a batch must "
                               f"have the same number of dimensions (DALI refuses it too)")


class _RunSample:
    def __init__(self, path: GraphPath, position: int, index: int, ctx, others, shared: dict,
                 gathered: BatchBuffers, slot: int):
        self.path, self.position, self.index, self.ctx, self.others = path, position, index, ctx, others
        self.shared, self.gathered, self.slot = shared, gathered, slot

    def __call__(self, report) -> tuple:
        def run(index: int, repeat: int) -> tuple:
            return self.path.run(index, repeat, self.ctx, report, self.others, self.shared)
        return self.gathered.place(self.slot, self.path.load_or_replace(run, self.position, self.index, self.ctx))


def external_batch(graph: Graph, inputs: dict, given: list | None, size: int, seed: int, run: int,
                   gpu: torch.device, threads: int, make_batch: Callable) -> tuple:
    """One batch of a pipeline whose graph runs when the batch is taken (it has external sources):
    ``size`` samples, each with its external sources' values (``inputs``: op id -> per-sample values) and,
    where the pipeline has readers, the values its readers' outputs took in the loader (``given``, one
    dict per sample). Sample ``i`` of the pipeline's ``run``-th batch draws from the stream (seed, run, i).
    The samples run on ``threads`` threads of fastload's pool, each op on one core (run here, torch would
    fan each op out over every core, which a loaded machine makes many times slower)."""
    shared: dict = {}  # what the batch reads once (SampleContext.batch)
    gathered = BatchBuffers(size, len(graph.outputs))

    def task(i: int):
        ctx = SampleContext(seed, run, i, name=f"sample {i}", gpu=gpu,
                            external={key: value[i] for key, value in inputs.items()}, batch=shared)
        return lambda report: gathered.place(i, graph.run_sample(ctx, given[i] if given is not None else None))

    job = Job([task(i) for i in range(size)], lambda results: batch_outputs(graph, results, make_batch, gathered),
              what=[f"sample {i}" for i in range(size)])
    pool = ThreadPool(iter([job]), max(1, min(threads, size)), 1)
    try:
        return next(pool)
    finally:
        pool.close()
