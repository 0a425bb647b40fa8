"""Whole remote shards on the local disk: the streaming mode's store, least recently used first out.

Object stores charge and throttle per request and answer each one tens of
milliseconds late, so streaming ``TarShards`` and ``TFRecords`` fetch a file whole, in one
sequential read, and read its samples from the local copy. The copies live
in one folder per node (``$FASTLOAD_CACHE/shards`` by default) under a size
limit: past it, the copies used longest ago are deleted. One cache serves
the threads of a process (a shard is fetched once, the others wait for it)
and the processes of a node (a lock file per shard: the first process
fetches, the others wait, then read the same file). A copy is written to a
temporary name and renamed, so no reader ever sees half of one; a process
keeps its shards open, so another process deleting one under the limit
never pulls it from under a read (POSIX keeps an open file readable).

Read-ahead needs no thread of fastload's: for fsspec's asynchronous
filesystems (HTTP, S3, GCS) a prefetched shard is a coroutine on fsspec's
own event-loop thread; elsewhere a shard is fetched when it is first read.

Nothing here waits forever or keeps a bad copy: a copy whose size is not
the one the shard was indexed at is never renamed into place (and one found
there is fetched again); a process waits at most ``lock_timeout`` seconds
(default 600) for a shard's lock, whose file names its holder (pid, host),
and the error names it; temporary ``.part`` files that a killed process
left are deleted (their process is dead, or untouched for an hour).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import fcntl
import hashlib
import os
import socket
import threading
import time
from typing import Callable

from .index_cache import cache_name

COPY = ".copy"  # a whole remote file (a tar shard, a TFRecord file)
PART = ".part"
LOCK = ".lock"
LOCK_TIMEOUT = 600.0  # seconds a process waits for another one's fetch of a shard before it is an error
STALE_PART = 3600.0  # seconds after its last write that a .part file of no live process is deleted
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]  # in .part names: whose pids they hold


class LockTimeout(TimeoutError):
    """A shard's lock held by another process for longer than the cache's ``lock_timeout``."""


class ShardCache:
    """Local copies of remote shards, at most ``limit`` bytes of them in ``folder``.

    Args:
        folder: the cache folder, shared by every process of the node that uses it.
        limit: bytes the copies may take; it must hold the shards a process reads at once (read-ahead + 2).
        keep_open: how many shards a process keeps open (least recently used closed first).
        lock_timeout: seconds to wait for another process's fetch of a shard (its lock) before a
            ``LockTimeout`` naming the holder; it must outlast the fetch of one shard.
    """

    def __init__(self, folder: str, limit: int, keep_open: int = 8, lock_timeout: float = LOCK_TIMEOUT):
        self.folder, self.limit, self.keep_open, self.lock_timeout = folder, limit, keep_open, lock_timeout
        self.fetched = 0  # shards this process fetched (each one whole read of a remote shard)
        self._lock = threading.Lock()
        self._open: collections.OrderedDict[str, int] = collections.OrderedDict()  # name -> descriptor
        self._pending: dict[str, concurrent.futures.Future] = {}  # name -> a prefetch in flight

    def name(self, url: str, version: str) -> str:
        """The local copy of ``url`` as it is at ``version`` (its size and ETag): a changed shard is a new
        copy, and the stale one ages out."""
        return cache_name(self.folder, f"{url}@{version}".replace("://", "/"), COPY)

    def prefetch(self, name: str, fetch_async: Callable[[str], object] | None, loop, size: int | None = None) -> None:
        """Start fetching ``name`` in the background, if it is neither here nor being fetched (by this
        process or another): ``fetch_async(part_path)`` is a coroutine run on ``loop`` (fsspec's); a copy
        that is not ``size`` bytes is dropped (and fetched again, with retries, when read)."""
        if fetch_async is None:
            return
        with self._lock:
            if name in self._open or name in self._pending or os.path.exists(name):
                return
            lock = _try_lock(name)
            if lock is None:  # another process is fetching it
                return
            part = _part(name)

            async def fetch() -> None:
                try:
                    await fetch_async(part)
                    if size is not None and os.path.getsize(part) != size:
                        return  # cut short: not renamed into place
                    os.replace(part, name)
                    with self._lock:
                        self.fetched += 1
                finally:
                    _remove(part)
                    _unlock(lock)
            future = asyncio.run_coroutine_threadsafe(fetch(), loop)
            self._pending[name] = future
        # once done, the copy is on disk (or, if the fetch failed, fetched again when read)
        future.add_done_callback(lambda _: self._forget(name, future))

    def _forget(self, name: str, future) -> None:
        with self._lock:
            if self._pending.get(name) is future:
                del self._pending[name]

    def descriptor(self, name: str, fetch: Callable[[str], None], size: int | None = None) -> int:
        """An open descriptor of the local copy ``name``: kept open, else opened, else fetched first --
        waiting for a prefetch of it, or fetching it here with ``fetch(part_path)`` (under the shard's lock,
        so that one process of the node fetches it, waiting at most ``lock_timeout``). Given ``size``, a copy
        of another size is never used: one found is fetched again, a fetched one is an OSError."""
        with self._lock:
            if name in self._open:
                self._open.move_to_end(name)
                return self._open[name]
            pending = self._pending.get(name)
        if pending is not None:
            try:
                pending.result()
            except Exception:  # fetched again below, with the caller's retries
                pass
        descriptor = _open(name, size)
        if descriptor is None:
            lock = _lock_file(name, self.lock_timeout)
            try:
                descriptor = _open(name, size)  # another process may have fetched it while we waited
                if descriptor is None:
                    part = _part(name)
                    try:
                        fetch(part)
                        descriptor = os.open(part, os.O_RDONLY)
                        if size is not None and os.fstat(descriptor).st_size != size:
                            got = os.fstat(descriptor).st_size
                            os.close(descriptor)
                            raise OSError(f"{name}: fetched {got} bytes, not the {size} indexed (cut short)")
                        os.replace(part, name)
                    finally:
                        _remove(part)
                    with self._lock:
                        self.fetched += 1
            finally:
                _unlock(lock)
        try:
            os.utime(name)  # its last use, which eviction (by any process of the node) goes by
        except FileNotFoundError:  # evicted by another process since: our descriptor still reads it
            pass
        with self._lock:
            if name in self._open:  # another thread opened it meanwhile
                os.close(descriptor)
                return self._open[name]
            self._open[name] = descriptor
            while len(self._open) > self.keep_open:
                os.close(self._open.popitem(last=False)[1])
        self.evict()
        return descriptor

    def evict(self) -> None:
        """Delete the least recently used copies until the folder holds at most ``limit`` bytes, sparing the
        ones this process has open or is fetching; and the ``.part`` files that killed processes left."""
        try:
            found = list(os.scandir(self.folder))
        except FileNotFoundError:
            return
        entries = [e for e in found if e.name.endswith(COPY) and e.is_file()]
        for entry in found:
            if entry.name.endswith(PART) and _stale_part(entry):
                _remove(entry.path)
        stats = [(entry.stat(), entry.path) for entry in entries]
        total = sum(stat.st_size for stat, _ in stats)
        with self._lock:
            busy = set(self._open) | set(self._pending)
        for stat, path in sorted(stats, key=lambda pair: pair[0].st_mtime_ns):
            if total <= self.limit:
                break
            if path not in busy:
                _remove(path)
                total -= stat.st_size

    def close(self) -> None:
        """Close the copies this process holds open (a prefetch in flight finishes on its own)."""
        with self._lock:
            while self._open:
                os.close(self._open.popitem()[1])

    def __getstate__(self) -> dict:
        """A copy for another process (a torch DataLoader's worker): the folder and limit, none of the open
        descriptors, prefetches or locks."""
        return {"folder": self.folder, "limit": self.limit, "keep_open": self.keep_open,
                "lock_timeout": self.lock_timeout}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _open(name: str, size: int | None = None) -> int | None:
    """The copy, open; None if there is none, or if it is not ``size`` bytes (then it is deleted: a copy
    that an older fastload renamed into place unchecked)."""
    try:
        descriptor = os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    if size is not None and os.fstat(descriptor).st_size != size:
        os.close(descriptor)
        _remove(name)
        return None
    return descriptor


def _part(name: str) -> str:
    """A temporary name for a copy being fetched: the host's tag and the pid and thread fetching it."""
    return f"{name}.{_HOST}-{os.getpid()}-{threading.get_ident()}{PART}"


def _stale_part(entry: os.DirEntry) -> bool:
    """Whether a ``.part`` file was left by a killed fetch: its process (of this host) is gone, or nothing
    has written to it for ``STALE_PART`` seconds (a live fetch writes, or times out, long before)."""
    try:
        if time.time() - entry.stat().st_mtime > STALE_PART:
            return True
    except FileNotFoundError:
        return False
    host, _, pid = entry.name[:-len(PART)].rpartition(".")[2].partition("-")
    pid = pid.partition("-")[0]
    if host != _HOST or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def _lock_file(name: str, timeout: float = LOCK_TIMEOUT) -> int:
    """Hold the shard's lock file, waiting at most ``timeout`` seconds for another process that holds it
    (then a LockTimeout naming the holder, which wrote its pid and host into the file)."""
    os.makedirs(os.path.dirname(name), exist_ok=True)
    descriptor = os.open(name + LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline, pause = time.monotonic() + timeout, 0.005
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                holder = os.pread(descriptor, 512, 0).decode("utf-8", "replace").strip()
                os.close(descriptor)
                raise LockTimeout(f"{name}{LOCK}: held by {holder or 'a process that did not say which'} for "
                                  f"over {timeout:g} s (lock_timeout): a process stopped or stuck while it "
                                  f"fetches this shard; end it, or raise lock_timeout for larger shards") from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.25)
    _claim(descriptor)
    return descriptor


def _claim(descriptor: int) -> None:
    """Write who holds the lock into its file, for the error of a process that waits too long for it."""
    holder = f"pid {os.getpid()} on host {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, holder.encode(), 0)


def _try_lock(name: str) -> int | None:
    """The shard's lock if no other process holds it, else None."""
    os.makedirs(os.path.dirname(name), exist_ok=True)
    descriptor = os.open(name + LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    _claim(descriptor)
    return descriptor


def _unlock(descriptor: int) -> None:
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    os.close(descriptor)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
