import io
import os
import struct

import numpy as np
import pytest
from PIL import Image

from fastload import decode as decode_module
from fastload.decode import Header, decode, open_image, read_header
from fastload.transforms import Geometry
from fastload.errors import DecodeError
from fastload.read import read_file

from fastload.sample_data import make_image

from conftest import TESTDATA, FakeGpuDecoder


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
    cut = data[: len(data) // 2]
    header = read_header(0, "cut.jpg", cut)
    with pytest.raises(DecodeError, match="decoding failed"):  # Pillow's verdict, as torchvision's loader
        decode(0, "cut.jpg", cut, header)


def test_dct_scaled_decode_reports_its_scale():
    data = _jpeg(400, 300)
    decoded = decode(0, "a.jpg", data, read_header(0, "a.jpg", data), reduction=4)
    assert decoded.scale == 4 and decoded.image.size == (100, 75) and decoded.origin == (0, 0)
    decoded = decode(0, "a.jpg", data, read_header(0, "a.jpg", data), reduction=1)
    assert decoded.scale == 1 and decoded.image.size == (400, 300)


def test_png_bytes_named_jpg_decode_as_images():
    out = io.BytesIO()
    Image.new("RGBA", (5, 4), (1, 2, 3, 4)).save(out, "PNG")
    data = out.getvalue()
    decoded = decode(0, "really-png.jpg", data, read_header(0, "really-png.jpg", data)).image
    assert decoded.mode == "RGB" and np.asarray(decoded)[0, 0].tolist() == [1, 2, 3]


@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_every_zoo_file_decodes_like_pillow_or_is_reported():
    for path in sorted((TESTDATA / "jpeg_zoo").iterdir()):
        if path.name.endswith((".tsv", ".md")):
            continue
        try:
            data = read_file(0, str(path))
            ours = decode(0, str(path), data, read_header(0, str(path), data)).image
        except DecodeError as error:
            assert str(path) in str(error) and error.reason
            continue
        try:
            with Image.open(path) as reference:
                expected = np.asarray(reference.convert("RGB"))
        except Image.UnidentifiedImageError:  # a Pillow built without WebP: torchvision's decoder is the reference
            import torchvision.io
            assert data[8:12] == b"WEBP", path.name
            expected = torchvision.io.decode_image(str(path), mode=torchvision.io.ImageReadMode.RGB)
            expected = expected.permute(1, 2, 0).numpy()
        assert np.array_equal(np.asarray(ours.convert("RGB")), expected), path.name

needs_region_decoder = pytest.mark.skipif(decode_module._jpeg is None,
                                          reason="fastload._jpeg was not built (no libjpeg headers)")


def _zoo_and_photos():
    for folder in ("jpeg_zoo", "photos"):
        if (TESTDATA / folder).is_dir():
            yield from sorted(p for p in (TESTDATA / folder).rglob("*")
                              if p.is_file() and not p.name.endswith((".tsv", ".md")))


def _awkward_regions(width, height, rng):
    """Whole image, 1-pixel and odd boxes, boxes touching each edge, and random ones."""
    yield 0, 0, width, height
    yield width - 1, height - 1, width, height
    yield 0, 0, 1, 1
    yield 1, 1, width, height
    yield 0, height // 3, width, height
    for _ in range(6):
        left, top = int(rng.integers(0, width)), int(rng.integers(0, height))
        yield left, top, int(rng.integers(left + 1, width + 1)), int(rng.integers(top + 1, height + 1))


@needs_region_decoder
@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_region_decode_equals_pillow_crop_on_every_test_file():
    """Every odd and broken file: the region decoder gives Pillow's pixels, or hands the file to Pillow."""
    rng = np.random.default_rng(0)
    taken = 0
    for path in _zoo_and_photos():
        data = path.read_bytes()
        try:
            header = read_header(0, str(path), data)
        except DecodeError:
            continue
        if header.image is not None:
            continue  # not a JPEG the region decoder takes: Pillow decodes it (tested above)
        try:
            with Image.open(path) as reference:
                expected = np.asarray(reference.convert("RGB"))
        except Exception:
            expected = None  # Pillow refuses it: so must we
        for box in _awkward_regions(header.width, header.height, rng):
            geometry = Geometry(crop=box)
            try:
                decoded = decode(0, str(path), data, Header(header.width, header.height), geometry)
            except DecodeError:
                assert expected is None, f"{path.name}: Pillow decodes it, fastload refused it"
                break
            assert expected is not None, f"{path.name}: Pillow refuses it, fastload decoded it"
            left, top, right, bottom = box
            ours = np.asarray(decoded.image.convert("RGB"))
            if decoded.origin == (0, 0) and decoded.image.size == (header.width, header.height):
                ours = ours[top:bottom, left:right]  # handed to Pillow, which decodes everything
            else:
                assert decoded.origin == (left, top)
                taken += 1
            assert np.array_equal(ours, expected[top:bottom, left:right]), (path.name, box)
    assert taken > 100  # the region decoder really ran on most files


@needs_region_decoder
@pytest.mark.parametrize("subsampling", [0, 1, 2])  # 4:4:4, 4:2:2, 4:2:0
@pytest.mark.parametrize("size", [(333, 251), (17, 9), (64, 48)])
def test_region_decode_is_exact_for_each_chroma_subsampling(subsampling, size):
    out = io.BytesIO()
    make_image(5, *size).save(out, "JPEG", quality=90, subsampling=subsampling)
    data = out.getvalue()
    expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    header = read_header(0, "a.jpg", data)
    assert header.image is None
    for box in _awkward_regions(*size, np.random.default_rng(subsampling)):
        decoded = decode(0, "a.jpg", data, header, Geometry(crop=box))
        assert decoded.origin == box[:2]
        left, top, right, bottom = box
        assert np.array_equal(np.asarray(decoded.image), expected[top:bottom, left:right]), box


@needs_region_decoder
def test_region_decode_at_reduced_scale_matches_pillow_draft_near_the_box():
    """At 1/s scale the region (source box plus margin) holds the pixels of Pillow's draft decode."""
    out = io.BytesIO()
    make_image(2, 1600, 1200).save(out, "JPEG", quality=90)
    data = out.getvalue()
    geometry = Geometry(crop=(100, 200, 1500, 1100), resize=(224, 224), source_box=(100, 200, 1500, 1100),
                        max_reduction=4)
    for scale in (2, 4):
        decoded = decode(0, "big.jpg", data, read_header(0, "big.jpg", data), geometry, reduction=scale)
        drafted = Image.open(io.BytesIO(data))
        drafted.draft("RGB", (1600 // scale, 1200 // scale))
        whole = np.asarray(drafted.convert("RGB"))
        left, top = decoded.origin
        width, height = decoded.image.size
        assert decoded.scale == scale and left <= 100 // scale - 8 + 1 and top <= 200 // scale - 8 + 1
        assert np.array_equal(np.asarray(decoded.image), whole[top:top + height, left:left + width])


@needs_region_decoder
def test_libjpeg_warnings_hand_the_file_to_pillow():
    """Corrupt-but-decodable data: the region decoder does not guess; Pillow decides as in torchvision."""
    out = io.BytesIO()
    make_image(3, 120, 90).save(out, "JPEG", quality=90)
    data = bytearray(out.getvalue())
    sos = data.index(b"\xff\xda")
    data[sos + 40: sos + 44] = b"\xff\xd0\xff\xd0"  # stray restart markers: libjpeg warns
    data = bytes(data)
    header = read_header(0, "warn.jpg", data)
    result = decode_module._jpeg.decode(data, np.empty(120 * 90 * 3, np.uint8), 8, 0, 0, 120, 90)
    assert result[3] > 0 and result[4]  # counted, with libjpeg's message, and not printed
    try:
        expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    except OSError:
        with pytest.raises(DecodeError):
            decode(0, "warn.jpg", data, header)
    else:
        decoded = decode(0, "warn.jpg", data, header)
        assert np.array_equal(np.asarray(decoded.image), expected)


def test_header_is_checked_against_the_pixel_cap_on_the_region_path_too():
    with pytest.raises(DecodeError, match="exceeds max_image_pixels=100"):
        read_header(0, "small-cap.jpg", _jpeg(16, 16), max_pixels=100)


@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_webp_size_is_read_from_the_header_before_decoding():
    import torch
    import torchvision.io
    from fastload.decode import _webp_size
    webps = sorted((TESTDATA / "jpeg_zoo").glob("*.webp"))
    assert webps
    for path in webps:
        data = path.read_bytes()
        pixels = torchvision.io.decode_webp(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        assert _webp_size(data) == (pixels.shape[2], pixels.shape[1]), path.name
        with pytest.raises(DecodeError, match="exceeds max_image_pixels=100"):
            open_image(0, str(path), data, max_pixels=100)


@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_every_zoo_file_through_the_gpu_fallback_logic():
    """A batch of every jpeg_zoo file: each gets pixels or its own error; no bad file loses a neighbour."""
    import torch
    cpu = decode_module.CpuDecoder()
    paths = sorted(p for p in (TESTDATA / "jpeg_zoo").iterdir() if p.is_file() and p.suffix != ".md")
    items = [(i, str(p), p.read_bytes()) for i, p in enumerate(paths)]
    gpu = FakeGpuDecoder()
    results = decode_module.decode_batch(items, gpu, cpu)
    assert len(results) == len(items)
    assert gpu.calls[0] > 1 and len(gpu.calls) > 1  # the batch was refused, then retried image by image
    decoded = 0
    for (index, path, data), result in zip(items, results):
        try:
            expected = cpu.decode_one(index, path, data)
        except DecodeError as error:
            assert isinstance(result, DecodeError) and result.path == path and result.reason == error.reason
            continue
        assert isinstance(result, torch.Tensor), f"{path}: {result}"
        assert result.dtype == torch.uint8 and result.shape == expected.shape and result.shape[0] == 3, path
        # nvJPEG's stand-in and the CPU backend are both libjpeg-turbo: equal but for upsampling details
        assert (result.float() - expected.float()).abs().mean() < 2, path
        decoded += 1
    assert decoded > len(items) // 2


def test_a_corrupt_file_in_a_batch_is_reported_and_its_neighbours_decoded(tmp_path):
    import torch
    good = io.BytesIO()
    make_image(1, 40, 30).save(good, "JPEG")
    gray = io.BytesIO()
    make_image(2, 20, 10, grayscale=True).save(gray, "JPEG")
    png = io.BytesIO()
    make_image(3, 8, 8).save(png, "PNG")
    broken = good.getvalue()[:200]
    items = [(0, "good.jpg", good.getvalue()), (1, "broken.jpg", broken), (2, "gray.jpg", gray.getvalue()),
             (3, "image.png", png.getvalue())]
    results = decode_module.decode_batch(items, FakeGpuDecoder(), decode_module.CpuDecoder())
    assert [type(r).__name__ for r in results] == ["Tensor", "DecodeError", "Tensor", "Tensor"]
    assert results[1].path == "broken.jpg"
    assert results[2].shape == (3, 10, 20) and torch.equal(results[2][0], results[2][1])  # gray as RGB
    assert results[3].shape == (3, 8, 8)


def test_choose_decoder_is_forceable_and_falls_back_to_cpu(monkeypatch):
    def chosen(*args, **kwargs):
        return [type(d).__name__ for d in decode_module.choose_decoder(*args, **kwargs)]
    assert chosen("cpu", "cuda") == ["CpuDecoder"]
    with pytest.raises(ValueError, match="decode_device"):
        decode_module.choose_decoder("gpu")
    with pytest.raises(ValueError, match="decoder must be"):
        decode_module.choose_decoder("auto", "cuda", decoder="dali")
    # Where no GPU backend can decode (no GPU here; a ROCm build), "auto" decodes on the CPU
    # and "cuda" or a forced backend says why it cannot.
    monkeypatch.setattr(decode_module.NvjpegDecoder, "available", staticmethod(lambda: False))
    monkeypatch.setattr(decode_module.TorchCodecDecoder, "available", classmethod(lambda cls: False))
    assert chosen("auto", "cuda:0") == ["CpuDecoder"]
    with pytest.raises(RuntimeError, match="cannot decode JPEGs on a GPU"):
        decode_module.choose_decoder("cuda", "cuda:0")
    with pytest.raises(RuntimeError, match="decoder='nvjpeg' is not available"):
        decode_module.choose_decoder("auto", "cuda:0", decoder="nvjpeg")
    monkeypatch.setattr(decode_module.NvjpegDecoder, "available", staticmethod(lambda: True))
    [nvjpeg] = decode_module.choose_decoder("auto", "cuda:1")
    assert isinstance(nvjpeg, decode_module.NvjpegDecoder) and str(nvjpeg.device) == "cuda:1"
    assert chosen("auto", None) == ["CpuDecoder"]
    assert chosen("cuda", None) == ["NvjpegDecoder"]
    assert chosen("auto", "cuda", decoder="cpu") == ["CpuDecoder"]
    # both GPU backends present: both are candidates, for pick_fastest to measure
    monkeypatch.setattr(decode_module.TorchCodecDecoder, "available", classmethod(lambda cls: True))
    assert chosen("auto", "cuda:0") == ["NvjpegDecoder", "TorchCodecDecoder"]
    assert chosen("auto", "cuda:0", decoder="torchcodec") == ["TorchCodecDecoder"]


class _TimedDecoder:
    """A backend that takes ``seconds`` on a fake clock per batch, or fails."""

    def __init__(self, name, seconds, clock, fails=False):
        self.name, self.seconds, self.clock, self.fails = name, seconds, clock, fails

    def decode_many(self, encoded):
        if self.fails:
            raise RuntimeError("refused")
        self.clock[0] += self.seconds
        return [f"{self.name}:{i}" for i in range(len(encoded))]


def test_pick_fastest_measures_each_backend_on_the_real_batch():
    clock = [0.0]
    slow, fast = _TimedDecoder("slow", 2.0, clock), _TimedDecoder("fast", 1.0, clock)
    decoder, output = decode_module.pick_fastest([slow, fast], [b"a", b"b"], clock=lambda: clock[0])
    assert decoder is fast and output == ["fast:0", "fast:1"]
    broken = _TimedDecoder("broken", 0.1, clock, fails=True)
    assert decode_module.pick_fastest([broken, slow], [b"a"], clock=lambda: clock[0])[0] is slow
    assert decode_module.pick_fastest([broken, broken], [b"a"], clock=lambda: clock[0]) == (None, None)
    assert decode_module.pick_fastest([slow], [b"a"]) == (slow, None)


@pytest.mark.skipif(not decode_module.TorchCodecDecoder.installed(), reason="torchcodec not installed")
@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_torchcodec_backend_through_the_fallback_logic_on_cpu():
    """TorchCodec's own decode_jpeg (on the CPU here), called as the GPU backend is: the whole zoo, per file."""
    import torch
    cpu = decode_module.CpuDecoder()
    paths = sorted(p for p in (TESTDATA / "jpeg_zoo").iterdir() if p.suffix == ".jpg")
    items = [(i, str(p), p.read_bytes()) for i, p in enumerate(paths)]
    results = decode_module.decode_batch(items, decode_module.TorchCodecDecoder("cpu"), cpu)
    decoded = 0
    for (index, path, data), result in zip(items, results):
        try:
            expected = cpu.decode_one(index, path, data)
        except DecodeError:
            assert isinstance(result, (DecodeError, torch.Tensor)), path  # TorchCodec may accept what Pillow refuses
            continue
        assert isinstance(result, torch.Tensor) and result.shape == expected.shape, path
        assert (result.float() - expected.float()).abs().mean() < 2, path
        decoded += 1
    assert decoded > len(items) // 2
