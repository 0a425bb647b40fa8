"""fastload.TarShards: WebDataset tar shards as a source whose samples are byte ranges -- the same batches
as the folder they were packed from, indexes cached and rebuilt when a shard changes, bad members named."""

from __future__ import annotations

import json
import os
import tarfile

import pytest
import torch

import fastload
from fastload import tarshards
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
    with pytest.raises(fastload.DecodeError, match=r"train-000.tar:img0010\): .*(cut short|truncated)"):
        source.read(10)


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
    the next n GETs send half their body, then wait ``cut_wait`` seconds and close the connection."""

    def __init__(self, folder):
        import http.server
        import threading
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _body(self):
                path = os.path.join(folder, self.path.lstrip("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return None
                return open(path, "rb").read()

            def do_HEAD(self):
                data = self._body()
                if data is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    stamp = os.stat(os.path.join(folder, self.path.lstrip("/"))).st_mtime_ns
                    self.send_header("ETag", f'"{len(data)}-{stamp}"')
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
                if ranged:
                    start, _, end = ranged.removeprefix("bytes=").partition("-")
                    start, end = int(start), min(int(end) if end else len(data) - 1, len(data) - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                    part = data[start:end + 1]
                else:
                    self.send_response(200)
                    part = data
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
