r"""fastload inspect: what is in a dataset, and which files training will fail on.

Scans an image folder or a file list with the loader's own reading and
decoding checks, in the loader's threads: counts per class, formats, the
distribution of image and file sizes, and every file that will fail (not an
image, truncated header, over the pixel cap, unreadable, ...) with its reason.
Without ``--deep`` only headers are parsed (fast; a file truncated in its
pixel data passes); ``--deep`` decodes every file fully, as training would,
and also lists JPEGs that libjpeg warns about but decodes (corrupt data).
Exits with status 1 if any file would fail; ``--bad-list`` writes them as
``path<TAB>reason`` lines.

The bad list is UTF-8 text, one line per file, its two fields escaped so that
no name can break a row or the file's encoding (``escape``, undone by
``unescape``): a backslash is ``\\``, a tab ``\t``, a newline ``\n``, a
carriage return ``\r``, and every other byte of the name (``os.fsencode``)
that is not valid UTF-8, a control character (0x00-0x1F, 0x7F) or part of
U+0085, U+2028 or U+2029 (line breaks to some readers) is ``\xHH``, one per
byte. Everything else is written as it is, so an ordinary path reads as
itself. The printed report shows names the same way.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

from .common import open_source

_SOF_KINDS = {0xC0: "JPEG baseline", 0xC1: "JPEG extended", 0xC2: "JPEG progressive", 0xC3: "JPEG lossless",
              0xC9: "JPEG arithmetic", 0xCA: "JPEG progressive arithmetic", 0xCB: "JPEG lossless arithmetic"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="an image folder (class sub-folders), a file list, tar shards (a path, "
                        "'train-*.tar', a brace pattern or a URL) or TFRecord files")
    parser.add_argument("--deep", action="store_true", help="decode every file fully (slower)")
    parser.add_argument("--bad-list", metavar="FILE", help="write the failing files as path<TAB>reason lines "
                        "(UTF-8; backslash, tab, newline, other control characters and bytes that are not "
                        "UTF-8 escaped as \\\\, \\t, \\n, \\xHH)")
    parser.add_argument("--max-image-pixels", type=int, default=None,
                        help="the loader's pixel cap (default: Pillow's limit)")
    parser.add_argument("--workers", type=int, default=os.cpu_count(),
                        help="threads reading and decoding; default: the number of cores")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


_NAMED = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNNAMED = {"\x85", "\u2028", "\u2029"}


def escape(text: str) -> str:
    """``text`` (a path as os.fsdecode gives it, or a reason) as one bad-list field: see the module's
    docstring. Bytes that were not UTF-8 (surrogate escapes) become ``\\xHH``, so the field is valid UTF-8."""
    out = []
    for char in text:
        code = ord(char)
        if char in _NAMED:
            out.append(_NAMED[char])
        elif 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F or char in _UNNAMED:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8"))
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate no file system name decodes to
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append(char)
    return "".join(out)


def unescape(field: str) -> bytes:
    """A bad-list field's original bytes (``os.fsdecode`` gives the path as fastload saw it)."""
    out, i = bytearray(), 0
    while i < len(field):
        char = field[i]
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
        elif field[i + 1:i + 2] == "x":
            out.append(int(field[i + 2:i + 4], 16))
            i += 4
        else:
            out += {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r"}[field[i + 1]]
            i += 2
    return bytes(out)


def jpeg_kind(data: bytes) -> str:
    """The JPEG's coding process from its SOF marker: baseline, progressive, lossless, ..."""
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker in _SOF_KINDS:
            return _SOF_KINDS[marker]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return "JPEG (no frame header)"


class Probe:
    """A map-style dataset whose item is one file's report, made with the loader's own checks."""

    def __init__(self, samples, deep: bool, max_pixels, read=None):
        self.samples, self.deep, self.max_pixels = samples, deep, max_pixels
        self.read = read  # the source's read stage (a shard's byte range, a record); None: the file

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        from ..decode import DEFAULT_MAX_PIXELS, decode, read_header
        from ..errors import DecodeError
        from ..read import read_file
        path, label = self.samples[index]
        report = {"path": path, "label": label, "bytes": None, "format": None, "size": None,
                  "error": None, "warning": None}
        try:
            data = self.read(index) if self.read is not None else read_file(index, path)
            report["bytes"] = len(data)
            cap = self.max_pixels if self.max_pixels is not None else DEFAULT_MAX_PIXELS
            header = read_header(index, path, data, cap)
            report["size"] = (header.width, header.height)
            is_jpeg = header.image is None or header.image.format == "JPEG"
            report["format"] = jpeg_kind(data) if is_jpeg else (header.image.format or "unknown")
            if self.deep:  # the full decode reports libjpeg's warning, if it had one
                report["warning"] = decode(index, path, data, header).warning
        except DecodeError as error:
            report["error"] = error.reason
        return report


def _percentiles(values: list[float], spec: str = ".0f") -> str:
    if not values:
        return "-"
    values = sorted(values)
    picked = [values[min(len(values) - 1, int(q * len(values)))] for q in (0.05, 0.5, 0.95)]
    return ", ".join(f"{name} {value:{spec}}" for name, value in
                     zip(("min", "p5", "median", "p95", "max"), [values[0], *picked, values[-1]]))


def run(args) -> int:
    from tqdm import tqdm

    import fastload
    source = open_source(args.data)
    samples = source.samples
    classes = getattr(source, "classes", None)
    started = time.perf_counter()
    loader = fastload.DataLoader(Probe(samples, args.deep, args.max_image_pixels, source.read), batch_size=32,
                                 num_workers=max(1, args.workers), collate_fn=list)
    reports = []
    with loader, tqdm(total=len(samples), unit="file", desc="inspect", disable=args.no_progress,
                      file=sys.stderr, leave=False) as bar:
        for batch in loader:
            reports.extend(batch)
            bar.update(len(batch))
    elapsed = time.perf_counter() - started
    failed = [r for r in reports if r["error"]]
    warned = [r for r in reports if r["warning"] and not r["error"]]

    print(f"{escape(args.data)}: {len(reports)} files, {'fully decoded' if args.deep else 'headers checked'} "
          f"in {elapsed:.1f} s")
    per_class = collections.Counter(r["label"] for r in reports)
    print(f"\n{'class':<32} {'label':>5} {'files':>7} {'failing':>7}")
    failing_per_class = collections.Counter(r["label"] for r in failed)
    for label in sorted(per_class):
        name = escape(classes[label]) if classes else str(label)
        print(f"{name[:32]:<32} {label:>5} {per_class[label]:>7} {failing_per_class[label]:>7}")
    print(f"\n{'format':<32} {'files':>7}")
    for kind, count in collections.Counter(r["format"] or "unreadable" for r in reports).most_common():
        print(f"{kind:<32} {count:>7}")
    sized = [r for r in reports if r["size"]]
    print(f"\nwidth px:     {_percentiles([r['size'][0] for r in sized])}")
    print(f"height px:    {_percentiles([r['size'][1] for r in sized])}")
    print(f"megapixels:   {_percentiles([r['size'][0] * r['size'][1] / 1e6 for r in sized], '.2f')}")
    print(f"file KB:      {_percentiles([r['bytes'] / 1024 for r in reports if r['bytes']])}")
    if warned:
        print(f"\n{len(warned)} file(s) decode with libjpeg warnings (corrupt data; delivered as decoded):")
        for r in warned:
            print(f"  {escape(r['path'])}: {escape(r['warning'])}")
    if failed:
        print(f"\n{len(failed)} file(s) will fail (raise, or be skipped and reported with on_error='skip'):")
        for r in failed:
            print(f"  {escape(r['path'])}: {escape(r['error'])}")
    else:
        print("\nno file will fail" + ("" if args.deep else " at the header check (use --deep to decode them all)"))
    if args.bad_list:
        with open(args.bad_list, "w", encoding="utf-8", newline="\n") as out:
            out.writelines(f"{escape(r['path'])}\t{escape(r['error'])}\n" for r in failed)
        print(f"bad list: {escape(args.bad_list)} ({len(failed)} lines)")
    return 1 if failed else 0
