"""Serve a torchvision classifier behind a rocAL JSON preprocessing pipeline over HTTP.

``fastload serve --pipeline p.json --model resnet50 --port 8000``: POST an
image's bytes to /predict for its top-5 classes as JSON; GET /health.
Concurrent requests are batched for the model (--max-batch, --max-wait-ms).
Weights come from --weights (a state_dict file) or are random; nothing is
downloaded. Ctrl-C (or SIGTERM) answers what is in flight, then exits; a second
one exits at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pipeline", required=True, help="the JSON preprocessing pipeline (rocAL's format)")
    parser.add_argument("--model", default="resnet50", help="a torchvision classifier")
    parser.add_argument("--weights", help="its state_dict (torch.save file); default: random weights")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="the port to listen on")
    parser.add_argument("--max-batch", type=int, default=8,
                        help="requests per model batch (ResNet-50 on 2 CPU cores runs 8 at 35 ms an "
                             "image, 32 at 44, 1 at 79)")
    parser.add_argument("--max-wait-ms", type=float, default=5.0,
                        help="how long a batch waits for more requests after its first")
    parser.add_argument("--max-bytes", type=int, default=20 << 20, help="largest request body in bytes")
    parser.add_argument("--timeout", type=_positive, default=30.0,
                        help="seconds a connection may send nothing (between requests or within one) before it "
                             "is closed")
    parser.add_argument("--device", default="cpu",
                        help="where the model runs and the pipeline's fused step writes (cpu, cuda, cuda:1; "
                             "a ROCm GPU is cuda too)")


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: a number of seconds above 0")
    return value


def run(args: argparse.Namespace) -> int:
    import torch

    from ..compat.rocal import JsonPipeline
    from ..serve import InferenceServer, load_model
    try:
        pipeline = JsonPipeline(args.pipeline, batch=args.max_batch, device=args.device)
        model = load_model(args.model, args.weights).to(args.device)
        server = InferenceServer(pipeline, model, args.host, args.port, args.max_batch, args.max_wait_ms,
                                 args.max_bytes, name=args.model, timeout_s=args.timeout)
    except (OSError, ValueError, RuntimeError) as error:
        raise SystemExit(f"fastload serve: {error}") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    weights = args.weights or "random weights (no --weights)"
    print(f"fastload serve: {args.model} ({weights}) behind {args.pipeline} on http://{server.host}:{server.port} "
          f"(POST /predict with the image's bytes as the body, GET /health); Ctrl-C to stop", flush=True)
    if pipeline.output_dtype == torch.uint8:
        print(f"fastload serve: {args.pipeline}'s output is uint8 (mean/std applied to 0-255 pixels and saturated, "
              f"as rocAL's backend gives it); add \"output_dtype\": \"float32\" to its normalizing operation for a "
              f"model input", file=sys.stderr, flush=True)
    stop.wait()
    for sig in (signal.SIGINT, signal.SIGTERM):  # a second one does not wait for the requests in flight
        signal.signal(sig, lambda *_: os._exit(1))
    print("fastload serve: answering the requests in flight, then stopping (again to stop at once)", flush=True)
    server.close()
    return 0
