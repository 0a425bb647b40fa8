"""DALI's ``Pipeline`` and ``pipeline_def``, defined in any of DALI's three styles, run by fastload.

Styles: ``@pipeline_def`` (bare or with arguments; a call's keyword
arguments go to the Pipeline when it takes them and the function does not,
as in DALI), ``with pipe: ... pipe.set_outputs(...)``, and a ``Pipeline``
subclass with ``define_graph`` (and ``iter_setup`` / ``feed_input`` for
external sources). ``build()`` is optional before ``run()``. A pipeline
with a file reader runs as a fastload DataLoader over that reader
(``execution``): the loader's threads read and run the graph, batches are
prefetched. A pipeline fed by external sources runs its graph when its
outputs are taken, on the batch its sources gave, sample by sample on
fastload's thread pool; one with readers and external sources both reads
in the loader's threads, then runs the rest of its graph that way.

Running follows DALI's engine (its ``pipeline.py``): ``run()`` is
``schedule_run()`` then ``outputs()``; the epoch's first schedule runs
``prefetch_queue_depth`` iterations (``_prefetch``), later ones one
(``_run_once``); an iteration calls every external source's callback (in
DALI's order, with DALI's iteration and sample indices), then ``iter_setup``,
and counts a batch to consume; a source that runs out ends the epoch until
``reset()``. The private members public DALI code uses (``_prefetch``,
``_run_once``, ``_first_iter``, ``_last_iter``, ``_batches_to_consume``,
``_epoch_idx``, ``_api_type``...) mean what they mean in DALI.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import functools
import inspect
import random
import sys
import warnings
from types import ModuleType

import numpy as np
import torch

from ...loader import DataLoader
from ...paths import device_refusal
from ..engine.execution import ReaderSource, external_batch
from .order import reader_order
from .tensors import TensorList
from .lowering import lower
from ..engine.graph import DataNode, Graph, current_pipeline, pop_pipeline, push_pipeline
from .operators import ExternalSourceOp
from .types import BatchInfo, SampleInfo, torch_dtype
from .unsupported import refuse

_warned_no_gpu = False


class PipelineAPIType(enum.Enum):
    """How a pipeline is being run (DALI's ``types.PipelineAPIType``): DALI refuses to mix them."""

    BASIC = 0
    ITERATOR = 1
    SCHEDULED = 2

# Pipeline's declared output properties: what an output has (a set over its samples), and the declared
# value in the same terms
_DECLARED = {"output_dtype": (lambda out: {t.dtype for t in out.tensors}, torch_dtype),
             "output_layout": (lambda out: {out.layout()}, str),
             "output_ndim": (lambda out: {t.dim() for t in out.tensors}, int)}


class Pipeline:
    """A DALI pipeline: its arguments as in DALI; ``device_id=None`` makes it CPU-only.

    One argument is fastload's own: ``dct_scaling``. False (the default) decodes at full scale, then
    resizes, as DALI does. "auto" lets a fused random-crop graph decode a crop at least twice the output
    at 1/2..1/8 scale in the JPEG's DCT, as ``fastload.DataLoader`` does with RandomResizedCrop: a little
    faster, but the pixels are no longer DALI's (measured: mean 1-2 levels, 99th percentile up to 14).
    """

    def __init__(self, batch_size=-1, num_threads=-1, device_id=-1, seed=-1, exec_pipelined=True,
                 prefetch_queue_depth=2, exec_async=True, bytes_per_sample=0, set_affinity=False,
                 max_streams=-1, default_cuda_stream_priority=0, *, enable_memory_stats=False,
                 enable_checkpointing=False, checkpoint=None, py_num_workers=1, py_start_method="fork",
                 py_callback_pickler=None, output_dtype=None, output_ndim=None, output_layout=None,
                 exec_dynamic=None, experimental_exec_dynamic=None, stream_policy=None, concurrency=None,
                 dct_scaling=False):
        if enable_checkpointing or checkpoint is not None:
            raise NotImplementedError("fastload.compat.dali: DALI checkpointing is not supported; "
                                      "fastload.DataLoader's state_dict() resumes exactly")
        self._batch_size = batch_size if batch_size is not None else -1
        self._max_batch_size = self._batch_size
        self._num_threads = num_threads if num_threads is not None and num_threads > 0 else 1
        self._device_id = device_id
        self._seed = seed if seed is not None and seed >= 0 else random.SystemRandom().randrange(1 << 31)
        depth = prefetch_queue_depth
        self._prefetch_queue_depth = depth  # as given: an int, or DALI's {"cpu_size": .., "gpu_size": ..}
        self._cpu_queue_size = int(depth if isinstance(depth, int) else depth["cpu_size"])
        self._gpu_queue_size = int(depth if isinstance(depth, int) else depth["gpu_size"])
        if self._cpu_queue_size < 1 or self._gpu_queue_size < 1:
            raise ValueError(f"prefetch_queue_depth must be at least 1, not {depth!r}")
        self._exec_dynamic = exec_dynamic
        self._exec_pipelined = bool(exec_pipelined)
        self._exec_async = bool(exec_async)
        self._py_num_workers, self._py_start_method = py_num_workers, py_start_method
        # checked on every batch, as DALI does (_DECLARED)
        self._declared = {"output_dtype": output_dtype, "output_layout": output_layout, "output_ndim": output_ndim}
        self._outputs: list[DataNode] | None = None
        self._ops: list = []
        self._graph: Graph | None = None
        self._loader: DataLoader | None = None
        self._batches = None
        self._sources: list[ExternalSourceOp] = []
        self._readers: list = []
        self._feeds: list[_SourceFeed] = []  # the external sources that have a ``source``, in graph order
        self._fed: dict[int, collections.deque] = {}  # external source op id -> batches feed_input gave
        self._built = False
        # DALI's engine state, under DALI's names (its client code reads them)
        self._scheduled: collections.deque = collections.deque()  # iterations run, their outputs not yet taken
        self._batches_to_consume = 0
        self._first_iter = True  # the epoch's first schedule_run() prefetches (``_prefetch``)
        self._last_iter = False  # a source ran out: nothing more is scheduled until reset()
        self._epoch_idx = 0  # the external sources' epoch (SampleInfo / BatchInfo), counted by reset()
        self._consumer_iter = self._consumer_epoch_idx = 0
        self._api_type: PipelineAPIType | None = None
        self._skip_api_check = False
        self._py_pool = None  # DALI's worker processes: fastload calls parallel sources in this process
        # what DALI's constructor keeps under these names, read as DALI's by code written for it
        self._exec_separated = False
        self._bytes_per_sample, self._set_affinity = bytes_per_sample, set_affinity
        self._enable_checkpointing = self._is_restored_from_checkpoint = False
        self._iterator_data = None
        self._output_dtype, self._output_ndim, self._output_layout = output_dtype, output_ndim, output_layout
        self._conditionals = False  # set by pipeline_def(enable_conditionals=True)
        self._runs = 0  # graph runs so far: the random operators' key for pipelines without a reader
        self.unfused: str | None = None  # why the graph runs operator by operator (None: it is fused)
        self._dct_scaling = dct_scaling

    # -- properties DALI scripts read
    batch_size = property(lambda self: self._batch_size)
    max_batch_size = batch_size
    num_threads = property(lambda self: self._num_threads)
    device_id = property(lambda self: self._device_id)
    seed = property(lambda self: self._seed)
    exec_dynamic = property(lambda self: self._exec_dynamic)
    exec_pipelined = property(lambda self: self._exec_pipelined)
    py_num_workers = property(lambda self: self._py_num_workers)
    py_start_method = property(lambda self: self._py_start_method)
    prefetch_queue_depth = property(lambda self: self._prefetch_queue_depth)
    exec_async = property(lambda self: self._exec_async)
    _conditionals_enabled = property(lambda self: self._conditionals)  # DALI's name
    is_restored_from_checkpoint = property(lambda self: False)  # (checkpointing is refused)

    # -- definition
    def __enter__(self):
        push_pipeline(self)
        return self

    def __exit__(self, *exc):
        pop_pipeline()

    @staticmethod
    def current():
        """The pipeline being defined (inside ``with pipe:`` or a ``pipeline_def`` function), else None."""
        return current_pipeline()

    def set_outputs(self, *outputs) -> None:
        nodes = []
        for out in outputs:
            nodes.extend(out if isinstance(out, (list, tuple)) else [out])
        for node in nodes:
            if not isinstance(node, DataNode):
                raise TypeError(f"set_outputs: {node!r} is not a DataNode (an operator's output)")
        self._outputs = nodes

    def define_graph(self):
        """Override in a subclass: return the outputs (DALI's subclassing style)."""
        raise RuntimeError("this pipeline has no outputs: define them in define_graph(), with set_outputs(), "
                           "or with @pipeline_def")

    def iter_setup(self) -> None:
        """Called before each ``run()``; a subclass feeds its external sources here (``feed_input``)."""

    def feed_input(self, data_node, data, layout=None, cuda_stream=None, use_copy_kernel=False) -> None:
        """Give an external source (its DataNode or name) the next batch: a list of samples or one array."""
        self.build()
        name = data_node if isinstance(data_node, str) else None
        for op in self._sources:
            if (name is not None and op.feed_name == name) or (
                    name is None and any(data_node is node for node in op.outputs)):
                if op.grouped:
                    raise RuntimeError(f"feed_input: external source {op.feed_name!r} has num_outputs: DALI "
                                       f"feeds such a source from its `source` only")
                # queued: each iteration takes one batch, as DALI's input queue does
                self._fed.setdefault(op.id, collections.deque()).append(_group(data, op))
                return
        raise RuntimeError(f"feed_input: no external source named {data_node!r} in this pipeline")

    # -- building
    def build(self) -> None:
        if self._built:
            return
        if self._batch_size is None or self._batch_size < 1:
            raise ValueError("the pipeline's batch_size must be set (a positive int)")
        if self._outputs is None:
            with self:
                outputs = self.define_graph()
            self.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else [outputs]))
        self._graph = graph = Graph(self._outputs)
        readers = graph.readers()
        self._sources = [op for op in graph.ops if isinstance(op, ExternalSourceOp)]
        self._feeds = [_SourceFeed(op) for op in self._sources if op.source is not None]
        gpu = self._gpu_device(graph)
        self._readers = readers
        self._lowered = None
        self._reading: Graph | None = None  # with external sources too: the readers' part, run by the loader
        if readers and self._sources:
            self._reading = Graph([out for op in readers for out in op.outputs])
            self.unfused = "the graph runs beside its external sources, one by one in torch"
            source = ReaderSource(readers, self._reading, self._seed, gpu, order=reader_order,
                                  make_batch=TensorList)
            self._loader = DataLoader(source, batch_size=self._batch_size, num_workers=self._num_threads,
                                      prefetch_factor=self._cpu_queue_size)
            self._loader.stats.unfused = self.unfused
        elif readers:
            lowered = self._lower(graph) if len(readers) == 1 else "it has several readers"
            if isinstance(lowered, str):
                names = sorted({op.name for op in graph.ops if op not in readers and op.name not in ("gpu", "cpu")})
                if names:
                    self.unfused = f"{', '.join(names)} run one by one in torch, not fused: {lowered}"
                    if self._says_unfused:
                        _warn_unfused(self.unfused)
                else:  # only readers: nothing that fusing would have run, so nothing to warn about
                    self.unfused = f"{', '.join(sorted({op.name for op in readers}))} read in the loader's " \
                                   f"threads, not fused: {lowered}"
            else:
                self._lowered, self.unfused = lowered, None
            plan = self._lowered.plan if self._lowered else None
            source = ReaderSource(readers, graph, self._seed, gpu, plan, order=reader_order,
                                  make_batch=TensorList)
            # a fused graph that asks for the GPU takes fastload's device path where the fused kernel runs
            # on ``gpu`` (a CUDA device; without one, gpu is the CPU and the path the CPU fast path)
            asks_gpu = any(op.device in ("gpu", "mixed") for op in graph.ops)
            self._loader = DataLoader(source, batch_size=self._batch_size, num_workers=self._num_threads,
                                      prefetch_factor=self._cpu_queue_size,
                                      device=gpu if plan is not None and asks_gpu else None,
                                      dct_scaling=self._dct_scaling, memory_format=(
                                          torch.channels_last if self._lowered and self._lowered.layout == "HWC"
                                          else torch.contiguous_format))
            self._loader.stats.unfused = self.unfused or ""
            if plan is not None and asks_gpu and gpu.type == "cuda" and not self._loader.device_path:
                _warn_unfused(f"the fused graph runs on the CPU fast path, its batches copied to {gpu}: "
                              f"{device_refusal((source.samples, plan), gpu)}")
        self._gpu = gpu
        self._built = True

    _says_unfused = True  # False: a front end whose graphs never fuse yet (rocAL) says so in loader.stats only

    def _lower(self, graph: Graph):
        """The graph as a fused plan (``lowering.lower``), or why not."""
        return lower(graph)

    def _gpu_device(self, graph: Graph) -> torch.device:
        global _warned_no_gpu
        gpu_ops = [op for op in graph.ops if op.device in ("gpu", "mixed")]
        if not gpu_ops:
            return torch.device("cpu")
        if self._device_id is not None and torch.cuda.is_available():
            return torch.device("cuda", max(self._device_id, 0))
        if not _warned_no_gpu:
            _warned_no_gpu = True
            why = "device_id=None" if self._device_id is None else "there is no GPU"
            warnings.warn(f"fastload.compat.dali: {why}: the pipeline's GPU operators ("
                          f"{', '.join(sorted({op.name for op in gpu_ops}))}) run on the CPU", stacklevel=3)
        return torch.device("cpu")

    def start_py_workers(self) -> None:
        """DALI starts the worker processes of ``external_source(parallel=True)`` here (before CUDA is
        initialized, for ``py_start_method="fork"``). fastload starts no processes: such a source's callback
        is called in the pipeline's process, in order, so its batches are the ones DALI's workers give (DALI
        asks parallel callbacks to depend only on their SampleInfo / BatchInfo). Builds the pipeline, as
        DALI builds its graph here; calling it again, or after ``build()``, does nothing."""
        self.build()

    # -- running: DALI's engine (run = schedule_run + outputs; a first schedule prefetches)
    def run(self, cuda_stream=None, /, **pipeline_inputs) -> tuple:
        """The next batch: one TensorList per output (StopIteration when an external source ran out).
        ``pipeline_inputs``: batches for external sources by name, fed first (DALI asks
        ``prefetch_queue_depth=1`` or ``exec_pipelined=False`` for them)."""
        if pipeline_inputs and self._exec_pipelined and max(self._cpu_queue_size, self._gpu_queue_size) > 1:
            raise RuntimeError(f"run() with pipeline inputs ({', '.join(pipeline_inputs)}) needs "
                               f"prefetch_queue_depth=1 or exec_pipelined=False in the Pipeline (as in DALI)")
        self.build()
        for name, value in pipeline_inputs.items():
            self.feed_input(name, value)
        with self._check_api_type_scope(PipelineAPIType.BASIC):
            self.schedule_run()
            return self.outputs(cuda_stream)

    def _check_api_type_scope(self, api_type: PipelineAPIType):
        """Refuses mixing ``run()`` with ``schedule_run()`` / ``share_outputs()`` (or an iterator's use),
        as DALI does; the calls made inside the returned context are not checked again."""
        if not self._skip_api_check:
            if self._api_type is None:
                self._api_type = api_type
            elif self._api_type != api_type:
                raise RuntimeError(f"Mixing pipeline API type. Currently used: {self._api_type}, but trying to "
                                   f"use {api_type}")

        @contextlib.contextmanager
        def unchecked():
            before, self._skip_api_check = self._skip_api_check, True
            try:
                yield
            finally:
                self._skip_api_check = before
        return unchecked()

    def schedule_run(self) -> None:
        """Run the next iteration (the epoch's first call: ``prefetch_queue_depth`` of them, as DALI's
        pipelined executor prefetches) for ``share_outputs()`` to return; a source that runs out ends the
        scheduling until ``reset()``, and ``share_outputs()`` then raises StopIteration once the batches
        already run are taken."""
        self.build()
        with self._check_api_type_scope(PipelineAPIType.SCHEDULED):
            if self._first_iter and self._exec_pipelined:
                self._prefetch()
            else:
                self._run_once()

    def _prefetch(self) -> None:
        """DALI's: run ``prefetch_queue_depth`` iterations now (each call, as DALI does; loaders written
        for DALI's first versions call it before every ``share_outputs()``). An iteration after the first
        whose external source has nothing fed (and no ``iter_setup`` to feed it) is left for a later
        ``schedule_run()``: DALI would fail on the next ``run()`` instead, when the caller feeds one batch
        per ``run()``."""
        self.build()
        for k in range(max(self._cpu_queue_size, self._gpu_queue_size) if self._exec_pipelined
                       else self._cpu_queue_size):
            if k and self._starved():
                break
            self._first_iter = False
            try:
                self._schedule_one()
            except StopIteration:
                self._last_iter = True
                break

    def _starved(self) -> bool:
        """Whether an external source fed only by ``feed_input`` has no batch queued, with nothing to feed it."""
        return type(self).iter_setup is Pipeline.iter_setup and any(
            op.source is None and not self._fed.get(op.id) for op in self._sources)

    def _run_once(self) -> None:
        """DALI's: run one iteration, unless a source ran out this epoch."""
        self.build()
        if self._last_iter:
            return
        try:
            self._schedule_one()
        except StopIteration:
            self._last_iter = True

    def _run(self) -> None:
        """DALI's deprecated name of ``schedule_run()``."""
        _deprecated("_run", "schedule_run")
        self.schedule_run()

    def _schedule_one(self) -> None:
        self._scheduled.append(self._iter_setup())
        self._batches_to_consume += 1

    def _iter_setup(self) -> dict:
        """One iteration's inputs, as DALI gathers them: every source's callback is called (any one that
        runs out ends the epoch: StopIteration, the others' batches dropped), then ``iter_setup()``, then
        each external source takes its batch (a callback's, or the oldest one ``feed_input`` gave)."""
        self.build()
        batches, ran_out = {}, False
        for feed in self._feeds:
            try:
                batches[feed.op.id] = feed.get_batch(self._max_batch_size, self._epoch_idx)
            except StopIteration:
                ran_out = True
        if ran_out:
            raise StopIteration
        self.iter_setup()
        inputs = {}
        for op in self._sources:
            fed = self._fed.get(op.id)
            if op.id in batches:
                inputs[op.id] = batches[op.id]
            elif fed:
                inputs[op.id] = fed.popleft()
            else:
                raise RuntimeError(f"external source {op.feed_name!r} has no data: feed it with "
                                   f"feed_input() (in iter_setup(), or before run()), or give it a source")
        return inputs

    def share_outputs(self, cuda_stream=None) -> tuple:
        """The oldest iteration ``schedule_run()`` ran, as TensorLists (StopIteration when there is none,
        as in DALI). They stay valid after ``release_outputs()``, as DALI's do with its default executor."""
        with self._check_api_type_scope(PipelineAPIType.SCHEDULED):
            self._consumer_iter += 1
            if self._batches_to_consume == 0:
                raise StopIteration
            self._batches_to_consume -= 1
            return self._outputs_of(self._scheduled.popleft())

    def _share_outputs(self) -> tuple:
        """DALI's deprecated name of ``share_outputs()`` (returning the outputs, as its first versions did,
        which the loaders written for them read)."""
        _deprecated("_share_outputs", "share_outputs")
        return self.share_outputs()

    def outputs(self, cuda_stream=None) -> tuple:
        """DALI's ``release_outputs()`` then ``share_outputs()``."""
        with self._check_api_type_scope(PipelineAPIType.SCHEDULED):
            self.release_outputs()
            return self.share_outputs(cuda_stream)

    def release_outputs(self) -> None:
        """Accepted as DALI's: fastload's outputs are torch tensors, freed when nothing refers to them."""
        self.build()
        with self._check_api_type_scope(PipelineAPIType.SCHEDULED):
            pass

    def _release_outputs(self) -> None:
        """DALI's deprecated name of ``release_outputs()``."""
        _deprecated("_release_outputs", "release_outputs")
        self.release_outputs()

    def empty(self) -> bool:
        """Whether no batch is scheduled and not yet taken (DALI's)."""
        return self._batches_to_consume == 0

    def reset(self) -> None:
        """After a source ran out (else nothing, as in DALI): start the sources' next epoch. A reader is
        not rewound: it reads on, as DALI's do."""
        if not self._last_iter:
            return
        self._first_iter, self._last_iter = True, False
        self._epoch_idx += 1
        if self._consumer_iter > 0:
            self._consumer_epoch_idx += 1
            self._consumer_iter = 0
        for feed in self._feeds:
            feed.reset_indices()

    def _outputs_of(self, inputs: dict) -> tuple:
        """The outputs of one scheduled iteration, given its external sources' batches."""
        self.build()
        self._runs += 1
        if self._loader is not None and self._reading is None:  # readers only: the loader ran the graph
            if self._batches is None:
                self._batches = _endless(self._loader)
            batch = next(self._batches)
            return self._checked(self._as_outputs(batch) if self._lowered is not None else batch)
        given = None
        if self._reading is not None:
            if self._batches is None:
                self._batches = _endless(self._loader)
            read = next(self._batches)
            given = [dict(zip(self._reading.outputs, sample)) for sample in zip(*(out.tensors for out in read))]
        return self._checked(self._run_graph(inputs, given))

    def _checked(self, outputs) -> tuple:
        """``outputs``, after checking them against the Pipeline's output_dtype, output_layout and
        output_ndim (one value for all outputs, or one per output; None: any), which DALI enforces."""
        for what, declared in self._declared.items():
            if declared is None:
                continue
            found, normal = _DECLARED[what]
            wanted = list(declared) if isinstance(declared, (list, tuple)) else [declared] * len(outputs)
            if len(wanted) != len(outputs):
                raise ValueError(f"Pipeline({what}={declared!r}): {len(wanted)} values for {len(outputs)} outputs")
            for at, (expected, out) in enumerate(zip(wanted, outputs)):
                if expected is not None and len(out) and found(out) != {normal(expected)}:
                    raise TypeError(f"Pipeline({what}=...): output {at} has {what[7:]} {sorted(found(out), key=str)}, "
                                    f"not the declared {normal(expected)!r} (DALI refuses it too)")
        return outputs

    def _as_outputs(self, batch) -> tuple:
        """The fast path's [images, labels] as the graph's outputs: images as one dense CHW or HWC batch,
        labels int32 of shape [N, 1] (DALI's reader labels), each where its output node says."""
        images, labels = batch
        outputs = [None, None]
        nodes = self._graph.outputs
        lowered = self._lowered
        if lowered.layout == "HWC":  # a channels_last batch: its NHWC view is contiguous
            images = images.permute(0, 2, 3, 1)
        for at, tensor, layout in ((lowered.image_output, images, lowered.layout),
                                   (lowered.label_output, labels.to(torch.int32).reshape(-1, 1), "")):
            device = nodes[at].device
            if device == "cpu" and tensor.device.type != "cpu":  # (the device path delivers both on the GPU)
                tensor = tensor.cpu()
            outputs[at] = TensorList.from_batch(tensor, layout, device)
        return tuple(outputs)

    def _run_graph(self, inputs: dict, given: list | None) -> tuple:
        """The graph over one batch here, each sample with its external values (and its reader values)."""
        sizes = {len(v) for v in inputs.values()} | ({len(given)} if given is not None else set())
        size = sizes.pop() if len(sizes) == 1 else None
        if size is None and not sizes:
            size = self._batch_size  # no input at all: random operators and constants
        if size is None:
            what = {op.feed_name or f"external_source {k}": len(inputs[op.id])
                    for k, op in enumerate(self._sources)}
            if given is not None:
                what["the readers"] = len(given)
            raise RuntimeError(f"the pipeline's inputs gave batches of different sizes: {what}")
        if size > self._batch_size:
            raise RuntimeError(f"an external source gave {size} samples, more than batch_size={self._batch_size}")
        return external_batch(self._graph, inputs, given, size, self._seed, self._runs - 1, self._gpu,
                              self._num_threads, TensorList)

    # -- readers
    def _reader_spec(self, name):
        """The spec of the reader named ``name`` (None: the only one), as DALI finds it by name."""
        self.build()
        specs = [op.reader for op in self._readers]
        if name is None and len(specs) == 1:
            return specs[0]
        for spec in specs:
            if spec.name == name:
                return spec
        raise KeyError(f"no reader named {name!r} in this pipeline (readers: {[s.name for s in specs]})")

    def epoch_size(self, name=None):
        """The reader's ``epoch_size_padded`` (a dict by reader name when no name is given), as DALI's:
        its dataset's size, with pad_last_batch rounded up to a whole number per shard."""
        if name is None:
            return {reader: meta["epoch_size_padded"] for reader, meta in self.reader_meta().items()}
        return self.reader_meta(name)["epoch_size_padded"]

    def reader_meta(self, name=None) -> dict:
        """DALI's reader metadata (epoch_size, epoch_size_padded, number_of_shards, shard_id, pad_last_batch,
        stick_to_shard), of one reader, or a dict by reader name."""
        if name is None:
            return {op.reader.name: self._loader.dataset.meta(op.reader) for op in self._readers_built()}
        spec = self._reader_spec(name)  # first: a pipeline without that reader (or any) is a KeyError
        return self._loader.dataset.meta(spec)

    def _readers_built(self) -> list:
        self.build()
        return self._readers

    @property
    def loader(self) -> DataLoader | None:
        """The fastload DataLoader that runs a reader pipeline (its ``stats`` say where time goes)."""
        self.build()
        return self._loader


_warned_unfused: set[str] = set()


def _warn_unfused(what: str) -> None:
    """Once per distinct graph shape: which operators do not fuse, and why (also in ``loader.stats``)."""
    if what not in _warned_unfused:
        _warned_unfused.add(what)
        warnings.warn(f"fastload.compat.dali: {what}", stacklevel=4)


def _endless(loader):
    """The reader's stream: the loader's epochs back to back (the order carries the position on)."""
    while True:
        yield from loader


def _samples(data, dtype=None) -> list[torch.Tensor]:
    """A batch given as one array (first dimension: samples) or a list of per-sample arrays/bytes."""
    if isinstance(data, TensorList):
        return list(data.tensors)
    if isinstance(data, (list, tuple)):
        return [_tensor(x, dtype) for x in data]
    tensor = _tensor(data, dtype)
    return list(tensor.unbind(0))


def _tensor(value, dtype=None) -> torch.Tensor:
    """One sample as a tensor. Python numbers and lists take the source's ``dtype``; a numpy array, tensor
    or bytes of another dtype is refused, as DALI refuses it, rather than converted."""
    if isinstance(value, (bytes, bytearray)):
        tensor = torch.frombuffer(bytearray(value), dtype=torch.uint8)
    elif isinstance(value, np.ndarray) and not value.flags.writeable:  # (np.frombuffer of a file's bytes)
        tensor = torch.from_numpy(value.copy())  # the source may reuse it, as DALI copies it too
    else:
        tensor = torch.as_tensor(value)
    if dtype is None or tensor.dtype == dtype:
        return tensor
    if isinstance(value, (np.ndarray, np.generic, torch.Tensor, bytes, bytearray)):
        raise TypeError(f"external_source: the source gave {tensor.dtype} data where its dtype is {dtype}")
    return tensor.to(dtype)


def _group(batch, op: ExternalSourceOp, batched: bool = False) -> list:
    """A source's batch as a list of per-sample values; with ``num_outputs``, a tuple of outputs each.
    Samples of another number of dimensions than the source's ``ndim`` are refused, as in DALI."""
    if op.grouped:
        outputs = [_samples(b, d) for b, d in zip(batch, op.output_dtypes)] if batched else \
            [_samples([s[k] for s in batch], op.output_dtypes[k]) for k in range(op.num_outputs)]
        samples = list(zip(*outputs))
        flat = [t for group in samples for t in group]
    else:
        samples = flat = _samples(batch, op.output_dtypes[0])
    if op.ndim is not None and any(t.dim() != op.ndim for t in flat):
        raise ValueError(f"external_source(ndim={op.ndim}): the source gave samples of "
                         f"{sorted({t.dim() for t in flat})} dimensions")
    return samples


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"{name} is deprecated, please use {instead} instead", DeprecationWarning, stacklevel=3)


class _SourceFeed:
    """One ``external_source`` with a ``source``, called as DALI calls it (its ``_ExternalSourceGroup``):
    an iterable or generator function is read through one iterator made at build (``cycle`` rewinds it:
    quietly, or raising StopIteration once per rewind with "raise"; without ``cycle`` it stays exhausted,
    after ``reset()`` too); a callable taking an argument is given the iteration (a ``BatchInfo`` with
    ``batch_info=True``) or, per sample, a ``SampleInfo``. ``parallel=True`` sources are called the same
    way, in this process and in order, which gives DALI's batches where the callback depends only on its
    argument, as DALI asks of parallel callbacks."""

    def __init__(self, op: ExternalSourceOp):
        self.op, self.current_iter, self.current_sample = op, 0, 0
        self.callback, self.accepts_arg = _callback(op.source, op.cycle)
        if self.accepts_arg is None and not op.batch:
            raise TypeError(f"external_source(batch=False) needs a callable source taking a SampleInfo, not "
                            f"{type(op.source).__name__}")

    def reset_indices(self) -> None:
        self.current_iter = self.current_sample = 0

    def get_batch(self, batch_size: int, epoch_idx: int) -> list:
        """The iteration's batch as per-sample values (StopIteration when the source ran out)."""
        op = self.op
        try:
            if op.batch:
                if not self.accepts_arg:
                    batch = self.callback()
                else:
                    batch = self.callback(BatchInfo(self.current_iter, epoch_idx) if op.batch_info
                                          else self.current_iter)
            else:
                batch = [self.callback(SampleInfo(self.current_sample + i, i, self.current_iter, epoch_idx))
                         for i in range(batch_size)]
            self.current_sample += batch_size
            self.current_iter += 1
        except StopIteration:
            self.reset_indices()
            raise
        return _group(batch, op, batched=op.batch)


def _callback(source, cycle):
    """(a function giving the source's next item, whether it takes an argument: None for an iterable)."""
    if cycle not in (None, False, True, "no", "quiet", "raise"):
        raise ValueError(f"external_source: cycle={cycle!r}: it is one of 'no' (False, None), 'quiet' (True) "
                         f"and 'raise'")
    cycling = cycle not in (None, False, "no")
    if inspect.isgenerator(source) and cycling:
        raise TypeError("external_source: a generator cannot be cycled through: pass its generator function")
    if _is_generator_function(source):
        if cycling:
            return _Rewinding(source, cycle == "raise").next, None
        iterator = iter(source())
        return (lambda: next(iterator)), None
    if hasattr(source, "__iter__"):
        if cycling:
            return _Rewinding(lambda: source, cycle == "raise").next, None
        iterator = iter(source)
        return (lambda: next(iterator)), None
    if cycle is not None:
        raise ValueError("external_source: cycle is only valid for an iterable source (or a generator function)")
    if not callable(source):
        raise TypeError(f"external_source: the source must be callable, iterable or a generator function, not "
                        f"{type(source).__name__}")
    return source, _takes_argument(source)


class _Rewinding:
    """An iterable read again from its start when it runs out (``make()`` gives a fresh iterator source)."""

    def __init__(self, make, signal: bool):
        self.make, self.signal = make, signal
        self.iterator = iter(make())

    def next(self):
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.make())
            if self.signal:
                raise
            return next(self.iterator)


def _is_generator_function(source) -> bool:
    """A generator function, a partial of one, or an object whose ``__call__`` is one (as DALI tells them)."""
    if inspect.isgeneratorfunction(source):
        return True
    if isinstance(source, functools.partial):
        return _is_generator_function(source.func)
    if source is None or inspect.isfunction(source) or inspect.ismethod(source):
        return False
    call = getattr(source, "__call__", None)
    return call is not None and call is not source and inspect.isgeneratorfunction(call)


def _takes_argument(source) -> bool:
    """Whether the callable takes the iteration / sample argument: 0 or 1 positional parameters, as DALI
    allows (anything else is a TypeError naming it)."""
    try:
        parameters = list(inspect.signature(source).parameters.values())
    except (TypeError, ValueError):
        return False  # a builtin without a signature: called with no argument
    for p in parameters:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"external_source: the source callable takes {p.name!r} ({p.kind.description}); "
                            f"it must take 0 or 1 positional arguments")
    if len(parameters) > 1:
        raise TypeError(f"external_source: the source callable takes {len(parameters)} arguments; it must take "
                        f"0 or 1 (the iteration, BatchInfo or SampleInfo)")
    return len(parameters) == 1


def split_kwargs(name: str, function_args, pipeline_args, decorated: dict, given: dict) -> tuple[dict, dict]:
    """(the Pipeline's keyword arguments, the function's): a call's keyword goes to the function when it
    takes it, else to the Pipeline when that takes it (over the decorator's), else it is a TypeError -- the
    split of DALI's and rocAL's pipeline_def."""
    pipe, function = dict(decorated), {}
    for key, value in given.items():
        if key in function_args:
            function[key] = value
        elif key in pipeline_args:
            pipe[key] = value
        else:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
    return pipe, function


def pipeline_def(fn=None, *, enable_conditionals=False, **pipeline_kwargs):
    """DALI's decorator: calling the function makes a Pipeline whose outputs are what it returns."""
    def decorate(func):
        names = inspect.signature(func).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in names.values()):
            raise TypeError(f"Using variadic keyword argument in a graph-defining function is not allowed "
                            f"({func.__name__})")
        ctor = inspect.signature(Pipeline.__init__).parameters
        converted = []  # func with its `if`/`and`/`or`/`not` rewritten (conditionals.convert), made once

        @functools.wraps(func)
        def create_pipeline(*args, **kwargs):
            conditionals = kwargs.pop("enable_conditionals", enable_conditionals) \
                if "enable_conditionals" not in names else enable_conditionals
            kwargs.pop("debug", None) if "debug" not in names else None
            pipe_args, fn_args = split_kwargs(func.__name__, names, ctor, pipeline_kwargs, kwargs)
            pipe = Pipeline(**pipe_args)
            pipe._conditionals = conditionals
            body = func
            if conditionals:
                from . import conditionals as conversion
                if not converted:
                    converted.append(conversion.convert(func))
                body = converted[0]
            with pipe:
                outputs = body(*args, **fn_args)
            pipe.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else [outputs]))
            return pipe
        return create_pipeline
    return decorate(fn) if fn is not None else decorate


def _experimental_pipeline_def(fn=None, *, enable_conditionals=False, debug=False, **pipeline_kwargs):
    """``nvidia.dali.pipeline.experimental.pipeline_def``: ``pipeline_def`` with DALI's experimental switches;
    debug mode, which fastload does not have, is refused."""
    if debug:
        raise NotImplementedError("fastload.compat.dali: pipeline debug mode (debug=True) is not supported; "
                                  "run the pipeline and inspect pipe.run()'s outputs instead")
    return pipeline_def(fn, enable_conditionals=enable_conditionals, **pipeline_kwargs)


# DALI's ``nvidia.dali.pipeline.experimental`` module, made here (a file of its own would import this one
# back), importable as a submodule: ``from fastload.compat.dali.pipeline.experimental import pipeline_def``
experimental = ModuleType(__name__ + ".experimental", "DALI's nvidia.dali.pipeline.experimental: "
                                "pipeline_def with DALI's experimental switches (debug mode refused).")
experimental.pipeline_def = _experimental_pipeline_def
experimental.__all__ = ["pipeline_def"]
experimental.__getattr__ = refuse(experimental.__name__, "nvidia.dali.pipeline.experimental")
sys.modules[experimental.__name__] = experimental
__all__ = ["Pipeline", "pipeline_def", "experimental"]

__getattr__ = refuse(__name__, "nvidia.dali.pipeline")  # any other name: NotImplementedError naming it

# fn._conditional (DALI's split / merge / not_), put on the fn namespace here: fn/__init__.py lists the
# operator table's names only
from .fn import _conditional  # noqa: E402,F401
