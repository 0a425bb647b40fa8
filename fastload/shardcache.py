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
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import fcntl
import os
import threading
from typing import Callable

from .index_cache import cache_name

COPY = ".copy"  # a whole remote file (a tar shard, a TFRecord file)
PART = ".part"
LOCK = ".lock"


class ShardCache:
    """Local copies of remote shards, at most ``limit`` bytes of them in ``folder``.

    Args:
        folder: the cache folder, shared by every process of the node that uses it.
        limit: bytes the copies may take; it must hold the shards a process reads at once (read-ahead + 2).
        keep_open: how many shards a process keeps open (least recently used closed first).
    """

    def __init__(self, folder: str, limit: int, keep_open: int = 8):
        self.folder, self.limit, self.keep_open = folder, limit, keep_open
        self.fetched = 0  # shards this process fetched (each one whole read of a remote shard)
        self._lock = threading.Lock()
        self._open: collections.OrderedDict[str, int] = collections.OrderedDict()  # name -> descriptor
        self._pending: dict[str, concurrent.futures.Future] = {}  # name -> a prefetch in flight

    def name(self, url: str, version: str) -> str:
        """The local copy of ``url`` as it is at ``version`` (its size and ETag): a changed shard is a new
        copy, and the stale one ages out."""
        return cache_name(self.folder, f"{url}@{version}".replace("://", "/"), COPY)

    def prefetch(self, name: str, fetch_async: Callable[[str], object] | None, loop) -> None:
        """Start fetching ``name`` in the background, if it is neither here nor being fetched (by this
        process or another): ``fetch_async(part_path)`` is a coroutine run on ``loop`` (fsspec's)."""
        if fetch_async is None:
            return
        with self._lock:
            if name in self._open or name in self._pending or os.path.exists(name):
                return
            lock = _try_lock(name)
            if lock is None:  # another process is fetching it
                return
            part = f"{name}.{os.getpid()}{PART}"

            async def fetch() -> None:
                try:
                    await fetch_async(part)
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

    def descriptor(self, name: str, fetch: Callable[[str], None]) -> int:
        """An open descriptor of the local copy ``name``: kept open, else opened, else fetched first --
        waiting for a prefetch of it, or fetching it here with ``fetch(part_path)`` (under the shard's lock,
        so that one process of the node fetches it)."""
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
        descriptor = _open(name)
        if descriptor is None:
            lock = _lock_file(name)
            try:
                descriptor = _open(name)  # another process may have fetched it while we waited
                if descriptor is None:
                    part = f"{name}.{os.getpid()}.{threading.get_ident()}{PART}"
                    try:
                        fetch(part)
                        descriptor = os.open(part, os.O_RDONLY)
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
        ones this process has open or is fetching."""
        try:
            entries = [e for e in os.scandir(self.folder) if e.name.endswith(COPY) and e.is_file()]
        except FileNotFoundError:
            return
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
        return {"folder": self.folder, "limit": self.limit, "keep_open": self.keep_open}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _open(name: str) -> int | None:
    try:
        return os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return None


def _lock_file(name: str) -> int:
    """Hold the shard's lock file (waiting for another process that holds it)."""
    os.makedirs(os.path.dirname(name), exist_ok=True)
    descriptor = os.open(name + LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    return descriptor


def _try_lock(name: str) -> int | None:
    """The shard's lock if no other process holds it, else None."""
    os.makedirs(os.path.dirname(name), exist_ok=True)
    descriptor = os.open(name + LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def _unlock(descriptor: int) -> None:
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    os.close(descriptor)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
