import io
import os
import struct

import numpy as np
import pytest
from PIL import Image

from fastload.decode import decode, open_image
from fastload.errors import DecodeError
from fastload.read import read_file

from fastload.sample_data import make_image

from conftest import TESTDATA


def test_read_errors_name_the_file(tmp_path):
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "dir.jpg").mkdir()
    os.symlink(tmp_path / "gone.jpg", tmp_path / "dangling.jpg")
    for name, reason in [("empty.jpg", "empty file"), ("dir.jpg", "is a directory"),
                         ("dangling.jpg", "dangling symbolic link"), ("missing.jpg", "file not found")]:
        with pytest.raises(DecodeError, match=reason) as info:
            read_file(7, str(tmp_path / name))
        assert info.value.index == 7 and info.value.path.endswith(name)


def _jpeg(width, height) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, "JPEG")
    return out.getvalue()


def test_header_over_pixel_cap_is_refused_before_decoding():
    data = bytearray(_jpeg(16, 16))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", 60000, 60000)  # claim 3.6 gigapixels
    with pytest.raises(DecodeError, match="exceeds max_image_pixels|pixels"):
        open_image(0, "huge.jpg", bytes(data))
    with pytest.raises(DecodeError, match="exceeds max_image_pixels=100"):
        open_image(0, "small-cap.jpg", _jpeg(16, 16), max_pixels=100)


@pytest.mark.parametrize("payload", [b"hello, I am text\n", bytes(range(256)) * 4])
def test_not_an_image(payload):
    with pytest.raises(DecodeError, match="not a readable image"):
        open_image(3, "fake.jpg", payload)


def test_truncated_jpeg_fails_at_decode():
    out = io.BytesIO()
    make_image(0, 200, 150).save(out, "JPEG", quality=90)
    data = out.getvalue()
    image = open_image(0, "cut.jpg", data[: len(data) // 2])
    with pytest.raises(DecodeError, match="decoding failed"):
        decode(0, "cut.jpg", image)


def test_dct_scaled_decode_reports_its_scale():
    image = open_image(0, "a.jpg", _jpeg(400, 300))
    decoded, scale = decode(0, "a.jpg", image, reduction=4)
    assert scale == 4 and decoded.size == (100, 75)
    decoded, scale = decode(0, "a.jpg", open_image(0, "a.jpg", _jpeg(400, 300)), reduction=1)
    assert scale == 1 and decoded.size == (400, 300)


def test_png_bytes_named_jpg_decode_as_images():
    out = io.BytesIO()
    Image.new("RGBA", (5, 4), (1, 2, 3, 4)).save(out, "PNG")
    decoded, _ = decode(0, "really-png.jpg", open_image(0, "really-png.jpg", out.getvalue()))
    assert decoded.mode == "RGB" and np.asarray(decoded)[0, 0].tolist() == [1, 2, 3]


@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_every_zoo_file_decodes_like_pillow_or_is_reported():
    for path in sorted((TESTDATA / "jpeg_zoo").iterdir()):
        if path.name.endswith((".tsv", ".md")):
            continue
        try:
            image = open_image(0, str(path), read_file(0, str(path)))
            ours, _ = decode(0, str(path), image)
        except DecodeError as error:
            assert str(path) in str(error) and error.reason
            continue
        with Image.open(path) as reference:
            expected = np.asarray(reference.convert("RGB"))
        assert np.array_equal(np.asarray(ours.convert("RGB")), expected), path.name
