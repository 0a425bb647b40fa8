"""fastload.native_sample: one JPEG's decode, resize, crop, flip and write in one GIL-free call, with the
pixels of the Pillow route (decode, Image.resize, crop, transpose) bit for bit."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from fastload import decode as decode_stage
from fastload import native_sample
from fastload.cpu_augment import transform_image, write_normalized
from fastload.rng import SampleRandom
from fastload.transforms import CenterCropGeometry, Plan, RandomResizedCropGeometry, ResizeGeometry, compile_plan

from test_normalize_parity import STATS, plan_values, torchvision_steps, torchvision_values

pytestmark = pytest.mark.skipif(native_sample._jpeg is None or not hasattr(native_sample._jpeg, "sample"),
                                reason="fastload._jpeg is not built")

FILTERS = [Image.Resampling.BILINEAR, Image.Resampling.BICUBIC, Image.Resampling.LANCZOS,
           Image.Resampling.BOX, Image.Resampling.HAMMING]


def _jpeg(rng, width: int, height: int, gray: bool) -> bytes:
    shape = (height, width) if gray else (height, width, 3)
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    if rng.random() < 0.5:  # smooth content too: resampling errors hide in noise
        pixels = np.cumsum(pixels, axis=0, dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=int(rng.integers(50, 96)), subsampling=int(rng.integers(0, 3)))
    return out.getvalue()


def _geometry(rng, kind: int):
    out_h, out_w = int(rng.integers(1, 200)), int(rng.integers(1, 200))
    if kind == 0:
        return RandomResizedCropGeometry((out_h, out_w), (0.08, 1.0), (3 / 4, 4 / 3))
    if kind == 1:
        return ResizeGeometry(int(rng.integers(1, 240)), None, (out_h, out_w) if rng.random() < 0.5 else None)
    return CenterCropGeometry((out_h, out_w))


def test_equals_the_pillow_route_on_random_images(seed):
    """Random sizes (1 to 300 pixels a side), gray and color, every filter, RandomResizedCrop, Resize (with
    and without a CenterCrop window), CenterCrop, flips, whole and DCT-reduced decodes: uint8 rows equal
    the Pillow route's pixels exactly. This also pins the pass order Pillow 13 picks (vertical first when
    it takes more than twice as many rows off as the horizontal takes columns): the other order differs."""
    rng = np.random.default_rng(seed)
    checked = 0
    for trial in range(120):
        data = _jpeg(rng, int(rng.integers(1, 300)), int(rng.integers(1, 300)), gray=trial % 6 == 0)
        geometry_kind = trial % 3
        plan_geometry = _geometry(rng, geometry_kind)
        resample = FILTERS[trial % len(FILTERS)]
        plan = Plan(geometry=plan_geometry, resample=resample, hflip_p=0.5, output_size=(1, 1), dtype=torch.uint8,
                    scale=None, shift=None, vflip_p=0.3)
        header = decode_stage.read_header(0, "x", data)
        geometry = plan.sample(header.width, header.height, SampleRandom(seed, 0, trial))
        for reduction in sorted({1, geometry.max_reduction}):
            if native_sample.steps(header, geometry, reduction) is None:
                continue  # a crop that pads: the Pillow route's alone
            decoded = decode_stage.decode(0, "x", data, decode_stage.Header(header.width, header.height), geometry,
                                          reduction)
            expected = np.asarray(transform_image(decoded, geometry, resample))
            out = np.full(expected.size + 7, 77, np.uint8)
            assert native_sample.sample(data, header, geometry, plan, reduction, out, 3,
                                        native_sample.UINT8_ROWS) is not None
            assert np.array_equal(out[3:3 + expected.size].reshape(expected.shape), expected), (trial, geometry)
            assert (out[:3] == 77).all() and (out[3 + expected.size:] == 77).all()  # nothing written outside
            checked += 1
    assert checked > 80


@pytest.mark.parametrize("kind", ["v1", "v2"])
@pytest.mark.parametrize("mean, std", STATS[:2])
def test_float_output_is_torchvisions_normalize_of_the_pillow_route(seed, kind, mean, std):
    """kind FLOAT32_PLANES writes torchvision's ToTensor (or ToDtype) + Normalize of the Pillow route's pixels,
    bit for bit, CHW, the horizontal flip folded in; fastload._normalize writes the same."""
    rng = np.random.default_rng(seed)
    plan = compile_plan(v2.Compose([v2.RandomResizedCrop((56, 48)), v2.RandomHorizontalFlip()]
                                   + torchvision_steps(kind, torch.float32, mean, std)))
    for trial in range(12):
        data = _jpeg(rng, int(rng.integers(40, 300)), int(rng.integers(40, 300)), gray=trial % 5 == 0)
        header = decode_stage.read_header(0, "x", data)
        geometry = plan.sample(header.width, header.height, SampleRandom(seed, 1, trial))
        decoded = decode_stage.decode(0, "x", data, decode_stage.Header(header.width, header.height), geometry, 1)
        decoded.image = decoded.image.copy()  # (its pixels live in the thread's scratch, which sample() reuses)
        pixels = torch.from_numpy(np.asarray(transform_image(decoded, geometry, plan.resample)).copy())
        expected = torchvision_values(kind, torch.float32, mean, std, pixels[None])[0]
        got = np.zeros(3 * 56 * 48, np.float32)
        assert native_sample.sample(data, header, geometry, plan, 1, got, 0, native_sample.FLOAT32_PLANES) is not None
        assert torch.equal(torch.from_numpy(got).view(3, 56, 48), expected)
        written = torch.empty(3, 56, 48)
        write_normalized(transform_image(decoded, geometry, plan.resample, flip=False), geometry.hflip, plan,
                         written)
        assert torch.equal(written, expected)


def test_what_it_cannot_take_goes_the_pillow_route():
    rng = np.random.default_rng(0)
    plan = Plan(geometry=CenterCropGeometry((40, 40)), resample=Image.Resampling.BILINEAR, hflip_p=0.0,
                output_size=(40, 40), dtype=torch.uint8, scale=None, shift=None)
    out = np.zeros(40 * 40 * 3, np.uint8)
    small = _jpeg(rng, 20, 30, gray=False)  # a CenterCrop larger than the image pads
    header = decode_stage.read_header(0, "x", small)
    assert native_sample.sample(small, header, plan.sample(20, 30, SampleRandom(0, 0, 0)), plan, 1, out, 0,
                                native_sample.UINT8_ROWS) is None
    png = io.BytesIO()
    Image.new("RGB", (60, 60)).save(png, "PNG")
    header = decode_stage.read_header(0, "x", png.getvalue())
    assert native_sample.sample(png.getvalue(), header, plan.sample(60, 60, SampleRandom(0, 0, 0)), plan, 1, out, 0,
                                native_sample.UINT8_ROWS) is None
    cut = _jpeg(rng, 200, 200, gray=False)[:3000]  # truncated: libjpeg warns, Pillow judges
    header = decode_stage.read_header(0, "x", cut)
    assert native_sample.sample(cut, header, plan.sample(200, 200, SampleRandom(0, 0, 0)), plan, 1, out, 0,
                                native_sample.UINT8_ROWS) is None
    nearest = Plan(geometry=CenterCropGeometry((40, 40)), resample=Image.Resampling.NEAREST, hflip_p=0.0,
                   output_size=(40, 40), dtype=torch.uint8, scale=None, shift=None)
    assert not native_sample.available(nearest) and native_sample.available(plan)


def test_bad_arguments_are_refused_not_written_past():
    rng = np.random.default_rng(1)
    data = _jpeg(rng, 64, 48, gray=False)
    scratch, out = bytearray(1 << 20), np.zeros(10, np.uint8)
    args = (8, (0, 0, 64, 48), (0.0, 0.0, 64.0, 48.0), (32, 24), (0, 0, 32, 24), 2, False, False, 0, b"", 0)
    with pytest.raises(ValueError, match="output too small"):
        native_sample._jpeg.sample(data, scratch, out, *args)
    big = np.zeros(32 * 24 * 3 * 4, np.uint8)
    with pytest.raises(ValueError, match="3 x 256"):  # float planes need each channel's 256 values
        native_sample._jpeg.sample(data, scratch, big, *args[:8], 1, bytes(3 * 256 * 4 - 4), 0)
    # a box past the region, a window past the resized image, the nearest filter, a negative offset
    for index, bad in ((2, (0.0, 0.0, 65.0, 48.0)), (4, (0, 0, 33, 24)), (5, 0), (10, -1)):
        wrong = list(args)
        wrong[index] = bad
        with pytest.raises(ValueError):
            native_sample._jpeg.sample(data, scratch, big, *wrong)


def test_runs_without_the_gil():
    """While one thread decodes and resizes a large JPEG natively, another keeps running Python."""
    rng = np.random.default_rng(2)
    data = _jpeg(rng, 2000, 1500, gray=False)
    scratch, out = bytearray(64 << 20), np.zeros(1000 * 750 * 3, np.uint8)
    args = (8, (0, 0, 2000, 1500), (0.0, 0.0, 2000.0, 1500.0), (1000, 750), (0, 0, 1000, 750),
            Image.Resampling.LANCZOS, False, False, 0, b"", 0)
    started = time.perf_counter()
    native_sample._jpeg.sample(data, scratch, out, *args)
    alone = time.perf_counter() - started
    ticks, done = [0], threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        started = time.perf_counter()
        for _ in range(3):
            native_sample._jpeg.sample(data, scratch, out, *args)
        elapsed = time.perf_counter() - started
    finally:
        done.set()
        counter.join()
    # holding the GIL, the counter would advance only at switch intervals; released, it runs throughout
    assert ticks[0] > 20_000 * elapsed, (ticks[0], elapsed, alone)


@pytest.mark.parametrize("kind", [native_sample.UINT8_ROWS, native_sample.FLOAT32_PLANES])
def test_load_equals_the_separate_steps_on_files(tmp_path, seed, kind):
    """``load`` (read, header, draw, geometry and decode in one call) writes what read_header, Plan.draw,
    native_sample.steps and sample write, for random sizes, gray and color, every filter, whole and
    DCT-reduced decodes, and seeds whose first sum passes 2**64."""
    rng = np.random.default_rng(seed)
    scale, shift = (1 / 58.395, 1 / 57.12, 1 / 57.375), (-2.1179, -2.0357, -1.8044)
    # torchvision's ops (v1's first step here) on odd trials, DALI's and rocAL's affine map on even ones
    normalization = plan_values("v1", torch.float32, *STATS[1])
    for trial in range(60):
        path = tmp_path / f"{trial}.jpg"
        path.write_bytes(_jpeg(rng, int(rng.integers(1, 700)), int(rng.integers(1, 700)), gray=trial % 6 == 0))
        out_h, out_w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        plan = Plan(geometry=RandomResizedCropGeometry((out_h, out_w), (0.08, 1.0), (3 / 4, 4 / 3)),
                    resample=FILTERS[trial % len(FILTERS)], hflip_p=0.5, output_size=(out_h, out_w),
                    dtype=torch.float32, scale=scale, shift=shift, vflip_p=0.25,
                    normalization=normalization if trial % 2 else None)
        dct = trial % 3 != 0
        stream = (int(rng.choice([seed, 2**64 - 3])), trial % 4, trial, trial % 2)
        settings = native_sample.load_settings(plan, kind, None, dct)
        size = 3 * out_h * out_w * (4 if kind else 1)
        got, expected = np.full(size + 5, 7, np.uint8), np.full(size + 5, 7, np.uint8)
        assert isinstance(native_sample.load(str(path), stream, settings, got, 5), tuple)
        data = path.read_bytes()
        header = decode_stage.read_header(0, str(path), data)
        geometry = plan.draw(header.width, header.height, *stream)
        reduction = geometry.max_reduction if dct else 1
        assert native_sample.sample(data, header, geometry, plan, reduction, expected, 5, kind) is not None
        assert np.array_equal(got, expected), (trial, geometry, reduction)


def test_load_hands_back_what_it_does_not_take(tmp_path):
    """The file's bytes (the Pillow route then takes, or refuses, the sample) for what is not a JPEG it
    decodes, is over a limit or made libjpeg warn; None for what it could not read (the caller's read says
    why)."""
    rng = np.random.default_rng(3)
    plan = Plan(geometry=RandomResizedCropGeometry((32, 32), (0.08, 1.0), (3 / 4, 4 / 3)),
                resample=Image.Resampling.BILINEAR, hflip_p=0.5, output_size=(32, 32), dtype=torch.uint8,
                scale=None, shift=None)
    out = np.zeros(32 * 32 * 3, np.uint8)
    png, cmyk = io.BytesIO(), io.BytesIO()
    Image.new("RGB", (60, 60)).save(png, "PNG")
    Image.new("CMYK", (60, 60)).save(cmyk, "JPEG")
    progressive = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (50, 60, 3), dtype=np.uint8)).save(progressive, "JPEG", progressive=True)
    many = progressive.getvalue()
    last = many.rfind(b"\xff\xda")
    files = {"png.jpg": png.getvalue(), "cmyk.jpg": cmyk.getvalue(), "cut.jpg": _jpeg(rng, 300, 300, False)[:3000],
             "scans.jpg": many[:last] + many[last:-2] * 120 + b"\xff\xd9", "big.jpg": _jpeg(rng, 120, 100, False)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    settings = native_sample.load_settings(plan, native_sample.UINT8_ROWS, 100 * 100, True)
    for name, data in files.items():
        assert native_sample.load(str(tmp_path / name), (0, 0, 0, 0), settings, out, 0) == data, name
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "folder.jpg").mkdir()
    for name in ("empty.jpg", "folder.jpg", "missing.jpg"):
        assert native_sample.load(str(tmp_path / name), (0, 0, 0, 0), settings, out, 0) is None, name
    unlimited = native_sample.load_settings(plan, native_sample.UINT8_ROWS, None, True)
    assert isinstance(native_sample.load(str(tmp_path / "big.jpg"), (0, 0, 0, 0), unlimited, out, 0), tuple)
    assert native_sample.load_settings(Plan(geometry=CenterCropGeometry((40, 40)), resample=Image.Resampling.BILINEAR,
                                            hflip_p=0.0, output_size=(40, 40), dtype=torch.uint8, scale=None,
                                            shift=None), native_sample.UINT8_ROWS, None, True) is None


def test_load_refuses_a_table_of_another_size(tmp_path):
    """Float planes need each channel's 256 values: a shorter table is a ValueError, nothing is written."""
    plan = compile_plan(v2.Compose([v2.RandomResizedCrop(16)] + torchvision_steps("v2", torch.float32, *STATS[0])))
    settings = native_sample.load_settings(plan, native_sample.FLOAT32_PLANES, None, True)
    path = tmp_path / "a.jpg"
    path.write_bytes(_jpeg(np.random.default_rng(3), 40, 30, gray=False))
    out = np.zeros(3 * 16 * 16, np.float32)
    assert isinstance(native_sample.load(str(path), (0, 0, 0, 0), settings, out, 0), tuple)
    written = out.copy()
    out[:] = 0
    with pytest.raises(ValueError, match="3 x 256"):
        native_sample.load(str(path), (0, 0, 0, 0), settings[:-1] + (settings[-1][:-4],), out, 0)
    assert not out.any() and written.any()
