"""Tar shards in WebDataset's layout as a source: each sample is a byte range of a shard.

A WebDataset shard is a plain tar whose members are grouped into samples by
key: the member's path up to the first "." of its file name
(``train/n01440764_10026.jpg`` and ``train/n01440764_10026.cls`` are one
sample, key ``train/n01440764_10026``), as webdataset's ``base_plus_ext``
splits them. ``TarShards`` indexes every shard once (member offsets, sizes
and keys, from the tar headers), caches the index beside the shard (or in a
cache folder when the shard's folder is read-only), and from then on a
sample is ``(shard, offset, size)``: the order, sharding across ranks,
exact resume, the fast path and the device path work as for a folder, each
read a ``pread`` of one range instead of an ``open`` of one file.

Shards may be local paths or any fsspec URL (``https://``, ``s3://`` with
s3fs installed, ...), read in either mode, indexed (one ranged request per
sample) or streaming (whole shards in a local cache): ``shardfiles.py``,
which ``TFRecords`` shares. ``fastload pack`` writes shards.
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import BinaryIO, Callable

from .errors import DecodeError
from .shardcache import LOCK_TIMEOUT
from .shardfiles import ShardedSource, ShardFiles

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")  # the first one a sample has is its image
LABEL_EXTENSIONS = ("cls", "txt", "json")  # likewise for its label; see _label
INDEX_VERSION = 1
MAX_TEXT = 4096  # members up to this size that are not images are kept in the index as text


def split_key(name: str) -> tuple[str, str]:
    """(key, extension) of a member: the path up to the first "." of the file name, and the rest,
    lower-cased (webdataset's base_plus_ext)."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (extension.lower() if dot else "")


def build_index(path: str | None, stream: BinaryIO | None = None) -> dict:
    """A shard's index from its tar headers (the local file ``path``, or read once as ``stream``): per
    sample (in the order of its first member), its key, the (offset, size) of each member by extension,
    and the text of its small non-image members (labels). A shard that ends early (truncated) or has a
    corrupt header is indexed up to there and says so (``"error"``); members that run past its end are
    kept, so reading them is that sample's error."""
    samples: dict[str, dict[str, list[int]]] = {}
    texts: dict[str, dict[str, str]] = {}
    error = None
    try:
        with (tarfile.open(fileobj=stream, mode="r|") if stream is not None else tarfile.open(path, "r:")) \
                as archive:
            for member in archive:
                if not member.isfile():
                    continue
                key, extension = split_key(member.name)
                samples.setdefault(key, {})[extension] = [member.offset_data, member.size]
                if extension not in IMAGE_EXTENSIONS and member.size <= MAX_TEXT:
                    # small members (labels) go into the index, so opening the shards reads no sample
                    data = archive.extractfile(member).read()
                    if len(data) == member.size:
                        texts.setdefault(key, {})[extension] = data.decode("utf-8", "replace")
    except (tarfile.TarError, EOFError, *((OSError,) if stream is None else ())) as failure:
        # (a remote stream's OSError -- a timeout, a reset -- is the network's, not the shard's: it goes up
        # to be retried, never into the index as if the shard ended there)
        error = f"cannot read past {sum(len(m) for m in samples.values())} members: {failure}"
    return {"version": INDEX_VERSION, "error": error,
            "samples": [[key, members, texts.get(key, {})] for key, members in samples.items()]}


def is_whole_index(index: dict) -> bool:
    """Whether a cached index is one of this version, whole (a malformed one is rebuilt)."""
    samples = index.get("samples")
    return index.get("version") == INDEX_VERSION and "error" in index and isinstance(samples, list) and \
        all(isinstance(s, list) and len(s) == 3 and isinstance(s[1], dict) and isinstance(s[2], dict)
            for s in samples)


def _label(extension: str, text: str) -> int:
    """A label member's class: ``.cls`` and ``.txt`` hold the integer as text; ``.json`` holds an integer
    or an object with an integer ``"label"`` (or ``"cls"``)."""
    text = text.strip()
    if extension == "json":
        value = json.loads(text)
        if isinstance(value, dict):
            value = value.get("label", value.get("cls"))
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"no integer label in {text[:60]!r}")
        return value
    return int(text)


class TarShards(ShardedSource):
    """WebDataset tar shards as a source: ``fastload.DataLoader(TarShards("train-{0000..0146}.tar"), ...)``.

    A sample is a key's members: its image is the first of ``.jpg``, ``.jpeg``, ``.png``, ``.webp`` it has
    and its label the first of ``.cls``, ``.txt`` (an integer as text) or ``.json`` (an integer, or
    ``{"label": n}``); ``label_extensions`` changes that choice. Samples are numbered shard by shard in
    their order in the shard, so the order, sharding, resume and augmentation rules are a folder's
    (``fastload.Source``: shuffle, seed, drop_last, even_shards, rank, world_size). A sample with no
    image or no readable label, or whose bytes lie past the end of a truncated shard, is a DecodeError
    naming ``shard.tar:key`` when read (``on_error="skip"`` skips and reports it).

    Args:
        urls: a shard path or fsspec URL, a brace pattern (``train-{000000..001023}.tar``), a glob, or a
            list of them.
        transform, target_transform: as torchvision's.
        label_extensions: which members hold the label, in order of preference.
        storage_options: passed to the remote filesystem (fsspec's name for them): an S3 endpoint
            (``{"endpoint_url": ...}``), credentials, ``{"anon": True}``...
        cache_dir: where indexes go for remote shards and when a shard's folder is read-only.
        timeout: seconds a remote request (HTTP, S3) may wait to connect, or for the next bytes, before it
            fails (and is retried).
        retries, backoff: how many times a remote call that failed transiently (a 5xx or 429 answer, a reset
            connection, a timeout, a body cut short) is tried again, after ``backoff`` (0.25 s), then twice
            that, ...; then, or at once for a permanent failure (404, 403, a shard changed since it was
            indexed), it is an error naming the shard's URL and saying which (a DecodeError naming the key
            too, for a sample's read). ``self.retried`` counts the retries. Every read of a remote shard is
            checked to be of the version indexed (ETag, else last-modified time, and size).
        mode: ``"indexed"`` (the default for local shards): a sample is one ranged read, in a folder's order.
            ``"streaming"`` (the default for remote shards): a remote shard is fetched whole, in one
            sequential read, into a local cache, and read there; each rank reads a contiguous run of the
            epoch's shards, mixed by a shuffle buffer (``fastload.order.StreamOrder``), fetching the next
            ``read_ahead`` shards while it reads one. Both are pure functions of (seed, epoch): equal
            batch counts on every rank, exact and elastic resume.
        shuffle_buffer: streaming, ``shuffle=True``: samples a rank draws its next one from.
        read_ahead: streaming: shards fetched ahead of the one being read.
        cache_limit: streaming: bytes the local copies of remote shards may take (``cache_dir``/shards, else
            ``shards`` in fastload's cache folder, shared by the node's processes); the least recently
            used go first. It must hold ``read_ahead + 2`` shards per process. A fetched copy whose size is not
            the shard's is never kept.
        lock_timeout: streaming: seconds a process waits for another one's fetch of a shard (600) before an
            error naming that process (``fastload.shardcache.LockTimeout``).
        **order: ``shuffle``, ``seed``, ``drop_last``, ``even_shards``, ``rank``, ``world_size``: see
            ``fastload.Source``.
    """

    def __init__(self, urls, transform: Callable | None = None, target_transform: Callable | None = None, *,
                 label_extensions: tuple[str, ...] = LABEL_EXTENSIONS, cache_dir: str | None = None,
                 timeout: float = 60.0, retries: int = 3, mode: str | None = None, shuffle_buffer: int = 1000,
                 read_ahead: int = 2, cache_limit: int = 16 << 30, storage_options: dict | None = None,
                 backoff: float = 0.25, lock_timeout: float = LOCK_TIMEOUT, **order):
        self.storage = ShardFiles(urls, "fastload.TarShards", cache_dir=cache_dir, timeout=timeout,
                                  retries=retries, mode=mode, cache_limit=cache_limit,
                                  storage_options=storage_options, backoff=backoff,
                                  lock_timeout=lock_timeout)
        self.shards = self.storage.paths
        self.shuffle_buffer, self.read_ahead = shuffle_buffer, read_ahead
        self.ranges: list[tuple[int, int, int]] = []  # per sample: (shard number, offset, size) of its image
        self.problems: dict[int, str] = {}  # per bad sample: why it cannot be read
        samples: list[tuple[str, int]] = []
        for number, path in enumerate(self.shards):
            index = self.storage.index(number, "shard-index", ".idx.json", is_whole_index, build_index)
            for key, members, texts in index["samples"]:
                image = next((e for e in IMAGE_EXTENSIONS if e in members), None)
                label, problem = -1, None
                if image is None:
                    problem = f"no image member ({', '.join('.' + e for e in IMAGE_EXTENSIONS)}) " \
                              f"among {sorted(members)}"
                else:
                    label, problem = self._label(members, texts, label_extensions)
                if problem is not None:
                    self.problems[len(samples)] = problem
                offset, size = members[image] if image else (0, 0)
                self.ranges.append((number, offset, size))
                samples.append((f"{path}:{key}", label))
            if index["error"] and not index["samples"]:
                raise ValueError(f"fastload.TarShards: {path}: not a readable tar ({index['error']})")
            if index["error"] and len(samples) - 1 in self.problems:  # the sample the shard ends in
                self.problems[len(samples) - 1] += f" (the shard is cut short: {index['error']})"
        super().__init__(samples, transform, target_transform, **order)

    def _repr_parts(self) -> list:
        return [("shards", self._paths(vars(self).get("shards"))), *super()._repr_parts(),
                ("mode", self._quoted(getattr(vars(self).get("storage"), "mode", None)))]

    @staticmethod
    def _label(members: dict, texts: dict, extensions) -> tuple[int, str | None]:
        found = next((e for e in extensions if e in members), None)
        if found is None:
            return -1, f"no label member ({', '.join('.' + e for e in extensions)}) among {sorted(members)}"
        if found not in texts:
            return -1, f"its .{found} member is over {MAX_TEXT} bytes or lies past the end of the shard"
        try:
            return _label(found, texts[found]), None
        except ValueError as error:
            return -1, f"unreadable label in its .{found} member: {error}"

    def read(self, index: int) -> bytes:
        """The sample's image bytes: one ranged read of its shard (``ShardFiles.read``)."""
        if index in self.problems:
            raise DecodeError(index, self.samples[index][0], self.problems[index])
        data = self.read_range(index)
        if len(data) < self.ranges[index][2]:
            raise DecodeError(index, self.samples[index][0], f"the shard ends {self.ranges[index][2] - len(data)} "
                                                             f"bytes into this image (truncated)")
        if not data:
            raise DecodeError(index, self.samples[index][0], "empty image member")
        return data

    @classmethod
    def write(cls, samples, path: str | Path) -> str:
        """Write ``samples`` [(key, image bytes, label)] as one shard in WebDataset's layout (``key.jpg`` or
        the image's own extension given as ``key.png`` etc., and ``key.cls``); returns the path."""
        path = os.fspath(path)
        with tarfile.open(path, "w") as archive:
            for key, data, label in samples:
                stem, dot, extension = key.partition(".")
                add_member(archive, f"{stem}.{extension if dot else 'jpg'}", data)
                add_member(archive, f"{stem}.cls", str(int(label)).encode())
        return path


def add_member(archive: tarfile.TarFile, name: str, payload: bytes) -> None:
    """One member with ``payload``, as shards are written (mtime 0, mode 644: the same bytes every time)."""
    import io
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(payload), 0, 0o644
    archive.addfile(info, io.BytesIO(payload))
