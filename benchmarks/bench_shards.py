"""The same images as a folder, as local tar shards, as TFRecords and as tar shards over HTTP, in one run.

Every loader but webdataset is fastload.DataLoader with the standard ResNet-50
training transform (RandomResizedCrop 224, flip, float32, normalize), batch
64, num_workers = cores; each loader, webdataset's too, runs in its own
subprocess for a warm-up epoch and ``--epochs`` timed ones:

* folder:      fastload.ImageFolder (one open + read per image)
* tar:         fastload.TarShards on local shards (one pread per image)
* tar-stream:  the same in streaming mode (each rank a run of whole shards, a shuffle buffer)
* tfrecord:    fastload.TFRecords on local files (one pread + CRC + Example parse per image)
* tar-http:    fastload.TarShards over HTTP from a server on 127.0.0.1 in this process that answers
               every request ``--latency-ms`` late, indexed mode (one ranged request per image)
* tar-http-stream: the same server, streaming mode (the remote default): each shard fetched whole, ahead,
               into a shard cache limited to 4 shards (of 8), least recently used out, so each epoch fetches
               again the shards evicted since their last use (its requests/image column counts the fetches)
* webdataset:  webdataset 1.0.2's own loader on the same local shards, as its README builds one (below;
               ``pip install webdataset==1.0.2``, in fastload[test])

webdataset is the loader fastload's shards are measured against (target: fastload's local tar at least 1.8x
its images/s), so it runs as a user of webdataset would run it, not as fastload does: ``wds.WebDataset(shards,
shardshuffle=100)`` with the single-rank splitters (whole shards dealt to workers round-robin),
``.shuffle(1000)`` (1000 samples per worker; fastload's streaming mode draws from 1000 per rank),
``.decode("pil")`` (Pillow, converted to RGB as torchvision's loader does), ``.to_tuple("jpg;jpeg;png;webp",
"cls")``, ``.map_tuple`` with torchvision's v1 transform (RandomResizedCrop 224, flip, ToTensor, normalize:
bench_loader.py's "torch + PIL/v1" and webdataset's README), ``.batched(batch)`` in the workers (its README:
batch in the dataset, not in the DataLoader), then torch's DataLoader with ``batch_size=None`` and
``--workers`` processes (default the number of cores: 2 on a 2-core machine; started
anew each epoch, torch's default, as in bench_loader.py's torch rows). Since whole shards go to workers, the
benchmark needs at least as many shards as workers (the default, 2,000 images in shards of 256, makes 8), and
refuses to run webdataset otherwise: a worker with no shard would deliver nothing. Each worker batches its own
shards and keeps its last partial batch, so webdataset delivers every image of an epoch; the child checks that
it did. fastload's rows drop the last partial batch (``drop_last=True``): both rates are images delivered per
second, over slightly different counts (2,000 and 1,984 per epoch by default).

The shards and TFRecords are written once from the folder, in ImageFolder's
order (``--shard-images`` per file), beside it in ``<folder>.packed``. The
table gives images/s, the ratio to the folder, and bytes and requests read
per image; then fastload's local tar (indexed and streaming) over webdataset.
Run with no arguments it uses the built-in sample folder.
"""

from __future__ import annotations

import argparse
import glob
import http.server
import json
import os
import shutil
import sys
import threading
import time

from fastload.cli.bench import machine, measure, run_in_child

LOADERS = ("folder", "tar", "tar-stream", "webdataset", "tfrecord", "tar-http", "tar-http-stream")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def pack(root: str, shard_images: int) -> str:
    """Tar shards and TFRecords of ``root``'s images, once; returns their folder."""
    import fastload
    out = root.rstrip("/") + ".packed"
    done = os.path.join(out, f"done-{shard_images}")
    if os.path.exists(done):
        return out
    os.makedirs(out, exist_ok=True)
    samples = fastload.ImageFolder(root).samples
    for number, start in enumerate(range(0, len(samples), shard_images)):
        chunk = [(path, label) for path, label in samples[start:start + shard_images]]
        items = [(open(path, "rb").read(), label) for path, label in chunk]
        fastload.TarShards.write([(f"{start + i:07d}.jpg", data, label) for i, (data, label) in enumerate(items)],
                                 os.path.join(out, f"train-{number:04d}.tar"))
        fastload.TFRecords.write(items, os.path.join(out, f"train-{number:04d}.tfrecord"))
    open(done, "w").close()
    return out


class _SlowServer:
    """Serves a folder over HTTP with HEAD and Range requests, each answer ``latency`` seconds late (an
    object store across a network); counts requests and bytes."""

    def __init__(self, folder: str, latency: float):
        counts = self.counts = {"requests": 0, "bytes": 0}
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, body: bool):
                path = os.path.join(folder, self.path.lstrip("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return
                time.sleep(latency)
                size = os.path.getsize(path)
                start, end = 0, size - 1
                ranged = self.headers.get("Range")
                if ranged and body:
                    first, _, last = ranged.removeprefix("bytes=").partition("-")
                    start, end = int(first), min(int(last) if last else size - 1, size - 1)
                self.send_response(206 if ranged and body else 200)
                if ranged and body:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(end - start + 1 if body else size))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if body:
                    with open(path, "rb") as file:
                        file.seek(start)
                        data = file.read(end - start + 1)
                    self.wfile.write(data)
                    with lock:
                        counts["requests"] += 1
                        counts["bytes"] += len(data)

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class _Epochs:
    """webdataset's loader as ``measure`` reads a loader (``len`` and ``batch_size`` for its progress bar), and
    a check that each epoch delivered as many images as the shards hold: with whole shards dealt to workers,
    a miscount means a worker was given no shard, or a shard was read twice."""

    def __init__(self, loader, images: int, batch_size: int):
        self.loader, self.images, self.batch_size = loader, images, batch_size

    def __len__(self) -> int:
        return -(-self.images // self.batch_size)

    def __iter__(self):
        count = 0
        for images, labels in self.loader:
            count += images.shape[0]
            yield images, labels
        if count != self.images:
            raise RuntimeError(f"webdataset delivered {count} images in an epoch, not {self.images}")


def _webdataset_loader(data: str, batch_size: int, workers: int):
    """webdataset 1.0.2's loader on the local shards in ``data``, built as its README builds one."""
    import torch
    import webdataset as wds
    from torchvision import transforms as v1
    transform = v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(), v1.ToTensor(),
                            v1.Normalize(MEAN, STD)])
    shards = sorted(glob.glob(os.path.join(data, "train-*.tar")))
    dataset = (wds.WebDataset(shards, shardshuffle=100, nodesplitter=wds.single_node_only,
                              workersplitter=wds.split_by_worker)
               .shuffle(1000).decode("pil").to_tuple("jpg;jpeg;png;webp", "cls").map_tuple(transform, int)
               .batched(batch_size, partial=True))
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers)
    return _Epochs(loader, int(os.environ["BENCH_IMAGES"]), batch_size)


def _make_loader(name: str, data: str, batch_size: int, workers: int):
    import torch

    import fastload
    if name == "webdataset":
        return _webdataset_loader(data, batch_size, workers)
    T = fastload.transforms
    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                           T.Normalize(MEAN, STD)])
    if name == "folder":
        source = fastload.ImageFolder(data, transform)
    elif name == "tfrecord":
        source = fastload.TFRecords(os.path.join(data, "train-*.tfrecord"), transform=transform)
    else:  # tar, tar-stream, tar-http, tar-http-stream: data is a folder or the server's URL
        local = not name.startswith("tar-http")
        pattern = "train-*.tar" if local else f"train-{{0000..{int(os.environ['BENCH_SHARDS']) - 1:04d}}}.tar"
        source = fastload.TarShards(f"{data}/{pattern}", transform, cache_dir=os.environ.get("BENCH_INDEX_CACHE"),
                                    mode="streaming" if name.endswith("stream") else "indexed",
                                    cache_limit=int(os.environ.get("BENCH_CACHE_LIMIT", 1 << 34)))
    return fastload.DataLoader(source, batch_size=batch_size, shuffle=True, num_workers=workers, drop_last=True)


def wds_version() -> str:
    from importlib.metadata import version
    return version("webdataset")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", help="ImageFolder root (default: the built-in sample)")
    parser.add_argument("--images", type=int, default=2000, help="size of the generated sample")
    parser.add_argument("--shard-images", type=int, default=256, help="images per tar shard / TFRecord file")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after one warm-up epoch")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the HTTP server's delay per request")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one loader, print JSON
    args = parser.parse_args(argv)

    if args.one:
        import warnings
        warnings.filterwarnings("ignore", category=UserWarning)
        loader = _make_loader(args.one, args.root, args.batch_size, args.workers)
        print(json.dumps(measure(args.one, loader, args.epochs, "cpu", True)))
        return 0
    root = args.root
    if root is None:
        from fastload.sample_data import sample_folder
        root = sample_folder(args.images)
    import fastload
    packed = pack(root, args.shard_images)
    shards = len([name for name in os.listdir(packed) if name.endswith(".tar")])
    max_shard = max(os.path.getsize(os.path.join(packed, n)) for n in os.listdir(packed) if n.endswith(".tar"))
    samples = fastload.ImageFolder(root).samples
    images, folder_bytes = len(samples), sum(os.path.getsize(path) for path, _ in samples)
    if "webdataset" in args.loaders.split(",") and shards < args.workers:
        raise SystemExit(f"bench_shards: webdataset deals whole shards to its {args.workers} workers, and {shards} "
                         f"shard(s) leave one without any: lower --shard-images, or --workers")
    server = _SlowServer(packed, args.latency_ms / 1000)
    index_cache = os.path.join(packed, "http-index-cache")
    results = []
    try:
        for name in args.loaders.split(","):
            data = server.url if name.startswith("tar-http") else root if name == "folder" else packed
            command = [sys.executable, os.path.abspath(__file__), data, "--one", name, "--batch-size",
                       str(args.batch_size), "--workers", str(args.workers), "--epochs", str(args.epochs)]
            shutil.rmtree(os.path.join(index_cache, "shards"), ignore_errors=True)  # no copies from a last run
            os.environ.update(BENCH_SHARDS=str(shards), BENCH_INDEX_CACHE=index_cache,
                              BENCH_CACHE_LIMIT=str(4 * max_shard), BENCH_IMAGES=str(images))
            before = dict(server.counts)
            result = run_in_child(name, command)
            epochs = args.epochs + 1
            if name.startswith("tar-http"):
                result["requests_per_image"] = (server.counts["requests"] - before["requests"]) / (epochs * images)
                result["bytes_per_image"] = (server.counts["bytes"] - before["bytes"]) / (epochs * images)
            else:
                result["requests_per_image"] = None
                result["bytes_per_image"] = folder_bytes / images
            results.append(result)
    finally:
        server.close()
    folder = next((r["images_per_s"] for r in results if r["name"] == "folder"), None)
    print(f"\nmachine: {machine()}")
    print(f"data: {root}, {images} images; {shards} shards of {args.shard_images}; batch {args.batch_size}, "
          f"num_workers {args.workers}; HTTP latency {args.latency_ms:g} ms; {args.epochs} timed epochs\n")
    print(f"{'loader':<16} {'images/s':>9} {'vs folder':>10} {'KB/image':>9} {'requests/image':>15}")
    for r in results:
        ratio = f"{r['images_per_s'] / folder:.2f}x" if folder else "-"
        requests = f"{r['requests_per_image']:.3f}" if r["requests_per_image"] is not None else "-"
        print(f"{r['name']:<16} {r['images_per_s']:>9.0f} {ratio:>10} {r['bytes_per_image'] / 1024:>9.1f} "
              f"{requests:>15}")
    print("\nKB/image for local loaders: the image bytes (the file, or the member / record read); for tar-http*: "
          "bytes the server sent, warm-up epoch and index building included")
    rates = {r["name"]: r["images_per_s"] for r in results}
    vs_webdataset = {name: rates[name] / rates["webdataset"] for name in ("tar", "tar-stream")
                     if name in rates and "webdataset" in rates}
    if vs_webdataset:
        print(f"webdataset: webdataset {wds_version()} + torch DataLoader, {args.workers} worker processes")
    for name, ratio in vs_webdataset.items():
        print(f"fastload {name} / webdataset: {ratio:.2f}x the images/s (target: at least 1.8x)")
    if "tar" in rates and "folder" in rates:
        print(f"fastload tar / folder: {rates['tar'] / rates['folder']:.2f}x (target: at least 0.95x)")
    for name in ("tar-http", "tar-http-stream"):
        if name in rates and "tar" in rates:
            print(f"fastload {name} / tar: {rates[name] / rates['tar']:.2f}x (target, at "
                  f"{args.latency_ms:g} ms: at least 0.90x)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "results": results, "vs_webdataset": vs_webdataset}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
