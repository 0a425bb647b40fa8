"""The files of a sharded source -- tar shards, TFRecord files -- on a local disk or behind any fsspec URL.

``TarShards`` and ``TFRecords`` differ only in how a file is indexed and how
a sample's bytes are unpacked; where the files are, how their indexes are
cached, how a byte range of one is read, and the two read modes are the
same for both, and live here:

* ``ShardFiles``: the list of files (paths, brace patterns, globs, URLs);
  each file's index, cached beside it or in a cache folder and rebuilt when
  the file changes (local: size and mtime; remote: size and ETag or
  last-modified); a byte range read with one ``pread``, one ranged request
  (indexed mode), or a ``pread`` of the file's whole local copy in the
  ``ShardCache`` (streaming mode, remote files); remote calls under a
  timeout and retried with backoff, the retries counted.
* ``ShardedSource``: a source whose samples are byte ranges of those files,
  ordered as a folder (indexed) or as whole files per rank
  (``order.StreamOrder``, streaming).

fsspec runs its HTTP and S3 clients on its own daemon event-loop thread,
which fastload neither starts nor stops.
"""

from __future__ import annotations

import glob
import os
import re
import threading
import time
from typing import BinaryIO, Callable

from .errors import DecodeError
from .index_cache import cache_folder, cache_name, cached_index
from .order import StreamOrder
from .shardcache import ShardCache
from .sources import ByteSource

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_CHOICE = re.compile(r"\{([^{}]*,[^{}]*)\}")
MODES = ("indexed", "streaming")


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
    """(fsspec filesystem, path) for a remote file. HTTP and S3 get ``timeout`` seconds to connect and per
    read (fsspec's HTTP default never gives up on a server that stops answering) and no retries of their
    own, so that every retry is ``ShardFiles.with_retries``'s, with its backoff, counted in loader.stats.
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
    given = storage_options or {}
    merged = {**options, **given}
    for key in ("client_kwargs", "config_kwargs"):  # one level deep: the user's headers keep the timeouts
        if key in options and isinstance(given.get(key), dict):
            merged[key] = {**options[key], **given[key]}
    fs, path = fsspec.core.url_to_fs(url, **merged)
    if protocol in ("s3", "s3a") and merged["config_kwargs"].get("retries") == {"total_max_attempts": 1}:
        # unless the user chose botocore's retries: s3fs has no argument for its own, only the attribute;
        # this instance is fsspec's cached one for exactly these options, so no one else's changes
        fs.retries = 1
    return fs, path


def shard_paths(urls, timeout: float = 60.0, owner: str = "fastload.TarShards",
                storage_options: dict | None = None) -> list[str]:
    """``urls`` (a path or URL, a brace pattern, a glob, or a list of them) as the list of files; errors
    name ``owner``."""
    patterns = [urls] if isinstance(urls, (str, os.PathLike)) else list(urls)
    paths: list[str] = []
    for pattern in map(os.fspath, patterns):
        if os.path.isfile(pattern):  # an existing file is itself, whatever characters its name holds
            paths.append(pattern)
            continue
        remote = is_remote(pattern)
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


def _local_identity(path: str) -> dict:
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _remote_identity(fs, path: str) -> dict:
    """What says a remote file is unchanged: its size and whichever of ETag / last-modified it reports."""
    info = fs.info(path)
    identity = {"size": info.get("size")}
    for key in ("ETag", "etag", "LastModified", "last_modified", "mtime"):
        if info.get(key) is not None:
            identity["version_tag"] = str(info[key])
            break
    return identity


def _version(identity: dict) -> str:
    """Which version of a file an identity describes: its size and ETag (or mtime)."""
    return f"{identity.get('size')}-{identity.get('version_tag', identity.get('mtime_ns'))}"


class ShardFiles:
    """The files a sharded source reads, where their indexes are, and how a byte range of one is read.

    Args:
        urls: a path or fsspec URL, a brace pattern, a glob, or a list of them.
        owner: the source's name, for errors.
        cache_dir: where indexes go for remote files and when a file's folder is read-only (default:
            fastload's cache folder), and, streaming, the local copies (``cache_dir``/shards).
        timeout, retries: remote calls: seconds to connect or for the next bytes; tries again after
            0.25 s, 0.5 s, 1 s, ... (``retried`` counts them).
        mode: ``"indexed"`` or ``"streaming"``; by default streaming when a file is remote.
        cache_limit: streaming: bytes the local copies may take.
        storage_options: for the remote filesystem (fsspec's name): an endpoint, credentials, ...
    """

    def __init__(self, urls, owner: str, *, cache_dir: str | None = None, timeout: float = 60.0,
                 retries: int = 3, mode: str | None = None, cache_limit: int = 16 << 30,
                 storage_options: dict | None = None):
        self.owner, self.cache_dir, self.timeout, self.retries = owner, cache_dir, timeout, retries
        self.storage_options = dict(storage_options or {})
        self.retried = 0  # remote calls tried again, over this object's life
        self._retried_lock = threading.Lock()
        self._filesystems: dict = {}  # protocol -> its fsspec filesystem (see filesystem)
        self.paths = shard_paths(urls, timeout, owner, self.storage_options)
        remote = any(map(is_remote, self.paths))
        self.mode = mode or ("streaming" if remote else "indexed")
        if self.mode not in MODES:
            raise ValueError(f"{owner}: mode must be 'indexed' or 'streaming', not {mode!r}")
        self.cache = ShardCache(os.path.join(cache_dir, "shards") if cache_dir else cache_folder("shards"),
                                cache_limit) if self.mode == "streaming" and remote else None
        self.versions: list[str] = [""] * len(self.paths)  # per file: its size and ETag (or mtime), once indexed

    def index(self, number: int, kind: str, suffix: str, describes: Callable[[dict], bool],
              build: Callable[[str | None, BinaryIO | None], dict]) -> dict:
        """File ``number``'s index: the cached one if it still describes the file (its size and mtime, or
        ETag, and ``describes(index)``), else ``build(local_path, None)`` or, for a remote file read as a
        stream, ``build(None, stream)``, and cached: beside a local file (``file`` + ``suffix``) or, where
        that folder is read-only and for remote files, in the ``kind`` folder of the cache. Streaming, a
        remote file is indexed from its whole local copy, which the first epoch then reads without
        fetching the file again."""
        path = self.paths[number]
        fallback = cache_folder(kind, self.cache_dir)
        if is_remote(path):
            identity = self.with_retries(lambda: _remote_identity(*self.filesystem(path)), path)
            places = [cache_name(fallback, path.replace("://", "/"), suffix)]
        else:
            identity = _local_identity(path)
            places = [path + suffix, cache_name(fallback, os.path.abspath(path), suffix)]
        self.versions[number] = _version(identity)

        def streamed() -> dict:
            fs, inner = self.filesystem(path)
            with fs.open(inner, "rb", block_size=4 << 20) as stream:
                return build(None, stream)

        def built() -> dict:
            if not is_remote(path):
                return {**build(path, None), **identity}
            if self.cache is not None:  # from the descriptor held, which another process's eviction cannot close
                with os.fdopen(os.dup(self.descriptor(number)), "rb") as copy:
                    return {**build(None, copy), **identity}
            return {**self.with_retries(streamed, path), **identity}
        return cached_index(places, lambda index: all(index.get(k) == v for k, v in identity.items())
                            and describes(index), built)

    def read(self, number: int, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` of file ``number`` (fewer where the file ends first): a ``pread``
        of the local file or of a remote file's local copy (streaming), or one ranged request, retried
        (indexed). Raises OSError (RemoteError once the retries are spent). All release the GIL."""
        path = self.paths[number]
        if self.cache is not None and is_remote(path):
            return os.pread(self.descriptor(number), size, offset)
        if is_remote(path):
            fs, inner = self.filesystem(path)
            return self.with_retries(lambda: fs.cat_file(inner, start=offset, end=offset + size), path)
        descriptor = os.open(path, os.O_RDONLY)
        try:
            return os.pread(descriptor, size, offset)
        finally:
            os.close(descriptor)

    def descriptor(self, number: int) -> int:
        """Streaming: an open descriptor of remote file ``number``'s whole local copy, fetched (with
        retries) if need be."""
        path = self.paths[number]
        fs, inner = self.filesystem(path)
        return self.cache.descriptor(self.cache.name(path, self.versions[number]),
                                     lambda part: self.with_retries(lambda: fs.get_file(inner, part), path))

    def prefetch(self, numbers: list[int]) -> None:
        """Streaming: start fetching these files into the local cache, on fsspec's event loop
        (asynchronous filesystems: HTTP, S3, GCS; others are fetched when first read)."""
        for number in numbers:
            path = self.paths[number]
            if is_remote(path):
                fs, inner = self.filesystem(path)
                fetch = (lambda part, fs=fs, inner=inner: fs._get_file(inner, part)) \
                    if getattr(fs, "async_impl", False) else None
                self.cache.prefetch(self.cache.name(path, self.versions[number]), fetch,
                                    getattr(fs, "loop", None))

    def filesystem(self, path: str):
        """(fsspec filesystem, path) for a remote file: one filesystem per protocol for this object's life
        (fsspec makes one per thread, and the loader's threads are new each epoch, so per-read lookups would
        pile up clients and sessions); fsspec's asynchronous filesystems serve every thread."""
        protocol = path.split("://", 1)[0]
        fs = self._filesystems.get(protocol)
        if fs is None:
            fs = self._filesystems.setdefault(protocol, filesystem(path, self.timeout, self.storage_options)[0])
        return fs, fs._strip_protocol(path)

    def with_retries(self, call, what: str):
        """``call()``, tried again after 0.25 s, 0.5 s, ... on a network error or timeout (not on a missing
        file or a refused permission); the last failure becomes a RemoteError naming ``what``."""
        for attempt in range(self.retries + 1):
            try:
                return call()
            except (FileNotFoundError, PermissionError, IsADirectoryError, ImportError, ValueError):
                raise  # retrying does not help: a missing file, a missing fsspec backend, a bad URL
            except Exception as error:  # aiohttp's and botocore's errors, timeouts, OSError
                if attempt == self.retries:
                    raise RemoteError(f"{what}: {type(error).__name__}: {error} (after {attempt + 1} "
                                      f"tries)") from error
                with self._retried_lock:
                    self.retried += 1
                time.sleep(0.25 * 2 ** attempt)

    def __getstate__(self) -> dict:
        """A copy for another process (a torch DataLoader's worker under spawn): no lock, no filesystem."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_retried_lock", "_filesystems")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _retried_lock=threading.Lock(), _filesystems={})


class ShardedSource(ByteSource):
    """A source whose samples are byte ranges of ``ShardFiles`` (``TarShards``, ``TFRecords``).

    A subclass sets ``storage`` (its ShardFiles) and ``ranges`` (per sample: file number, offset, size)
    before ``Source.__init__``; ``read_range`` gives a sample's bytes. Indexed, the order is a folder's;
    streaming, whole files (``StreamOrder``): each rank a contiguous run of them, a shuffle buffer of
    ``shuffle_buffer`` samples, the next ``read_ahead`` files fetched while one is read.
    """

    storage: ShardFiles
    ranges: list[tuple[int, int, int]]
    shuffle_buffer: int = 1000
    read_ahead: int = 2

    @property
    def mode(self) -> str:
        return self.storage.mode

    @property
    def cache(self) -> ShardCache | None:
        return self.storage.cache

    @property
    def retried(self) -> int:
        """Remote calls tried again, over the source's life (``loader.stats.retried``: per epoch)."""
        return self.storage.retried

    def order(self, **rules):
        """Streaming: whole files, a contiguous run of them per rank (``StreamOrder``); else a folder's."""
        if self.mode != "streaming":
            return super().order(**rules)
        return StreamOrder([number for number, _, _ in self.ranges], shuffle_buffer=self.shuffle_buffer,
                           read_ahead=self.read_ahead,
                           prefetch=self.storage.prefetch if self.cache is not None else None, **rules)

    def read_range(self, index: int) -> bytes:
        """Sample ``index``'s byte range (a DecodeError naming the sample when it cannot be read; fewer
        bytes than asked when the file ends first)."""
        number, offset, size = self.ranges[index]
        try:
            return self.storage.read(number, offset, size)
        except (OSError, ValueError, ImportError) as error:  # (fsspec's own errors for a bad URL or backend)
            raise DecodeError(index, self.samples[index][0],
                              f"cannot read: {getattr(error, 'strerror', None) or error}") from error
