"""fastload.DataLoader: torch's DataLoader, with threads instead of processes and a fast path for images.

The loader holds validated options (``fastload.options``), the path chosen
for its dataset (``fastload.paths``), the schedule of its epochs and seeds
(``fastload.schedule``) and its stats. Each ``iter()`` is one epoch, started
by ``fastload.epoch.start_epoch``; ARCHITECTURE.md draws the whole data path.
"""

from __future__ import annotations

import dataclasses
import os
import weakref
from typing import TypeVar

import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate, default_convert
from torch.utils.data.dataloader import _InfiniteConstantSampler
from torch.utils.data.distributed import DistributedSampler

from . import fingerprint
from .decode import DEFAULT_MAX_PIXELS
from .epoch import start_epoch
from .options import Options
from .order import SamplerOrder, dist_info
from .thread_pool import ThreadPool
from .paths import choose_path, fast_path_inputs, torch_draws_of
from .schedule import Schedule
from .sources import Source
from .stats import Stats
from .workers import Workers


T_co = TypeVar("T_co", covariant=True)


class DataLoader(torch.utils.data.DataLoader[T_co]):
    """A drop-in ``torch.utils.data.DataLoader`` that loads with threads.

    Generic in what its dataset yields, as torch's is (``DataLoader[Tensor]`` in an annotation, and
    ``class Mine(DataLoader[T_co])``).

    Takes torch's arguments with torch's meanings, except that
    ``num_workers`` counts threads in this process (no worker processes,
    no pickling) and ``shuffle`` on a fastload source is passed on to it.
    fastload's own keyword arguments are validated by
    ``fastload.options.Options`` (which describes each at length) and
    readable (and settable, validated again) as attributes of the loader.
    ``loader.stats`` counts the current epoch; ``state_dict`` and
    ``load_state_dict`` resume mid-epoch. Epochs advance by themselves
    without ``set_epoch`` (``fastload.schedule`` says how).

    Args:
        dataset: what to load. A fastload source (``ImageFolder``, ``FileList``, ``Encoded``,
            ``TarShards``, ``TFRecords``) or torchvision's ImageFolder / DatasetFolder with its default
            loader (or a ``Subset`` of one) takes the fast path when its transform compiles; any other
            map-style or iterable dataset is loaded as torch loads it (``dataset[i]``, ``collate_fn``).
        batch_size: samples per batch (default 1); None: no batching, as torch's.
        shuffle: reshuffle at every epoch (default False). On a fastload source, passed on to it (None:
            the source's own ``shuffle``); with ``rank``/``world_size`` on a map-style dataset without a
            sampler, passed to the DistributedSampler the loader makes.
        sampler, batch_sampler: as torch's.
        num_workers: loader threads of this process (torch: worker processes); 0 loads in the training
            loop's thread. Each thread is a worker to ``get_worker_info()``, with its own shallow copy
            of the dataset.
        collate_fn: as torch's; on the fast path it is given the batch's (image, label) pairs.
        pin_memory: as torch's, but pins only where CUDA is available (torch's warning where no
            accelerator is).
        drop_last: as torch's.
        timeout: seconds to wait for a batch (0: no limit). A timeout ends the epoch at once: threads
            stuck in a call are told to stop and are not waited for. Also the most that shutdown
            (``close()``, an exception or Ctrl-C leaving the loop, interpreter exit) waits for the threads
            (0: ``fastload.thread_pool.CLOSE_TIMEOUT``, 5 s); one still in a call is named in a warning.
        worker_init_fn: called with the worker id in each loader thread before it loads, with the
            process generators seeded as the worker's (and put back after the call).
        multiprocessing_context: accepted, as torch validates it, and unused: there are no processes.
        generator: as torch's: draws the sampler's order and the workers' base seed; without ``seed``,
            also the fast path's augmentation seed.
        prefetch_factor: batches queued ahead per thread (default 2).
        persistent_workers: the threads still start each epoch, but as the same workers: the base seed
            is drawn once, each keeps its dataset copy, and ``worker_init_fn`` runs only the first time.
        pin_memory_device: deprecated; warns as torch does.
        in_order: accepted; batches always come in order.
        device: deliver batches on this device (e.g. "cuda"; default None: the CPU, unmoved). On a
            CUDA device the fast path decodes and augments there (``loader.device_path``). A bare
            "cuda" under torchrun means cuda:LOCAL_RANK.
        seed: seed of a fastload source's sample order and of every sample's augmentation. Default: the
            source's ``seed``; else the order's is 0 and the augmentation's is ``torch.initial_seed()``
            (the ``generator``'s) at the first iteration.
        on_error: "raise" (default) raises ``fastload.DecodeError`` naming the file; "skip" replaces a
            bad sample with the next one and records it in ``loader.stats.skipped``.
        rank, world_size: override the rank and world size from torch.distributed / torchrun (default
            None: theirs). On a map-style dataset without a sampler they make a DistributedSampler.
        max_image_pixels: refuse images whose header claims more pixels (default: Pillow's
            ``Image.MAX_IMAGE_PIXELS``; None: no limit).
        dct_scaling: decode JPEGs at 1/2, 1/4 or 1/8 scale when that still covers the output. "auto"
            (default): only under random geometry (RandomResizedCrop); True: wherever it applies;
            False: never.
        max_skips: with ``on_error="skip"``, a budget per epoch (a count, or a fraction of the epoch's
            samples); one skip more raises ``fastload.LoaderError``. None (default): no limit.
        on_corrupt: a JPEG that libjpeg decodes while warning of corrupt data: "deliver" (default)
            delivers it and records it in ``loader.stats.corrupt``; "error" treats it as a bad sample.
        decode_device: with ``device="cuda"``, where JPEGs are decoded: "auto" (default: on the GPU where
            a probe decode succeeds, else the CPU), "cuda" or "cpu".
        decoder: force a decoding backend: "torchvision" ("nvjpeg" is the same), "torchcodec", "cpu", or
            backend objects of your own. Default None: with both GPU backends installed, the first batch
            measures which is faster.
        device_prefetch: with ``device="cuda"``, batches decoded and augmented on the GPU ahead of the
            training loop (default 2): the knob for GPU memory.
        memory_format: of the image batches: ``torch.contiguous_format`` (default) or
            ``torch.channels_last``.
        draws: over torch's datasets on the fast path: "torch" (default: torch's DataLoader's draws, from
            each worker's generator in torchvision's order: the same seed gives torch's pixels) or
            "fastload" (each sample's own stream of (seed, epoch, index)). See ``fastload.options``.
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
                 dct_scaling: bool | str = "auto", max_skips: int | float | None = None,
                 on_corrupt: str = "deliver", decode_device: str = "auto", decoder: str | None = None,
                 device_prefetch: int = 2, memory_format: torch.memory_format = torch.contiguous_format,
                 draws: str = "torch"):
        self.options = Options(device, seed, on_error, rank, world_size, max_image_pixels, dct_scaling,
                               max_skips, on_corrupt, decode_device, decoder, device_prefetch, memory_format,
                               draws)
        self.source_shuffle = None
        if isinstance(dataset, Source):  # torch refuses shuffle for an IterableDataset; a source shuffles itself
            self.source_shuffle, shuffle = shuffle, None
        elif ((rank is not None or world_size is not None) and sampler is None
              and batch_sampler is None and not isinstance(dataset, IterableDataset)):
            r, w = dist_info(rank, world_size)
            sampler = DistributedSampler(dataset, num_replicas=w, rank=r, shuffle=bool(shuffle), seed=seed or 0)
            shuffle = None
        super().__init__(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
                         pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context, generator,
                         prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                         pin_memory_device=pin_memory_device, in_order=in_order)
        self._accelerate_prepared: bool | None = None
        self.stats = Stats(retries=lambda: getattr(dataset, "retried", 0))  # a remote source counts them
        self.schedule = Schedule(dataset if isinstance(dataset, Source) else None, seed, self.sampler,
                                 generator, persistent_workers, batch_sampler=self.batch_sampler)
        self.iterators: weakref.WeakSet = weakref.WeakSet()  # this loader's live epochs, for close()
        self.workers = Workers()  # the loader threads' worker identities (kept across epochs if persistent)
        self._choose_path()

    def __setattr__(self, name: str, value) -> None:
        if name in Options.names() and "options" in self.__dict__:  # validated again; the path may change
            self.__dict__["options"] = dataclasses.replace(self.options, **{name: value})
            self._choose_path()
            return
        if name in EPOCH_SETTINGS and "path" in self.__dict__:
            _check_setting(name, value)  # the path is chosen again at the next epoch (refresh_path)
        super().__setattr__(name, value)  # torch's: refuses batch_size, sampler, dataset... once initialized

    def _choose_path(self) -> None:
        self.path = choose_path(self)
        self._path_settings = tuple(getattr(self, name) for name in EPOCH_SETTINGS)

    def __getattr__(self, name: str):
        options = self.__dict__.get("options")
        if options is not None and name in Options.names():
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def fast_path(self) -> bool:
        """Whether this loader decodes and augments on the fast path."""
        return self.path.fast

    @property
    def device_path(self) -> bool:
        """Whether batches are decoded and augmented on ``device`` (``fastload.device``)."""
        return self.path.on_device

    def refresh_path(self) -> None:
        """Choose the path again if the dataset's transform changed since the last epoch (progressive
        resizing, a new transform on a split): the batches must change, as they would under torch; or if
        one of torch's ``EPOCH_SETTINGS`` was set since (``num_workers``: the thread count, the batches in
        flight, the buffer pools and the CPU/GPU balance are all sized by it)."""
        settings = tuple(getattr(self, name) for name in EPOCH_SETTINGS)
        if any(new is not old for new, old in zip(settings, self._path_settings)):
            self._choose_path()  # torch's settings set since: the threads, in-flight depth, buffers follow them
            return
        fast = fast_path_inputs(self.dataset, self.batch_size, warn=False, draws=self.options.draws)
        draws = None if fast is None else torch_draws_of(self.dataset, fast[1], self.options.draws)
        drawn = getattr(self.path, "torch_draws", None)
        if (None if fast is None else fast[1]) != self.path.plan or \
                (None if draws is None else draws.steps) != (None if drawn is None else drawn.steps):
            self._choose_path()  # a new plan, or the same plan drawn in another order (torch's draws)
        elif fast is not None:  # same plan: the samples, target_transform or reader may still be new
            self.path.samples, self.path.target_transform, self.path.read_bytes = fast[0], fast[2], fast[3]

    def make_order(self, seed: int | None = None):
        """This rank's order of an epoch (``fastload.order.Order``), None for a generic IterableDataset.
        ``seed``: a fastload source's order seed (default: the schedule's)."""
        if isinstance(self.dataset, Source):
            return self.dataset.make_order(self.batch_size, self.drop_last, rank=self.rank,
                                           world_size=self.world_size, shuffle=self.source_shuffle,
                                           seed=self.schedule.order_seed if seed is None else seed)
        if isinstance(self.dataset, IterableDataset):
            return None
        return SamplerOrder(self._index_sampler, len(self.dataset), self._auto_collation)

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next iteration (order and augmentation); forwarded to a sampler that has one."""
        self.schedule.set_epoch(epoch)

    def __len__(self) -> int:
        """Batches per epoch; for a fastload source, of this loader's shard (its rank/world overrides)."""
        if not isinstance(self.dataset, Source):
            return super().__len__()
        return len(self.make_order())

    def check_worker_number_rationality(self) -> None:
        """No-op: torch warns about worker *processes* beyond the core count; these are threads."""

    def __iter__(self) -> ThreadPool:
        return start_epoch(self)

    def state_dict(self) -> dict:
        """Where this loader is: epoch, batches delivered in it, seeds, and the sampler's RNG state.

        Plain Python values only (safe in a torch checkpoint). A fresh loader
        built with the same arguments, given this in ``load_state_dict``,
        yields exactly the batches that were still to come -- pixel for pixel
        on the fast path, whatever its num_workers or prefetch_factor. For a
        fastload source the state also resumes at another world size: the
        new ranks share the epoch's undelivered samples
        (``fastload.order.ResumedOrder``).

        A sampler, batch sampler or dataset with ``state_dict`` and
        ``load_state_dict`` (torchdata's protocol) has its state in it too,
        as of the last batch delivered (with threads, each thread's dataset
        copy's; for an IterableDataset also which worker is next and which
        ran out), as its ``state_dict()`` gave it; it resumes itself
        (``fastload.schedule`` says when each is loaded).
        """
        return {**self.schedule.state_dict(self.batch_size, _length(self.dataset), self.dataset, self.num_workers),
                "fingerprint": self._fingerprint()}

    def load_state_dict(self, state: dict) -> None:
        """Make the next iteration continue from ``state`` (from ``state_dict``, possibly of another process).

        The state is checked whole before any of it is applied, so a refused state changes nothing: each
        field present, of its type and in its range (``fastload.schedule.STATE_FIELDS``), no more batches
        delivered than its epoch holds, and saved over the same samples (names, labels, file sizes) and
        order settings (shuffle, sampler, drop_last; ``fastload.fingerprint``), with the states of exactly
        this loader's stateful objects (``fastload.schedule.OBJECT_FIELDS``; one per loader thread: the same
        ``num_workers``). A ValueError names the field or what differs. A state whose ``fingerprint`` is None
        loads unchecked, with a warning."""
        checked = self.schedule.check_state(state, self.batch_size, _length(self.dataset), self.dataset,
                                            self.num_workers)
        fingerprint.check(checked["fingerprint"], self._fingerprint())
        self.schedule.check_position(checked, self.make_order)
        self.schedule.resume_from(checked)

    def _fingerprint(self) -> dict:
        """The samples' part (cached for this sample list: it may stat every file) and the order's."""
        samples = getattr(self.dataset, "samples", None)
        key = (id(samples), len(samples) if isinstance(samples, list) else None)
        if getattr(self, "_samples_fingerprint", (None,))[0] != key:
            self._samples_fingerprint = (key, fingerprint.samples_part(self.dataset))
        state = vars(self)
        return {"samples": self._samples_fingerprint[1],
                "order": {"shuffle": _shuffles(state), "drop_last": self.drop_last,
                          "sampler": _name(state.get("sampler")), "batch_sampler": _name(state.get("batch_sampler"))}}

    def close(self) -> None:
        """Stop and join the threads of every iterator of this loader; ``stats`` ends the current epoch."""
        for iterator in list(self.iterators):
            iterator.close()
        self.stats.end()

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        # For logs and debuggers: cheap (no I/O, no thread), one short line (the dataset by its own repr or its
        # class and size, torch's arguments and fastload's options where not the defaults, a function by its
        # name) and safe on a half-made loader (an error raised in __init__): what is not set yet is left out.
        try:
            state = vars(self)
            parts = []
            if "dataset" in state:
                parts += [_dataset_repr(state["dataset"]), f"batch_size={state.get('batch_size')}",
                          f"shuffle={_shuffles(state)}"]
            sampler, batch_sampler = state.get("sampler"), state.get("batch_sampler")
            if not isinstance(sampler, (SequentialSampler, RandomSampler, _InfiniteConstantSampler, type(None))):
                parts.append(f"sampler={_name(sampler)}")
            if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
                parts.append(f"batch_sampler={_name(batch_sampler)}")
            if "num_workers" in state:
                parts.append(f"num_workers={state['num_workers']}")
            torch_defaults = {"drop_last": (False,), "pin_memory": (False,), "timeout": (0,),
                              "prefetch_factor": (None, 2), "persistent_workers": (False,)}  # 2: with workers
            parts += [f"{name}={state[name]!r}" for name, defaults in torch_defaults.items()
                      if name in state and state[name] not in defaults]
            if state.get("collate_fn") not in (None, default_collate, default_convert):
                parts.append(f"collate_fn={_name(state['collate_fn'])}")
            options = state.get("options")
            parts += [f"{field.name}={_name(getattr(options, field.name))}"
                      for field in (dataclasses.fields(options) if options is not None else ())
                      if getattr(options, field.name) != field.default]
            if "path" in state:
                parts.append(f"path={type(state['path']).__name__}")
            return f"{type(self).__name__}({', '.join(parts)})"
        except Exception:
            return f"{type(self).__name__}(...)"


# torch's arguments that may be set after construction (torch refuses the others: batch_size, sampler,
# batch_sampler, drop_last, dataset, persistent_workers); each takes effect at the next epoch.
EPOCH_SETTINGS = ("num_workers", "prefetch_factor", "pin_memory", "timeout", "collate_fn", "worker_init_fn")


def _check_setting(name: str, value) -> None:
    """A torch setting set after construction, refused as torch's constructor refuses it (or, where torch's
    would fail only at the next iteration, here, naming it)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "num_workers" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if name == "timeout" and not (number and value >= 0):
        raise ValueError("timeout option should be non-negative")
    if name == "prefetch_factor" and not (value is None or (isinstance(value, int) and not isinstance(value, bool)
                                                            and value >= 1)):
        raise ValueError(f"prefetch_factor is {value!r}: None or an integer >= 1 (batches per loader thread)")
    if name == "collate_fn" and not callable(value):
        raise ValueError(f"collate_fn is {value!r}: a callable (torch's default_collate, or your own)")
    if name == "worker_init_fn" and not (value is None or callable(value)):
        raise ValueError(f"worker_init_fn is {value!r}: None or a callable taking the worker id")


def _dataset_repr(dataset) -> str:
    """A fastload source's own repr; another dataset's class, root and size (torchvision's repr spans lines
    and prints the transform in full)."""
    if isinstance(dataset, Source):
        return repr(dataset)
    try:
        root = getattr(dataset, "root", None)
        where = f"root={os.fspath(root)!r}, " if isinstance(root, (str, os.PathLike)) else ""
        return f"{type(dataset).__name__}({where}{len(dataset)} samples)"
    except Exception:  # no __len__ (an IterableDataset), or one that fails
        return type(dataset).__name__


def _shuffles(state: dict) -> bool:
    """Whether the loader's epochs are shuffled: by its source, its RandomSampler or its DistributedSampler."""
    dataset, sampler = state.get("dataset"), state.get("sampler")
    if isinstance(dataset, Source):
        shuffle = state.get("source_shuffle")
        return bool(vars(dataset).get("shuffle") if shuffle is None else shuffle)
    return isinstance(sampler, RandomSampler) or getattr(sampler, "shuffle", False) is True


def _name(value) -> str:
    """A value as a repr shows it: a literal as such, a device by its name, anything else (a function, a
    sampler, a decoder) by its name or its class's."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, torch.device):
        return repr(str(value))
    if isinstance(value, torch.memory_format):
        return str(value)
    name = getattr(value, "__name__", None)
    return name if isinstance(name, str) else type(value).__name__


def _length(dataset) -> int | None:
    """What a saved state must have been saved over: a fastload source's samples of all ranks (a state may
    resume at another world size), else the dataset's length."""
    if isinstance(dataset, Source):
        return len(dataset.samples)
    try:
        return len(dataset)
    except TypeError:
        return None
