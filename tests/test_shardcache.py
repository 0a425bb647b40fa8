"""fastload.shardcache: local copies of whole remote shards under a size limit, least recently used out,
each shard fetched once by the threads of a process and by the processes of a node."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from fastload.shardcache import ShardCache


def _writer(size: int, log: list | None = None, delay: float = 0.0):
    def fetch(part: str) -> None:
        time.sleep(delay)
        with open(part, "wb") as out:
            out.write(os.path.basename(part).encode()[:1] * size)
        if log is not None:
            log.append(part)
    return fetch


def test_past_the_limit_the_least_recently_used_copy_goes_and_open_ones_stay_readable(tmp_path):
    cache = ShardCache(str(tmp_path), limit=250, keep_open=1)
    names = [cache.name(f"https://host/s{i}.tar", "100-v1") for i in range(3)]
    fetched: list = []
    cache.descriptor(names[0], _writer(100, fetched))
    cache.descriptor(names[1], _writer(100, fetched))
    assert cache.descriptor(names[1], _writer(100, fetched)) and len(fetched) == 2  # kept open: not fetched again
    cache.descriptor(names[2], _writer(100, fetched))
    assert [os.path.exists(name) for name in names] == [False, True, True]  # the oldest went
    kept = cache.descriptor(names[0], _writer(100, fetched))
    assert len(fetched) == 4 == cache.fetched and [os.path.exists(n) for n in names] == [True, False, True]
    ShardCache(str(tmp_path), limit=0).evict()  # another process of the node, with a smaller limit
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".copy")]
    assert cache.descriptor(names[0], _writer(100, fetched)) == kept and len(fetched) == 4
    assert os.pread(kept, 10, 0) == b"h" * 10  # the copy it holds open still reads
    assert cache.name("https://host/s0.tar", "101-v2") != names[0]  # a changed shard is another copy
    cache.close()


def test_threads_of_a_process_fetch_a_shard_once(tmp_path):
    cache = ShardCache(str(tmp_path), limit=1 << 20)
    name, fetched = cache.name("s3://bucket/s.tar", "5-x"), []
    threads = [threading.Thread(target=cache.descriptor, args=(name, _writer(5, fetched, delay=0.2)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fetched) == 1 and not [n for n in os.listdir(tmp_path) if n.endswith(".part")]
    cache.close()


_PROCESS = """
import os, sys, time
from fastload.shardcache import ShardCache
folder, log = sys.argv[1], sys.argv[2]
cache = ShardCache(folder, limit=1 << 20)
def fetch(part):
    time.sleep(0.3)
    open(part, "wb").write(b"x" * 64)
    with open(log, "a") as out:
        out.write(f"{os.getpid()} {os.path.basename(part)}\\n")
for i in range(3):
    descriptor = cache.descriptor(cache.name(f"https://host/s{i}.tar", "64-v"), fetch)
    assert os.pread(descriptor, 64, 0) == b"x" * 64
"""


def test_processes_of_a_node_sharing_the_folder_fetch_each_shard_once(tmp_path):
    folder, log = tmp_path / "cache", tmp_path / "fetches.log"
    processes = [subprocess.Popen([sys.executable, "-c", _PROCESS, str(folder), str(log)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    for process in processes:
        output = process.communicate(timeout=120)[0]
        assert process.returncode == 0, output
    fetches = log.read_text().splitlines()
    assert len(fetches) == 3, fetches  # the second process waited on the first one's lock, then read its copy


_HOLDER = """
import os, sys
from fastload import shardcache
shardcache._lock_file(sys.argv[1], 5.0)
print("locked", flush=True)
os.kill(os.getpid(), __import__("signal").SIGSTOP)  # a peer stopped while it fetches the shard
"""


def test_a_lock_held_by_a_stopped_process_is_a_bounded_wait_and_the_error_names_the_holder(tmp_path):
    """The shard's lock file names its holder (pid, host); a process waits at most lock_timeout for it,
    then a LockTimeout naming that holder -- not a wait forever behind a stopped peer."""
    import signal
    import socket

    from fastload import shardcache
    cache = ShardCache(str(tmp_path), limit=1 << 20, lock_timeout=0.5)
    name = cache.name("https://host/s.tar", "5-x")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, name], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        try:
            cache.descriptor(name, _writer(5))
            raise AssertionError("the lock was taken from a live holder")
        except shardcache.LockTimeout as error:
            message = str(error)
        assert 0.5 <= time.monotonic() - started < 5
        assert f"pid {holder.pid} on host {socket.gethostname()}" in message and "lock_timeout" in message
        assert name in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    descriptor = cache.descriptor(name, _writer(5))  # a killed holder's lock is free (flock)
    assert os.pread(descriptor, 5, 0) == b"h" * 5
    with open(name + ".lock") as file:
        assert f"pid {os.getpid()} " in file.read()
    cache.close()


def test_part_files_of_killed_fetches_are_deleted_and_live_ones_kept(tmp_path):
    """A .part file whose process is dead, or that nothing wrote for an hour, is deleted when the cache
    is next tidied; the fetch of a live process is left alone."""
    from fastload import shardcache
    cache = ShardCache(str(tmp_path), limit=1 << 20)
    name = cache.name("https://host/s.tar", "5-x")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    host = shardcache._HOST
    parts = {"dead": f"{name}.{host}-{dead.pid}-1{shardcache.PART}",
             "old": f"{name}.{host}-{os.getpid()}-2{shardcache.PART}",
             "live": f"{name}.{host}-{os.getpid()}-3{shardcache.PART}",
             "other host": f"{name}.otherhst-{dead.pid}-4{shardcache.PART}"}
    for path in parts.values():
        with open(path, "wb") as out:
            out.write(b"x")
    hour_ago = time.time() - 2 * shardcache.STALE_PART
    os.utime(parts["old"], (hour_ago, hour_ago))
    cache.evict()
    assert {key for key, path in parts.items() if os.path.exists(path)} == {"live", "other host"}


def test_a_copy_of_the_wrong_size_is_fetched_again_and_a_short_fetch_is_never_renamed_in(tmp_path):
    """Given the size indexed, a copy of another size in the cache is fetched again, and a fetch that
    writes fewer bytes is an error, its .part deleted and nothing renamed into place."""
    cache = ShardCache(str(tmp_path), limit=1 << 20)
    name, fetched = cache.name("https://host/s.tar", "100-x"), []
    with open(name, "wb") as out:
        out.write(b"h" * 50)  # an older fastload's unchecked copy, cut short
    descriptor = cache.descriptor(name, _writer(100, fetched), size=100)
    assert len(fetched) == 1 and os.fstat(descriptor).st_size == 100
    cache.close()
    os.unlink(name)
    try:
        cache.descriptor(name, _writer(60), size=100)
        raise AssertionError("a short copy was accepted")
    except OSError as error:
        assert "fetched 60 bytes, not the 100 indexed" in str(error)
    assert not os.path.exists(name) and not [n for n in os.listdir(tmp_path) if n.endswith(".part")]


def test_cache_names_are_bounded_for_any_url(tmp_path):
    """A URL of any length (a presigned one's 300-character query) is a cache name under 255 bytes, with
    a readable tail; URLs that differ are different names, signatures alone are not."""
    cache = ShardCache(str(tmp_path), limit=1 << 20)
    long = "https://host/data/train-000001.tar?X-Amz-Credential=" + "c" * 200 + "&X-Amz-Signature=" + "f" * 300
    name = os.path.basename(cache.name(long, "100-x"))
    assert len(name.encode()) < 160 and "train-000001.tar" in name
    assert cache.name(long.replace("f" * 300, "e" * 300), "100-x") == cache.name(long, "100-x")
    assert cache.name("https://host/data/train-000002.tar", "100-x") != cache.name(long, "100-x")
    assert cache.name("https://host/a?part=1", "1-x") != cache.name("https://host/a?part=2", "1-x")
