"""Write WebDataset tar shards (and their indexes) from an image folder, a file list or TFRecords.

``fastload pack /data/train /data/shards --shard-size 1GB`` writes
``/data/shards/train-000000.tar``, ``train-000001.tar``, ... in the source's
order (ImageFolder's: sorted classes, sorted files), each sample as
``NNNNNNNNN.jpg`` (or its own image type) plus ``NNNNNNNNN.cls``, and indexes
every shard, so ``fastload.TarShards("/data/shards/train-*.tar")`` reads the
same dataset. ``--max-side N`` re-encodes images larger than N pixels on
their longer side as JPEG at ``--quality`` (faster to decode); the table
says bytes and decode time per image before and after. A sample that cannot
be read is named and left out (exit status 1).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tarfile
import time

_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def parse_size(text: str) -> int:
    """``1GB``, ``512MB``, ``300000`` (bytes) -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?B?)\s*", text.upper())
    if not match or match.group(2) not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: a size such as 1GB, 512MB or 300000")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="an image folder, a file list, or TFRecord files (a pattern)")
    parser.add_argument("out", help="the folder for the shards")
    parser.add_argument("--shard-size", type=parse_size, default=parse_size("1GB"),
                        help="start a new shard past this many bytes (default 1GB)")
    parser.add_argument("--prefix", default="train", help="shard names: PREFIX-000000.tar, ... (default train)")
    parser.add_argument("--max-side", type=int, help="re-encode images longer than this on a side, as JPEG")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality when re-encoding (default 90)")


def _reencode(data: bytes, max_side: int, quality: int) -> tuple[bytes, str] | None:
    """The image shrunk to ``max_side`` on its longer side and saved as JPEG, or None if it is small enough."""
    from PIL import Image
    image = Image.open(io.BytesIO(data))
    if max(image.size) <= max_side:
        return None
    image.draft("RGB", (max_side, max_side))  # DCT scaling first for JPEGs: fast, then an exact resize
    image = image.convert("RGB")
    scale = max_side / max(image.size)
    image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                         Image.Resampling.LANCZOS)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue(), "jpg"


def _decode_ms(images: list[bytes]) -> float:
    """Mean ms to decode the images Pillow can decode (a broken one is packed as it is, not timed)."""
    from PIL import Image
    decoded, seconds = 0, 0.0
    for data in images:
        started = time.perf_counter()
        try:
            Image.open(io.BytesIO(data)).convert("RGB")
        except Exception:  # Pillow raises many types for broken files
            continue
        seconds += time.perf_counter() - started
        decoded += 1
    return 1000 * seconds / decoded if decoded else float("nan")


def _extension(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "jpg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return "jpg"  # what webdataset's readers expect for an image; the decoder reads the bytes, not the name


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..errors import DecodeError
    from ..tarshards import TarShards, add_member
    from .common import open_source
    source = open_source(args.source)
    os.makedirs(args.out, exist_ok=True)
    total = len(source.samples)
    shards: list[str] = []
    archive, written = None, 0
    bytes_before = bytes_after = 0
    sample_before: list[bytes] = []
    sample_after: list[bytes] = []
    failed = []
    try:
        for index in tqdm(range(total), desc="fastload pack", unit="img", file=sys.stderr):
            name, label = source.samples[index]
            try:
                data = source.read(index)
                changed = _reencode(data, args.max_side, args.quality) if args.max_side else None
            except (DecodeError, OSError, ValueError) as error:
                failed.append(f"{name}: {getattr(error, 'reason', error)}")
                continue
            payload, extension = changed if changed else (data, _extension(data))
            if archive is None or written + len(payload) > args.shard_size and written:
                if archive is not None:
                    archive.close()
                shards.append(os.path.join(args.out, f"{args.prefix}-{len(shards):06d}.tar"))
                archive, written = tarfile.open(shards[-1], "w"), 0
            add_member(archive, f"{index:09d}.{extension}", payload)
            add_member(archive, f"{index:09d}.cls", str(int(label)).encode())
            written += len(payload) + 2048  # with the two tar headers
            bytes_before += len(data)
            bytes_after += len(payload)
            if len(sample_before) < 100:  # decode time measured on the first 100 images
                sample_before.append(data)
                sample_after.append(payload)
    finally:
        if archive is not None:
            archive.close()
    if shards:
        TarShards(shards)  # indexes them (beside each shard)
    packed = total - len(failed)
    print(f"\n{packed} of {total} images -> {len(shards)} shards in {args.out} "
          f"({args.prefix}-000000.tar ... {args.prefix}-{max(len(shards) - 1, 0):06d}.tar), indexed")
    if packed:
        print(f"{'':<22} {'before':>10} {'after':>10}")
        print(f"{'KB per image':<22} {bytes_before / packed / 1024:>10.1f} {bytes_after / packed / 1024:>10.1f}")
        print(f"{'decode ms per image':<22} {_decode_ms(sample_before):>10.2f} {_decode_ms(sample_after):>10.2f}")
        print("(decode: Pillow, RGB, the first 100 images; 'after' differs only with --max-side)")
    for line in failed:
        print(f"fastload pack: left out {line}", file=sys.stderr)
    return 0 if not failed else 1
