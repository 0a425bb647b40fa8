"""Run a rocAL inference-server JSON pipeline on image files and save the outputs with torch.save.

``fastload preprocess --pipeline p.json a.jpg b.jpg -o out.pt`` writes a dict
{"outputs": tensor (images, height, width, channels), "files": [...]}; a
table says each output's shape, type and value range, and every file that
cannot be decoded is named (exit status 1), the others still written.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="+", help="encoded image files (JPEG, PNG, ...)")
    parser.add_argument("--pipeline", required=True, help="the JSON pipeline (rocAL's inference-server format)")
    parser.add_argument("-o", "--output", required=True, help="where to torch.save the outputs (.pt)")
    parser.add_argument("--color-format", default="RGB24", choices=["RGB24", "BGR24", "U8"],
                        help="the backend's color format: RGB24 (default), BGR24, or U8 (grayscale)")
    parser.add_argument("--batch", type=int, default=64, help="images processed together (default 64)")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..compat.rocal import JsonPipeline
    from ..errors import DecodeError
    try:
        pipeline = JsonPipeline(args.pipeline, batch=args.batch, color_format=args.color_format)
    except (OSError, ValueError) as error:
        raise SystemExit(f"fastload preprocess: {error}") from None
    data, files = [], []
    for name in args.images:
        try:
            with open(name, "rb") as file:
                data.append(file.read())
            files.append(name)
        except OSError as error:
            print(f"fastload preprocess: {name}: cannot read ({error.strerror})", file=sys.stderr)
    results = pipeline(data, on_error="return")
    good = [(name, out) for name, out in zip(files, results) if not isinstance(out, DecodeError)]
    for name, out in zip(files, results):
        if isinstance(out, DecodeError):
            print(f"fastload preprocess: {name}: {out.reason}", file=sys.stderr)
    print(f"{'file':<40} {'shape':<16} {'dtype':<8} {'min':>8} {'max':>8}")
    for name, out in good:
        print(f"{name[-40:]:<40} {str(tuple(out.shape)):<16} {str(out.dtype).removeprefix('torch.'):<8} "
              f"{float(out.min()):>8.3f} {float(out.max()):>8.3f}")
    outputs = torch.stack([out for _, out in good]) if good else torch.empty((0, *pipeline.output_shape))
    torch.save({"outputs": outputs, "files": [name for name, _ in good]}, args.output)
    print(f"{len(good)} of {len(args.images)} images -> {args.output}")
    return 0 if len(good) == len(args.images) else 1
