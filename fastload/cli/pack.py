"""Write WebDataset tar shards (and their indexes) from an image folder, a file list or TFRecords.

``fastload pack /data/train /data/shards --shard-size 1GiB`` writes
``/data/shards/train-000000.tar``, ``train-000001.tar``, ... in the source's
order (ImageFolder's: sorted classes, sorted files), each sample keyed by its
source name (``n01440764/n01440764_10026.jpg`` plus ``.cls``, its label, and
``.class``, its class name, where the source has class names), and indexes
every shard, so ``fastload.TarShards("/data/shards/train-*.tar")`` reads the
same dataset, class names included. ``--max-side N`` re-encodes images larger than N pixels on
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

_UNITS = {"": 1, "B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def parse_size(text: str) -> int:
    """``1GiB``, ``512MiB`` (powers of 1024), ``1GB``, ``512MB`` (powers of 1000), ``300000`` (bytes) -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*", text.upper())
    if not match or match.group(2) not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: a size such as 1GiB, 512MiB, 500MB or 300000 (bytes)")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def sample_key(name: str, root: str | None, taken: set[str], index: int) -> str:
    """The tar key of a sample named ``name`` (its file, relative to the source's folder ``root``): its path
    without the extension, characters other than letters, digits, ``_``, ``-`` and ``/`` as ``_`` (a ``.``
    would end the key, as webdataset splits names), unique in the pack (a second ``a.png`` beside ``a.jpg``
    gets ``_`` and its index)."""
    if root is not None and os.path.isabs(name):
        name = os.path.relpath(name, root)
    stem = os.path.splitext(name)[0] if os.path.splitext(name)[1].lower() in _IMAGE_SUFFIXES else name
    key = re.sub(r"[^A-Za-z0-9_\-/]", "_", stem).strip("/")
    key = re.sub(r"/+", "/", key) or f"{index:09d}"
    unique, suffix = key, index
    while unique in taken:
        unique, suffix = f"{key}_{suffix}", suffix + 1
    taken.add(unique)
    return unique


_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".ppm", ".pgm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="an image folder, a file list, or TFRecord files (a pattern)")
    parser.add_argument("out", help="the folder for the shards")
    parser.add_argument("--shard-size", type=parse_size, default=parse_size("1GiB"),
                        help="start a new shard past this many bytes: 1GiB (the default), 512MiB, 500MB, ...")
    parser.add_argument("--prefix", default="train", help="shard names: PREFIX-000000.tar, ... (default train)")
    parser.add_argument("--max-side", type=int, help="re-encode images longer than this on a side, as JPEG")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality when re-encoding (default 90)")


def _reencode(data: bytes, max_side: int, quality: int) -> tuple[bytes, str] | None:
    """The image shrunk to ``max_side`` on its longer side and saved as JPEG, or None if it is small enough."""
    from PIL import Image, UnidentifiedImageError
    try:
        image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ValueError("not an image Pillow can identify") from None
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
    root = args.source if os.path.isdir(args.source) else os.path.dirname(os.path.abspath(args.source))
    classes = getattr(source, "classes", None)
    keys: set[str] = set()
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
            key = sample_key(name, root, keys, index)
            add_member(archive, f"{key}.{extension}", payload)
            add_member(archive, f"{key}.cls", str(int(label)).encode())
            written += len(payload) + 2048  # with the two tar headers
            if classes and 0 <= int(label) < len(classes):
                add_member(archive, f"{key}.class", str(classes[int(label)]).encode())
                written += 1024
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
          f"({args.prefix}-000000.tar ... {args.prefix}-{max(len(shards) - 1, 0):06d}.tar), indexed"
          + (f"; {len(failed)} left out, each named on stderr (exit status 1)" if failed else ""))
    if packed:
        print(f"{'':<22} {'before':>10} {'after':>10}")
        print(f"{'KB per image':<22} {bytes_before / packed / 1024:>10.1f} {bytes_after / packed / 1024:>10.1f}")
        print(f"{'decode ms per image':<22} {_decode_ms(sample_before):>10.2f} {_decode_ms(sample_after):>10.2f}")
        print("(decode: Pillow, RGB, the first 100 images; 'after' differs only with --max-side)")
    for line in failed:
        print(f"fastload pack: left out {line}", file=sys.stderr)
    return 0 if not failed else 1
