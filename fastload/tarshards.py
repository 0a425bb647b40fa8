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
s3fs installed, ...): a remote shard is indexed by reading it once as a
stream and its index cached locally (fsspec runs its HTTP client on its
own daemon event-loop thread, which fastload neither starts nor stops).
Then a sample is read in one of two modes. Indexed (local shards' default):
one ranged request (retried with backoff, under a timeout). Streaming
(remote shards' default, since object stores charge and wait per request):
the order gives each rank a contiguous run of whole shards
(``order.StreamOrder``), each fetched in one read, ahead of use, into a
node-wide local cache (``shardcache.ShardCache``) and read there.
``fastload pack`` writes shards; ``tfrecords.py`` is the other byte-range
source.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tarfile
import threading
import time
from pathlib import Path
from typing import Callable

from .errors import DecodeError
from .index_cache import cache_folder, cache_name, cached_index
from .order import StreamOrder
from .shardcache import ShardCache
from .sources import ByteSource

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")  # the first one a sample has is its image
LABEL_EXTENSIONS = ("cls", "txt", "json")  # likewise for its label; see _label
INDEX_VERSION = 1
MAX_TEXT = 4096  # members up to this size that are not images are kept in the index as text
_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_CHOICE = re.compile(r"\{([^{}]*,[^{}]*)\}")


def expand(pattern: str) -> list[str]:
    """Brace patterns as webdataset writes them: ``{000..123}`` (zero-padded to the first bound's width)
    and ``{a,b}``, several in one pattern, the leftmost varying slowest (braceexpand's order)."""
    found = [m for m in (_RANGE.search(pattern), _CHOICE.search(pattern)) if m]
    if not found:
        return [pattern]
    match = min(found, key=lambda m: m.start())
    head, tail = pattern[:match.start()], pattern[match.end():]
    if match.re is _RANGE:
        low, high = match.group(1), match.group(2)
        choices = [f"{n:0{len(low)}d}" for n in range(int(low), int(high) + 1)]
    else:
        choices = match.group(1).split(",")
    return [head + choice + rest for choice in choices for rest in expand(tail)]


class RemoteError(OSError):
    """A remote read that failed on every try (network error, timeout, server error)."""


def is_remote(url: str) -> bool:
    return "://" in url and not url.startswith("file://")


def filesystem(url: str, timeout: float, storage_options: dict | None = None):
    """(fsspec filesystem, path) for a remote shard. HTTP and S3 get ``timeout`` seconds to connect and per
    read (fsspec's HTTP default never gives up on a server that stops answering) and no retries of their
    own, so that every retry is ``TarShards._with_retries``'s, with its backoff, counted in loader.stats.
    ``storage_options`` (an endpoint, credentials, ...) go to the filesystem and win over these."""
    import fsspec
    protocol = url.split("://", 1)[0]
    options: dict = {}
    if protocol in ("http", "https"):
        import aiohttp
        # per connection and per read, not in total: a whole shard (streaming) may take longer than a
        # timeout to arrive, but a server that stops sending for that long has stalled
        options["client_kwargs"] = {"timeout": aiohttp.ClientTimeout(total=None, sock_connect=timeout,
                                                                     sock_read=timeout)}
    elif protocol in ("s3", "s3a"):  # botocore tries once; s3fs's own retry loop too (below)
        options["config_kwargs"] = {"connect_timeout": timeout, "read_timeout": timeout,
                                    "retries": {"total_max_attempts": 1}}
    fs, path = fsspec.core.url_to_fs(url, **{**options, **(storage_options or {})})
    if protocol in ("s3", "s3a") and "config_kwargs" not in (storage_options or {}):
        # s3fs has no argument for it, only the attribute; this instance is fsspec's cached one for
        # exactly these options (fastload's config_kwargs), so no one else's filesystem changes
        fs.retries = 1
    return fs, path


def shard_paths(urls, timeout: float = 60.0, owner: str = "fastload.TarShards", remote_ok: bool = True,
                storage_options: dict | None = None) -> list[str]:
    """``urls`` (a path or URL, a brace pattern, a glob, or a list of them) as the list of files; errors
    name ``owner``, and a URL is refused by name where it cannot be read (``remote_ok=False``)."""
    patterns = [urls] if isinstance(urls, (str, os.PathLike)) else list(urls)
    paths: list[str] = []
    for pattern in map(os.fspath, patterns):
        remote = is_remote(pattern)
        if remote and not remote_ok:
            raise NotImplementedError(f"{owner}: {pattern}: remote files are not supported yet (local paths, "
                                      f"brace patterns and globs are)")
        pattern = pattern.removeprefix("file://")
        for name in expand(pattern):
            if not glob.has_magic(name.split("://", 1)[-1]):
                found = [name]
            elif remote:
                fs, path = filesystem(name, timeout, storage_options)
                found = sorted(fs.unstrip_protocol(p) for p in fs.glob(path))
            else:
                found = sorted(glob.glob(name))
            if not found:
                raise FileNotFoundError(f"{owner}: nothing matches {name!r}")
            paths.extend(found)
    if not paths:
        raise ValueError(f"{owner}: no files given")
    return paths


def split_key(name: str) -> tuple[str, str]:
    """(key, extension) of a member: the path up to the first "." of the file name, and the rest,
    lower-cased (webdataset's base_plus_ext)."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (extension.lower() if dot else "")


def build_index(path: str, stream=None, identity: dict | None = None) -> dict:
    """A shard's index from its tar headers: per sample (in the order of its first member), its key, the
    (offset, size) of each member by extension, and the text of its small non-image members (labels). A
    shard that ends early (truncated) or has a corrupt header is indexed up to there and says so
    (``"error"``); members that run past its end are kept, so reading them is that sample's error."""
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
    except (tarfile.TarError, OSError, EOFError) as failure:
        error = f"cannot read past {sum(len(m) for m in samples.values())} members: {failure}"
    identity = identity if identity is not None else _local_identity(path)
    return {"version": INDEX_VERSION, **identity, "error": error,
            "samples": [[key, members, texts.get(key, {})] for key, members in samples.items()]}


def _local_identity(path: str) -> dict:
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _remote_identity(fs, path: str) -> dict:
    """What says a remote shard is unchanged: its size and whichever of ETag / last-modified it reports."""
    info = fs.info(path)
    identity = {"size": info.get("size")}
    for key in ("ETag", "etag", "LastModified", "last_modified", "mtime"):
        if info.get(key) is not None:
            identity["version_tag"] = str(info[key])
            break
    return identity


def load_index(path: str, cache_dir: str | None = None, timeout: float = 60.0,
               local_copy: Callable[[dict], str] | None = None, storage_options: dict | None = None) -> dict:
    """The shard's index: the cached one if it still describes the shard (same size and mtime -- for a
    remote shard, size and ETag or last-modified), else built and cached: beside a local shard
    (``shard.tar.idx.json``) or, where that folder is read-only and for remote shards, in ``cache_dir``
    (default: ``shard-index`` in fastload's cache, ~/.cache/fastload unless $FASTLOAD_CACHE says).
    A remote shard is read as a stream to index it, or, given ``local_copy(identity)`` (streaming: the
    path of its whole copy in the shard cache, fetched if need be), indexed from that copy, which the
    first epoch then reads without fetching the shard again."""
    fallback = cache_folder("shard-index", cache_dir)
    if is_remote(path):
        fs, inner = filesystem(path, timeout, storage_options)
        identity = _remote_identity(fs, inner)
        places = [cache_name(fallback, path.replace("://", "/"), ".idx.json")]
    else:
        identity = _local_identity(path)
        places = [path + ".idx.json", cache_name(fallback, os.path.abspath(path), ".idx.json")]

    def build() -> dict:
        if not is_remote(path):
            return build_index(path)
        if local_copy is not None:
            return build_index(local_copy(identity), identity=identity)
        with fs.open(inner, "rb", block_size=4 << 20) as stream:
            return build_index(path, stream, identity)
    return cached_index(places, lambda index: index.get("version") == INDEX_VERSION
                        and all(index.get(k) == v for k, v in identity.items()), build)


def _version(identity: dict) -> str:
    """Which version of a shard an index or identity describes: its size and ETag (or mtime)."""
    return f"{identity.get('size')}-{identity.get('version_tag', identity.get('mtime_ns'))}"


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


class TarShards(ByteSource):
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
        timeout: seconds an HTTP request may wait to connect, or for the next bytes, before it fails (and is
            retried).
        retries: how many times a failed remote read is tried again, after 0.25 s, 0.5 s, 1 s, ...; then
            it is a DecodeError naming the shard URL and the key. ``self.retried`` counts the retries.
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
            used go first. It must hold ``read_ahead + 2`` shards per process.
    """

    def __init__(self, urls, transform: Callable | None = None, target_transform: Callable | None = None, *,
                 label_extensions: tuple[str, ...] = LABEL_EXTENSIONS, cache_dir: str | None = None,
                 timeout: float = 60.0, retries: int = 3, mode: str | None = None, shuffle_buffer: int = 1000,
                 read_ahead: int = 2, cache_limit: int = 16 << 30, storage_options: dict | None = None,
                 **order):
        self.timeout, self.retries, self.retried = timeout, retries, 0
        self._retried_lock = threading.Lock()
        self.storage_options = dict(storage_options or {})
        self.shards = shard_paths(urls, timeout, storage_options=self.storage_options)
        self.ranges: list[tuple[int, int, int]] = []  # per sample: (shard number, offset, size) of its image
        self.problems: dict[int, str] = {}  # per bad sample: why it cannot be read
        self.versions: list[str] = []  # per shard: its size and ETag (a remote shard's copy is of this version)
        remote = any(map(is_remote, self.shards))
        self.mode = mode or ("streaming" if remote else "indexed")
        if self.mode not in ("indexed", "streaming"):
            raise ValueError(f"fastload.TarShards: mode must be 'indexed' or 'streaming', not {mode!r}")
        self.shuffle_buffer, self.read_ahead = shuffle_buffer, read_ahead
        self.cache = ShardCache(os.path.join(cache_dir, "shards") if cache_dir else cache_folder("shards"),
                                cache_limit) if self.mode == "streaming" and remote else None
        samples: list[tuple[str, int]] = []
        for number, path in enumerate(self.shards):
            local_copy = (lambda identity, path=path: self._local_copy(path, _version(identity))) \
                if self.cache is not None else None
            index = self._with_retries(lambda: load_index(path, cache_dir, timeout, local_copy,
                                                                 self.storage_options), path)
            self.versions.append(_version(index))
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

    def order(self, **rules):
        """Streaming: whole shards, a contiguous run of them per rank (``StreamOrder``); else a folder's."""
        if self.mode != "streaming":
            return super().order(**rules)
        return StreamOrder([number for number, _, _ in self.ranges], shuffle_buffer=self.shuffle_buffer,
                           read_ahead=self.read_ahead, prefetch=self.prefetch if self.cache else None, **rules)

    def prefetch(self, numbers: list[int]) -> None:
        """Start fetching these shards into the local cache, on fsspec's event loop (asynchronous
        filesystems: HTTP, S3, GCS; others are fetched when first read)."""
        for number in numbers:
            path = self.shards[number]
            if is_remote(path):
                fs, inner = self._filesystem(path)
                fetch = (lambda part, fs=fs, inner=inner: fs._get_file(inner, part)) \
                    if getattr(fs, "async_impl", False) else None
                self.cache.prefetch(self.cache.name(path, self.versions[number]), fetch, getattr(fs, "loop", None))

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
        """The sample's image bytes: one ranged read of its shard (os.pread, or one ranged request for a
        remote shard; both release the GIL)."""
        name = self.samples[index][0]
        if index in self.problems:
            raise DecodeError(index, name, self.problems[index])
        number, offset, size = self.ranges[index]
        path = self.shards[number]
        try:
            if self.cache is not None and is_remote(path):  # streaming: from the shard's local copy
                data = os.pread(self._descriptor(path, self.versions[number]), size, offset)
            elif is_remote(path):
                fs, inner = self._filesystem(path)
                data = self._with_retries(lambda: fs.cat_file(inner, start=offset, end=offset + size), path)
            else:
                descriptor = os.open(path, os.O_RDONLY)
                try:
                    data = os.pread(descriptor, size, offset)
                finally:
                    os.close(descriptor)
        except (OSError, RemoteError) as error:
            raise DecodeError(index, name, f"cannot read: {getattr(error, 'strerror', None) or error}") from error
        if len(data) < size:
            raise DecodeError(index, name, f"the shard ends {size - len(data)} bytes into this image (truncated)")
        if not data:
            raise DecodeError(index, name, "empty image member")
        return data

    def _descriptor(self, path: str, version: str) -> int:
        """An open descriptor of the remote shard's whole local copy, fetched (with retries) if need be."""
        fs, inner = self._filesystem(path)
        return self.cache.descriptor(self.cache.name(path, version),
                                     lambda part: self._with_retries(lambda: fs.get_file(inner, part), path))

    def _filesystem(self, path: str):
        return filesystem(path, self.timeout, self.storage_options)

    def _local_copy(self, path: str, version: str) -> str:
        self._descriptor(path, version)
        return self.cache.name(path, version)

    def _with_retries(self, call, what: str):
        """``call()``, tried again after 0.25 s, 0.5 s, ... on a network error or timeout (not on a missing
        file or a refused permission); the last failure becomes a RemoteError naming ``what``."""
        for attempt in range(self.retries + 1):
            try:
                return call()
            except (FileNotFoundError, PermissionError, IsADirectoryError, ImportError, ValueError):
                raise  # retrying does not help: a missing shard, a missing fsspec backend, a bad URL
            except Exception as error:  # aiohttp's and botocore's errors, timeouts, OSError
                if attempt == self.retries:
                    raise RemoteError(f"{what}: {type(error).__name__}: {error} (after {attempt + 1} "
                                      f"tries)") from error
                with self._retried_lock:
                    self.retried += 1
                time.sleep(0.25 * 2 ** attempt)

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
