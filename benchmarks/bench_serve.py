"""Requests/s and latency of `fastload serve` against the same model behind the same server with per-request
PIL + torchvision preprocessing and no batching, in one run, at several concurrency levels.

Both servers run in their own process (python -m fastload serve for fastload; this script in --serve
baseline mode for the baseline), side by side, and are measured in turn at each level, ``--rounds``
times (medians reported); the clients run in this one: ``--concurrency`` threads each sending its
share of ``--requests`` JPEG bodies (ImageNet-like sizes) and waiting for each answer. The fastload
server preprocesses with a JSON pipeline (Resize 256x256, CropMirrorNormalize 224, float32) and batches
concurrent requests (--max-batch, --max-wait-ms); the baseline resizes with PIL (Resize 256, CenterCrop
224) and torchvision's ToTensor/Normalize, and runs the model per request. Same model, same random
weights (seed 0), same images.

``--preprocess-only``: the preprocessing model alone (no classifier), on the Open Inference Protocol, with
tritonclient.http as the load generator (binary BYTES input, binary FP32 output): ``fastload serve
--model none`` (the JSON pipeline, dynamic batching) against the same server running PIL + torchvision per
request (max batch 1, decoding in the server's thread pool), at each concurrency level in the same run.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from PIL import Image

PIPELINE = {"pipeline": [
    {"operation": "Resize", "dest_width": 256, "dest_height": 256},
    {"operation": "CropMirrorNormalize", "crop_height": 224, "crop_width": 224, "start_x": 0.5, "start_y": 0.5,
     "mean": [123.675, 116.28, 103.53], "std_dev": [58.395, 57.12, 57.375], "output_dtype": "float32",
     "is_output": True}]}


class _PilPipeline:
    """The baseline's preprocessing: PIL decode and resize, torchvision's ToTensor and Normalize, per request.

    ``steps="rocal"`` (--preprocess-only): the JSON pipeline's own steps, done the way a PIL + torchvision
    server would: the image brought to the size rocAL's decoder gives it (TurboJPEG's scale rule at 1000x1000:
    500x375 -> 1000x750, 1600x1200 -> 1000x750), PIL's DCT reduction (``draft``) where it shrinks and its
    bilinear resize for the rest, then torchvision's bilinear resize to 256x256 without antialiasing, the
    224x224 window at the centre and the normalization on 0-255 pixels. Its outputs are the pipeline's
    within the rounding of the two decoders' scaling (the benchmark prints the mean difference), so both
    servers do the same work. ``steps="torchvision"`` (the classifier benchmark): Resize((256, 256)),
    CenterCrop(224), ToTensor, Normalize, as a torchvision user writes it."""

    output_shape = (224, 224, 3)

    def __init__(self, device: str = "cpu", steps: str = "torchvision"):
        import torch
        self.output_dtype = torch.float32
        from torchvision import transforms
        self.device = device
        self.steps = steps
        self.transform = transforms.Compose([transforms.Resize((256, 256)), transforms.CenterCrop(224),
                                             transforms.ToTensor(),
                                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        normalize = PIPELINE["pipeline"][1]
        self.mean = torch.tensor(normalize["mean"]).view(3, 1, 1)
        self.std = torch.tensor(normalize["std_dev"]).view(3, 1, 1)

    def _rocal_steps(self, image):
        from torchvision.transforms.v2 import functional as F

        from fastload.compat.rocal.imageops import _tj_scale
        width, height = image.size
        scale = _tj_scale(width, height, 1000, 1000)
        size = (-(-width * scale // 8), -(-height * scale // 8))
        image.draft("RGB", size)  # PIL's DCT reduction, down to no less than the size
        image = image.convert("RGB")
        if image.size != size:
            image = image.resize(size, Image.Resampling.BILINEAR)
        tensor = F.resize(F.pil_to_tensor(image), [256, 256], antialias=False)
        window = tensor[:, 16:240, 16:240]  # start_x = start_y = 0.5: round(0.5 * (256 - 224))
        return (window.float() - self.mean) / self.std

    def one(self, data: bytes, index: int = 0):
        from fastload.errors import DecodeError
        try:
            image = Image.open(io.BytesIO(data))
            if self.steps == "rocal":
                tensor = self._rocal_steps(image)
            else:
                tensor = self.transform(image.convert("RGB"))
        except Exception as error:
            raise DecodeError(index, f"request {index}", str(error)) from error
        return tensor.permute(1, 2, 0).to(self.device)  # HWC, as the server's model_input takes it

    def _decode(self, data: bytes, index: int, name: str):
        """The server's per-request step (in its decode pool): the whole preprocessing, or the DecodeError."""
        from fastload.errors import DecodeError
        try:
            return self.one(data, index).contiguous()
        except DecodeError as error:
            return error

    def _process(self, items: list) -> list:
        """The server's batch step: already done per request."""
        return [image for _, _, image in items]

    def __call__(self, images: list, on_error: str = "raise", names=None) -> list:
        """The server's batch call (one image at a time here: the baseline runs batches of 1)."""
        from fastload.errors import DecodeError
        outputs = []
        for index, data in enumerate(images):
            try:
                outputs.append(self.one(data, index))
            except DecodeError as error:
                if on_error == "raise":
                    raise
                outputs.append(error)
        return outputs


def _serve_baseline(model_name: str, port: int, device: str = "cpu") -> None:
    import signal
    import threading

    from fastload.serve import InferenceServer, load_model
    model = None if model_name == "none" else load_model(model_name).to(device)
    steps = "rocal" if model is None else "torchvision"  # the preprocessing model alone: the pipeline's steps
    server = InferenceServer(_PilPipeline(device, steps), model, port=port, max_batch=1, max_wait_ms=0, name="pre")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"serving on http://127.0.0.1:{server.port}", flush=True)
    stop.wait()
    server.close()


IMAGE_SIZES = {"imagenet": [(500, 375), (375, 500), (640, 480)],
               "camera": [(1600, 1200), (1200, 1600), (2048, 1536)]}


def _baseline_difference(pipeline: str, bodies: list[bytes]) -> dict:
    """How far the baseline's preprocessing is from the JSON pipeline's on the same bytes (in units of the
    output, normalized pixels): the two do the same steps, and differ only where PIL's decoder and resize
    scale an image where TurboJPEG's DCT does."""
    import torch

    from fastload.compat.rocal import JsonPipeline
    ours, theirs = JsonPipeline(pipeline)(bodies), [_PilPipeline(steps="rocal").one(body) for body in bodies]
    differences = torch.stack([(a.float() - b).abs() for a, b in zip(ours, theirs)])
    return {"mean_abs": differences.mean().item(), "max_abs": differences.max().item()}


def _start(command: list[str]) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if "http://127.0.0.1:" not in line:
        process.kill()
        raise SystemExit(f"bench_serve: the server did not start ({line!r})")
    return process, int(line.split("http://127.0.0.1:")[1].split()[0].rstrip(")"))


def _post(port: int, body: bytes) -> float:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        connection.request("POST", "/predict", body=body)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"bench_serve: the server answered {response.status}")
    finally:
        connection.close()
    return time.perf_counter() - started


def _measure(port: int, bodies: list[bytes], concurrency: int) -> dict:
    with ThreadPoolExecutor(concurrency) as pool:  # warm-up: the batch sizes this level makes, allocators
        list(pool.map(lambda body: _post(port, body), bodies[:concurrency]))
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = sorted(pool.map(lambda body: _post(port, body), bodies))
    seconds = time.perf_counter() - started
    return {"requests_per_s": len(bodies) / seconds, "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]}


def _measure_triton(port: int, model: str, bodies: list[bytes], concurrency: int) -> dict:
    """The same with tritonclient.http: one client per thread, each request one image as a binary BYTES input,
    its output asked for in binary."""
    import threading

    import numpy as np
    import tritonclient.http as httpclient
    local = threading.local()

    def infer(body: bytes) -> float:
        if not hasattr(local, "client"):
            local.client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        tensor = httpclient.InferInput("images", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([body], dtype=object))
        started = time.perf_counter()
        local.client.infer(model, [tensor], outputs=[httpclient.InferRequestedOutput("output")])
        return time.perf_counter() - started

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(infer, bodies[:concurrency]))  # warm-up
        started = time.perf_counter()
        latencies = sorted(pool.map(infer, bodies))
    seconds = time.perf_counter() - started
    return {"requests_per_s": len(bodies) / seconds, "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]}


def _median(runs: list[dict]) -> dict:
    """One level's rounds: the median of each figure, and every round's requests/s."""
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    return {**median, "rounds_requests_per_s": [run["requests_per_s"] for run in runs]}


def _model_only(model_name: str, sizes: list[int], rounds: int = 2) -> int:
    """ms an image of the server's model alone at each batch size, as model_input hands it batches
    (channels_last input), with the model in its own layout and converted to channels_last; the best
    ratio of batch 1 to a batch is all that batching can gain the server on this machine."""
    import torch

    from fastload.cli.bench import machine
    from fastload.serve import load_model
    models = {"own layout": load_model(model_name), "channels_last": load_model(model_name).to(
        memory_format=torch.channels_last)}
    times = {}
    with torch.inference_mode():
        for round_ in range(rounds):
            for layout, model in models.items():
                for size in sizes:
                    batch = torch.randn(size, 3, 224, 224).contiguous(memory_format=torch.channels_last)
                    model(batch)  # warm-up
                    started, reps = time.perf_counter(), max(1, 8 // size)
                    for _ in range(reps):
                        model(batch)
                    ms = (time.perf_counter() - started) / reps / size * 1000
                    times.setdefault((layout, size), []).append(ms)
                    print(f"round {round_ + 1} {layout:<14} batch {size:>3}: {ms:6.1f} ms an image", flush=True)
    print(f"\nmachine: {machine()}, {torch.get_num_threads()} threads; model {model_name} (random weights), "
          f"224x224\n")
    print(f"{'batch':>5} " + " ".join(f"{layout + ' ms/image':>26}" for layout in models))
    for size in sizes:
        print(f"{size:>5} " + " ".join(f"{', '.join(f'{t:.1f}' for t in times[(layout, size)]):>26}"
                                        for layout in models))
    for layout in models:
        best = min(min(times[(layout, size)]) for size in sizes)
        print(f"{layout}: batch 1 / best batch = {min(times[(layout, 1)]) / best:.2f}x" if 1 in sizes else "")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--requests", type=int, default=256, help="requests per measurement")
    parser.add_argument("--concurrency", default="1,8,32", help="client threads, comma-separated")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every level this many times, the two servers in turn; report medians")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--device", default="cpu",
                        help="where both servers run the model (and fastload's pipeline): cpu, or cuda; the "
                             "baseline's PIL preprocessing stays on the CPU and hands its tensor over")
    parser.add_argument("--model-only", default="", metavar="SIZES",
                        help="instead: the model alone, ms an image at these batch sizes (comma-separated), as "
                             "the server runs it, in its own layout and channels_last: the ceiling batching sets")
    parser.add_argument("--preprocess-only", action="store_true",
                        help="the preprocessing model alone, driven by tritonclient.http (see the docstring)")
    parser.add_argument("--images", choices=sorted(IMAGE_SIZES), default="imagenet",
                        help="request images' sizes: imagenet (500x375, 375x500, 640x480: the pipeline's decode "
                             "enlarges them to 1000x750 by rocAL's rule) or camera (1600x1200, 1200x1600, "
                             "2048x1536: it shrinks them in the DCT)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # internal: run the baseline server
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve_baseline(args.model, args.port, args.device)
        return 0
    if args.model_only:
        return _model_only(args.model, [int(size) for size in args.model_only.split(",")])

    from fastload.cli.bench import machine
    from fastload.sample_data import make_image
    bodies = []
    sizes = IMAGE_SIZES[args.images]
    for i in range(args.requests):
        out = io.BytesIO()
        make_image(i, *sizes[i % len(sizes)]).save(out, "JPEG", quality=90)
        bodies.append(out.getvalue())
    with tempfile.TemporaryDirectory() as folder:
        pipeline = os.path.join(folder, "pipeline.json")
        with open(pipeline, "w") as file:
            json.dump(PIPELINE, file)
        difference = _baseline_difference(pipeline, bodies[:12]) if args.preprocess_only else None
        model = "none" if args.preprocess_only else args.model
        servers = {
            "fastload": [sys.executable, "-m", "fastload", "serve", "--pipeline", pipeline, "--model", model,
                         "--port", "0", "--max-batch", str(args.max_batch), "--max-wait-ms", str(args.max_wait_ms),
                         "--device", args.device],
            "baseline": [sys.executable, os.path.abspath(__file__), "--serve", "baseline", "--model", model,
                         "--device", args.device],
        }
        # Both servers wait side by side (idle, they take no CPU) and are measured in turn at each level,
        # ``--rounds`` times: this machine's speed drifts by a third between minutes, which measuring one
        # server's levels and then the other's puts into the ratio.
        runs: dict = {}
        processes = {}
        try:
            ports = {}
            for name, command in servers.items():
                processes[name], ports[name] = _start(command)
            for round_ in range(args.rounds):
                for concurrency in (int(c) for c in args.concurrency.split(",")):
                    for name in servers:
                        result = (_measure_triton(ports[name], "pipeline" if name == "fastload" else "pre", bodies,
                                                  concurrency) if args.preprocess_only else
                                  _measure(ports[name], bodies, concurrency))
                        runs.setdefault((name, concurrency), []).append(result)
                        print(f"round {round_ + 1} {name:<9} concurrency {concurrency:>3}: {result}", flush=True)
        finally:
            for process in processes.values():
                process.terminate()
                process.wait(timeout=120)
        results = {key: _median(values) for key, values in runs.items()}
    print(f"\nmachine: {machine()}")
    if difference is not None:
        print(f"baseline vs pipeline outputs on 12 of the images: mean |difference| {difference['mean_abs']:.3f}, "
              f"max {difference['max_abs']:.2f} (normalized units; 1 pixel level is about 0.017)")
    what = ("the preprocessing model alone (tritonclient.http, binary BYTES in, FP32 224x224x3 out), baseline PIL + "
            "torchvision per request" if args.preprocess_only else f"model {args.model} (random weights)")
    shown = ", ".join(f"{w}x{h}" for w, h in sizes)
    print(f"{what} on {args.device}, {args.requests} JPEG requests ({shown}), 224x224 input; fastload: max batch "
          f"{args.max_batch}, max wait {args.max_wait_ms} ms; "
          f"{len(os.sched_getaffinity(0))} cores; medians of {args.rounds} round(s), the servers measured in "
          f"turn at each level\n")
    print(f"{'concurrency':>11} {'fastload req/s':>15} {'p50 ms':>8} {'p99 ms':>8} {'baseline req/s':>15} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'ratio':>6}")
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        ours, theirs = results[("fastload", concurrency)], results[("baseline", concurrency)]
        print(f"{concurrency:>11} {ours['requests_per_s']:>15.1f} {ours['p50_ms']:>8.0f} {ours['p99_ms']:>8.0f} "
              f"{theirs['requests_per_s']:>15.1f} {theirs['p50_ms']:>8.0f} {theirs['p99_ms']:>8.0f} "
              f"{ours['requests_per_s'] / theirs['requests_per_s']:>5.2f}x")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "device": args.device, "images": sizes, "difference": difference,
                       "cores": len(os.sched_getaffinity(0)),
                       "results": {f"{k[0]}@{k[1]}": v for k, v in results.items()}}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
