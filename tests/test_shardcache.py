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
