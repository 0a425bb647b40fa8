"""How a built DALI pipeline runs on fastload: its reader is a fastload source with DALI's order, and its
graph runs per sample in the loader's threads (``GraphPath``, a fastload path); a batch comes back as
DALI's outputs, one ``TensorList`` each.
"""

from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import torch

from ...batch import SampleReader
from ...order import ReaderOrder
from ...pipeline import Job, Stages
from ...sources import Source
from .graph import Graph, SampleContext
from .types import DALI_TYPES


class TensorList:
    """One output of a batch, as DALI's ``TensorListCPU``/``TensorListGPU`` reads: per-sample tensors.

    ``at(i)`` gives sample i as a numpy array (CPU lists, as in DALI);
    ``as_tensor()`` the dense batch as one torch tensor; ``as_cpu()`` a CPU
    copy. ``layout()`` is the per-sample layout ("HWC", "CHW" or "").
    """

    def __init__(self, tensors: list[torch.Tensor], layout: str = "", device: str = "cpu"):
        self.tensors, self._layout, self.device = tensors, layout, device

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self):
        return iter(self.tensors)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.tensors[i]

    def __repr__(self) -> str:
        return f"TensorList{self.device.upper()}({len(self)} samples, layout={self._layout!r}, dtype={self.dtype})"

    def at(self, i: int) -> np.ndarray:
        if self.device != "cpu":
            raise RuntimeError("TensorListGPU has no at(); call as_cpu() first (as in DALI)")
        return self.tensors[i].numpy()

    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self):
        return DALI_TYPES.get(self.tensors[0].dtype) if self.tensors else None

    def shape(self) -> list[tuple[int, ...]]:
        return [tuple(t.shape) for t in self.tensors]

    def is_dense_tensor(self) -> bool:
        return len({tuple(t.shape) for t in self.tensors}) <= 1

    def as_tensor(self) -> torch.Tensor:
        if not self.is_dense_tensor():
            raise RuntimeError(f"the samples have different shapes ({self.shape()[:4]}...): as_tensor() needs "
                               f"a dense batch (as in DALI)")
        return torch.stack(self.tensors)

    def as_array(self) -> np.ndarray:
        return self.as_cpu().as_tensor().numpy()

    def as_cpu(self) -> "TensorList":
        return TensorList([t.cpu() for t in self.tensors], self._layout, "cpu")


class ReaderSource(Source):
    """``fn.readers.file``'s samples as a fastload source: DALI's order (``ReaderOrder``), and the pipeline's
    graph as its path (``GraphPath``)."""

    def __init__(self, spec, graph: Graph, seed: int, gpu: torch.device):
        super().__init__(spec.samples, seed=seed)
        self.spec, self.graph, self.gpu = spec, graph, gpu
        self.order_seed = spec.seed if spec.seed >= 0 else seed

    def make_order(self, batch_size: int, drop_last: bool, **ignored) -> ReaderOrder:
        spec = self.spec
        return ReaderOrder(len(self.samples), shard_id=spec.shard_id, num_shards=spec.num_shards,
                           batch_size=batch_size, stick_to_shard=spec.stick_to_shard,
                           pad_last_batch=spec.pad_last_batch, random_shuffle=spec.random_shuffle,
                           initial_fill=spec.initial_fill, shuffle_after_epoch=spec.shuffle_after_epoch,
                           seed=self.order_seed)

    def meta(self) -> dict:
        """DALI's ``reader_meta`` for this reader."""
        spec, size = self.spec, len(self.samples)
        padded = -(-size // spec.num_shards) * spec.num_shards if spec.pad_last_batch else size
        return {"epoch_size": size, "epoch_size_padded": padded, "number_of_shards": spec.num_shards,
                "shard_id": spec.shard_id, "pad_last_batch": int(spec.pad_last_batch),
                "stick_to_shard": int(spec.stick_to_shard)}

    def fastload_path(self, loader):
        return GraphPath(loader, self)


class GraphPath(SampleReader):
    """A fastload path that runs a DALI graph per sample in the loader's threads: read the sample's bytes,
    run the graph with the sample's random streams (seed, epoch, index), and make the batch's
    TensorLists. A sample whose bytes do not decode is a named error, or skipped and replaced as the
    order says under ``on_error="skip"``."""

    fast = on_device = False
    plan = None

    def __init__(self, loader, source: ReaderSource):
        super().__init__(loader, source.samples, None, None, source.read)
        self.graph, self.gpu, self.names = source.graph, source.gpu, source.spec.names

    def stages(self, batches: Iterator[list[tuple[int, int]]], epoch: int, order) -> Stages:
        ctx = self.context(epoch, order)
        in_flight = (self.loader.prefetch_factor or 2) * max(self.loader.num_workers, 1)
        return Stages(self._jobs(batches, ctx), in_flight=in_flight)

    def _jobs(self, batches, ctx) -> Iterator[Job]:
        for batch in batches:
            tasks = [_RunSample(self, position, index, ctx) for position, index in batch]
            yield Job(tasks, self._finish, what=[self.samples[index][0] for _, index in batch])

    def run(self, index: int, ctx, report) -> tuple:
        path, label = self.samples[index]
        report("read", path)
        started = time.perf_counter()
        data = self.read_bytes(index)
        read = time.perf_counter()
        report("graph", path)
        sample = SampleContext(ctx.seed, ctx.epoch, index, name=path, reader=(data, label), gpu=self.gpu)
        outputs = self.graph.run_sample(sample)
        self.stats.add("read", read - started)
        self.stats.add("augment", time.perf_counter() - read)
        return outputs

    def _finish(self, results: list[tuple]) -> tuple:
        self.stats.count_batch(len(results))
        return batch_outputs(self.graph, results)


def batch_outputs(graph: Graph, results: list[tuple]) -> tuple:
    """Per-sample output tuples -> one TensorList per pipeline output."""
    return tuple(TensorList([sample[i] for sample in results], node.layout(), node.device)
                 for i, node in enumerate(graph.outputs))


class _RunSample:
    def __init__(self, path: GraphPath, position: int, index: int, ctx):
        self.path, self.position, self.index, self.ctx = path, position, index, ctx

    def __call__(self, report) -> tuple:
        return self.path.load_or_replace(lambda index: self.path.run(index, self.ctx, report), self.position,
                                         self.index, self.ctx)
