"""Write the seed corpus of benchmarks/fuzz_parsers.py into tests/data/fuzz/<target>/: small files (a few
hundred bytes to a few KB), generated, never photos.

    .venv/bin/python benchmarks/fuzz_corpus.py            # (re)writes the seeds; inputs the fuzzer kept stay

tar: shards in ustar, GNU (long names) and pax formats, a key repeated, a duplicate member, labels of
several kinds, a cut shard, a negative base-256 size. tfrecord: framed Examples (bytes, int64, packed
float lists), a bad CRC, a cut record. jpeg: tiny baseline, progressive, grayscale and 4:2:0 JPEGs drawn
here with Pillow, and one cut short.
"""

from __future__ import annotations

import io
import os
import struct
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "data", "fuzz")


def _tar(members, tar_format=tarfile.GNU_FORMAT, global_pax=None, first_pax=None) -> bytes:
    """A tar of (name, payload) members: bytes a file, None a folder, text a symbolic link to it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tar_format, pax_headers=global_pax) as archive:
        for number, (name, payload) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.mtime, info.mode = 0, 0o644
            if payload is None:
                info.type = tarfile.DIRTYPE
            elif isinstance(payload, str):
                info.type, info.linkname = tarfile.SYMTYPE, payload
            else:
                info.size = len(payload)
            if number == 0 and first_pax:
                info.pax_headers = dict(first_pax)
            archive.addfile(info, io.BytesIO(payload) if isinstance(payload, bytes) else None)
    data = out.getvalue().rstrip(b"\0")  # tarfile pads to 10 KiB records: two zero blocks end it as well
    return data + bytes(-len(data) % 512 + 1024)


def _header(name: bytes, size_field: bytes) -> bytes:
    block = bytearray(512)
    block[:len(name)], block[100:108], block[124:136], block[156:157] = name, b"0000644\0", size_field, b"0"
    block[257:265], block[148:156] = b"ustar\x0000", b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _unpacked_example() -> bytes:
    """An Example whose int64 and float lists are not packed (one field per value, wire types 0 and 5), with an
    unknown field beside them: what TensorFlow's older writers and other protobuf libraries emit."""
    from fastload.tfrecords import _encode_varint as varint

    def field(number: int, payload: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    ints = field(3, b"".join(b"\x08" + varint(v & (1 << 64) - 1) for v in (3, -1)))
    floats = field(2, b"\x0d" + struct.pack("<f", 0.5) + b"\x0d" + struct.pack("<f", -2.0))
    image = field(1, field(1, b"\xff\xd8\xff\xd9"))
    entries = b"".join(field(1, field(1, name) + field(2, value)) for name, value in
                       ((b"image/class/label", ints), (b"bbox", floats), (b"image/encoded", image)))
    return field(1, entries + b"\x38\x01")


def _jpeg(mode: str, size: tuple[int, int], **options) -> bytes:
    from PIL import Image
    image = Image.new(mode, size)
    pixels = image.load()
    for y in range(size[1]):
        for x in range(size[0]):
            value = (x * 37 + y * 11) % 256
            pixels[x, y] = value if mode == "L" else (value, (x * 5) % 256, (y * 9) % 256)
    out = io.BytesIO()
    image.save(out, "JPEG", **options)
    return out.getvalue()


def seeds() -> dict[str, dict[str, bytes]]:
    sys.path.insert(0, ROOT)
    from fastload import tfrecords
    jpeg = b"\xff\xd8\xff\xe0" + b"\0" * 60 + b"\xff\xd9"  # a stand-in image: the tar index reads no image
    tar = {
        "gnu-two-samples.tar": _tar([("000.jpg", jpeg), ("000.cls", b"3"), ("001.jpg", jpeg),
                                     ("001.json", b'{"label": 4}')]),
        "pax-unicode-long.tar": _tar([("d/" * 60 + "ü.jpg", jpeg), ("d/" * 60 + "ü.cls", b" 7\n")], tarfile.PAX_FORMAT),
        "ustar-prefix.tar": _tar([("p/" * 70 + "x.jpg", jpeg), ("p/" * 70 + "x.txt", b"-2")], tarfile.USTAR_FORMAT),
        "repeated-key.tar": _tar([("a.jpg", jpeg), ("a.cls", b"1"), ("b.jpg", jpeg), ("a.jpg", jpeg)]),
        "duplicate-member.tar": _tar([("a.jpg", jpeg), ("a.jpg", jpeg), ("a.cls", b"99999999999999999999")]),
        "cut.tar": _tar([("a.jpg", jpeg * 4), ("a.cls", b"1")])[:700],
        "negative-size.tar": _header(b"evil.jpg", ((1 << 96) - 512).to_bytes(12, "big")) + bytes(1024),
        "gnu-long-name.tar": _tar([("g/" * 60 + "0.jpg", jpeg), ("g/" * 60 + "0.cls", b"5")]),
        "pax-global-size.tar": _tar([("a.jpg", jpeg), ("a.cls", b"1")], tarfile.PAX_FORMAT, {"comment": "global"},
                                    {"size": str(len(jpeg)), "path": "renamed.jpg"}),
        "links-and-folders.tar": _tar([("dir/", None), ("dir/a.jpg", jpeg), ("dir/a.lnk", "a.jpg"),
                                       ("dir/a.cls", b"0")]),
        "empty.tar": b"",
    }

    def record(features) -> bytes:
        return tfrecords.frame(tfrecords.example(features))
    good = record({"image/encoded": [jpeg], "image/class/label": [7], "bbox": [0.5, 0.25]})
    tfrecord = {
        "two-records.tfrecord": good + record({"image/encoded": [jpeg], "image/class/label": [-1 << 40],
                                               "image/filename": [b"x.jpg"]}),
        "no-label.tfrecord": record({"image/encoded": [jpeg]}),
        "bad-data-crc.tfrecord": good[:-1] + bytes([good[-1] ^ 1]),
        "cut.tfrecord": good + good[:30],
        "example-only.bin": tfrecords.example({"image/encoded": [jpeg], "image/class/label": [1, 2, 3]}),
        "unpacked-lists.tfrecord": tfrecords.frame(_unpacked_example()),
        "short.tfrecord": good[:7],
    }
    jpegs = {
        "baseline-16x8.jpg": _jpeg("RGB", (16, 8), quality=50),
        "progressive-24x16.jpg": _jpeg("RGB", (24, 16), quality=40, progressive=True),
        "gray-9x7.jpg": _jpeg("L", (9, 7), quality=60),
        "subsampled-33x17.jpg": _jpeg("RGB", (33, 17), quality=30, subsampling=2),
        "restart-16x16.jpg": _jpeg("RGB", (16, 16), quality=30, restart_marker_blocks=1),
    }
    jpegs["cut-progressive.jpg"] = jpegs["progressive-24x16.jpg"][:-40]
    return {"tar": tar, "tfrecord": tfrecord, "jpeg": jpegs}


def main() -> None:
    for target, files in seeds().items():
        folder = os.path.join(CORPUS, target)
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as out:
                out.write(data)
        print(f"{folder}: {len(files)} seeds, {sum(map(len, files.values()))} bytes")


if __name__ == "__main__":
    main()
