"""fastload.shardfiles: the files of TarShards and TFRecords, local or remote. Remote here is a real
S3-compatible endpoint (moto's server mode, as s3fs's own tests use it) started on 127.0.0.1 and read
through fsspec's s3fs -- streaming (the default for object stores) and indexed, a 2-rank torchrun job
streaming from it, and a server that goes away mid-epoch. (HTTP, with dropped and stalled connections:
tests/test_tarshards.py.)"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import fastload
from fastload import shardfiles
from fastload import transforms as T


def test_brace_patterns_expand_as_webdataset_writes_them():
    assert shardfiles.expand("a-{000..002}.tar") == ["a-000.tar", "a-001.tar", "a-002.tar"]
    assert shardfiles.expand("{x,y}/s{8..10}.tar") == ["x/s8.tar", "x/s9.tar", "x/s10.tar", "y/s8.tar",
                                                         "y/s9.tar", "y/s10.tar"]
    assert shardfiles.expand("plain.tar") == ["plain.tar"]


def test_storage_options_keep_the_timeouts_unless_they_set_them():
    """A user's client_kwargs (an HTTP header) are merged into fastload's, not over them: the timeout that
    ends a stalled server stays."""
    fs, _ = shardfiles.filesystem("http://127.0.0.1:9/a.tar", 7.0, {"client_kwargs": {"headers": {"X-Key": "k"}}})
    assert fs.client_kwargs["headers"] == {"X-Key": "k"} and fs.client_kwargs["timeout"].sock_read == 7.0
    fs, _ = shardfiles.filesystem("http://127.0.0.1:9/a.tar", 7.0, {"client_kwargs": {"timeout": None}})
    assert fs.client_kwargs["timeout"] is None  # set by the user: theirs


@pytest.fixture(scope="module")
def moto_server():
    pytest.importorskip("s3fs", reason="S3 shards need s3fs (pip install -e .[s3])")
    pytest.importorskip("boto3")
    return pytest.importorskip("moto.server", reason="the S3 tests need moto[server] (pip install -e .[test])")


def _client(endpoint: str):
    import boto3
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")

SHARD_SIZES = (7, 5, 6, 6)  # 24 samples: 12 a rank at world size 2, no padding, so the ranks' samples cover
CREDENTIALS = {"key": "testing", "secret": "testing"}


def _jpeg(number: int) -> bytes:
    from PIL import Image
    generator = torch.Generator().manual_seed(number)
    height, width = 20 + number % 7 * 9, 30 + number % 5 * 11
    pixels = torch.randint(0, 256, (height, width, 3), generator=generator, dtype=torch.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels.numpy()).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.fixture(scope="module")
def s3(tmp_path_factory, moto_server):
    """A moto S3 server on 127.0.0.1 with bucket ``data`` holding shards ``train-{0..3}.tar`` whose labels
    are the samples' numbers, and the same samples as ``train-{0..3}.tfrecord``; yields (storage_options,
    the local copies' folder, the server)."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = _client(endpoint)
    client.create_bucket(Bucket="data")
    local = tmp_path_factory.mktemp("s3-shards")
    number = 0
    for shard, size in enumerate(SHARD_SIZES):
        samples = [(f"s{n:04d}", _jpeg(n), n) for n in range(number, number + size)]
        number += size
        path = fastload.TarShards.write(samples, local / f"train-{shard}.tar")
        client.upload_file(path, "data", f"train-{shard}.tar")
        path = fastload.TFRecords.write([(data, label) for _, data, label in samples],
                                        local / f"train-{shard}.tfrecord")
        client.upload_file(path, "data", f"train-{shard}.tfrecord")
    yield {"endpoint_url": endpoint, **CREDENTIALS}, local, server
    server.stop()


def _transform():
    return T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])


def test_s3_shards_stream_whole_into_the_cache_and_give_the_local_shards_batches(s3, tmp_path):
    """From S3 the default is streaming: each shard fetched once, whole, into the local cache (when it is
    indexed), and the batches are those of the same shards read locally in streaming mode."""
    options, local, _ = s3
    cache = str(tmp_path / "cache")
    remote = fastload.TarShards("s3://data/train-{0..3}.tar", _transform(), cache_dir=cache,
                                storage_options=options, shuffle=True, seed=4, shuffle_buffer=5)
    assert remote.mode == "streaming" and remote.cache.fetched == 4 and len(remote.samples) == 24
    assert remote.samples[7][0] == "s3://data/train-1.tar:s0007" and remote.targets == list(range(24))
    reference = fastload.TarShards(str(local / "train-*.tar"), _transform(), mode="streaming", shuffle=True,
                                   seed=4, shuffle_buffer=5)
    for epoch in range(2):
        loaders = [fastload.DataLoader(s, batch_size=5, num_workers=2) for s in (remote, reference)]
        for loader in loaders:
            loader.set_epoch(epoch)
        for (images, labels), (ref_images, ref_labels) in zip(*loaders, strict=True):
            assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
        assert loaders[0].stats.retried == 0 and loaders[0].stats.images == 24
    assert remote.cache.fetched == 4  # the epochs read the copies
    again = fastload.TarShards("s3://data/train-*.tar", cache_dir=cache, storage_options=options)  # a glob
    assert again.samples == remote.samples and again.cache.fetched == 0  # indexes and copies cached


def test_s3_shards_read_indexed_as_one_ranged_get_per_sample(s3, tmp_path):
    options, local, _ = s3
    remote = fastload.TarShards("s3://data/train-{0..3}.tar", cache_dir=str(tmp_path / "cache"),
                                storage_options=options, mode="indexed")
    reference = fastload.TarShards(str(local / "train-{0..3}.tar"))
    assert remote.cache is None and remote.targets == reference.targets
    for index in (0, 6, 7, 23):
        assert remote.read(index) == reference.read(index) == _jpeg(index)


def test_s3_tfrecords_stream_and_read_indexed_as_the_local_files(s3, tmp_path):
    """TFRecords share the shards' storage: streamed from S3 by default (each file fetched once), the same
    batches as the local files streamed; indexed, a record is one ranged GET, its CRCs checked."""
    options, local, _ = s3
    remote = fastload.TFRecords("s3://data/train-*.tfrecord", transform=_transform(), cache_dir=str(tmp_path),
                                storage_options=options, shuffle=True, seed=2, shuffle_buffer=3)
    assert remote.mode == "streaming" and remote.cache.fetched == 4 and remote.targets == list(range(24))
    assert remote.samples[7][0] == "s3://data/train-1.tfrecord:record 0"
    reference = fastload.TFRecords(str(local / "train-*.tfrecord"), transform=_transform(), mode="streaming",
                                   shuffle=True, seed=2, shuffle_buffer=3)
    pairs = zip(*(fastload.DataLoader(s, batch_size=4, num_workers=2) for s in (remote, reference)), strict=True)
    for (images, labels), (ref_images, ref_labels) in pairs:
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
    indexed = fastload.TFRecords("s3://data/train-{0..3}.tfrecord", cache_dir=str(tmp_path),
                                 storage_options=options, mode="indexed")
    assert indexed.cache is None and [indexed.read(i) for i in (0, 13, 23)] == [_jpeg(i) for i in (0, 13, 23)]


def test_a_missing_shard_or_an_empty_glob_is_a_clear_error(s3, tmp_path):
    options, _, _ = s3
    with pytest.raises(FileNotFoundError, match="train-9.tar"):
        fastload.TarShards("s3://data/train-9.tar", cache_dir=str(tmp_path), storage_options=options)
    with pytest.raises(FileNotFoundError, match=r"nothing matches 's3://data/valid-\*.tar'"):
        fastload.TarShards("s3://data/valid-*.tar", cache_dir=str(tmp_path), storage_options=options)


def test_a_server_that_goes_away_is_retried_then_an_error_naming_the_shard_and_sample(tmp_path, moto_server):
    """The endpoint stops mid-epoch: each read is tried again with backoff (loader.stats.retried counts the
    tries), then the loader raises a DecodeError naming the S3 URL and the key -- in bounded time."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}", **CREDENTIALS}
        client = _client(options["endpoint_url"])
        client.create_bucket(Bucket="gone")
        path = fastload.TarShards.write([(f"s{n}", _jpeg(n % 24), n) for n in range(40)], tmp_path / "gone.tar")
        client.upload_file(path, "gone", "gone.tar")
        source = fastload.TarShards("s3://gone/gone.tar", _transform(), cache_dir=str(tmp_path / "cache"),
                                    storage_options=options, mode="indexed", timeout=2.0, retries=2)
        # one thread, one batch ahead: at most 2 of the 20 batches are read before the server stops
        loader = fastload.DataLoader(source, batch_size=2, num_workers=1, prefetch_factor=1)
        iterator = iter(loader)
        images, labels = next(iterator)
        assert labels.tolist() == [0, 1] and loader.stats.retried == 0
    finally:
        server.stop()
    started = time.monotonic()
    with pytest.raises(fastload.DecodeError, match=r"s3://gone/gone.tar:s\d+\): cannot read: .*after 3 tries"):
        for _ in iterator:
            pass
    assert time.monotonic() - started < 30 and loader.stats.retried >= 2
    loader.close()


def test_two_torchrun_ranks_stream_from_s3_with_equal_batches_and_disjoint_covering_samples(s3, tmp_path):
    """torchrun, 2 ranks (gloo), streaming from the S3 server through one node-wide shard cache: in each of
    two epochs the ranks run the same number of batches and their samples are disjoint and cover the 24;
    the node fetched each shard once."""
    options, _, _ = s3
    out = tmp_path / "out"
    out.mkdir()
    script = Path(__file__).parent / "distributed" / "stream.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
               "s3://data/train-{0..3}.tar", str(out), str(tmp_path / "cache"), json.dumps(options)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ranks = [json.loads((out / f"stream-{rank}.json").read_text()) for rank in range(2)]
    assert all(r["mode"] == "streaming" for r in ranks)
    for epoch in range(2):
        got = [r["epochs"][epoch] for r in ranks]
        assert len(got[0]) == len(got[1]) == 12
        assert sorted(got[0] + got[1]) == list(range(24))
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]  # shuffled per epoch
    assert sum(r["fetched"] for r in ranks) == 4


def test_an_s3_object_replaced_mid_run_is_an_error_naming_it_and_a_new_source_indexes_it_again(s3, tmp_path):
    """Each ranged GET carries IfMatch with the ETag indexed: a shard replaced since (same size, other
    labels) is an error naming its S3 URL, in both modes, not samples under the old index's labels; a
    source built again indexes the new version. A missing key is permanent: not retried."""
    options, local, _ = s3
    client = _client(options["endpoint_url"])
    client.create_bucket(Bucket="changing")
    samples = [(f"s{n}", _jpeg(n), n) for n in range(6)]
    client.upload_file(fastload.TarShards.write(samples, tmp_path / "a.tar"), "changing", "a.tar")
    cache = str(tmp_path / "cache")
    indexed = fastload.TarShards("s3://changing/a.tar", cache_dir=cache, storage_options=options, mode="indexed",
                                 retries=1, backoff=0.01)
    streamed = fastload.TarShards("s3://changing/a.tar", cache_dir=cache, storage_options=options, retries=1,
                                  backoff=0.01)
    # (streamed found the index cached: its copy is fetched when first read, after the change below)
    assert indexed.read(2) == _jpeg(2) and indexed.targets == list(range(6))
    relabelled = [(key, data, (label + 1) % 10) for key, data, label in samples]
    client.upload_file(fastload.TarShards.write(relabelled, tmp_path / "b.tar"), "changing", "a.tar")
    for source in (indexed, streamed):
        with pytest.raises(fastload.DecodeError, match=r"s3://changing/a.tar:s3\): cannot read: s3://changing/a.tar"
                                                       r": .*changed since it was indexed.*permanent, not retried"):
            source.read(3)
    assert indexed.retried == streamed.retried == 0
    again = fastload.TarShards("s3://changing/a.tar", cache_dir=cache, storage_options=options, mode="indexed")
    assert again.targets == [(n + 1) % 10 for n in range(6)] and again.read(3) == _jpeg(3)
    with pytest.raises(FileNotFoundError, match=r"s3://changing/gone.tar: .*permanent, not retried"):
        fastload.TarShards("s3://changing/gone.tar", cache_dir=cache, storage_options=options, backoff=5.0)


class _VersionedMemory:
    """Factories of fsspec filesystems on a memory store of their own, registered under a test protocol,
    whose ``info()`` reports what gcsfs, adlfs, a local disk or nothing at all reports of an object's
    version; ``fail`` holds errors that the next listings (glob) raise, one each."""

    @staticmethod
    def make(style: str):
        import base64
        import datetime
        import hashlib

        import fsspec
        from fsspec.implementations.memory import MemoryFileSystem
        protocol = f"fake{style}"

        class Versioned(MemoryFileSystem):
            store, pseudo_dirs, writes, fail = {}, [""], {}, []
            cachable = False

            @classmethod
            def _strip_protocol(cls, path):
                return super()._strip_protocol(str(path).removeprefix(f"{protocol}://"))

            def pipe_file(self, path, value, **kwargs):
                path = self._strip_protocol(path)
                super().pipe_file(path, value, **kwargs)
                self.writes[path] = self.writes.get(path, 0) + 1

            def info(self, path, **kwargs):
                info = super().info(path, **kwargs)
                path = self._strip_protocol(path)
                if info["type"] != "file":
                    return info
                count, data = self.writes.get(path, 0), self.store[path].getvalue()
                stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=count)
                info.pop("created")
                if style == "gcs":  # gcsfs's keys
                    info.update(generation=str(1700000000000000 + count), etag=f"CJ{count}EAE=",
                                updated=stamp.isoformat(), metageneration="1",
                                md5Hash=base64.b64encode(hashlib.md5(data).digest()).decode())
                elif style == "azure":  # adlfs's
                    info.update(etag=f'"0x8DC{count:08X}"', last_modified=stamp, version_id=stamp.isoformat() + "Z")
                elif style == "local":  # fsspec's local filesystem's
                    info.update(mtime=stamp.timestamp(), created=stamp.timestamp())
                return info  # "none": size and type alone

            def glob(self, path, **kwargs):
                if self.fail:
                    raise self.fail.pop(0)
                return super().glob(path, **kwargs)
        Versioned.__name__ = f"Versioned_{style}"
        Versioned.protocol = protocol
        fsspec.register_implementation(protocol, Versioned, clobber=True)
        return Versioned(), protocol


def _shard(labels_plus: int = 0) -> bytes:
    buffer = io.BytesIO()
    import tarfile

    from fastload import tarshards
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for n in range(6):
            tarshards.add_member(archive, f"s{n}.jpg", _jpeg(n))
            tarshards.add_member(archive, f"s{n}.cls", str((n + labels_plus) % 10).encode())
    return buffer.getvalue()


@pytest.mark.parametrize("style", ["gcs", "azure", "local"])
def test_an_object_replaced_mid_run_on_other_filesystems_is_an_error_naming_it_or_indexed_again(style, tmp_path):
    """On a filesystem without fastload's checked GET (GCS, Azure, memory, local through fsspec), every ranged
    read and every fetch of a whole copy checks afterwards that the object is still the version indexed
    (generation / MD5 / ETag, version id / ETag, mtime, and size): an object replaced by one of the same size
    and other labels is an error naming it, in both modes, never read under the old index's labels; a
    source built again indexes the new version."""
    fs, protocol = _VersionedMemory.make(style)
    url = f"{protocol}://bucket/{style}/a.tar"
    fs.pipe_file(url, _shard())
    cache = str(tmp_path / "cache")
    indexed = fastload.TarShards(url, cache_dir=cache, mode="indexed", retries=1, backoff=0.01)
    streamed = fastload.TarShards(url, cache_dir=cache, mode="streaming", retries=1, backoff=0.01)
    assert indexed.targets == streamed.targets == list(range(6)) and indexed.read(2) == _jpeg(2)
    assert streamed.read(2) == _jpeg(2)  # from the copy fetched when it was indexed
    fs.pipe_file(url, _shard(1))  # the same size, other labels
    assert len(_shard(1)) == len(_shard())
    with pytest.raises(fastload.DecodeError, match=r"a.tar:s3\): cannot read: " + url +
                       r": .*changed since it was indexed.*permanent, not retried"):
        indexed.read(3)
    assert streamed.read(3) == _jpeg(3)  # the copy is of the version indexed: still right
    streamed.cache.close()
    for name in os.listdir(tmp_path / "cache" / "shards"):
        os.unlink(tmp_path / "cache" / "shards" / name)  # evicted: the next read fetches the new version
    with pytest.raises(fastload.DecodeError, match=r"cannot read: .*" + url + r": .*changed since it was indexed"):
        streamed.read(3)
    assert not [n for n in os.listdir(tmp_path / "cache" / "shards") if n.endswith((".copy", ".part"))]
    for mode in ("indexed", "streaming"):
        again = fastload.TarShards(url, cache_dir=cache, mode=mode)
        assert again.targets == [(n + 1) % 10 for n in range(6)] and again.read(3) == _jpeg(3)


def test_a_filesystem_that_reports_no_version_is_warned_of_and_checked_by_size(tmp_path):
    """An object whose filesystem reports only its size: the source warns once that a replacement of the
    same size would go undetected (UnversionedWarning naming the URL); a replacement of another size is
    still an error naming it."""
    fs, protocol = _VersionedMemory.make("none")
    urls = [f"{protocol}://bucket/{n}.tar" for n in range(2)]
    for url in urls:
        fs.pipe_file(url, _shard())
    with pytest.warns(shardfiles.UnversionedWarning, match=urls[0] + r" reports no version.*only its size") as caught:
        source = fastload.TarShards(f"{protocol}://bucket/{{0..1}}.tar", cache_dir=str(tmp_path), mode="indexed",
                                    retries=1, backoff=0.01)
    assert len([w for w in caught if w.category is shardfiles.UnversionedWarning]) == 1
    fs.pipe_file(urls[0], _shard() + b"\0" * 512)
    with pytest.raises(fastload.DecodeError, match=urls[0] + r": changed since it was indexed \(size"):
        source.read(1)


def test_a_local_shard_replaced_mid_run_is_an_error_naming_it(tmp_path):
    """A local shard rewritten after it was indexed (same size, other labels) is an error naming it: each read
    compares the opened file's size and mtime with the ones indexed."""
    shard = tmp_path / "a.tar"
    shard.write_bytes(_shard())
    source = fastload.TarShards(str(shard))
    assert source.read(1) == _jpeg(1)
    stamp = shard.stat().st_mtime_ns
    shard.write_bytes(_shard(1))
    os.utime(shard, ns=(stamp + 10**9, stamp + 10**9))
    with pytest.raises(fastload.DecodeError, match=r"a.tar:s2\): cannot read: .*a.tar: changed since it was indexed"):
        source.read(2)
    assert fastload.TarShards(str(shard)).targets == [(n + 1) % 10 for n in range(6)]


def _http_error(status: int):
    """The error fsspec's HTTP filesystem raises for an answer of ``status`` (aiohttp's)."""
    import aiohttp
    import multidict
    import yarl
    url = yarl.URL("https://store.example/listed/")
    headers = multidict.CIMultiDictProxy(multidict.CIMultiDict())
    return aiohttp.ClientResponseError(aiohttp.RequestInfo(url, "GET", headers, url), (), status=status,
                                       message="from the fake store")


def test_a_remote_glob_is_retried_on_transient_errors_and_not_on_permanent_ones(tmp_path):
    """Listing remote shards (a glob) is retried with backoff as opens and reads are: a 503, a 429, a reset
    connection or a timeout is tried again, and counted; a 403 or a missing bucket is raised at once, saying
    "permanent, not retried"; a transient error on every try says how many tries, all naming the pattern."""
    fs, protocol = _VersionedMemory.make("gcs")
    for n in range(3):
        fs.pipe_file(f"{protocol}://listed/{n}.tar", _shard())
    pattern = f"{protocol}://listed/*.tar"
    options = dict(cache_dir=str(tmp_path), mode="indexed", retries=4, backoff=0.01)
    fs.fail[:] = [_http_error(503), _http_error(429), ConnectionResetError("reset by peer"), TimeoutError()]
    source = fastload.TarShards(pattern, **options)
    assert len(source.storage.paths) == 3 and len(source.samples) == 18 and not fs.fail
    assert source.retried == 4
    fs.fail[:] = [_http_error(403), _http_error(503)]
    with pytest.raises(PermissionError, match=r"listed/\*.tar: HTTP 403 Forbidden.*\(permanent, not retried\)"):
        fastload.TarShards(pattern, **options)
    assert len(fs.fail) == 1  # tried once
    fs.fail[:] = [FileNotFoundError("no such bucket"), _http_error(503)]
    with pytest.raises(FileNotFoundError, match=r"listed/\*.tar: .*no such bucket \(permanent, not retried\)"):
        fastload.TarShards(pattern, **options)
    fs.fail[:] = [_http_error(503)] * 3
    with pytest.raises(shardfiles.RemoteError, match=r"listed/\*.tar: HTTP 503 .*transient, still failing after "
                                                     r"2 tries"):
        fastload.TarShards(pattern, **{**options, "retries": 1})
    fs.fail.clear()


def test_a_prefetch_on_an_asynchronous_filesystem_never_caches_a_replaced_object(tmp_path):
    """Streaming read-ahead on an asynchronous filesystem (gcsfs, adlfs: fsspec's event loop) checks the
    version after the fetch as the synchronous fetch does: a copy of an object replaced since it was indexed
    is never renamed into the cache, and the read that follows is an error naming it."""
    import concurrent.futures

    from fsspec.asyn import AsyncFileSystem

    class AsyncStore(AsyncFileSystem):
        protocol, cachable, store, writes = "fakeasync", False, {}, {}

        @classmethod
        def _strip_protocol(cls, path):
            return str(path).removeprefix("fakeasync://").strip("/")

        def put(self, path, data):
            path = self._strip_protocol(path)
            self.store[path], self.writes[path] = data, self.writes.get(path, 0) + 1

        async def _info(self, path, **kwargs):
            path = self._strip_protocol(path)
            if path not in self.store:
                raise FileNotFoundError(path)
            return {"name": path, "size": len(self.store[path]), "type": "file",
                    "generation": str(self.writes[path])}

        async def _cat_file(self, path, start=None, end=None, **kwargs):
            return self.store[self._strip_protocol(path)][start:end]

        async def _get_file(self, rpath, lpath, **kwargs):
            with open(lpath, "wb") as out:
                out.write(self.store[self._strip_protocol(rpath)])
    import fsspec
    fsspec.register_implementation("fakeasync", AsyncStore, clobber=True)
    url = "fakeasync://bucket/a.tar"
    AsyncStore().put(url, _shard())
    source = fastload.TarShards(url, cache_dir=str(tmp_path), mode="streaming", retries=1, backoff=0.01)
    assert source.targets == list(range(6))
    source.cache.close()
    shards = tmp_path / "shards"
    for name in os.listdir(shards):
        os.unlink(shards / name)  # evicted
    AsyncStore().put(url, _shard(1))  # the same size, other labels
    source.storage.prefetch([0])
    concurrent.futures.wait(list(source.cache._pending.values()), timeout=10)
    assert not [n for n in os.listdir(shards) if n.endswith((".copy", ".part"))]
    with pytest.raises(fastload.DecodeError, match=r"cannot read: " + url + r": .*changed since it was indexed"):
        source.read(3)
