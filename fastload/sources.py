"""Sources: lists of (path, label) that shard themselves across ranks.

Both sources are ``IterableDataset``s. Iterated on their own, or inside a
stock ``torch.utils.data.DataLoader`` (where they also split across its
workers), they yield ``(transform(image), target_transform(label))`` for this
rank's shard, exactly as torchvision's ImageFolder would for those indices.
``fastload.DataLoader`` instead reads their ``samples`` and order and runs
its fast path.
"""

from __future__ import annotations

import operator
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
from PIL import Image

from ._torchvision import IMG_EXTENSIONS, find_classes, list_samples, pil_loader
from .decode import open_image
from .errors import DecodeError
from .order import ShardOrder, dist_info, num_shard_samples, split_for_workers
from .read import read_file


INT64 = (-(1 << 63), (1 << 63) - 1)
_DECIMAL = re.compile(r"[+-]?[0-9]{1,20}")  # a file list's label: ASCII digits (int() also takes "1_0", "١")


def class_index(label, name: str) -> int:
    """``label`` as the class index a batch's int64 labels hold: an integer (Python's, numpy's, a one-element
    integer tensor) within int64; a ValueError naming the sample otherwise (a float label such as 2.9 would
    be truncated to 2, silently)."""
    try:
        value = operator.index(label)
    except TypeError:
        raise ValueError(f"{name}: label {label!r} is not a class index (an integer); give integer labels, or a "
                         f"target_transform that makes them") from None
    if not INT64[0] <= value <= INT64[1]:
        raise ValueError(f"{name}: label {value} does not fit in the int64 a batch's labels are")
    return value


class Source(torch.utils.data.IterableDataset):
    """A list of ``samples`` [(path, label)] with DistributedSampler's sharding rules.

    Args:
        samples: [(path, label)]: a sample's file and its class index.
        transform, target_transform: as torchvision's: applied to the PIL image and to the label.
        shuffle, seed, drop_last: as in ``DistributedSampler``: permute with
            ``seed + epoch`` (``seed`` None: 0, DistributedSampler's default);
            drop the tail (or pad by repeating) so that all ranks get the
            same number of samples. A ``seed`` given here also seeds the
            augmentation of ``fastload.DataLoader`` (which otherwise takes
            torch's initial seed).
        even_shards: True (default) gives every rank the same number of
            samples, as DistributedSampler does (training: ranks must step
            together). False, for evaluation, neither pads nor drops: each
            sample is read by exactly one rank, so metrics are exact, and
            shards differ by at most one sample (``len()`` is this rank's).
        rank, world_size: default to torch.distributed's group, then
            torchrun's ``RANK``/``WORLD_SIZE``, then 0/1 -- looked up each
            time they are read, not when the source is made, so a source
            built before the process group exists (Lightning's Trainer
            starts it inside ``fit``) still shards by it.
    """

    def __init__(self, samples: list[tuple[str, int]], transform: Callable | None = None,
                 target_transform: Callable | None = None, *, shuffle: bool = False, seed: int | None = None,
                 drop_last: bool = False, rank: int | None = None, world_size: int | None = None,
                 even_shards: bool = True):
        self.samples = samples
        self.targets = [label for _, label in samples]
        self.transform = transform
        self.target_transform = target_transform
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.even_shards = even_shards
        dist_info(rank, world_size)  # refuse an invalid pair now
        self._rank, self._world_size = rank, world_size
        self.epoch = 0
        self._uneven_warned = False

    @property
    def rank(self) -> int:
        return dist_info(self._rank, self._world_size)[0]

    @property
    def world_size(self) -> int:
        return dist_info(self._rank, self._world_size)[1]

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for ``epoch`` (with ``shuffle=True``), like DistributedSampler.set_epoch."""
        self.epoch = epoch

    def shard(self, epoch: int | None = None) -> list[int]:
        """This rank's dataset indices for ``epoch`` (default: the current one)."""
        return self.make_order(1, False).indices(self.epoch if epoch is None else epoch)

    def make_order(self, batch_size: int, drop_last: bool, *, rank: int | None = None,
                   world_size: int | None = None, shuffle: bool | None = None, seed: int | None = None) -> ShardOrder:
        """This rank's order for ``fastload.DataLoader`` (whose overrides of rank, world size, shuffle and
        seed win): DistributedSampler's rules. A source with another sharding rule returns its own
        ``fastload.order.Order`` here."""
        rank, world = dist_info(self._rank if rank is None else rank,
                                self._world_size if world_size is None else world_size)
        if not self.even_shards and len(self.samples) % world and not self._uneven_warned:
            self._uneven_warned = True  # once per source
            size, extra = divmod(len(self.samples), world)
            warnings.warn(f"fastload: even_shards=False: ranks 0-{extra - 1} read {size + 1} samples, the "
                          f"others {size} (this is rank {rank}): ranks may run different numbers of batches. "
                          f"Right for evaluation (each sample once); do not run per-batch collectives "
                          f"(DDP training) on this loader", stacklevel=4)
        return self.order(rank=rank, world_size=world, shuffle=self.shuffle if shuffle is None else shuffle,
                          seed=self.seed or 0 if seed is None else seed, drop_last=self.drop_last,
                          even_shards=self.even_shards, batch_size=batch_size, drop_last_batch=drop_last)

    def order(self, **rules) -> ShardOrder:
        """The order ``make_order`` settled the rules of (rank, world size, seed, ...): DistributedSampler's
        (``TarShards`` streams whole shards instead)."""
        return ShardOrder(len(self.samples), **rules)

    def __len__(self) -> int:
        """Samples this rank yields per epoch (DistributedSampler's ``num_samples``)."""
        return num_shard_samples(len(self.samples), self.world_size, self.drop_last, self.rank,
                                 self.even_shards)

    def read(self, index: int) -> bytes:
        """Sample ``index``'s encoded bytes (the fast paths' read stage): its file's."""
        return read_file(index, self.samples[index][0])

    def load(self, index: int) -> tuple[Any, Any]:
        """One sample as torchvision's ImageFolder.__getitem__ returns it."""
        path, label = self.samples[index]
        image = self._open(index, path)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    def _open(self, index: int, path: str) -> Image.Image:
        return pil_loader(path)

    def __iter__(self):
        for index in split_for_workers(self.shard()):
            yield self.load(index)

    def __repr__(self) -> str:
        # For logs and debuggers: cheap (no I/O; counts, not lists; a transform by its class name) and safe on a
        # half-made source (an error raised in __init__): a part is left out until its attribute is set.
        try:
            parts = [f"{name}={value}" for name, value in self._repr_parts() if value is not None]
        except Exception:
            parts = ["..."]
        return f"{type(self).__name__}({', '.join(parts)})"

    def _repr_parts(self) -> list[tuple[str, Any]]:
        """(name, shown value or None) for ``__repr__``; a subclass puts where its samples come from first."""
        state = vars(self)
        samples, classes = state.get("samples"), state.get("classes")
        rank = None
        if "_rank" in state:
            try:
                rank = "{}/{}".format(*dist_info(state["_rank"], state["_world_size"]))
            except ValueError:  # torchrun's RANK / WORLD_SIZE do not fit
                pass
        return [("samples", None if samples is None else len(samples)),
                ("classes", None if classes is None else len(classes)),  # ImageFolder's
                ("transform", self._name(state.get("transform"))),
                ("target_transform", self._name(state.get("target_transform"))),
                ("shuffle", state.get("shuffle")), ("seed", state.get("seed")),
                ("drop_last", state.get("drop_last") or None),  # shown only where not the default
                ("even_shards", None if state.get("even_shards", True) else False), ("rank", rank)]

    @staticmethod
    def _quoted(value) -> str | None:
        return None if value is None else repr(value)

    @staticmethod
    def _name(value) -> str | None:
        """A transform as ``__repr__`` shows it: a function by its name, anything else by its class's."""
        if value is None:
            return None
        name = getattr(value, "__name__", None)
        return name if isinstance(name, str) else type(value).__name__

    @staticmethod
    def _paths(paths: list[str] | None) -> str | None:
        """A list of files as ``__repr__`` shows it: the first and the last, and how many."""
        if paths is None or len(paths) <= 2:
            return None if paths is None else repr(list(paths))
        return f"[{paths[0]!r}, ..., {paths[-1]!r}] ({len(paths)} files)"


class ImageFolder(Source):
    """``root/class_name/**/image.ext`` with torchvision's discovery rules.

    Class folders are sorted to give label indices; files are found by
    torchvision's ``make_dataset`` rules (its default extensions, compared
    case-insensitively, the same sample order), so ``classes``,
    ``class_to_idx`` and ``samples`` equal torchvision's ImageFolder's --
    except under a symbolic link that leads back to a folder above it (a
    loop), which is not followed (torchvision lists the files under it
    again at every level until the path is too long) and is named in a
    warning.

    Args:
        root: the folder of class folders.
        transform, target_transform: as torchvision's.
        is_valid_file: as torchvision's: a file is a sample where it returns True (instead of the
            extension check).
        allow_empty: as torchvision's: a class folder without samples is not an error.
        **order: ``shuffle``, ``seed``, ``drop_last``, ``even_shards``, ``rank``, ``world_size``: see
            ``Source``.
    """

    def __init__(self, root: str | os.PathLike, transform: Callable | None = None,
                 target_transform: Callable | None = None, *,
                 is_valid_file: Callable[[str], bool] | None = None, allow_empty: bool = False,
                 **order):
        self.root = os.fspath(root)
        self.classes, self.class_to_idx = find_classes(self.root)
        extensions = None if is_valid_file is not None else IMG_EXTENSIONS
        samples = list_samples(self.root, self.class_to_idx, extensions, is_valid_file,
                               allow_empty=allow_empty)
        super().__init__(samples, transform, target_transform, **order)
        self.imgs = self.samples

    def _repr_parts(self) -> list[tuple[str, Any]]:
        return [("root", self._quoted(vars(self).get("root"))), *super()._repr_parts()]


class FileList(Source):
    """A DALI/rocAL ``file_list``: one ``relative/path label`` per line.

    The label is the last whitespace-separated field, so paths may contain
    spaces. Blank lines and lines starting with ``#`` are ignored. Paths are
    relative to ``root``, which defaults to the list file's folder (as in
    DALI); absolute paths are kept.

    Args:
        list_file: the list's path.
        root: the folder the paths are relative to (default: the list file's).
        transform, target_transform: as torchvision's.
        **order: ``shuffle``, ``seed``, ``drop_last``, ``even_shards``, ``rank``, ``world_size``: see
            ``Source``.
    """

    def __init__(self, list_file: str | os.PathLike, root: str | os.PathLike | None = None,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 **order):
        self.list_file = os.fspath(list_file)
        self.root = os.fspath(root) if root is not None else str(Path(self.list_file).parent)
        super().__init__(self._parse(), transform, target_transform, **order)

    def _repr_parts(self) -> list[tuple[str, Any]]:
        return [("list_file", self._quoted(vars(self).get("list_file"))), *super()._repr_parts()]

    def _parse(self) -> list[tuple[str, int]]:
        samples = []
        with open(self.list_file, "rb") as file:
            raw = file.read()
        # decoded line by line, so that a line that is not UTF-8 is named by its number; bytes.splitlines
        # splits where text mode's universal newlines do (\n, \r\n, \r)
        for number, data in enumerate(raw.splitlines(), start=1):
            try:
                line = data.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                raise ValueError(f"{self.list_file}:{number}: not UTF-8 text (byte {error.start + 1} of the "
                                 f"line is {data[error.start:error.start + 1]!r}); a file list is UTF-8, "
                                 f"its paths included") from None
            if not line or line.startswith("#"):
                continue
            fields = line.rsplit(None, 1)
            if len(fields) != 2 or not _DECIMAL.fullmatch(fields[1]):
                raise ValueError(f"{self.list_file}:{number}: expected 'path label' with an "
                                 f"integer label, got {line!r}")
            label = class_index(int(fields[1]), f"{self.list_file}:{number}")
            samples.append((os.path.join(self.root, fields[0]), label))
        return samples


class ByteSource(Source):
    """A source whose samples are not files of their own -- encoded bytes, a byte range of a tar shard, a
    TFRecord: ``read(index)`` gives a sample's bytes, and the generic path opens those bytes."""

    def _open(self, index: int, path: str) -> Image.Image:
        return open_image(index, path, self.read(index)).convert("RGB")


class Encoded(ByteSource):
    """Your own encoded images as a source (what DALI's ``external_source`` is for): ``items[i]`` is
    ``(encoded bytes, label)``.

    ``items`` is a list, or any sequence with a length and indexing (a view
    of a database, a memory-mapped store): read by index, so it shards,
    shuffles and resumes exactly like the folder sources and takes the fast
    path and the device path; every item is read once when the source is
    made (for its label). The bytes may be ``bytes``, ``bytearray``, a
    ``memoryview`` or a uint8 numpy array / tensor. Errors name a sample
    ``name[i]``. For a one-pass stream of samples, wrap it in an
    ``IterableDataset`` (the generic path, as torch would run it).

    Args:
        items: a sequence of (encoded bytes, label).
        transform, target_transform: as torchvision's.
        name: what errors and ``samples`` call item i: ``name[i]`` (default "encoded").
        **order: ``shuffle``, ``seed``, ``drop_last``, ``even_shards``, ``rank``, ``world_size``: see
            ``Source``.
    """

    def __init__(self, items, transform: Callable | None = None, target_transform: Callable | None = None, *,
                 name: str = "encoded", **order):
        self.items, self.name = items, name
        labels = [label for _, label in items]
        if target_transform is None:  # the labels become an int64 tensor: each must be a class index
            labels = [class_index(label, f"{name}[{i}]") for i, label in enumerate(labels)]
        super().__init__([(f"{name}[{i}]", label) for i, label in enumerate(labels)], transform,
                         target_transform, **order)

    def _repr_parts(self) -> list[tuple[str, Any]]:
        return [("name", self._quoted(vars(self).get("name"))), *super()._repr_parts()]

    def read(self, index: int) -> bytes:
        data = self.items[index][0]
        if hasattr(data, "numpy"):  # a tensor
            data = data.numpy()
        data = bytes(memoryview(data).cast("B")) if not isinstance(data, bytes) else data
        if not data:
            raise DecodeError(index, self.samples[index][0], "empty bytes")
        return data
