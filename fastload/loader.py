"""fastload.DataLoader: torch's DataLoader, with threads instead of processes and a fast path for images.

Construction validates arguments exactly as torch does (it is torch's own
``__init__``), then picks a path:

* fast path -- a fastload source, or torchvision's ImageFolder/DatasetFolder
  with its default loader, whose transform compiles to a ``Plan``: read,
  decode (DCT-scaled) and crop/resize/flip each sample in a thread, then
  convert and normalize each batch once (``batch.FastPath``);
* device path -- the fast path with ``device="cuda"``: reader threads read
  files and draw each sample's augmentation; one device-stage thread
  decodes the batch on the GPU (nvJPEG) and runs the fused augmentation
  kernel into a preallocated output slot on a side stream
  (``fastload.device``);
* generic path -- anything else: threads call ``dataset[i]`` (or iterate an
  IterableDataset) and ``collate_fn`` batches, so the samples are the ones
  torch's DataLoader would give.

Each ``iter()`` is one epoch: it builds that epoch's jobs and hands them to
a ``ThreadPipeline``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
import warnings
import weakref
from typing import Any, Iterator

import torch
import torchvision
from torch.utils.data import IterableDataset, RandomSampler, Subset, default_collate
from torch.utils.data.distributed import DistributedSampler
from torchvision.datasets.folder import DatasetFolder, default_loader, pil_loader

from .batch import FastPath, output_pool
from . import device as device_stage
from .decode import DECODE_DEVICES, DECODERS, DEFAULT_MAX_PIXELS, choose_decoder
from .deliver import OutputPool, collate, to_device
from .order import dist_info, num_shard_samples, shard_indices
from .pipeline import END, SKIP, Job, ThreadPipeline
from .sources import Source
from .stats import Stats
from .transforms import UnsupportedTransform, compile_plan
from .workers import ThreadWorkers, current_dataset, install_worker_info
from fastload.kernels import augment as augment_kernel


class DataLoader(torch.utils.data.DataLoader):
    """A drop-in ``torch.utils.data.DataLoader`` that loads with threads.

    Takes torch's arguments with torch's meanings, except that
    ``num_workers`` counts threads in this process (no worker processes,
    no pickling) and ``shuffle`` on a fastload source is passed on to it.

    Args:
        device: deliver batches on this device (e.g. "cuda"). On a CUDA
            device the fast path decodes JPEGs there (nvJPEG) and augments
            each batch in one fused kernel (``loader.device_path``; see
            ``fastload.device``); other transforms travel as uint8 and are
            converted there. A plain "cuda" under torchrun means this
            process's GPU: cuda:LOCAL_RANK.
        seed: seed of the sample order of fastload sources and of every
            sample's augmentation. Default: the fastload source's ``seed``;
            without one, the order's is 0 (DistributedSampler's) and the
            augmentation's is ``torch.initial_seed()`` (the ``generator``'s,
            if one is given) when the loader is first iterated, so
            ``torch.manual_seed`` changes it and a fixed seed reproduces it. Augmentation is a pure function of (seed, epoch,
            sample index); ``state_dict`` records its seed.
        on_error: "raise" (default) raises ``fastload.DecodeError`` naming the
            file; "skip" replaces a bad sample with the next one and records
            it in ``loader.stats.skipped``.
        rank, world_size: override the rank and world size from
            torch.distributed / torchrun. On a map-style dataset without a
            sampler they make the loader use a DistributedSampler.
        max_skips: with on_error="skip", a budget per epoch: a count, or a
            fraction of the epoch's samples; one skip more raises
            ``fastload.LoaderError``. None (default): no limit.
        on_corrupt: a JPEG that libjpeg decodes while warning about corrupt
            data ("Corrupt JPEG data: ...", which torchvision prints to stderr
            and otherwise ignores): "deliver" (default) delivers it, as
            torchvision does, and records it in ``loader.stats.corrupt``;
            "error" treats it as a bad sample (raised, or skipped with
            on_error="skip").
        max_image_pixels: refuse images whose header claims more pixels.
        dct_scaling: decode JPEGs at 1/2, 1/4 or 1/8 scale when that still
            covers the output (faster; pixels differ slightly from a full
            decode). False gives torchvision's pixels exactly.
        decode_device: with ``device="cuda"``, where JPEGs are decoded:
            "auto" (default: on the GPU where this torch/torchvision can --
            not on ROCm, say -- else on the CPU), "cuda" (an error where it
            cannot) or "cpu" (decode on the CPU, augment on the GPU).
        decoder: force a decoding backend: "nvjpeg" (torchvision's),
            "torchcodec" (``pip install fastload[torchcodec]``) or "cpu".
            By default, with both GPU backends installed, the first batch
            measures which is faster.
        device_prefetch: with ``device="cuda"``, how many batches are
            decoded and augmented on the GPU ahead of the training loop
            (default 2). This is the knob for GPU memory: the loader keeps
            ``device_prefetch + 2`` output batches there, plus one batch of
            decoded images while it works.
        memory_format: of the image batches: ``torch.contiguous_format``
            (default) or ``torch.channels_last``, which the device path
            writes directly (the CPU paths convert each batch).

    The epoch of an iteration is the one last given to ``set_epoch`` (on the
    loader or on its source) since the previous iteration, else the previous
    epoch + 1, so shuffling and augmentation change every epoch even when
    ``set_epoch`` is never called.
    """

    # Hugging Face Accelerate reads these two attributes. ``prepare()`` returns a loader it finds
    # already prepared unchanged: one that shards itself (a fastload source, a DistributedSampler,
    # or a single process) keeps its fast path instead of being rebuilt as a torch DataLoader and
    # sharded a second time. ``save_state()`` / ``load_state()`` store ``state_dict()`` when
    # ``use_stateful_dataloader`` is set, so a resumed run continues mid-epoch.
    use_stateful_dataloader = True

    @property
    def _is_accelerate_prepared(self) -> bool:
        if self._accelerate_prepared is not None:
            return self._accelerate_prepared
        return (isinstance(self.dataset, Source) or isinstance(self.sampler, DistributedSampler)
                or dist_info(self.rank, self.world_size)[1] == 1)

    @_is_accelerate_prepared.setter
    def _is_accelerate_prepared(self, value: bool) -> None:
        self._accelerate_prepared = value

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True, device=None,
                 seed: int | None = None, on_error: str = "raise", rank: int | None = None,
                 world_size: int | None = None, max_image_pixels: int | None = DEFAULT_MAX_PIXELS,
                 dct_scaling: bool = True, max_skips: int | float | None = None,
                 on_corrupt: str = "deliver", decode_device: str = "auto", decoder: str | None = None,
                 device_prefetch: int = 2, memory_format: torch.memory_format = torch.contiguous_format):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if on_corrupt not in ("deliver", "error"):
            raise ValueError(f"on_corrupt must be 'deliver' or 'error', got {on_corrupt!r}")
        if max_skips is not None and not (isinstance(max_skips, int) and max_skips >= 0
                                          or isinstance(max_skips, float) and 0 <= max_skips < 1):
            raise ValueError(f"max_skips must be a count >= 0 or a fraction in [0, 1), got {max_skips!r}")
        if decode_device not in DECODE_DEVICES:
            raise ValueError(f"decode_device must be one of {DECODE_DEVICES}, got {decode_device!r}")
        if decoder not in (None, "cpu", *DECODERS):
            raise ValueError(f"decoder must be None, 'cpu', {', '.join(map(repr, DECODERS))}; got {decoder!r}")
        if not isinstance(device_prefetch, int) or device_prefetch < 1:
            raise ValueError(f"device_prefetch must be an int >= 1, got {device_prefetch!r}")
        if memory_format not in (torch.contiguous_format, torch.channels_last):
            raise ValueError(f"memory_format must be torch.contiguous_format or torch.channels_last, "
                             f"got {memory_format!r}")
        self.source_shuffle = None
        if isinstance(dataset, Source):
            # torch refuses shuffle for an IterableDataset; a source shuffles itself.
            self.source_shuffle, shuffle = shuffle, None
        elif ((rank is not None or world_size is not None) and sampler is None
              and batch_sampler is None and not isinstance(dataset, IterableDataset)):
            r, w = dist_info(rank, world_size)
            sampler = DistributedSampler(dataset, num_replicas=w, rank=r, shuffle=bool(shuffle),
                                         seed=seed or 0)
            shuffle = None
        super().__init__(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
                         collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
                         multiprocessing_context, generator, prefetch_factor=prefetch_factor,
                         persistent_workers=persistent_workers,
                         pin_memory_device=pin_memory_device, in_order=in_order)
        self.device = _local_device(device)
        self._accelerate_prepared: bool | None = None
        self.seed = seed
        self.on_error = on_error
        self.rank, self.world_size = rank, world_size
        self.max_image_pixels = max_image_pixels
        self.dct_scaling = dct_scaling
        self.max_skips = max_skips
        self.on_corrupt = on_corrupt
        self.decode_device, self.decoder = decode_device, decoder
        self.device_prefetch, self.memory_format = device_prefetch, memory_format
        self.stats = Stats()
        self._resume: dict | None = None
        self._augment_seed: int | None = None  # fixed at the first iteration (see ``seed``)
        self.base_seed: int | None = None  # torch's per-epoch draw (once, with persistent_workers)
        self._workers: ThreadWorkers | None = None  # the loader threads' worker identities
        self._yielded = 0  # batches handed out this epoch (torch's IterableDataset length warning)
        self._position = {"epoch": None, "batches": 0, "finished": False, "rng": None}
        self._epoch = -1
        self._epoch_was_set = False
        self._source_epoch_seen = getattr(dataset, "epoch", None)
        self._iterators: weakref.WeakSet = weakref.WeakSet()
        self._fast = self._fast_path_inputs()
        self.device_path = self._uses_device_path()
        self._device_slots = None  # the device path's output batches, made at the first iteration

    def _uses_device_path(self) -> bool:
        """Whether batches are decoded and augmented on ``device``; an error when GPU decode was asked
        for and cannot happen."""
        reason = None
        if self._fast is None:
            reason = "the dataset or its transform does not take the fast path"
        elif self.device is None or self.device.type not in device_stage.KERNEL_DEVICE_TYPES:
            reason = "device is not a CUDA device"
        elif augment_kernel.triton is None:
            reason = "triton is not installed"
        else:
            reason = device_stage.unsupported(self._fast[1])
            reason = reason and f"the fused kernel cannot run {reason}"
        if reason and (self.decode_device == "cuda" or self.decoder in DECODERS):
            raise ValueError(f"decode_device={self.decode_device!r}, decoder={self.decoder!r}: GPU decoding "
                             f"runs on the device path, and {reason}")
        if reason is None:  # an error now, not at the first batch, when the asked-for decoder is missing
            self._decoders = choose_decoder(self.decode_device, self.device, self.max_image_pixels, self.decoder)
        return reason is None

    # -- path selection ---------------------------------------------------------------
    def _fast_path_inputs(self):
        """(samples, plan, target_transform) when the fast path applies, else None (warning once).

        A ``Subset`` (``random_split``'s output) of a dataset that takes it
        takes it too, over that subset's samples in its index order.
        """
        dataset, indices = _unwrap_subsets(self.dataset)
        if isinstance(dataset, Subset):  # one that overrides how it fetches
            if not isinstance(_unwrap_subsets(dataset.dataset)[0], (Source, DatasetFolder)):
                return None
            warnings.warn(f"fastload: {type(dataset).__name__} overrides {', '.join(_overridden(dataset, Subset))}; "
                          f"running it as given (correct, slower) instead of the fast path", stacklevel=3)
            return None
        if isinstance(dataset, Source):
            if indices is not None:
                return None
        elif isinstance(dataset, DatasetFolder):
            if dataset.loader not in (default_loader, pil_loader) or torchvision.get_image_backend() != "PIL":
                return None
        else:
            return None
        if self.batch_size is None:
            return None
        overridden = _overridden(dataset, Source if isinstance(dataset, Source) else DatasetFolder)
        if overridden:
            warnings.warn(f"fastload: {type(dataset).__name__} overrides {', '.join(overridden)}; running it as "
                          f"given (correct, slower) instead of the fast path", stacklevel=3)
            return None
        try:
            plan = compile_plan(dataset.transform)
        except UnsupportedTransform as reason:
            warnings.warn(f"fastload: the fast path cannot run {reason}; running "
                          f"{type(dataset).__name__}'s transform as given (correct, slower)",
                          stacklevel=3)
            return None
        samples = dataset.samples if indices is None else [dataset.samples[i] for i in indices]
        return samples, plan, dataset.target_transform

    @property
    def fast_path(self) -> bool:
        """Whether this loader decodes and augments on the fast path."""
        return self._fast is not None

    # -- epochs ---------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next iteration (order and augmentation); forwarded to a sampler that has one."""
        self._epoch, self._epoch_was_set = epoch, True
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _next_epoch(self) -> int:
        source_epoch = getattr(self.dataset, "epoch", None)
        if self._epoch_was_set:
            self._epoch_was_set = False
        elif isinstance(self.dataset, Source) and source_epoch != self._source_epoch_seen:
            self._epoch = source_epoch
        else:
            self._epoch += 1
        self._source_epoch_seen = source_epoch
        return self._epoch

    def _shard_rank_world(self) -> tuple[int, int]:
        """(rank, world_size) of a fastload source's shard: this loader's overrides, else the source's."""
        source = self.dataset
        return dist_info(self.rank if self.rank is not None else source.rank,
                         self.world_size if self.world_size is not None else source.world_size)

    def _source_order(self, epoch: int) -> list[int]:
        source = self.dataset
        rank, world = self._shard_rank_world()
        shuffle = source.shuffle if self.source_shuffle is None else self.source_shuffle
        return shard_indices(len(source.samples), rank=rank, world_size=world, shuffle=shuffle,
                             seed=self._seed(), epoch=epoch, drop_last=source.drop_last,
                             even_shards=source.even_shards)

    def __len__(self) -> int:
        """Batches per epoch; for a fastload source, of this loader's shard (its rank/world overrides)."""
        if not isinstance(self.dataset, Source):
            return super().__len__()
        source = self.dataset
        rank, world = self._shard_rank_world()
        samples = num_shard_samples(len(source.samples), world, source.drop_last, rank, source.even_shards)
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def check_worker_number_rationality(self) -> None:
        """No-op: torch warns about worker *processes* beyond the core count; these are threads."""

    def _seed(self) -> int:
        """The seed of a fastload source's sample order."""
        if self.seed is not None:
            return self.seed
        return getattr(self.dataset, "seed", None) or 0

    def _augmentation_seed(self) -> int:
        """The seed of every sample's augmentation: ``seed``, else the source's, else torch's initial seed;
        fixed once read."""
        if self._augment_seed is None:
            source_seed = getattr(self.dataset, "seed", None) if isinstance(self.dataset, Source) else None
            if self.seed is not None or source_seed is not None:
                self._augment_seed = self._seed()
            else:
                generator = self.generator if self.generator is not None else torch.default_generator
                self._augment_seed = generator.initial_seed()
        return self._augment_seed

    # -- iteration ------------------------------------------------------------------------
    def __iter__(self) -> ThreadPipeline:
        skip, resumed_rng = self._apply_resume()
        self._refresh_path()
        epoch = self._next_epoch()
        self.stats.reset()
        self._yielded = 0
        self._warn_as_torch()
        threads = self.num_workers
        iterable = isinstance(self.dataset, IterableDataset)
        rng = resumed_rng if resumed_rng is not None else self._rng_state()
        with self._rng_restored(resumed_rng):
            batches = None if iterable else iter(self._index_sampler)
            # As torch's iterator does, draw a base seed after creating the sampler
            # iterator (a RandomSampler draws its own seed lazily, at the first batch):
            # the global RNG or generator then advances exactly as under torch, so a
            # shuffled epoch has torch's order, and a new one each epoch.
            if not (self.persistent_workers and self._workers is not None):  # torch's persistent iterator
                self.base_seed = torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
            if resumed_rng is not None:  # make the sampler draw from the saved state now
                first = next(batches, None)
                batches = itertools.chain([first] if first is not None else [], batches)
        self._position = {"epoch": epoch, "batches": skip, "finished": False, "rng": rng}
        if threads and not (self.persistent_workers and self._workers is not None):
            install_worker_info()
            self._workers = ThreadWorkers(self.dataset, threads, self.base_seed, self.worker_init_fn,
                                          copy_dataset=not isinstance(self.dataset, Source))
        workers = self._workers if threads else None
        fast_forward = 0
        pinned = False
        if iterable and not isinstance(self.dataset, Source):
            jobs, fast_forward, pinned = self._iterable_jobs(threads), skip, True
        elif isinstance(self.dataset, Source):
            self._warn_if_uneven()
            order = self._source_order(epoch)
            index_batches = itertools.islice(self._batches_of(order), skip, None)
            jobs = (self._fast_jobs if self._fast is not None else self._map_jobs)(epoch, index_batches, order)
        else:
            batches = itertools.islice(batches, skip, None)
            jobs = (self._fast_jobs if self._fast is not None else self._map_jobs)(epoch, batches, None)
        in_flight = (self.prefetch_factor or 2) * max(threads, 1)
        device_path = {}
        if self.device_path:  # encoded batches in flight: those on the GPU, and a few being read
            in_flight = self.device_prefetch + (self.prefetch_factor or 2)
            device_path = dict(serial_finish=self.device_prefetch, handover=self._device_run.handover)
        try:
            length = len(self) - skip + fast_forward
        except TypeError:
            length = None
        pipeline = ThreadPipeline(jobs, threads, in_flight, self.timeout,
                                  on_wait=lambda seconds: self.stats.add("wait", seconds),
                                  thread_init=workers.init_thread if workers else None, length=length,
                                  on_deliver=self._delivered, pinned=pinned, **device_path)
        self._iterators.add(pipeline)
        for _ in range(fast_forward):  # a plain IterableDataset can only be replayed
            if next(pipeline, END) is END:
                break
        self._position["batches"] = skip
        return pipeline

    def _refresh_path(self) -> None:
        """Compile the dataset's transform again: one replaced or changed since the last epoch (progressive
        resizing, a new transform on a split) must change the batches, as it would under torch."""
        fast = self._fast_path_inputs()
        plan = None if fast is None else fast[1]
        changed = plan != (None if self._fast is None else self._fast[1])
        self._fast = fast
        if changed:
            self.device_path = self._uses_device_path()

    def _warn_as_torch(self) -> None:
        """The warnings torch's iterator gives when it starts."""
        if self.pin_memory and self.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                          f"ignore pin_memory_device='{self.pin_memory_device}'.", stacklevel=3)
        if self.pin_memory and not torch.accelerator.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)

    def _warn_if_uneven(self) -> None:
        """Say once that even_shards=False gives ranks different sample (and maybe batch) counts."""
        source = self.dataset
        if getattr(self, "_uneven_warned", False) or source.even_shards:
            return
        rank, world = self._shard_rank_world()
        size, extra = divmod(len(source.samples), world)
        if extra:
            warnings.warn(f"fastload: even_shards=False: ranks 0-{extra - 1} read {size + 1} samples, the "
                          f"others {size} (this is rank {rank}): ranks may run different numbers of batches. "
                          f"Right for evaluation (each sample once); do not run per-batch collectives "
                          f"(DDP training) on this loader", stacklevel=3)
        self._uneven_warned = True

    # -- resume ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this loader is: epoch, batches delivered in it, seed, and the sampler's RNG state.

        Plain Python values only (safe in a torch checkpoint). A fresh loader
        built with the same arguments, given this in ``load_state_dict``,
        yields exactly the batches that were still to come -- pixel for pixel
        on the fast path, whatever its num_workers or prefetch_factor.
        """
        position = dict(self._position)
        if position["epoch"] is None:  # never iterated: resume where a first iteration would start
            position.update(epoch=self._epoch + 1 if not self._epoch_was_set else self._epoch,
                            batches=0, finished=False)
        try:
            samples = len(self.dataset)
        except TypeError:
            samples = None
        return {"version": 1, "epoch": position["epoch"], "batches": position["batches"],
                "finished": position["finished"], "seed": self._seed(),
                "augment_seed": self._augmentation_seed(), "rng": position["rng"],
                "batch_size": self.batch_size, "dataset_len": samples}

    def load_state_dict(self, state: dict) -> None:
        """Make the next iteration continue from ``state`` (from ``state_dict``, possibly of another process)."""
        if state.get("version") != 1:
            raise ValueError(f"not a fastload DataLoader state (version {state.get('version')!r})")
        try:
            samples = len(self.dataset)
        except TypeError:
            samples = None
        if (state["batch_size"], state["dataset_len"]) != (self.batch_size, samples):
            raise ValueError(f"this state was saved with batch_size={state['batch_size']} over "
                             f"{state['dataset_len']} samples; this loader has batch_size={self.batch_size} "
                             f"over {samples}: the remaining batches would not be the same")
        self._resume = dict(state)

    def _apply_resume(self) -> tuple[int, Any]:
        """Set up a pending resume: returns (batches to skip, RNG state to start from)."""
        state, self._resume = self._resume, None
        if state is None:
            return 0, None
        self.seed = state["seed"]
        self._augment_seed = state.get("augment_seed", state["seed"])
        self.set_epoch(state["epoch"] + 1 if state["finished"] else state["epoch"])
        if isinstance(self.dataset, Source):
            self._source_epoch_seen = getattr(self.dataset, "epoch", None)
        if state["finished"]:
            return 0, None
        return state["batches"], state["rng"]

    def _delivered(self, end: bool) -> None:
        if end:
            self._position["finished"] = True
            return
        self._position["batches"] += 1
        self._yielded += 1
        reported = self._IterableDataset_len_called
        if isinstance(self.dataset, IterableDataset) and reported is not None and self._yielded > reported:
            message = (f"Length of IterableDataset {self.dataset} was reported to be {reported}"
                       f"(when accessing len(dataloader)), but {self._yielded} samples have been fetched. ")
            if self.num_workers > 0:
                message += ("For multiprocessing data-loading, this could be caused by not properly configuring "
                            "the IterableDataset replica at each worker. Please see "
                            "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset "
                            "for examples.")
            warnings.warn(message, stacklevel=3)

    def _rng_state(self) -> dict | None:
        """The RNG the sampler draws from, before it draws: the loader's generator, else the global one."""
        if isinstance(self.dataset, IterableDataset) or not isinstance(self.sampler, RandomSampler):
            return None
        if self.generator is not None:
            return {"generator": self.generator.get_state().tolist()}
        if self.sampler.generator is not None:
            return {"sampler_generator": self.sampler.generator.get_state().tolist()}
        return {"global": torch.get_rng_state().tolist()}

    @contextlib.contextmanager
    def _rng_restored(self, rng: dict | None):
        """Run the sampler's draws from ``rng``; the global RNG is left as the caller had it."""
        if not rng:
            yield
            return
        state = torch.tensor(next(iter(rng.values())), dtype=torch.uint8)
        if "generator" in rng:
            self.generator.set_state(state)
            yield
        elif "sampler_generator" in rng:
            self.sampler.generator.set_state(state)
            yield
        else:
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(state)
                yield

    def _batches_of(self, order: list[int]) -> Iterator[list[tuple[int, int]]]:
        positions = list(enumerate(order))
        for start in range(0, len(positions), self.batch_size):
            batch = positions[start:start + self.batch_size]
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def _fast_jobs(self, epoch: int, index_batches, order: list[int] | None) -> Iterator[Job]:
        samples, plan, target_transform = self._fast
        threads = max(self.num_workers, 1)
        reader = dict(seed=self._augmentation_seed(), target_transform=target_transform,
                      collate_fn=None if self.collate_fn is default_collate else self.collate_fn,
                      on_error=self.on_error, max_skips=self._skip_budget(), on_corrupt=self.on_corrupt,
                      max_image_pixels=self.max_image_pixels, stats=self.stats)
        if self.device_path:
            fast = self._device_run = device_stage.DevicePath(samples, plan, device=self.device,
                                                               decoders=self._decoders,
                                                               slots=self._output_slots(plan), **reader)
        else:
            fast = FastPath(samples, plan, batch_size=self.batch_size, dct_scaling=self.dct_scaling,
                            device=self.device, pin_memory=self.pin_memory,
                            slots=(self.prefetch_factor or 2) * threads, outputs=self._output_pool(plan, threads),
                            memory_format=self.memory_format, **reader)
        if order is not None:
            return fast.jobs(index_batches, epoch, order)
        counter = itertools.count()
        batches = ([(next(counter), index) for index in batch] for batch in index_batches)
        return fast.jobs(batches, epoch)

    def _skip_budget(self) -> int | None:
        """max_skips as a count for this epoch."""
        if isinstance(self.max_skips, float):
            return int(self.max_skips * len(self) * (self.batch_size or 1))
        return self.max_skips

    def _output_slots(self, plan) -> "device_stage.OutputSlots":
        """The device path's output batches, made once and kept across epochs."""
        height, width = plan.output_size
        shape = (self.batch_size, 3, height, width)
        if self._device_slots is None or (self._device_slots.shape, self._device_slots.dtype) != (shape, plan.output_dtype):
            self._device_slots = device_stage.OutputSlots(self.device_prefetch + 2,
                                                          shape, plan.output_dtype,
                                                          self.device, self.memory_format)
        return self._device_slots

    def _output_pool(self, plan, threads: int) -> OutputPool:
        """The CPU output batches, kept across epochs so their memory stays mapped."""
        pool = getattr(self, "_outputs", None)
        fresh = output_pool(plan, self.batch_size, (self.prefetch_factor or 2) * threads)
        if pool is None or (pool.shape, pool.dtype, pool.capacity) != (fresh.shape, fresh.dtype, fresh.capacity):
            self._outputs = pool = fresh
        return pool

    def _map_jobs(self, epoch: int, index_batches, order: list[int] | None) -> Iterator[Job]:
        """Generic path: threads call dataset[i]; collate_fn batches (torch's fetch semantics).

        Each loader thread calls its own copy of the dataset (``fastload.workers``),
        as each torch worker process has its own.
        """
        dataset = self.dataset
        if order is not None:
            batches = (list(index for _, index in batch) for batch in index_batches)
        else:
            batches = index_batches
        getitems = getattr(dataset, "__getitems__", None) if not isinstance(dataset, Source) else None
        for batch in batches:
            if not self._auto_collation:
                yield Job([_LoadSample(dataset, batch, self.stats)], _Collate(self, [batch], single=True),
                          what=[_describe(dataset, batch)])
            elif getitems:
                yield Job([_LoadSamples(dataset, batch, self.stats)], _Collate(self, batch, single=True),
                          what=[f"samples {batch}"])
            else:
                yield Job([_LoadSample(dataset, index, self.stats) for index in batch], _Collate(self, batch),
                          what=[_describe(dataset, index) for index in batch])

    def _iterable_jobs(self, workers: int) -> Iterator[Job]:
        """Generic IterableDataset, by torch's rule: each worker (thread) iterates its own copy of the
        dataset and batches what it yields; the loader takes one batch from each worker in turn, skipping
        workers that ran out. With ``num_workers=0`` the training loop's thread iterates it once."""
        streams = _WorkerStreams(self, max(workers, 1))
        if not workers:
            while streams.active:
                yield Job([streams.puller(0)], _first_result)
            return
        for worker in itertools.cycle(range(workers)):
            if not streams.active:
                return
            if worker in streams.active:
                yield Job([streams.puller(worker)], _first_result, worker=worker,
                          what=[f"{type(self.dataset).__name__} in worker {worker}"])

    # -- shutdown -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop and join the threads of every iterator of this loader."""
        for iterator in list(self._iterators):
            iterator.close()

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _describe(dataset, index) -> str:
    """'sample 5', with its file when the dataset lists (path, label) samples as torchvision's folders do."""
    samples = getattr(dataset, "samples", None)
    try:
        return f"sample {index} ({samples[index][0]})"
    except (TypeError, IndexError, KeyError):
        return f"sample {index}"


def _unwrap_subsets(dataset) -> tuple[Any, list[int] | None]:
    """(the dataset under any ``Subset`` layers, the indices into it they select; None without one)."""
    indices = None
    while isinstance(dataset, Subset) and not _overridden(dataset, Subset):
        selected = [int(i) for i in dataset.indices]
        indices = selected if indices is None else [selected[i] for i in indices]
        dataset = dataset.dataset
    return dataset, indices


def _overridden(dataset, known: type) -> list[str]:
    """The sample-producing methods of ``known`` that ``type(dataset)`` replaces (the fast path would
    bypass them)."""
    names = ("__getitem__", "__getitems__", "load", "loader")
    return [name for name in names
            if hasattr(known, name) and getattr(type(dataset), name, None) is not getattr(known, name)]


class _LoadSample:
    """A generic-path task: ``dataset[index]`` on the loader thread's copy of the dataset (its time is
    counted as ``read``)."""

    def __init__(self, dataset, index, stats: Stats):
        self.dataset, self.index, self.stats = dataset, index, stats

    def __call__(self, report) -> Any:
        dataset = current_dataset(self.dataset)
        what = _describe(dataset, self.index)
        report("dataset[i]", what)
        started = time.perf_counter()
        try:
            sample = dataset.load(self.index) if isinstance(dataset, Source) else dataset[self.index]
            self.stats.add("read", time.perf_counter() - started)
            return sample
        except Exception as error:
            error.add_note(f"fastload: raised while loading {what} of {type(dataset).__name__} "
                           f"in loader thread {threading.current_thread().name}")
            raise


class _LoadSamples(_LoadSample):
    """A generic-path task: ``dataset.__getitems__(indices)``, torch's batched fetch."""

    def __call__(self, report) -> Any:
        dataset = current_dataset(self.dataset)
        report("dataset.__getitems__", f"samples {self.index}")
        started = time.perf_counter()
        try:
            samples = dataset.__getitems__(self.index)
            self.stats.add("read", time.perf_counter() - started)
            return samples
        except Exception as error:
            error.add_note(f"fastload: raised while loading samples {self.index} of {type(dataset).__name__} "
                           f"in loader thread {threading.current_thread().name}")
            raise


class _Collate:
    """A generic-path batch's finish: ``collate_fn``, then to the loader's device; counted in stats."""

    def __init__(self, loader: "DataLoader", indices: list, single: bool = False):
        self.loader, self.indices, self.single = loader, indices, single

    def __call__(self, results: list) -> Any:
        loader = self.loader
        started = time.perf_counter()
        items = results[0] if self.single else results
        batch = collate(loader.collate_fn, items, f"the batch of samples {self.indices}")
        batch = to_device(batch, loader.device, loader.pin_memory)
        loader.stats.add("copy", time.perf_counter() - started)
        loader.stats.count_batch(len(self.indices) if loader._auto_collation else 1)
        return batch


def _first_result(results: list) -> Any:
    return results[0]


class _WorkerStreams:
    """The per-worker iterators of a generic IterableDataset and which of them still yield."""

    def __init__(self, loader: "DataLoader", workers: int):
        self.loader = loader
        self.iterators: list = [None] * workers
        self.batches = [0] * workers
        self.active = set(range(workers))

    def puller(self, worker: int) -> "_Pull":
        return _Pull(self, worker)

    def pull(self, worker: int, report) -> Any:
        """The next batch of ``worker``'s iterator (made in its thread, so it sees its worker info), or
        SKIP once that iterator has run out (torch's worker then stops, and the others go on)."""
        loader = self.loader
        if worker not in self.active:
            return SKIP
        dataset = current_dataset(loader.dataset)
        what = f"batch {self.batches[worker]} of {type(dataset).__name__} in worker {worker}"
        report("iterate", what)
        try:
            if self.iterators[worker] is None:
                self.iterators[worker] = iter(dataset)
            iterator = self.iterators[worker]
            started = time.perf_counter()
            wanted = loader.batch_size if loader._auto_collation else 1
            items = []
            while len(items) < wanted:  # next(), as torch's fetcher: islice would call iter() again
                item = next(iterator, END)
                if item is END:
                    break
                items.append(item)
            ended = len(items) < wanted
        except Exception as error:
            error.add_note(f"fastload: raised while iterating {what} "
                           f"(loader thread {threading.current_thread().name})")
            raise
        loader.stats.add("read", time.perf_counter() - started)
        if ended:
            self.active.discard(worker)
        if not items or (ended and loader.drop_last and loader._auto_collation):
            return SKIP
        self.batches[worker] += 1
        started = time.perf_counter()
        batch = collate(loader.collate_fn, items[0] if not loader._auto_collation else items, what)
        batch = to_device(batch, loader.device, loader.pin_memory)
        loader.stats.add("copy", time.perf_counter() - started)
        loader.stats.count_batch(len(items))
        return batch


class _Pull:
    """A task: the next batch of one worker's iterator."""

    def __init__(self, streams: _WorkerStreams, worker: int):
        self.streams, self.worker = streams, worker

    def __call__(self, report) -> Any:
        return self.streams.pull(self.worker, report)


def _local_device(device) -> torch.device | None:
    """``device`` as a torch.device; a bare "cuda" under torchrun becomes cuda:LOCAL_RANK."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return device
