"""fastload.TarShards: WebDataset tar shards as a source whose samples are byte ranges -- the same batches
as the folder they were packed from, indexes cached and rebuilt when a shard changes, bad members named."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile

import pytest
import torch

import fastload
from fastload import shardfiles, tarshards
from fastload import transforms as T


def _pack(folder, out_dir, per_shard=8):
    """The folder's images, in ImageFolder's order, as shards of ``per_shard`` samples."""
    reference = fastload.ImageFolder(folder)
    items = [(f"img{i:04d}.{os.path.splitext(path)[1][1:].lower()}", open(path, "rb").read(), label)
             for i, (path, label) in enumerate(reference.samples)]
    for number, start in enumerate(range(0, len(items), per_shard)):
        fastload.TarShards.write(items[start:start + per_shard], out_dir / f"train-{number:03d}.tar")
    return reference


def test_keys_split_as_webdataset_splits_them():
    assert tarshards.split_key("train/n0144_100.seg.png") == ("train/n0144_100", "seg.png")
    assert tarshards.split_key("plain.JPG") == ("plain", "jpg")
    assert tarshards.split_key("x/.hidden") == ("x/", "hidden") and tarshards.in_a_sample("x/.hidden")
    assert not any(map(tarshards.in_a_sample, ["README", ".hidden.txt", "a.b/c", "__key__", "__info__/x.json"]))


def test_shards_give_the_folders_batches_through_the_fast_path(image_folder, tmp_path):
    """Packed in ImageFolder's order, the shards are the same dataset: with the same transform and seed
    the loader gives the same batches, shuffled and sharded, on the fast path."""
    reference = _pack(image_folder, tmp_path)
    shards = fastload.TarShards(str(tmp_path / "train-{000..002}.tar"))
    assert len(shards.samples) == len(reference.samples) == 23
    assert shards.targets == reference.targets and shards.samples[0][0].endswith("train-000.tar:img0000")
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])
    for rank in range(2):
        options = dict(batch_size=5, num_workers=2, shuffle=True, seed=3, rank=rank, world_size=2)
        packed = fastload.DataLoader(fastload.TarShards(str(tmp_path / "train-*.tar"), transform), **options)
        folder = fastload.DataLoader(fastload.ImageFolder(image_folder, transform), **options)
        assert packed.fast_path and len(packed) == len(folder)
        for (images, labels), (ref_images, ref_labels) in zip(packed, folder, strict=True):
            assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)


def test_the_index_is_cached_and_rebuilt_when_the_shard_changes(image_folder, tmp_path, monkeypatch):
    _pack(image_folder, tmp_path, per_shard=23)
    shard = tmp_path / "train-000.tar"
    fastload.TarShards(str(shard))
    index = json.loads((tmp_path / "train-000.tar.idx.json").read_text())
    assert index["size"] == shard.stat().st_size and len(index["samples"]) == 23
    built = []
    monkeypatch.setattr(tarshards, "build_index", lambda path, stream=None, real=tarshards.build_index:
                        built.append(path) or real(path, stream))
    fastload.TarShards(str(shard))
    assert built == []  # read from the cache
    with tarfile.open(shard, "a") as archive:  # the shard changes: one more sample
        tarshards.add_member(archive, "extra.jpg", b"\xff\xd8")
        tarshards.add_member(archive, "extra.cls", b"1")
    assert len(fastload.TarShards(str(shard)).samples) == 24 and built == [str(shard)]


def test_an_index_that_cannot_be_written_beside_the_shard_goes_to_the_cache_folder(image_folder, tmp_path):
    """Where the shard's folder takes no index (read-only; here the index's name is taken by a folder, which
    stops even root), the index goes to cache_dir and is found there next time."""
    _pack(image_folder, tmp_path, per_shard=23)
    (tmp_path / "train-000.tar.idx.json").mkdir()
    cache = tmp_path.parent / f"{tmp_path.name}-cache"
    first = fastload.TarShards(str(tmp_path / "train-000.tar"), cache_dir=str(cache))
    assert len(os.listdir(cache)) == 1
    second = fastload.TarShards(str(tmp_path / "train-000.tar"), cache_dir=str(cache))
    assert second.samples == first.samples and len(first.samples) == 23


def test_bad_samples_are_errors_naming_shard_and_key_or_skipped(image_folder, tmp_path):
    """A key with no image, one with no label, one with an unreadable label: each a DecodeError naming
    ``shard:key`` when read, or skipped and reported with on_error="skip"; the good samples all arrive."""
    good = [open(path, "rb").read() for path, _ in fastload.ImageFolder(image_folder).samples[:5]]
    shard = tmp_path / "mixed.tar"
    with tarfile.open(shard, "w") as archive:
        for i, data in enumerate(good):
            tarshards.add_member(archive, f"s{i}.jpg", data)
            tarshards.add_member(archive, f"s{i}.json", json.dumps({"label": i}).encode())
        tarshards.add_member(archive, "nolabel.jpg", good[0])
        tarshards.add_member(archive, "noimage.cls", b"3")
        tarshards.add_member(archive, "badlabel.jpg", good[1])
        tarshards.add_member(archive, "badlabel.cls", b"three")
    source = fastload.TarShards(str(shard), T.Compose([T.CenterCrop(8), T.ToImage()]))
    assert source.targets[:5] == [0, 1, 2, 3, 4] and len(source.samples) == 8
    with pytest.raises(fastload.DecodeError, match=r"mixed.tar:nolabel\): no label member"):
        list(fastload.DataLoader(source, batch_size=4))
    loader = fastload.DataLoader(source, batch_size=4, on_error="skip")
    labels = [label for _, batch in loader for label in batch.tolist()]
    assert sorted(set(labels)) == [0, 1, 2, 3, 4]
    reasons = {entry[2].rsplit(":", 1)[1] for entry in loader.stats.skipped}
    assert reasons == {"nolabel", "noimage", "badlabel"}


def test_a_truncated_shard_indexes_what_it_can_and_names_the_cut_sample(image_folder, tmp_path):
    reference = _pack(image_folder, tmp_path, per_shard=23)
    shard = tmp_path / "train-000.tar"
    data = shard.read_bytes()
    index = tarshards.build_index(str(shard))
    key, members, _ = index["samples"][10]
    image = next(e for e in tarshards.IMAGE_EXTENSIONS if e in members)
    cut = members[image][0] + members[image][1] // 2  # halfway into sample 10's image
    shard.write_bytes(data[:cut])
    source = fastload.TarShards(str(shard))
    assert 10 <= len(source.samples) < 23 and source.targets[:10] == reference.targets[:10]
    assert source.read(0) == open(reference.samples[0][0], "rb").read()
    with pytest.raises(fastload.DecodeError, match=r"train-000.tar:img0010\): .*(cut short|truncated)") as info:
        source.read(10)
    assert str(info.value).count("cut short") == 1  # said once, by the index


def test_missing_shards_and_backends_are_refused_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-"):
        fastload.TarShards(str(tmp_path / "nothing-*.tar"))
    (tmp_path / "not.tar").write_bytes(b"this is not a tar file" * 40)
    with pytest.raises(ValueError, match="not.tar: not a readable tar"):
        fastload.TarShards(str(tmp_path / "not.tar"))
    try:
        import s3fs  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="s3fs"):  # fsspec's own message: install s3fs
            fastload.TarShards("s3://bucket/a.tar")


class _RangeServer:
    """An HTTP server on 127.0.0.1 serving a folder with HEAD and Range requests (206), as object stores
    and CDNs do, counting ranged and whole GETs; ``drop`` makes it close the connection on the next n GETs
    without answering, ``stall`` makes it hold every GET that many seconds before answering, ``cut`` makes
    the next n GETs send half their body, then wait ``cut_wait`` seconds and close the connection.
    Like a real server it sends an ETag (the file's size and mtime) and honours If-Match (412), unless
    ``etag`` is False; ``last_modified`` adds a Last-Modified header. Faults: ``truncate`` sends the next n
    GETs' bodies cut in half with no Content-Length (the end of the body is the closed connection);
    ``statuses`` answers the next requests (HEAD or GET), one each, with these error statuses;
    ``ignore_range`` answers ranged GETs with 200 and the whole file. A query string is ignored."""

    def __init__(self, folder):
        import email.utils
        import http.server
        import threading
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _body(self):
                server.requests += 1
                if server.statuses:
                    self.send_error(server.statuses.pop(0))
                    return None
                path = os.path.join(folder, self.path.partition("?")[0].lstrip("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return None
                data = open(path, "rb").read()
                stamp = os.stat(path).st_mtime_ns
                self.version = {}
                if server.etag:
                    self.version["ETag"] = f'"{len(data)}-{stamp}"'
                if server.last_modified:
                    self.version["Last-Modified"] = email.utils.formatdate(stamp / 1e9, usegmt=True)
                wanted = self.headers.get("If-Match")
                if wanted and server.etag and wanted != self.version["ETag"]:
                    self.send_error(412)
                    return None
                return data

            def _version_headers(self):
                for key, value in self.version.items():
                    self.send_header(key, value)

            def do_HEAD(self):
                data = self._body()
                if data is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self._version_headers()
                    self.send_header("Accept-Ranges", "bytes")
                    self.end_headers()

            def do_GET(self):
                data = self._body()
                if data is None:
                    return
                ranged = self.headers.get("Range")
                if ranged:
                    server.ranged += 1
                else:
                    server.whole += 1
                if server.drop > 0:
                    server.drop -= 1
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if server.stall:
                    import time
                    time.sleep(server.stall)
                if ranged and not server.ignore_range:
                    start, _, end = ranged.removeprefix("bytes=").partition("-")
                    start, end = int(start), min(int(end) if end else len(data) - 1, len(data) - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                    part = data[start:end + 1]
                else:
                    self.send_response(200)
                    part = data
                self._version_headers()
                if server.truncate > 0:
                    server.truncate -= 1
                    self.end_headers()
                    self.wfile.write(part[:len(part) // 2])
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                if server.cut > 0:
                    server.cut -= 1
                    self.wfile.write(part[:len(part) // 2])
                    self.wfile.flush()
                    import time
                    time.sleep(server.cut_wait)
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(part)

        self.ranged, self.whole, self.drop, self.stall, self.cut, self.cut_wait = 0, 0, 0, 0.0, 0, 0.0
        self.requests, self.truncate, self.statuses, self.ignore_range = 0, 0, [], False
        self.etag, self.last_modified = True, False

        class Quiet(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that timed out on a stalled answer: the late write fails, as expected

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture()
def served_shards(image_folder, tmp_path):
    (tmp_path / "www").mkdir()
    _pack(image_folder, tmp_path / "www", per_shard=8)
    server = _RangeServer(tmp_path / "www")
    yield server, tmp_path
    server.close()


def test_http_shards_give_the_local_shards_batches_one_ranged_request_per_sample(served_shards):
    """Over HTTP (fsspec), the same batches as the local shards; indexes cached locally (a second source
    reads no shard again); each sample one ranged request."""
    server, tmp_path = served_shards
    transform = T.Compose([T.RandomResizedCrop(24), T.ToDtype(torch.float32, scale=True)])
    options = dict(batch_size=5, num_workers=2, shuffle=True, seed=1)
    cache = str(tmp_path / "cache")
    remote = fastload.TarShards(server.url + "/train-{000..002}.tar", transform, cache_dir=cache, mode="indexed")
    local = fastload.TarShards(str(tmp_path / "www" / "train-{000..002}.tar"), transform)
    assert remote.targets == local.targets and remote.samples[3][0] == server.url + "/train-000.tar:img0003"
    before = server.ranged
    for (images, labels), (ref_images, ref_labels) in zip(fastload.DataLoader(remote, **options),
                                                          fastload.DataLoader(local, **options), strict=True):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
    assert server.ranged - before == 23
    before = server.ranged
    fastload.TarShards(server.url + "/train-{000..002}.tar", cache_dir=cache)
    assert server.ranged == before  # the indexes came from the cache


def test_dropped_connections_are_retried_and_a_stalled_server_ends_in_an_error_naming_the_sample(served_shards):
    server, tmp_path = served_shards
    source = fastload.TarShards(server.url + "/train-000.tar", cache_dir=str(tmp_path / "cache"), timeout=1.0,
                                retries=2, mode="indexed")
    server.drop = 2  # the next two ranged requests get no answer (aiohttp may itself retry one of them)
    first = source.read(0)
    assert first[:2] == b"\xff\xd8" and server.drop == 0 and source.retried >= 1
    server.stall = 3.0  # longer than the timeout, every time
    import time
    started = time.monotonic()
    with pytest.raises(fastload.DecodeError, match=r"train-000.tar:img0001\): cannot read: .*after 3 tries"):
        source.read(1)
    assert time.monotonic() - started < 15  # three 1 s timeouts and 0.75 s of waits, not a hang


@pytest.mark.parametrize("cut_wait", [0.0, 2.0], ids=["reset", "stalled"])
def test_a_shard_cut_off_while_it_is_indexed_is_fetched_again_not_indexed_as_truncated(served_shards, cut_wait):
    """The network failing halfway through a shard (the connection reset, or stalled past the timeout) is
    retried: the index holds every sample, never a shard cut short by the network."""
    server, tmp_path = served_shards
    server.cut, server.cut_wait = 1, cut_wait
    source = fastload.TarShards(server.url + "/train-000.tar", cache_dir=str(tmp_path / "cache"), timeout=1.0,
                                mode="indexed")
    assert server.cut == 0 and source.retried >= 1
    assert len(source.samples) == 8 and not source.problems


def test_loader_stats_count_the_retries_of_each_epoch(served_shards):
    server, tmp_path = served_shards
    transform = T.Compose([T.Resize((8, 8)), T.ToDtype(torch.float32, scale=True)])
    source = fastload.TarShards(server.url + "/train-000.tar", transform, cache_dir=str(tmp_path / "cache"),
                                timeout=1.0, retries=3, mode="indexed")
    loader = fastload.DataLoader(source, batch_size=4, num_workers=1)  # one read at a time
    server.drop = 2  # two GETs in a row unanswered: aiohttp may retry the first itself, not the second
    assert len(list(loader)) == 2 and server.drop == 0
    assert loader.stats.retried >= 1 and "remote reads retried" in str(loader.stats)
    assert len(list(loader)) == 2 and loader.stats.retried == 0  # the next epoch had none


def test_streamed_http_shards_are_fetched_whole_once_and_give_the_local_streaming_batches(served_shards):
    """Remote shards stream by default: each shard one whole GET into the local cache, read there; the same
    batches as the local shards in streaming mode (the order depends on the shards' sizes alone), on every
    rank the same number; a second epoch and a second source read the cache, not the server."""
    server, tmp_path = served_shards
    transform = T.Compose([T.RandomResizedCrop(24), T.ToDtype(torch.float32, scale=True)])
    cache = str(tmp_path / "cache")
    for rank in range(2):
        options = dict(batch_size=3, num_workers=2, shuffle=True, seed=1, rank=rank, world_size=2)
        remote = fastload.TarShards(server.url + "/train-{000..002}.tar", transform, cache_dir=cache,
                                    shuffle_buffer=4)
        local = fastload.TarShards(str(tmp_path / "www" / "train-{000..002}.tar"), transform, mode="streaming",
                                   shuffle_buffer=4)
        assert remote.mode == "streaming" and local.mode == "streaming"
        ranged, loaders = server.ranged, [fastload.DataLoader(s, **options) for s in (remote, local)]
        assert len(loaders[0]) == len(loaders[1]) == 4  # 23 samples: 12 a rank, padded as DistributedSampler
        for epoch in range(2):
            for (images, labels), (ref_images, ref_labels) in zip(*loaders, strict=True):
                assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
        assert server.ranged == ranged  # no sample was read by a ranged request
    assert server.whole == 3 and remote.cache.fetched <= 3  # each shard once, whichever rank needed it first
    assert sorted(n for n in os.listdir(os.path.join(cache, "shards")) if n.endswith(".copy")).__len__() == 3


def test_streamed_shards_resume_exactly_and_at_another_world_size(image_folder, tmp_path):
    _pack(image_folder, tmp_path, per_shard=5)
    transform = T.Compose([T.RandomResizedCrop(16), T.ToDtype(torch.float32, scale=True)])

    def loader(rank, world):
        source = fastload.TarShards(str(tmp_path / "train-*.tar"), transform, mode="streaming", shuffle=True,
                                    seed=2, shuffle_buffer=3, rank=rank, world_size=world)
        return fastload.DataLoader(source, batch_size=2, num_workers=2)
    whole = [[(x, y) for x, y in loader(rank, 3)] for rank in range(3)]
    first = loader(0, 3)
    iterator = iter(first)
    next(iterator)
    state = first.state_dict()
    first.close()
    again = loader(0, 3)
    again.load_state_dict(state)
    rest = [(x, y) for x, y in again]
    assert len(rest) == len(whole[0]) - 1
    for (images, labels), (ref_images, ref_labels) in zip(rest, whole[0][1:], strict=True):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
    moved = [loader(rank, 2) for rank in range(2)]
    for resumed in moved:
        resumed.load_state_dict(state)
    counts = [len(list(resumed)) for resumed in moved]
    assert counts[0] == counts[1] and sum(counts) * 2 >= 23 - 3 * 2


def test_streaming_retries_a_dropped_fetch_and_ends_a_stalled_one_in_an_error_naming_the_shard(served_shards):
    """A streamed shard is fetched whole once, when it is indexed (the first epoch reads that copy); a fetch
    whose connection drops is retried, one that stalls past the timeout on every try is a DecodeError
    naming the sample, in bounded time."""
    server, tmp_path = served_shards
    cache = tmp_path / "cache"
    server.drop = 2  # the next two GETs get no answer (aiohttp may itself retry one of them)
    source = fastload.TarShards(server.url + "/train-000.tar", cache_dir=str(cache), timeout=1.0, retries=2)
    assert source.retried >= 1 and server.drop == 0
    whole = server.whole
    assert source.read(0)[:2] == b"\xff\xd8" and server.whole == whole  # read from the copy
    stalled = fastload.TarShards(server.url + "/train-001.tar", cache_dir=str(cache), timeout=1.0, retries=1)
    stalled.cache.close()
    for name in os.listdir(cache / "shards"):
        os.unlink(cache / "shards" / name)  # evicted: the next read fetches it again
    server.stall = 3.0
    import time
    started = time.monotonic()
    with pytest.raises(fastload.DecodeError, match=r"train-001.tar:img0008\): cannot read: .*after 2 tries"):
        stalled.read(0)
    assert time.monotonic() - started < 10


def _relabel(shard):
    """Rewrite ``shard`` with every label one higher: the same size, the same image offsets, other labels
    (a shard replaced on the server by another of the same size); its mtime moves 5 s on."""
    with tarfile.open(shard) as archive:
        members = [(m.name, archive.extractfile(m).read()) for m in archive if m.isfile()]
    stamp = os.stat(shard).st_mtime_ns
    with tarfile.open(shard, "w") as archive:
        for name, payload in members:
            if name.endswith(".cls"):
                payload = str((int(payload) + 1) % 10).encode()
            tarshards.add_member(archive, name, payload)
    os.utime(shard, ns=(stamp + 5 * 10**9, stamp + 5 * 10**9))


def test_a_streamed_shard_cut_short_without_content_length_is_fetched_again_never_cached_short(served_shards):
    """A body that ends early with no Content-Length to say so (the connection closed) is retried, and a
    shard that never arrives whole is an error naming its URL: never a shorter copy in the cache whose
    missing samples vanish from the epoch (the size indexed is checked before the copy is renamed in)."""
    server, tmp_path = served_shards
    cache = tmp_path / "cache"
    server.truncate = 1
    source = fastload.TarShards(server.url + "/train-000.tar", cache_dir=str(cache), timeout=2.0, backoff=0.01)
    assert server.truncate == 0 and source.retried >= 1
    assert len(source.samples) == 8 and not source.problems
    copies = [n for n in os.listdir(cache / "shards") if n.endswith(".copy")]
    assert [os.path.getsize(cache / "shards" / n) for n in copies] == [(tmp_path / "www/train-000.tar").stat().st_size]
    server.truncate = 100
    with pytest.raises(shardfiles.RemoteError, match=r"train-001.tar: .*cut short.*after 3 tries"):
        fastload.TarShards(server.url + "/train-001.tar", cache_dir=str(cache), timeout=2.0, retries=2,
                           backoff=0.01)
    assert len([n for n in os.listdir(cache / "shards") if n.endswith(".copy")]) == 1  # no short copy
    assert not [n for n in os.listdir(cache / "shards") if n.endswith(".part")]


def test_a_short_copy_in_the_cache_is_fetched_again_and_a_cut_refetch_is_each_samples_error(served_shards):
    """A copy of the wrong size found in the cache (an older fastload's) is not read but fetched again; a
    refetch mid-epoch that never arrives whole makes each of the shard's samples an error naming the URL,
    which on_error="skip" reports one by one: none vanishes silently."""
    server, tmp_path = served_shards
    cache = tmp_path / "cache"
    url = server.url + "/train-000.tar"
    transform = T.Compose([T.Resize((8, 8)), T.ToDtype(torch.float32, scale=True)])
    source = fastload.TarShards(url, transform, cache_dir=str(cache), timeout=2.0, retries=1, backoff=0.01)
    source.cache.close()
    name = source.cache.name(url, source.storage.versions[0])
    data = open(name, "rb").read()
    with open(name, "wb") as out:
        out.write(data[:len(data) // 2])
    whole = server.whole
    again = fastload.TarShards(url, transform, cache_dir=str(cache), timeout=2.0, retries=1, backoff=0.01)
    assert len(list(fastload.DataLoader(again, batch_size=4))) == 2 and server.whole == whole + 1
    assert os.path.getsize(name) == len(data)
    both = fastload.TarShards(server.url + "/train-{000..001}.tar", transform, cache_dir=str(cache), timeout=2.0,
                              retries=1, backoff=0.01)
    again.cache.close()
    both.cache.close()
    os.unlink(name)  # evicted: read again mid-epoch, and cut short every time
    server.truncate = 100
    loader = fastload.DataLoader(both, batch_size=4, on_error="skip")
    assert sum(len(labels) for _, labels in loader) == 16  # train-001's samples, and as replacements
    assert {entry[2] for entry in loader.stats.skipped} == {name for name, _ in both.samples[:8]}
    assert all("train-000.tar" in str(entry) and "cut short" in str(entry) for entry in loader.stats.skipped)
    with pytest.raises(fastload.DecodeError, match=r"train-000.tar:img000\d\): cannot read: .*cut short"):
        list(fastload.DataLoader(both, batch_size=4))


@pytest.mark.parametrize("version", ["etag", "last-modified"])
def test_a_shard_replaced_by_one_of_the_same_size_is_indexed_again(served_shards, version):
    """The cached index of a remote shard records its version -- the ETag, or from a server without ETags
    its Last-Modified (fsspec's HTTP calls it ``Last-Modified``) -- so a shard replaced by another of the
    same size is indexed again, its new labels read, in both modes."""
    server, tmp_path = served_shards
    server.etag, server.last_modified = version == "etag", version == "last-modified"
    cache = str(tmp_path / "cache")
    for mode in ("indexed", "streaming"):
        old = fastload.TarShards(server.url + "/train-000.tar", cache_dir=cache, mode=mode)
        _relabel(tmp_path / "www" / "train-000.tar")
        new = fastload.TarShards(server.url + "/train-000.tar", cache_dir=cache, mode=mode)
        assert new.targets == [(label + 1) % 10 for label in old.targets] != old.targets
        assert new.targets == fastload.TarShards(str(tmp_path / "www" / "train-000.tar")).targets


@pytest.mark.parametrize("version", ["etag", "last-modified"])
def test_a_shard_replaced_mid_run_is_an_error_naming_it_never_wrong_labels(served_shards, version):
    """Indexed, every ranged read checks the version indexed (If-Match with the ETag; the answer's ETag or
    Last-Modified, and the size in its Content-Range): reads of a shard replaced since it was indexed are
    errors naming the URL and saying it changed, not samples with the old index's labels. Streaming, a copy
    fetched after the change is refused likewise (If-Match, or its Last-Modified)."""
    server, tmp_path = served_shards
    server.etag, server.last_modified = version == "etag", version == "last-modified"
    url = server.url + "/train-000.tar"
    indexed = fastload.TarShards(url, cache_dir=str(tmp_path / "cache"), mode="indexed", retries=1, backoff=0.01)
    streamed = fastload.TarShards(url, cache_dir=str(tmp_path / "cache"), retries=1, backoff=0.01)
    assert indexed.read(0)[:2] == b"\xff\xd8"
    _relabel(tmp_path / "www" / "train-000.tar")
    with pytest.raises(fastload.DecodeError, match=r"train-000.tar:img0001\): cannot read: .*" + url +
                       r".*changed since it was indexed.*permanent, not retried"):
        indexed.read(1)
    assert indexed.retried == 0
    # streaming: the index came from the indexed source's cache; the copy, fetched now, is of the new shard
    with pytest.raises(fastload.DecodeError, match=r"img0001\): cannot read: .*changed since it was indexed"):
        streamed.read(1)
    assert not os.listdir(tmp_path / "cache" / "shards") or \
        not [n for n in os.listdir(tmp_path / "cache" / "shards") if n.endswith((".copy", ".part"))]


def test_server_errors_are_retried_at_open_and_read_and_403_404_are_permanent(served_shards):
    """A 503 (then 200) when a shard is opened or read is retried with backoff; a 403 or a 404 is not,
    and the error says "permanent"; a 503 that persists says "transient" and how many tries; all name the
    URL."""
    server, tmp_path = served_shards
    url = server.url + "/train-000.tar"
    options = dict(cache_dir=str(tmp_path / "cache"), retries=2, backoff=0.01)
    server.statuses = [503, 503]  # HEAD, then fsspec's GET for the size: the open fails once
    source = fastload.TarShards(url, mode="indexed", **options)
    assert source.retried >= 1 and len(source.samples) == 8
    server.statuses = [503]
    assert source.read(0)[:2] == b"\xff\xd8" and source.retried >= 2
    server.statuses, requests = [403] * 5, server.requests
    with pytest.raises(fastload.DecodeError, match=r"img0001\): cannot read: .*" + url +
                       r": HTTP 403 Forbidden \(permanent, not retried\)"):
        source.read(1)
    assert server.requests == requests + 1  # not retried
    server.statuses, requests = [503] * 5, server.requests
    with pytest.raises(fastload.DecodeError, match=r"cannot read: .*" + url + r": HTTP 503 Service Unavailable "
                                                   r"\(transient, still failing after 3 tries\)"):
        source.read(1)
    assert server.requests == requests + 3
    server.statuses = []
    with pytest.raises(FileNotFoundError, match=r"train-999.tar: HTTP 404 Not Found \(permanent, not retried\)"):
        fastload.TarShards(server.url + "/train-999.tar", **options)
    server.statuses = [403, 403]
    with pytest.raises(PermissionError, match=r"train-001.tar: HTTP 403 Forbidden \(permanent, not retried\)"):
        fastload.TarShards(server.url + "/train-001.tar", **options)
    server.statuses = [503, 503, 503]  # streaming: the open, then the whole GET
    streamed = fastload.TarShards(server.url + "/train-002.tar", **options)
    assert streamed.retried >= 1 and len(streamed.samples) == 7 and not server.statuses


def test_a_server_that_ignores_range_still_gives_each_sample_its_own_bytes(served_shards):
    """A server answering a ranged request with 200 and the whole file: the sample's bytes are sliced from
    it (its size checked), not the whole shard given as the image."""
    server, tmp_path = served_shards
    server.ignore_range = True
    remote = fastload.TarShards(server.url + "/train-{000..002}.tar", cache_dir=str(tmp_path / "cache"),
                                mode="indexed")
    local = fastload.TarShards(str(tmp_path / "www" / "train-{000..002}.tar"))
    assert [remote.read(i) for i in (0, 5, 9, 22)] == [local.read(i) for i in (0, 5, 9, 22)]
    assert server.ranged >= 4


@pytest.mark.parametrize("mode", ["indexed", "streaming"])
def test_a_presigned_url_with_a_long_query_is_cached_under_a_bounded_name(served_shards, mode):
    """A 300-character query (a presigned URL) makes no cache file name too long: indexes and copies are
    named by a readable tail and a hash, found again by the next run (signed anew: the signature is not
    part of the name), so nothing is indexed or fetched twice."""
    server, tmp_path = served_shards
    cache = tmp_path / "cache"

    def signed(signature):
        return (f"{server.url}/train-000.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600"
                f"&X-Amz-Signature={signature * 300}")
    first = fastload.TarShards(signed("a"), cache_dir=str(cache), mode=mode)
    assert len(first.samples) == 8 and first.read(3) == fastload.TarShards(str(tmp_path / "www/train-000.tar")).read(3)
    names = [name for _, _, files in os.walk(cache) for name in files]
    assert names and max(len(name.encode()) for name in names) < 160
    requests = server.ranged + server.whole
    again = fastload.TarShards(signed("b"), cache_dir=str(cache), mode=mode)
    assert again.targets == first.targets
    assert server.ranged + server.whole == requests  # the index (and the copy) came from the cache


def test_a_malformed_cached_index_is_rebuilt(image_folder, tmp_path):
    """An index whose JSON lacks ``samples`` (or holds a list, malformed entries, negative offsets, or is nested
    past json's recursion limit) but names the shard's size and mtime is rebuilt, not a KeyError."""
    _pack(image_folder, tmp_path, per_shard=23)
    shard = tmp_path / "train-000.tar"
    good = fastload.TarShards(str(shard))
    index = json.loads((tmp_path / "train-000.tar.idx.json").read_text())
    nested = "[" * 100_000 + "]" * 100_000  # json.load's RecursionError
    negative = {**index, "samples": [[key, {e: [-1, 2] for e in members}, texts]
                                     for key, members, texts in index["samples"]]}
    for broken in ({k: v for k, v in index.items() if k != "samples"}, {**index, "samples": [["x"]]},
                   {**index, "samples": None}, [index], nested, negative, {**index, "problems": [[0]]}):
        (tmp_path / "train-000.tar.idx.json").write_text(broken if isinstance(broken, str) else json.dumps(broken))
        assert fastload.TarShards(str(shard)).samples == good.samples
        assert json.loads((tmp_path / "train-000.tar.idx.json").read_text()) == index



def _header(name: bytes, size_field: bytes, kind: bytes = b"0") -> bytes:
    """One ustar header with a size field given as raw bytes (tarfile's writer cannot write a hostile one)."""
    block = bytearray(512)
    block[:len(name)], block[100:108], block[124:136], block[156:157] = name, b"0000644\0", size_field, kind
    block[257:265], block[148:156] = b"ustar\x0000", b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _good_members(data: bytes, count: int = 2) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for i in range(count):
            tarshards.add_member(archive, f"s{i}.jpg", data)
            tarshards.add_member(archive, f"s{i}.cls", str(i).encode())
    return out.getvalue().rstrip(b"\0")  # (its end-of-archive blocks off: more members follow)


def _pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def test_a_negative_base256_size_ends_the_index_there_and_never_hangs(image_folder, tmp_path):
    """A header whose size is a negative base-256 number made Python 3.11's tarfile read that header forever,
    memory growing (and TarShards with it): the index stops at that header, the reason recorded, and the
    samples before it are read. Run in a child with a time and memory bound, so a hang fails the test. (-512
    sends tarfile back to the same header, over and over.)"""
    jpeg = open(fastload.ImageFolder(image_folder).samples[0][0], "rb").read()
    shard = tmp_path / "hostile.tar"
    negative = ((1 << 96) - 512).to_bytes(12, "big")
    shard.write_bytes(_pad(_good_members(jpeg)) + _header(b"evil.jpg", negative) + bytes(4096))
    code = f"""if True:
        import resource
        from fastload import tarshards
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) for line in status if line.startswith("VmSize")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), size + (1 << 30)))
        import fastload
        source = fastload.TarShards({str(shard)!r})
        print(len(source.samples), source.targets)
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", "[0,", "1]"]
    index = tarshards.build_index(str(shard))
    assert "negative" in index["error"] and [s[0] for s in index["samples"]] == ["s0", "s1"]
    (tmp_path / "first.tar").write_bytes(_header(b"evil.jpg", negative) + bytes(1024))
    with pytest.raises(ValueError, match=r"first.tar: not a readable tar .*negative"):
        fastload.TarShards(str(tmp_path / "first.tar"))


@pytest.mark.parametrize("size_field, reason", [
    (b"\x80" + (1 << 62).to_bytes(11, "big"), "the file ends"),  # huge, within off_t: past the file's end
    (b"\x80" + (1 << 80).to_bytes(11, "big"), "past"),  # past off_t: a corrupt header
    (b"-0000000001\0", "not an octal"), (b"0000000001x\0", "not an octal"),
])
def test_absurd_sizes_are_range_checked_before_use(image_folder, tmp_path, size_field, reason):
    """A member size past the file's end or past off_t, or not octal, ends the index at that header with the
    reason; the samples before it read, the one cut is that sample's error -- no allocation of the size."""
    jpeg = open(fastload.ImageFolder(image_folder).samples[0][0], "rb").read()
    shard = tmp_path / "absurd.tar"
    shard.write_bytes(_pad(_good_members(jpeg)) + _header(b"s9.jpg", size_field) + bytes(1024))
    index = tarshards.build_index(str(shard))
    assert reason in index["error"]
    source = fastload.TarShards(str(shard))
    assert source.read(1) == jpeg and source.targets[:2] == [0, 1]
    if len(source.samples) == 3:  # the member cut by the end: its sample's error, naming it
        with pytest.raises(fastload.DecodeError, match=r"absurd.tar:s9\): .*cut short"):
            source.read(2)
        assert source.storage.read(0, *source.ranges[2][1:]) == bytes(1024)  # the read is clamped to the file


def test_a_key_seen_again_after_another_is_a_new_sample_as_webdataset_groups_them(image_folder, tmp_path):
    """``000.jpg 000.cls 001.jpg 001.cls 000.jpg`` is three samples (webdataset's group_by_keys), not two
    with the first image dropped and the second labelled with the first's label; webdataset agrees."""
    photos = [open(path, "rb").read() for path, _ in fastload.ImageFolder(image_folder).samples[:3]]
    shard = tmp_path / "repeat.tar"
    with tarfile.open(shard, "w") as archive:
        for name, payload in [("000.jpg", photos[0]), ("000.cls", b"7"), ("001.jpg", photos[1]), ("001.cls", b"8"),
                              ("000.jpg", photos[2])]:
            tarshards.add_member(archive, name, payload)
    source = fastload.TarShards(str(shard))
    assert [name.rsplit(":", 1)[1] for name, _ in source.samples] == ["000", "001", "000"]
    assert source.targets == [7, 8, -1] and source.read(0) == photos[0]
    with pytest.raises(fastload.DecodeError, match=r"repeat.tar:000\): no label member"):
        source.read(2)
    webdataset = pytest.importorskip("webdataset")
    grouped = list(webdataset.WebDataset(str(shard), shardshuffle=False, empty_check=False))
    assert [sorted(k for k in sample if not k.startswith("__")) for sample in grouped] == \
        [["cls", "jpg"], ["cls", "jpg"], ["jpg"]]


def test_a_duplicate_member_in_one_sample_is_that_samples_error_never_a_silent_drop(image_folder, tmp_path):
    photos = [open(path, "rb").read() for path, _ in fastload.ImageFolder(image_folder).samples[:3]]
    shard = tmp_path / "dup.tar"
    with tarfile.open(shard, "w") as archive:
        for name, payload in [("a.jpg", photos[0]), ("a.jpg", photos[1]), ("a.cls", b"1"), ("b.jpg", photos[2]),
                              ("b.cls", b"2")]:
            tarshards.add_member(archive, name, payload)
    source = fastload.TarShards(str(shard), T.Compose([T.CenterCrop(8), T.ToImage()]))
    assert len(source.samples) == 2
    with pytest.raises(fastload.DecodeError, match=r"dup.tar:a\): two 'a.jpg' members in one sample"):
        source.read(0)
    loader = fastload.DataLoader(source, batch_size=2, on_error="skip")
    assert {label for _, batch in loader for label in batch.tolist()} == {2}
    assert [entry[2].rsplit(":", 1)[1] for entry in loader.stats.skipped] == ["a"]


@pytest.mark.parametrize("extension, text", [
    ("cls", str(1 << 63)), ("cls", str(-(1 << 63) - 1)), ("cls", "9" * 400), ("cls", "2.9"), ("cls", "three"),
    ("cls", "\u0661\u0662"), ("cls", ""), ("txt", "1_000"), ("json", "2.0"), ("json", '"3"'), ("json", "true"),
    ("json", "[1]"), ("json", '{"label": null}'), ("json", str(1 << 64)), ("json", "[" * 3000),
])
def test_a_bad_label_is_that_samples_error_and_skip_skips_only_it(image_folder, tmp_path, extension, text):
    """A label past int64, not an integer, or a JSON value of another type failed the whole epoch ("Overflow
    when unpacking long long" in the batch's label tensor) even with on_error="skip": now it is that sample's
    DecodeError naming the shard, key and member, and skip delivers every other sample."""
    photos = [open(path, "rb").read() for path, _ in fastload.ImageFolder(image_folder).samples[:3]]
    shard = tmp_path / "labels.tar"
    with tarfile.open(shard, "w") as archive:
        for i, photo in enumerate(photos):
            tarshards.add_member(archive, f"k{i}.jpg", photo)
            tarshards.add_member(archive, f"k{i}.{extension}", text.encode() if i == 1 else str(i).encode())
    source = fastload.TarShards(str(shard), T.Compose([T.CenterCrop(8), T.ToImage()]))
    assert source.targets == [0, -1, 2]
    with pytest.raises(fastload.DecodeError, match=rf"labels.tar:k1\): unreadable label in its .{extension} member"):
        source.read(1)
    loader = fastload.DataLoader(source, batch_size=3, on_error="skip")
    assert {label for _, batch in loader for label in batch.tolist()} == {0, 2}
    assert [entry[2].rsplit(":", 1)[1] for entry in loader.stats.skipped] == ["k1"]


@pytest.mark.parametrize("text, value", [(" 42\n", 42), ("+7", 7), ("-3", -3), (str((1 << 63) - 1), (1 << 63) - 1),
                                         (str(-(1 << 63)), -(1 << 63)), ("007", 7)])
def test_int64_labels_with_whitespace_and_signs_are_read(text, value):
    assert tarshards.parse_label("cls", text) == value
    assert tarshards.parse_label("json", json.dumps({"label": value})) == value


def test_rocals_webdataset_reader_on_the_same_index_refuses_a_duplicate_member_too(image_folder, tmp_path):
    """rocAL's WebDataset reader (compat.rocal) stands on this index: the sample with two ``a.jpg`` is its error
    there too, never one of the images silently."""
    from fastload.compat.rocal.webdataset import WebDatasetSamples, webdataset_reader
    photos = [open(path, "rb").read() for path, _ in fastload.ImageFolder(image_folder).samples[:3]]
    (tmp_path / "wds").mkdir()
    with tarfile.open(tmp_path / "wds" / "dup.tar", "w") as archive:
        for name, payload in [("a.jpg", photos[0]), ("a.jpg", photos[1]), ("a.cls", b"1"), ("b.jpg", photos[2]),
                              ("b.cls", b"2")]:
            tarshards.add_member(archive, name, payload)
    samples = WebDatasetSamples("fn.decoders.image", webdataset_reader(tmp_path / "wds", [{"jpg", "cls"}], 0),
                                str(tmp_path / "wds"))
    assert samples.read(1) == photos[2]
    with pytest.raises(fastload.DecodeError, match=r"dup.tar:a\): two 'a.jpg' members"):
        samples.read(0)


def test_extended_headers_and_names_are_bounded(image_folder, tmp_path):
    """A GNU long name or pax header over MAX_EXTENDED bytes, or a member name over MAX_NAME characters, is a
    corrupt header: the index ends there (each name is kept in memory and in the index)."""
    jpeg = open(fastload.ImageFolder(image_folder).samples[0][0], "rb").read()
    good = _pad(_good_members(jpeg))
    huge = _header(b"././@LongLink", b"%011o\0" % (tarshards.MAX_EXTENDED + 1), b"L")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        tarshards.add_member(archive, "n" * (tarshards.MAX_NAME + 1) + ".jpg", b"x")
    for name, tail, reason in [("extended.tar", huge + bytes(2048), "an extended header .* of 1048577 bytes"),
                               ("name.tar", out.getvalue(), "a member name of 65541 characters")]:
        (tmp_path / name).write_bytes(good + tail)
        index = tarshards.build_index(str(tmp_path / name))
        assert [s[0] for s in index["samples"]] == ["s0", "s1"]
        assert re.search(reason, index["error"]), index["error"]


def test_members_webdataset_puts_in_no_sample_are_left_out_without_splitting_one(image_folder, tmp_path):
    """``README`` (no extension), ``.hidden.txt`` and ``__info__/x.json`` between two members of one key: webdataset
    reads them into no sample and the key's members stay one sample; so does the index."""
    photo = open(fastload.ImageFolder(image_folder).samples[0][0], "rb").read()
    shard = tmp_path / "odd.tar"
    with tarfile.open(shard, "w") as archive:
        for name, payload in [("a.jpg", photo), ("README", b"hi"), (".hidden.txt", b"x"), ("__info__/x.json", b"{}"),
                              ("a.cls", b"1"), ("b.jpg", photo), ("b.cls", b"2")]:
            tarshards.add_member(archive, name, payload)
    source = fastload.TarShards(str(shard))
    assert [name.rsplit(":", 1)[1] for name, _ in source.samples] == ["a", "b"] and source.targets == [1, 2]
    webdataset = pytest.importorskip("webdataset")
    grouped = list(webdataset.WebDataset(str(shard), shardshuffle=False, empty_check=False))
    assert [(s["__key__"], sorted(k for k in s if not k.startswith("__"))) for s in grouped] == \
        [("a", ["cls", "jpg"]), ("b", ["cls", "jpg"])]


def test_a_sample_cut_short_keeps_both_reasons(tmp_path):
    """A sample with a duplicate member that the shard also ends inside: its problem names both (the cut was
    lost behind the first reason; the fuzz target's input, kept in its corpus)."""
    seed = os.path.join(os.path.dirname(__file__), "data", "fuzz", "tar", "seen-990275d606b6586e")
    shard = tmp_path / "cut.tar"
    shard.write_bytes(open(seed, "rb").read())
    (problem,) = [reason for _, reason in tarshards.build_index(str(shard))["problems"]]
    assert "two 'a.jpg' members" in problem and "the shard is cut short" in problem
