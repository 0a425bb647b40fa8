"""Serve rocAL JSON preprocessing pipelines, and a torchvision classifier behind one, over the Open Inference
Protocol (KServe v2 / Triton's HTTP API: tritonclient.http works against it; with --grpc-port its gRPC API
too, for tritonclient.grpc).

``fastload serve --pipeline p.json --model resnet50 --port 8000`` serves ``resnet50`` (p.json, then the
classifier: FP32 probabilities) and ``p`` (p.json alone); ``--repository DIR`` serves every ``*.json`` in DIR
as a preprocessing model and lets POST /v2/repository/models/{name}/load load more. POST an image's bytes to
/predict for its top-5 classes as JSON (a convenience). Concurrent requests are batched per model
(--max-batch, --max-queue-delay-us, --preferred-batch-size).
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

from ..serve_limits import MAX_MODELS, MAX_QUEUE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pipeline", help="the JSON preprocessing pipeline (rocAL's format)")
    parser.add_argument("--model", default="resnet50", help="a torchvision classifier after --pipeline ('none': "
                                                            "the pipeline alone)")
    parser.add_argument("--repository", help="a folder of JSON pipelines, each served as a preprocessing model")
    parser.add_argument("--weights", help="the classifier's weights: a torchvision state_dict file (torch.save of "
                                          "model.state_dict(), loaded with weights_only=True); without it the "
                                          "classifier has random weights (a warning says so at start)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="the port to listen on")
    parser.add_argument("--grpc-port", type=int,
                        help="also serve the protocol's gRPC API on this port (Triton's is 8001; needs "
                             "tritonclient[grpc]: pip install 'torch-fastload[grpc]')")
    parser.add_argument("--max-batch", type=int, default=8,
                        help="requests per model batch (ResNet-50 on 2 CPU cores runs 8 at 35 ms an "
                             "image, 32 at 44, 1 at 79)")
    parser.add_argument("--max-queue-delay-us", type=float, default=5000,
                        help="how long a batch waits for more images after its first (Triton's max_queue_delay_"
                             "microseconds)")
    parser.add_argument("--max-wait-ms", type=float, help="the same in milliseconds (the older option)")
    parser.add_argument("--preferred-batch-size", type=int, nargs="*", default=[],
                        help="batch sizes run at once when reached with nothing more waiting")
    parser.add_argument("--max-connections", type=int, default=512, help="past it: 503 with Retry-After")
    parser.add_argument("--max-models", type=int, default=MAX_MODELS,
                        help="models loaded at once at most; a repository load past it: 429")
    parser.add_argument("--max-queue", type=int, default=MAX_QUEUE,
                        help="images waiting for a model's batcher at most; past it: 503 with Retry-After")
    parser.add_argument("--max-inflight-bytes", type=int, default=256 << 20,
                        help="request bytes being read or run at most; past it: 503 with Retry-After")
    parser.add_argument("--decode-budget", type=_positive, default=10.0,
                        help="seconds one request's images may take to decode (then 400 for it alone)")
    parser.add_argument("--access-log", action="store_true", help="log one line per request to stderr")
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
    if args.pipeline is None and args.repository is None:  # (before torch is imported: this answers at once)
        print("fastload serve: error: the following arguments are required: --pipeline (or --repository)",
              file=sys.stderr)
        raise SystemExit(2)
    import torch

    from ..compat.rocal import JsonPipeline
    from ..serve import InferenceServer, Model, load_model
    if args.weights is not None and args.model == "none":
        raise SystemExit("fastload serve: --weights is a classifier's: it needs --model")
    if args.max_wait_ms is not None:
        args.max_queue_delay_us = args.max_wait_ms * 1000
    try:
        pipeline, model, models, name = None, None, [], "model"
        if args.pipeline is not None:
            pipeline = JsonPipeline(args.pipeline, batch=args.max_batch, device=args.device)
            name = stem = os.path.basename(args.pipeline)[:-5]
            if args.model != "none":
                model = load_model(args.model, args.weights).to(args.device)
                models = [Model(stem, JsonPipeline(args.pipeline, batch=args.max_batch, device=args.device), None,
                                args.max_batch, args.max_queue_delay_us, tuple(args.preferred_batch_size),
                                args.max_queue)]
        server = InferenceServer(pipeline, model, args.host, args.port, args.max_batch, args.max_queue_delay_us / 1000,
                                 args.max_bytes, name=args.model if model is not None else name,
                                 timeout_s=args.timeout, models=models, repository=args.repository,
                                 max_connections=args.max_connections, max_inflight_bytes=args.max_inflight_bytes,
                                 decode_budget_s=args.decode_budget, access_log=args.access_log,
                                 preferred_batch_size=tuple(args.preferred_batch_size), grpc_port=args.grpc_port,
                                 pipeline_loader=JsonPipeline, max_models=args.max_models,
                                 max_queue=args.max_queue)
    except (OSError, ValueError, RuntimeError) as error:
        raise SystemExit(f"fastload serve: {error}") from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server.start()
    except (OSError, ImportError) as error:  # a port in use, or gRPC asked for without grpcio
        raise SystemExit(f"fastload serve: {error}") from None
    grpc = f" and grpc://{server.host}:{server.grpc_port}" if server.grpc_port is not None else ""
    print(f"fastload serve: models {', '.join(server.models)} on http://{server.host}:{server.port}{grpc} "
          f"(Open Inference Protocol: GET /v2, POST /v2/models/<name>/infer; POST /predict with an image's bytes); "
          f"Ctrl-C to stop", flush=True)
    if model is not None and pipeline.output_dtype == torch.uint8:
        print(f"fastload serve: {args.pipeline}'s output is uint8 (mean/std applied to 0-255 pixels and saturated, "
              f"as rocAL's backend gives it); add \"output_dtype\": \"float32\" to its normalizing operation for a "
              f"model input", file=sys.stderr, flush=True)
    if model is not None and args.weights is None:
        print(f"fastload serve: warning: {args.model} has RANDOM weights (no --weights given): its answers mean "
              f"nothing. Pass --weights PATH, a state_dict file (torch.save(model.state_dict(), PATH) of "
              f"torchvision's {args.model} with its weights)", file=sys.stderr, flush=True)
    stop.wait()
    for sig in (signal.SIGINT, signal.SIGTERM):  # a second one does not wait for the requests in flight
        signal.signal(sig, lambda *_: os._exit(1))
    print("fastload serve: answering the requests in flight, then stopping (again to stop at once)", flush=True)
    server.close()
    return 0
