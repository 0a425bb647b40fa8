import functools
import io
import os
import struct

import numpy as np
import pytest
from PIL import Image

import fastload
from fastload import decode as decode_module
from fastload import gpu_decode
from fastload.decode import Header, decode, open_image, read_header
from fastload.transforms import Draw
from fastload.errors import DecodeError
from fastload.read import read_file

from fastload.sample_data import make_image

from conftest import TESTDATA, FakeGpuDecoder, decode_on_cpu


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
            geometry = Draw(crop=box)
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
        decoded = decode(0, "a.jpg", data, header, Draw(crop=box))
        assert decoded.origin == box[:2]
        left, top, right, bottom = box
        assert np.array_equal(np.asarray(decoded.image), expected[top:bottom, left:right]), box


@needs_region_decoder
def test_region_decode_at_reduced_scale_matches_pillow_draft_near_the_box():
    """At 1/s scale the region (source box plus margin) holds the pixels of Pillow's draft decode."""
    out = io.BytesIO()
    make_image(2, 1600, 1200).save(out, "JPEG", quality=90)
    data = out.getvalue()
    geometry = Draw(crop=(100, 200, 1500, 1100), resize=(224, 224), source_box=(100, 200, 1500, 1100),
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
    paths = sorted(p for p in (TESTDATA / "jpeg_zoo").iterdir() if p.is_file() and p.suffix != ".md")
    items = [(i, str(p), p.read_bytes()) for i, p in enumerate(paths)]
    gpu = FakeGpuDecoder()
    results = gpu_decode.decode_batch(items, gpu, lambda i: decode_on_cpu(*items[i]))
    assert len(results) == len(items)
    assert gpu.calls[0] > 1 and len(gpu.calls) > 1  # the batch was refused, then retried image by image
    decoded = 0
    for (index, path, data), result in zip(items, results):
        try:
            expected = decode_on_cpu(index, path, data)
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
    results = gpu_decode.decode_batch(items, FakeGpuDecoder(), lambda i: decode_on_cpu(*items[i]))
    assert [type(r).__name__ for r in results] == ["Tensor", "DecodeError", "Tensor", "Tensor"]
    assert results[1].path == "broken.jpg"
    assert results[2].shape == (3, 10, 20) and torch.equal(results[2][0], results[2][1])  # gray as RGB
    assert results[3].shape == (3, 8, 8)


def _backends(torchvision=None, torchcodec="torchcodec is not installed", library="nvjpeg"):
    """The two GPU backends as choose_decoder's ``backends``, with injected probes: each fails with the given
    reason, or (None) succeeds. Fresh probe functions each time, so no cached result is shared."""
    def probe(reason):
        def run(device):
            if reason is not None:
                raise RuntimeError(reason)
        return run
    return [functools.partial(gpu_decode.TorchvisionGpuDecoder, library=library, probe=probe(torchvision)),
            functools.partial(gpu_decode.TorchCodecDecoder, library=library, probe=probe(torchcodec))]


def test_choose_decoder_is_forceable_and_falls_back_to_cpu():
    def chosen(*args, **kwargs):
        return [type(d).__name__ for d in gpu_decode.choose_decoder(*args, **kwargs)]
    assert chosen("cpu", "cuda") == ["CpuDecoder"]
    # names are validated once, by the loader's options; choose_decoder takes them as given
    with pytest.raises(ValueError, match="decode_device"):
        fastload.DataLoader(list(range(4)), decode_device="gpu")
    with pytest.raises(ValueError, match="decoder must be"):
        fastload.DataLoader(list(range(4)), decoder="dali")
    # Where no GPU backend can decode (no GPU here; a build without a GPU JPEG decoder), "auto" decodes on the
    # CPU and "cuda" or a forced backend says why it cannot.
    none = _backends(torchvision="no nvJPEG", torchcodec="torchcodec is not installed")
    assert chosen("auto", "cuda:0", backends=none) == ["CpuDecoder"]
    with pytest.raises(RuntimeError, match="cannot decode JPEGs on a GPU"):
        gpu_decode.choose_decoder("cuda", "cuda:0", backends=none)
    with pytest.raises(RuntimeError, match="decoder='nvjpeg' is not available"):
        gpu_decode.choose_decoder("auto", "cuda:0", decoder="nvjpeg", backends=none)
    one = _backends(torchvision=None)
    [torchvision] = gpu_decode.choose_decoder("auto", "cuda:1", backends=one)
    assert isinstance(torchvision, gpu_decode.TorchvisionGpuDecoder) and str(torchvision.device) == "cuda:1"
    assert chosen("auto", None, backends=one) == ["CpuDecoder"]
    assert chosen("cuda", None, backends=one) == ["TorchvisionGpuDecoder"]
    assert chosen("auto", "cuda", decoder="cpu", backends=one) == ["CpuDecoder"]
    # "nvjpeg", its name before it ran on rocJPEG too, still means torchvision's GPU decoder
    assert chosen("auto", "cuda", decoder="nvjpeg", backends=one) == ["TorchvisionGpuDecoder"]
    assert chosen("auto", "cuda", decoder="torchvision", backends=one) == ["TorchvisionGpuDecoder"]
    # both GPU backends present: both are candidates, for pick_fastest to measure
    both = _backends(torchvision=None, torchcodec=None)
    assert chosen("auto", "cuda:0", backends=both) == ["TorchvisionGpuDecoder", "TorchCodecDecoder"]
    assert chosen("auto", "cuda:0", decoder="torchcodec", backends=both) == ["TorchCodecDecoder"]


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
    decoder, output = gpu_decode.pick_fastest([slow, fast], [b"a", b"b"], clock=lambda: clock[0])
    assert decoder is fast and output == ["fast:0", "fast:1"]
    broken = _TimedDecoder("broken", 0.1, clock, fails=True)
    assert gpu_decode.pick_fastest([broken, slow], [b"a"], clock=lambda: clock[0])[0] is slow
    assert gpu_decode.pick_fastest([broken, broken], [b"a"], clock=lambda: clock[0]) == (None, None)
    assert gpu_decode.pick_fastest([slow], [b"a"]) == (slow, None)


@pytest.mark.skipif(not gpu_decode.TorchCodecDecoder.installed(), reason="torchcodec not installed")
@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_torchcodec_backend_through_the_fallback_logic_on_cpu():
    """TorchCodec's own decode_jpeg (on the CPU here), called as the GPU backend is: the whole zoo, per file."""
    import torch
    paths = sorted(p for p in (TESTDATA / "jpeg_zoo").iterdir() if p.suffix == ".jpg")
    items = [(i, str(p), p.read_bytes()) for i, p in enumerate(paths)]
    results = gpu_decode.decode_batch(items, gpu_decode.TorchCodecDecoder("cpu"), lambda i: decode_on_cpu(*items[i]))
    decoded = 0
    for (index, path, data), result in zip(items, results):
        try:
            expected = decode_on_cpu(index, path, data)
        except DecodeError:
            assert isinstance(result, (DecodeError, torch.Tensor)), path  # TorchCodec may accept what Pillow refuses
            continue
        assert isinstance(result, torch.Tensor) and result.shape == expected.shape, path
        assert (result.float() - expected.float()).abs().mean() < 2, path
        decoded += 1
    assert decoded > len(items) // 2


# ---------------------------------------------------------------- GPU backends chosen by capability (ROCm)

def _dc_only_jpeg(width, height, sampling) -> bytes:
    """A baseline JPEG whose 8x8 blocks are flat (DC coefficients only), with any sampling factors: layouts
    Pillow's encoder does not write (4:1:1, 4:4:0). ``sampling``: (h, v) per component."""
    h_max, v_max = max(h for h, _ in sampling), max(v for _, v in sampling)
    bits, count, out = 0, 0, bytearray()

    def put(value, length):
        nonlocal bits, count
        bits, count = (bits << length) | value, count + length
        while count >= 8:
            byte = (bits >> (count - 8)) & 0xFF
            out.extend((byte, 0) if byte == 0xFF else (byte,))  # byte stuffing
            count -= 8
        bits &= (1 << count) - 1

    previous = [0] * len(sampling)
    for mcu_y in range(-(-height // (8 * v_max))):
        for mcu_x in range(-(-width // (8 * h_max))):
            for c, (h, v) in enumerate(sampling):
                for y in range(mcu_y * v, mcu_y * v + v):
                    for x in range(mcu_x * h, mcu_x * h + h):  # the block's place in its component's grid
                        level = (40 + 9 * x + 13 * y) % 200 + 20 if c == 0 else 88 + (17 * (x + c) + 7 * y) % 80
                        dc = 8 * (level - 128)  # a flat block's DC coefficient, quantized by 1
                        diff, previous[c] = dc - previous[c], dc
                        size = abs(diff).bit_length()
                        put(size, 4)  # the DC table gives category k the 4-bit code k
                        if size:
                            put(diff if diff > 0 else diff + (1 << size) - 1, size)
                        put(0, 1)  # end of block: the AC table's only code
    if count:
        put((1 << (8 - count)) - 1, 8 - count)

    def segment(marker, payload):
        return bytes([0xFF, marker]) + (len(payload) + 2).to_bytes(2, "big") + payload

    n = len(sampling)
    frame = bytes([8]) + height.to_bytes(2, "big") + width.to_bytes(2, "big") + bytes([n])
    frame += b"".join(bytes([c + 1, (h << 4) | v, 0]) for c, (h, v) in enumerate(sampling))
    tables = bytes([0x00, 0, 0, 0, 12] + [0] * 12) + bytes(range(12)) + bytes([0x10, 1] + [0] * 15 + [0])
    scan = bytes([n]) + b"".join(bytes([c + 1, 0x00]) for c in range(n)) + bytes([0, 63, 0])
    return (b"\xff\xd8" + segment(0xDB, bytes([0] + [1] * 64)) + segment(0xC0, frame) + segment(0xC4, tables)
            + segment(0xDA, scan) + bytes(out) + b"\xff\xd9")


def _pillow_jpeg(width, height, subsampling=2, gray=False, **options) -> bytes:
    out = io.BytesIO()
    make_image(7, width, height, grayscale=gray).save(out, "JPEG", quality=90, subsampling=subsampling, **options)
    return out.getvalue()


def _mixed_jpegs() -> list[tuple[int, str, bytes]]:
    """Baseline JPEGs of every common layout, one smaller than 64x64 and one 4:1:1."""
    files = {"420.jpg": _pillow_jpeg(96, 80, 2), "422.jpg": _pillow_jpeg(80, 64, 1), "444.jpg": _pillow_jpeg(64, 64, 0),
             "gray.jpg": _pillow_jpeg(72, 90, gray=True), "small.jpg": _pillow_jpeg(32, 32, 2),
             "411.jpg": _dc_only_jpeg(128, 72, ((4, 1), (1, 1), (1, 1)))}
    return [(i, name, data) for i, (name, data) in enumerate(files.items())]


class _TorchvisionGpuLike(FakeGpuDecoder):
    """torchvision's GPU decoder as it behaves on nvJPEG (CUDA) or rocJPEG (ROCm), run on the CPU. rocJPEG's
    hardware path fails the call on files under 64x64 or in other subsamplings than 4:4:4, 4:2:2, 4:2:0 and
    gray, judged here by Pillow (not by the parser ``accepts`` uses)."""

    def decode_many(self, encoded):
        for data in encoded if self.library == "rocjpeg" else ():
            with Image.open(io.BytesIO(bytes(data))) as image:
                sampling = tuple((h, v) for _, h, v, _ in image.layer)
                if min(image.size) < 64 or len(sampling) == 3 and sampling not in (
                        ((1, 1), (1, 1), (1, 1)), ((2, 1), (1, 1), (1, 1)), ((2, 2), (1, 1), (1, 1))):
                    raise RuntimeError("rocJPEG: ROCJPEG_STATUS_JPEG_NOT_SUPPORTED")
        return super().decode_many(encoded)


def _torchvision_cpu(data: bytes):
    import torch
    import torchvision.io
    return torchvision.io.decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                      mode=torchvision.io.ImageReadMode.RGB)


def test_jpeg_frame_reads_size_coding_and_sampling_factors():
    for subsampling, expected in ((0, "4:4:4"), (1, "4:2:2"), (2, "4:2:0")):
        frame = gpu_decode.jpeg_frame(_pillow_jpeg(70, 65, subsampling))
        assert (frame.marker, frame.precision, frame.width, frame.height) == (0xC0, 8, 70, 65)
        assert frame.subsampling == expected
    assert gpu_decode.jpeg_frame(_pillow_jpeg(20, 30, gray=True)).subsampling == "4:0:0"
    assert gpu_decode.jpeg_frame(_pillow_jpeg(70, 65, progressive=True)).marker == 0xC2
    assert gpu_decode.jpeg_frame(_dc_only_jpeg(128, 72, ((4, 1), (1, 1), (1, 1)))).subsampling == "4:1:1"
    assert gpu_decode.jpeg_frame(_dc_only_jpeg(64, 64, ((1, 2), (1, 1), (1, 1)))).subsampling == "4:4:0"
    for not_a_frame in (b"", b"\xff\xd8", b"\x89PNG\r\n", _pillow_jpeg(16, 16)[:20]):
        assert gpu_decode.jpeg_frame(not_a_frame) is None


def test_the_handmade_4_1_1_jpeg_decodes_alike_everywhere():
    """The 4:1:1 test file is a real JPEG: Pillow, torchvision and fastload's CPU decoder agree on it."""
    data = _dc_only_jpeg(128, 72, ((4, 1), (1, 1), (1, 1)))
    with Image.open(io.BytesIO(data)) as image:
        assert [(h, v) for _, h, v, _ in image.layer] == [(4, 1), (1, 1), (1, 1)]
        pillow = np.asarray(image.convert("RGB"))
    assert pillow.std() > 20  # not one flat color
    assert np.array_equal(_torchvision_cpu(data).permute(1, 2, 0).numpy(), pillow)
    assert np.array_equal(decode_on_cpu(0, "411.jpg", data).permute(1, 2, 0).numpy(), pillow)


def test_on_cuda_torchvision_gpu_decoder_takes_every_baseline_jpeg():
    """nvJPEG: small and 4:1:1 files are decoded on the GPU with the rest, in one batched call."""
    import torch
    [backend] = gpu_decode.choose_decoder("auto", "cuda:0", backends=[lambda d: _TorchvisionGpuLike(d, "nvjpeg")])
    assert backend.name == "torchvision" and backend.description == "torchvision (nvjpeg)"
    items = _mixed_jpegs()
    assert all(backend.accepts(data) for _, _, data in items)
    assert backend.accepts(_pillow_jpeg(96, 96, progressive=True))
    on_cpu = []
    results = gpu_decode.decode_batch(items, backend, lambda i: on_cpu.append(i) or decode_on_cpu(*items[i]))
    assert backend.calls == [len(items)] and on_cpu == []
    for (_, name, data), result in zip(items, results):
        assert torch.equal(result, _torchvision_cpu(data)), name


def test_on_rocm_files_rocjpeg_refuses_are_decoded_on_the_cpu():
    """rocJPEG: the 32x32 and the 4:1:1 file never reach the GPU (no failed batch); the CPU fallback decodes
    them, and every image has torchvision's CPU decoder's pixels."""
    import torch
    [backend] = gpu_decode.choose_decoder("cuda", "cuda:0", backends=[lambda d: _TorchvisionGpuLike(d, "rocjpeg")])
    assert backend.name == "torchvision" and backend.description == "torchvision (rocjpeg)"
    items = _mixed_jpegs()
    assert {name for _, name, data in items if not backend.accepts(data)} == {"small.jpg", "411.jpg"}
    assert not backend.accepts(_pillow_jpeg(96, 96, progressive=True))  # the hardware path is baseline only
    assert not backend.accepts(_dc_only_jpeg(64, 64, ((1, 2), (1, 1), (1, 1))))  # 4:4:0
    assert backend.accepts(_pillow_jpeg(64, 64)) and not backend.accepts(_pillow_jpeg(64, 63))
    on_cpu = []
    results = gpu_decode.decode_batch(items, backend, lambda i: on_cpu.append(items[i][1]) or decode_on_cpu(*items[i]))
    assert backend.calls == [len(items) - 2] and on_cpu == ["small.jpg", "411.jpg"]
    for (_, name, data), result in zip(items, results):
        assert isinstance(result, torch.Tensor) and result.dtype == torch.uint8, name
        assert torch.equal(result, _torchvision_cpu(data)), name


def test_a_build_whose_probe_decode_fails_decodes_on_the_cpu():
    """A torchvision without a GPU JPEG decoder for this GPU: "auto" decodes on the CPU; asking for the GPU
    says why, in the probe's words. The probe runs at first use, once per device."""
    probed = []

    def probe(device):
        probed.append(str(device))
        raise RuntimeError("decode_jpegs_cuda: torchvision not compiled with nvJPEG support")
    backends = [functools.partial(gpu_decode.TorchvisionGpuDecoder, library="rocjpeg", probe=probe)]
    gpu_decode.TorchvisionGpuDecoder("cuda:0", probe=probe)
    assert probed == []  # not at construction
    assert [d.description for d in gpu_decode.choose_decoder("auto", "cuda:0", backends=backends)] == ["cpu"]
    with pytest.raises(RuntimeError, match=r"cannot decode JPEGs on a GPU here \(torchvision \(rocjpeg\): a probe "
                                           r"decode on cuda:0 failed: .*not compiled with nvJPEG support"):
        gpu_decode.choose_decoder("cuda", "cuda:0", backends=backends)
    with pytest.raises(RuntimeError, match="decoder='torchvision' is not available here: .*not compiled with nvJPEG"):
        gpu_decode.choose_decoder("auto", "cuda:0", decoder="torchvision", backends=backends)
    assert probed == ["cuda:0"]
    gpu_decode.choose_decoder("auto", "cuda:1", backends=backends)
    gpu_decode.choose_decoder("auto", "cpu", backends=backends)  # nothing to decode on a GPU: no probe
    assert probed == ["cuda:0", "cuda:1"]


def test_the_probe_checks_the_pixels_and_rocjpeg_takes_its_image():
    import torch
    data = gpu_decode.probe_jpeg()
    frame = gpu_decode.jpeg_frame(data)
    assert frame.width >= 64 and frame.height >= 64 and gpu_decode.rocjpeg_accepts(data)
    gpu_decode.check_probe_output(_torchvision_cpu(data), data)  # a correct decode passes
    garbage = gpu_decode.TorchvisionGpuDecoder(
        "cuda:0", probe=lambda device: gpu_decode.check_probe_output(torch.zeros(3, 128, 128, dtype=torch.uint8), data))
    assert "wrong pixels" in garbage.unavailable()
    default = gpu_decode.TorchvisionGpuDecoder("cuda:0")
    assert default.library == ("rocjpeg" if torch.version.hip else "nvjpeg")
    if not torch.cuda.is_available():
        assert "no GPU" in default.unavailable()


def _many_scans(scans: int, gray: bool = False) -> bytes:
    """A progressive JPEG whose last scan is repeated until it has ``scans`` (libjpeg warns and decodes it)."""
    image = Image.fromarray(np.random.default_rng(scans).integers(0, 255, (90, 120, 3), dtype=np.uint8))
    out = io.BytesIO()
    (image.convert("L") if gray else image).save(out, "JPEG", progressive=True)
    data = out.getvalue()
    last = data.rfind(b"\xff\xda")
    base = decode_module.count_scans(data)
    return data[:last] + data[last:-2] * (scans - base + 1) + b"\xff\xd9"


@pytest.mark.parametrize("gray", [False, True])
def test_scans_are_counted_in_c_and_python_alike(gray):
    files = [_many_scans(n, gray) for n in (12, 100, 101, 400)]
    files += [_pillow_jpeg(64, 48), _pillow_jpeg(64, 48, gray=True)]
    if (TESTDATA / "jpeg_zoo").is_dir():
        files += [path.read_bytes() for path in sorted((TESTDATA / "jpeg_zoo").iterdir())
                  if path.suffix.lower() in (".jpg", ".jpeg")]
    for data in files:
        for limit in (5, 100, 10_000):
            assert decode_module._count_scans(data, limit) == decode_module.count_scans(data, limit)
    assert [decode_module.count_scans(_many_scans(n, gray), 10_000) for n in (12, 100, 101, 400)] == [12, 100, 101, 400]
    assert decode_module.count_scans(_many_scans(400, gray), 100) == 101  # counting stops past the limit


def test_a_progressive_jpeg_of_too_many_scans_is_refused_naming_the_file():
    assert decode_module.MAX_SCANS == 100
    read_header(0, "fine.jpg", _many_scans(100))  # at the limit: taken
    for data in (_many_scans(101), _many_scans(101, gray=True)):
        with pytest.raises(DecodeError, match="more than 100 scans") as info:
            read_header(3, "many-scans.jpg", data)
        assert info.value.path == "many-scans.jpg"
    cmyk = io.BytesIO()  # Pillow's route (a CMYK JPEG) counts them too
    Image.new("CMYK", (40, 30)).save(cmyk, "JPEG", progressive=True)
    data = cmyk.getvalue()
    last = data.rfind(b"\xff\xda")
    with pytest.raises(DecodeError, match="more than 100 scans"):
        open_image(0, "cmyk.jpg", data[:last] + data[last:-2] * 120 + b"\xff\xd9")


def test_the_dali_and_rocal_decoders_refuse_too_many_scans():
    from fastload.compat.dali import imageops as dali_imageops
    from fastload.compat.rocal import imageops as rocal_imageops
    data = _many_scans(150)
    with pytest.raises(ValueError, match="more than 100 scans"):
        rocal_imageops.decode(data, "RGB", 1000, 1000)
    with pytest.raises(ValueError, match="more than 100 scans"):
        dali_imageops.decode(data, "RGB")
    assert rocal_imageops.decode(_many_scans(20), "RGB", 1000, 1000).shape == (90, 120, 3)


def test_gpu_decoders_refuse_lossless_by_the_frame_marker_not_by_bytes_in_metadata():
    """nvJPEG and rocJPEG refuse lossless (SOF3) JPEGs: the frame header says which a JPEG is; the same
    two bytes inside an APP segment (a thumbnail, an ICC profile) do not make one lossless."""
    decoder = FakeGpuDecoder()
    plain = _pillow_jpeg(64, 48)
    app = b"\xff\xe2" + (2 + 6).to_bytes(2, "big") + b"\xff\xc3\x00\x11\xff\xc3"
    with_bytes = plain[:2] + app + plain[2:]
    sof0 = plain.find(b"\xff\xc0")
    lossless = plain[:sof0] + b"\xff\xc3" + plain[sof0 + 2:]
    assert decoder.accepts(plain) and decoder.accepts(with_bytes)
    assert not decoder.accepts(lossless)
