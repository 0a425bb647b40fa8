"""The files of a sharded source -- tar shards, TFRecord files -- on a local disk or behind any fsspec URL.

``TarShards`` and ``TFRecords`` differ only in how a file is indexed and how
a sample's bytes are unpacked; where the files are, how their indexes are
cached, how a byte range of one is read, and the two read modes are the
same for both, and live here:

* ``ShardFiles``: the list of files (paths, brace patterns, globs, URLs);
  each file's index, cached beside it or in a cache folder and rebuilt when
  the file changes (local: size and mtime; remote: size and ETag,
  generation or version id, else last-modified); a byte range read with one
  ``pread``, one ranged request (indexed mode), or a ``pread`` of the file's
  whole local copy in the ``ShardCache`` (streaming mode, remote files),
  each checked to be of the version indexed; remote calls (listings too)
  under a timeout and retried with backoff, the retries counted.
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
import stat
import threading
import time
from typing import BinaryIO, Callable

from .errors import DecodeError
from .index_cache import cache_folder, cache_name, cached_index
from .order import StreamOrder
from .shardcache import LOCK_TIMEOUT, ShardCache
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
    """A remote call that failed: a transient error (a 5xx or 429 answer, a reset connection, a timeout, a
    body cut short) on every try, or a permanent one (another 4xx answer), the message saying which and
    naming the URL. (A permanent 404 is a FileNotFoundError, a 401/403 a PermissionError, likewise.)"""


class ChangedError(RemoteError):
    """A remote file that is no longer the version indexed (its ETag, last-modified time or size differ):
    permanent; building the source again indexes the new version."""


class UnversionedWarning(UserWarning):
    """Remote files whose filesystem reports no version (no ETag, generation, version id or modification
    time): only their size is checked, so one replaced by another of the same size is not detected."""


class _Transient(OSError):
    """A transient failure that fastload finds itself: a server error answer, a body cut short."""


TRANSIENT_STATUS = frozenset({408, 425, 429})  # and every 5xx


def http_status(error: BaseException) -> int | None:
    """The HTTP status of a failed request in ``error`` or its causes: aiohttp's ``status``, botocore's
    ``HTTPStatusCode``, or the one fastload attached."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        status = getattr(error, "status", None)
        if status is None:
            response = getattr(error, "response", None)
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) \
                else None
        if isinstance(status, int) and status >= 400:
            return status
        error = error.__cause__ or error.__context__
    return None


def is_transient(error: BaseException) -> bool:
    """Whether trying again may help: an HTTP answer of 5xx, 408, 425 or 429, or no answer at all (a reset or
    refused connection, a timeout, a body cut short) -- not a missing file, a refused permission, another
    4xx, a changed file, a bad URL or a missing fsspec backend."""
    status = http_status(error)
    if status is not None:
        return status >= 500 or status in TRANSIENT_STATUS
    return not isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
                                  ChangedError, ImportError, ValueError, TypeError))


def _status_error(url: str, status: int, reason: str) -> OSError:
    """The error for an HTTP answer of ``status``: FileNotFoundError (404, 410), PermissionError (401, 403),
    ChangedError (412: the If-Match of the version indexed failed), transient (5xx, 408, 425, 429), else a
    RemoteError; each carries the status."""
    message = f"{url}: HTTP {status} {reason or ''}".rstrip()
    if status in (404, 410):
        error: OSError = FileNotFoundError(message)
    elif status in (401, 403):
        error = PermissionError(message)
    elif status == 412:
        error = ChangedError(f"{url}: changed since it was indexed (HTTP 412: its ETag is no longer the one "
                             f"indexed); build the source again to index the new version")
    elif status >= 500 or status in TRANSIENT_STATUS:
        error = _Transient(message)
    else:
        error = RemoteError(message)
    error.status = status
    return error


def _check_version(url: str, identity: dict, etag: str | None, modified: str | None, total: int | None,
                   declared: bool = True) -> None:
    """A response is of the version indexed: its ETag (or, without one, its Last-Modified) and the file's
    size (``total``), where the server gives them; else a ChangedError naming the URL and what differs.
    A ``total`` the server did not declare (counted from a body that may be cut short) is a transient error."""
    def bare(tag: str) -> str:
        return tag.removeprefix("W/")
    if identity.get("etag") and etag and bare(etag) != bare(identity["etag"]):
        raise ChangedError(f"{url}: changed since it was indexed (ETag {identity['etag']} -> {etag}); build the "
                           f"source again to index the new version")
    if not identity.get("etag") and identity.get("modified") and modified and modified != identity["modified"]:
        raise ChangedError(f"{url}: changed since it was indexed (Last-Modified {identity['modified']} -> "
                           f"{modified}); build the source again to index the new version")
    size = identity.get("size")
    if size is not None and total is not None and total != size:
        if declared:
            raise ChangedError(f"{url}: changed since it was indexed ({size} bytes -> {total}); build the source "
                               f"again to index the new version")
        raise _Transient(f"{url}: the body ended after {total} of its {size} bytes (cut short)")


async def _http_get(fs, url: str, identity: dict, start: int | None = None, size: int = 0, out=None):
    """One GET of ``url`` through fsspec's HTTP session: ``size`` bytes at ``start`` (returned), or the whole
    file written to ``out``; with If-Match (a strong ETag) and checked against the version indexed
    (``_check_version``). A server that ignores the Range and answers 200 with the whole file is read and
    sliced (correct, if slow: its size and version are checked the same way)."""
    kwargs = dict(fs.kwargs)
    headers = {**kwargs.pop("headers", {}), "Accept-Encoding": "identity"}
    if start is not None:
        if size <= 0:
            return b""
        headers["Range"] = f"bytes={start}-{start + size - 1}"
    etag = identity.get("etag")
    if etag and not etag.startswith("W/"):  # If-Match compares strongly: a weak ETag never matches
        headers["If-Match"] = etag
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), headers=headers, **kwargs) as response:
        if response.status >= 400:
            raise _status_error(url, response.status, response.reason)
        etag, modified = response.headers.get("ETag"), response.headers.get("Last-Modified")
        length = response.headers.get("Content-Length")
        if response.status == 206:
            total = response.headers.get("Content-Range", "").rpartition("/")[2]
            _check_version(url, identity, etag, modified, int(total) if total.isdigit() else None)
            data = await response.read()
            if length is None and len(data) < min(size, (identity.get("size") or 1 << 62) - start):
                raise _Transient(f"{url}: a ranged answer ended after {len(data)} of {size} bytes (cut short)")
            return data
        declared = length is not None and length.isdigit()
        _check_version(url, identity, etag, modified, int(length) if declared else None)
        if out is None:  # a 200 to a ranged request: the whole file
            data = await response.read()
            _check_version(url, identity, None, None, len(data), declared=False)
            return data[start:start + size]
        count = 0
        while chunk := await response.content.read(1 << 20):
            out.write(chunk)
            count += len(chunk)
        _check_version(url, identity, None, None, count, declared=False)
        return None


async def _s3_get(fs, url: str, identity: dict, start: int | None = None, size: int = 0, out=None):
    """As ``_http_get``, through s3fs's client: GetObject with IfMatch (the ETag indexed) and a Range."""
    bucket, key, version_id = fs.split_path(url)
    kwargs = {"VersionId": version_id} if version_id else {}
    if start is not None:
        if size <= 0:
            return b""
        kwargs["Range"] = f"bytes={start}-{start + size - 1}"
    if identity.get("etag"):
        kwargs["IfMatch"] = identity["etag"]
    try:
        response = await fs._call_s3("get_object", Bucket=bucket, Key=key, **kwargs)
    except Exception as error:
        if http_status(error) == 412:
            raise _status_error(url, 412, "Precondition Failed") from error
        raise
    body = response["Body"]
    try:
        total = response.get("ContentRange", "").rpartition("/")[2]
        _check_version(url, identity, response.get("ETag"), None,
                       int(total) if total.isdigit() else None if start is not None else response.get("ContentLength"))
        if out is None:
            return await body.read()
        count = 0
        while chunk := await body.read(1 << 20):
            out.write(chunk)
            count += len(chunk)
        _check_version(url, identity, None, None, count, declared=False)
        return None
    finally:
        body.close()


def _getter(fs):
    """The checked GET (``_http_get``, ``_s3_get``) for ``fs``'s protocol; None for others (fsspec's own
    calls, with the size checked)."""
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    if "http" in protocols or "https" in protocols:
        return _http_get
    if "s3" in protocols and hasattr(fs, "_call_s3"):
        return _s3_get
    return None


def _reason(error: BaseException, url: str, status: int | None) -> str:
    """What went wrong, for a message that names ``url`` already: the HTTP status (and the error's own
    words, if it has any), else the error."""
    import http
    detail = str(error).replace(f"{url}: ", "").replace(url, "").strip(": ")
    if not isinstance(error, (_Transient, RemoteError)) and not detail.startswith("HTTP "):
        detail = f"{type(error).__name__}: {detail}" if detail else ""
    if status is None or detail.startswith("HTTP "):
        return detail or type(error).__name__
    try:
        said = f"HTTP {status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        said = f"HTTP {status}"
    return f"{said} ({detail})" if detail else said


class Sequential:
    """A file read front to back by an index builder, every size it is asked for checked against what is
    left before anything is allocated: a local file (``pread`` at each offset; its size known, so a length
    past its end is found without reading) or a stream read once (a remote file: read in chunks of at most
    ``CHUNK`` bytes, so a length field of 2**62 costs no more memory than the bytes the stream holds).

    ``at`` is the offset of the next byte; ``take(n)`` gives up to ``n`` bytes there and ``skip(n)`` passes
    up to ``n``, both fewer only where the file ends (the caller compares). A stream that is a regular
    file (a remote shard's local copy) is read as a local file."""

    CHUNK = 1 << 20

    def __init__(self, path: str | None = None, stream: BinaryIO | None = None):
        self.at, self.size, self.stream, self._descriptor, self._owned = 0, None, stream, None, False
        if path is not None:
            self._descriptor, self._owned = os.open(path, os.O_RDONLY), True
        else:
            try:
                descriptor = stream.fileno()
                if stat.S_ISREG(os.fstat(descriptor).st_mode):
                    self._descriptor, self.at = descriptor, stream.tell()
            except (AttributeError, OSError, ValueError):  # a network stream: no descriptor
                pass
        if self._descriptor is not None:
            self.size = os.fstat(self._descriptor).st_size

    def left(self) -> int | None:
        """Bytes left in a local file; None for a stream (known only at its end)."""
        return None if self.size is None else max(0, self.size - self.at)

    def take(self, n: int) -> bytes:
        if self._descriptor is not None:
            data = os.pread(self._descriptor, max(0, min(n, self.size - self.at)), self.at)
        else:
            parts, wanted = [], n
            while wanted > 0 and (part := self.stream.read(min(wanted, self.CHUNK))):
                parts.append(part)
                wanted -= len(part)
            data = b"".join(parts)
        self.at += len(data)
        return data

    def skip(self, n: int) -> int:
        if self._descriptor is not None:
            skipped = max(0, min(n, self.size - self.at))
        else:
            skipped = 0
            while skipped < n and (part := self.stream.read(min(n - skipped, self.CHUNK))):
                skipped += len(part)
        self.at += skipped
        return skipped

    def close(self) -> None:
        if self._owned:
            os.close(self._descriptor)
            self._owned = False

    def __enter__(self) -> "Sequential":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Counted:
    """A stream read once, its bytes counted (an index built from a stream must have read the whole file)."""

    def __init__(self, stream):
        self.stream, self.count = stream, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        return data

    def drain(self) -> int:
        while self.read(4 << 20):
            pass
        return self.count


def with_retries(call, what: str, retries: int, backoff: float, on_retry: Callable[[], None] | None = None):
    """``call()``, tried again after ``backoff``, twice that, ... on a transient failure (``is_transient``:
    a 5xx, 408, 425 or 429 answer, a reset connection, a timeout, a body cut short); a permanent one (a
    404, a 403, another 4xx, a changed file) is raised at once. Either way the error names ``what`` (the
    URL) and says which: "permanent, not retried" (a FileNotFoundError for 404/410, PermissionError for
    401/403, ChangedError, else RemoteError), or "transient ... after N tries" (RemoteError). A bad URL
    or a missing fsspec backend is fsspec's own error. ``on_retry()`` is called before each new try."""
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as error:  # aiohttp's and botocore's errors, timeouts, OSError
            status = http_status(error)
            if not is_transient(error):
                if isinstance(error, (ImportError, ValueError, TypeError)) or \
                        (status is None and not isinstance(error, OSError)):
                    raise  # a bad URL, a missing backend: fsspec's message says it
                kind = (FileNotFoundError if status in (404, 410) else PermissionError if status in (401, 403)
                        else ChangedError if status == 412 else RemoteError) if status is not None \
                    else type(error) if isinstance(error, (FileNotFoundError, PermissionError, RemoteError)) \
                    else RemoteError
                raise kind(f"{what}: {_reason(error, what, status)} (permanent, not retried)") from error
            if attempt == retries:
                raise RemoteError(f"{what}: {_reason(error, what, status)} (transient, still failing after "
                                  f"{attempt + 1} tries)") from error
            if on_retry is not None:
                on_retry()
            time.sleep(backoff * 2 ** attempt)


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
                storage_options: dict | None = None, retries: int = 3, backoff: float = 0.25,
                on_retry: Callable[[], None] | None = None) -> list[str]:
    """``urls`` (a path or URL, a brace pattern, a glob, or a list of them) as the list of files; errors
    name ``owner``. A remote glob's listing is retried as reads are (``with_retries``: a transient failure
    ``retries`` times after ``backoff``, twice that, ..., a permanent one not)."""
    patterns = [urls] if isinstance(urls, (str, os.PathLike)) else list(urls)
    paths: list[str] = []
    for pattern in map(os.fspath, patterns):
        if os.path.isfile(pattern):  # an existing file is itself, whatever characters its name holds
            paths.append(pattern)
            continue
        remote = is_remote(pattern)
        pattern = pattern.removeprefix("file://")
        for name in expand(pattern):
            inner = name.split("://", 1)[-1]
            if name.startswith(("http://", "https://")):
                inner = inner.partition("?")[0]  # a URL's query (a presigned URL's signature), not a glob
            if not glob.has_magic(inner):
                found = [name]
            elif remote:
                fs, path = filesystem(name, timeout, storage_options)
                # a listing cached by an earlier source would list (and describe) the files as they were
                fs.invalidate_cache(path[:min(path.find(c) % (len(path) + 1) for c in "*?[")].rpartition("/")[0])
                listed = with_retries(lambda: fs.glob(path), name, retries, backoff, on_retry)
                found = sorted(fs.unstrip_protocol(p) for p in listed)
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


# What fsspec's filesystems report in info() that changes when an object is written again, by the name
# fastload records it under. Strong: the ETag (HTTP, s3fs, gcsfs, adlfs), a number or id per write
# (gcsfs ``generation``, adlfs ``version_id``, s3fs ``VersionId`` on a versioned bucket), a hash of the
# content (gcsfs ``md5Hash``). Weak, recorded only where no strong one is given: the modification time
# (HTTP ``Last-Modified``, s3fs ``LastModified``, adlfs ``last_modified``, gcsfs ``updated``, local and
# SFTP ``mtime``, fsspec's memory filesystem ``created``).
_STRONG = {"etag": ("ETag", "etag", "e_tag"), "generation": ("generation", "version_id", "VersionId"),
           "hash": ("md5Hash",)}
_MODIFIED = ("Last-Modified", "LastModified", "last_modified", "updated", "mtime", "modified", "created")
_CALLED = {"etag": "ETag", "generation": "generation", "hash": "MD5", "modified": "last-modified time",
           "size": "size"}


def _identity(info: dict) -> dict:
    """Which version of a remote file ``info`` (an fsspec ``info()``) describes: its size, and its ETag,
    generation or version id and content hash where the filesystem reports them, else its last-modified
    time; only the size where it reports none of these (``ShardFiles`` warns of those files)."""
    identity = {"size": info.get("size")}
    for name, keys in _STRONG.items():
        value = next((info[key] for key in keys if info.get(key) not in (None, "")), None)
        if value is not None:
            identity[name] = str(value)
    if len(identity) == 1:
        modified = next((info[key] for key in _MODIFIED if info.get(key) not in (None, "")), None)
        if modified is not None:
            identity["modified"] = str(modified)
    return identity


def _remote_identity(fs, path: str, fresh: bool = True) -> dict:
    """``_identity`` of the remote file ``path``: as it is now (``fresh``: fsspec's listings cache, which a
    glob fills, forgotten first), or as the listing just made says (a glob of 10,000 shards then costs no
    request per shard; a stale one would make the reads' checks fail, never pass)."""
    if fresh:
        fs.invalidate_cache(path)
    return _identity(fs.info(path))


async def _remote_identity_async(fs, path: str) -> dict:
    fs.invalidate_cache(path)
    return _identity(await fs._info(path))


def _check_identity(url: str, identity: dict, now: dict) -> None:
    """The file is still the version indexed: every part of ``identity`` that the filesystem reports (ETag,
    generation, hash, last-modified time, size) is the same ``now``; else a ChangedError naming the URL and
    what differs. For filesystems without a checked GET of their own: called after each read, so the bytes
    read are of the version indexed (a change before the read shows now; one after it did not affect it)."""
    for key in ("etag", "generation", "hash", "modified", "size"):
        if key in identity and now.get(key) != identity[key]:
            raise ChangedError(f"{url}: changed since it was indexed ({_CALLED[key]} {identity[key]} -> "
                               f"{now.get(key)}); build the source again to index the new version")


def _version(identity: dict) -> str:
    """Which version of a file an identity describes, for a cache file's name: its size and ETag (and
    generation, hash), or last-modified time, or mtime."""
    return "-".join(str(identity.get(key)) for key in ("size", "etag", "generation", "hash", "modified", "mtime_ns")
                    if key == "size" or key in identity)


class ShardFiles:
    """The files a sharded source reads, where their indexes are, and how a byte range of one is read.

    Args:
        urls: a path or fsspec URL, a brace pattern, a glob, or a list of them.
        owner: the source's name, for errors.
        cache_dir: where indexes go for remote files and when a file's folder is read-only (default:
            fastload's cache folder), and, streaming, the local copies (``cache_dir``/shards).
        timeout, retries, backoff: remote calls: seconds to connect or for the next bytes; a transient
            failure (``is_transient``) tried again after ``backoff`` (0.25 s), then twice that, ...
            (``retried`` counts them), a permanent one (404, 403, ...) not.
        mode: ``"indexed"`` or ``"streaming"``; by default streaming when a file is remote.
        cache_limit: streaming: bytes the local copies may take.
        storage_options: for the remote filesystem (fsspec's name): an endpoint, credentials, ...
        lock_timeout: streaming: seconds to wait for another process's fetch of a shard
            (``ShardCache``; 600 s).
    """

    def __init__(self, urls, owner: str, *, cache_dir: str | None = None, timeout: float = 60.0,
                 retries: int = 3, mode: str | None = None, cache_limit: int = 16 << 30,
                 storage_options: dict | None = None, backoff: float = 0.25, lock_timeout: float = LOCK_TIMEOUT):
        self.owner, self.cache_dir, self.timeout, self.retries = owner, cache_dir, timeout, retries
        self.backoff = backoff
        self.storage_options = dict(storage_options or {})
        self.retried = 0  # remote calls tried again, over this object's life
        self._retried_lock = threading.Lock()
        self._filesystems: dict = {}  # protocol -> its fsspec filesystem (see filesystem)
        self.paths = shard_paths(urls, timeout, owner, self.storage_options, retries, backoff, self._count_retry)
        remote = any(map(is_remote, self.paths))
        self.mode = mode or ("streaming" if remote else "indexed")
        if self.mode not in MODES:
            raise ValueError(f"{owner}: mode must be 'indexed' or 'streaming', not {mode!r}")
        self.cache = ShardCache(os.path.join(cache_dir, "shards") if cache_dir else cache_folder("shards"),
                                cache_limit, lock_timeout=lock_timeout) if self.mode == "streaming" and remote else None
        self.versions: list[str] = [""] * len(self.paths)  # per file: its size and ETag (or mtime), once indexed
        self.identities: list[dict] = [{} for _ in self.paths]  # per file: the version indexed, which reads check
        self._warned = False  # of a remote file that reports no version (UnversionedWarning), once

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
            identity = self.with_retries(lambda: _remote_identity(*self.filesystem(path), fresh=False), path)
            places = [cache_name(fallback, path.replace("://", "/"), suffix)]
            if len(identity) == 1 and not self._warned:
                self._warned = True
                import warnings
                warnings.warn(f"{self.owner}: {path} reports no version (no ETag, generation, version id or "
                              f"modification time): only its size is checked, so a file replaced by another of "
                              f"the same size while it is read is not detected (nor any other such file of this "
                              f"source)", UnversionedWarning, stacklevel=2)
        else:
            identity = _local_identity(path)
            places = [path + suffix, cache_name(fallback, os.path.abspath(path), suffix)]
        self.versions[number], self.identities[number] = _version(identity), identity

        def streamed() -> dict:
            fs, inner = self.filesystem(path)
            with fs.open(inner, "rb", block_size=4 << 20) as stream:
                counted = _Counted(stream)
                index = build(None, counted)
                counted.drain()  # (a tar's end may leave padding unread)
            # a body cut short at a member's or record's end would index as a shorter file, without error
            _check_version(path, identity, None, None, counted.count, declared=False)
            if _getter(fs) is None:  # and the file read is the version whose identity the index records
                _check_identity(path, identity, _remote_identity(fs, inner))
            return index

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
        (indexed), checked to be of the version indexed (If-Match; the answer's ETag and size). Raises
        OSError (RemoteError once the retries are spent or on a permanent error, ChangedError for a file that
        changed since it was indexed). All release the GIL."""
        path = self.paths[number]
        total = self.identities[number].get("size")
        if total is not None:  # a size from an index (a header's word) never allocates past the file's end
            size = max(0, min(size, total - offset))
        if self.cache is not None and is_remote(path):
            return os.pread(self.descriptor(number), size, offset)
        if is_remote(path):
            fs, inner = self.filesystem(path)
            get, identity = _getter(fs), self.identities[number]
            if get is None:
                return self.with_retries(lambda: self._checked_read(fs, inner, number, offset, size), path)
            from fsspec.asyn import sync
            return self.with_retries(lambda: sync(fs.loop, get, fs, inner, identity, offset, size), path)
        descriptor = os.open(path, os.O_RDONLY)
        try:
            identity = self.identities[number]
            if identity:  # the file opened is the one indexed (an fstat: a microsecond)
                stat = os.fstat(descriptor)
                now = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
                if now != identity:
                    raise ChangedError(f"{path}: changed since it was indexed (size, mtime {identity['size']}, "
                                       f"{identity['mtime_ns']} -> {now['size']}, {now['mtime_ns']}); build the "
                                       f"source again to index the new version")
            return os.pread(descriptor, size, offset)
        finally:
            os.close(descriptor)

    def _checked_read(self, fs, inner: str, number: int, offset: int, size: int) -> bytes:
        """A ranged read through a filesystem without a checked GET of fastload's (GCS, Azure, memory, SFTP,
        ...): fsspec's ``cat_file``, then the file's version asked for again and compared with the one
        indexed (``_check_identity``: one metadata request per read), and the bytes counted."""
        path, identity = self.paths[number], self.identities[number]
        data = fs.cat_file(inner, start=offset, end=offset + size)
        _check_identity(path, identity, _remote_identity(fs, inner))
        expected = max(0, min(size, (identity.get("size") or 1 << 62) - offset))
        if len(data) < expected:
            raise _Transient(f"{path}: a ranged read ended after {len(data)} of {expected} bytes (cut short)")
        return data

    def descriptor(self, number: int) -> int:
        """Streaming: an open descriptor of remote file ``number``'s whole local copy, fetched (with
        retries) if need be."""
        path = self.paths[number]
        return self.cache.descriptor(self.cache.name(path, self.versions[number]),
                                     lambda part: self.with_retries(lambda: self._fetch(number, part), path),
                                     self.identities[number].get("size"))

    def _fetch(self, number: int, part: str) -> None:
        """Remote file ``number``, whole, into the local file ``part``, checked to be the version indexed
        (complete, its ETag or last-modified time unchanged)."""
        path = self.paths[number]
        fs, inner = self.filesystem(path)
        get, identity = _getter(fs), self.identities[number]
        if get is None:
            fs.get_file(inner, part)
            _check_version(path, identity, None, None, os.path.getsize(part), declared=False)
            _check_identity(path, identity, _remote_identity(fs, inner))  # after: the copy is of that version
            return
        from fsspec.asyn import sync
        with open(part, "wb") as out:
            sync(fs.loop, get, fs, inner, identity, None, 0, out)

    def prefetch(self, numbers: list[int]) -> None:
        """Streaming: start fetching these files into the local cache, on fsspec's event loop
        (asynchronous filesystems: HTTP, S3, GCS; others are fetched when first read)."""
        for number in numbers:
            path = self.paths[number]
            if is_remote(path):
                fs, inner = self.filesystem(path)
                fetch = (lambda part, fs=fs, inner=inner, number=number: self._fetch_async(fs, inner, number, part)) \
                    if getattr(fs, "async_impl", False) else None
                self.cache.prefetch(self.cache.name(path, self.versions[number]), fetch,
                                    getattr(fs, "loop", None), self.identities[number].get("size"))

    async def _fetch_async(self, fs, inner: str, number: int, part: str) -> None:
        """``_fetch`` as a coroutine on fsspec's event loop (read-ahead; the cache checks the size)."""
        get = _getter(fs)
        if get is None:
            await fs._get_file(inner, part)
            _check_identity(self.paths[number], self.identities[number], await _remote_identity_async(fs, inner))
            return
        with open(part, "wb") as out:
            await get(fs, inner, self.identities[number], None, 0, out)

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
        """``call()`` under this object's retries and backoff (module ``with_retries``), the retries counted."""
        return with_retries(call, what, self.retries, self.backoff, self._count_retry)

    def _count_retry(self) -> None:
        with self._retried_lock:
            self.retried += 1

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
