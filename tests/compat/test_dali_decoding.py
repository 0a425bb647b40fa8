"""fastload.compat.dali.decoding: fn.decoders.image_slice's window decoding.

A window of a JPEG that libjpeg decodes directly is decoded alone (``decode_window``); everything else is
decoded whole and cut. Where the whole decode gives pixels the window's are the same; where it refuses
the file, the window is refused too unless it lies above the damage (DALI's ROI decoding also gives those
pixels). Checked on random JPEGs of every chroma subsampling, gray ones and ones with an EXIF orientation,
random windows (Hypothesis), and on every file of the odd-image zoo. Against real DALI: image_slice over
zoo files (gray, restart markers, Adobe RGB, 16-bit tables, rotated, 1x1) and the top of a truncated one.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import fastload.compat.dali as ours
from fastload.compat.dali import decoding

from conftest import TESTDATA

ZOO = TESTDATA / "jpeg_zoo"
KINDS = ("RGB", "BGR", "GRAY")


def cut_window(start, size):
    def window(shape):
        if any(start[d] < 0 or size[d] < 0 or start[d] + size[d] > shape[d] for d in range(3)):
            raise ValueError("out of bounds")
        return start, size
    return window


def whole_then_cut(data: bytes, kind: str, window) -> torch.Tensor:
    image = decoding.decode(data, kind)
    start, size = window(tuple(image.shape))
    return image[start[0]:start[0] + size[0], start[1]:start[1] + size[1], start[2]:start[2] + size[2]]


def outcome(call):
    try:
        return call()
    except ValueError as error:
        return type(error)


def assert_same_outcome(data: bytes, kind: str, window, what: str, damaged_below: bool = False) -> None:
    """The window's pixels are the whole decode's cut; a refusal is the same refusal, except that a window
    above the damage of a file the whole decode refuses may be decoded (``damaged_below``)."""
    ours_ = outcome(lambda: decoding.decode_window(data, kind, window))
    whole = outcome(lambda: whole_then_cut(data, kind, window))
    if isinstance(whole, torch.Tensor):
        assert isinstance(ours_, torch.Tensor), what
        assert ours_.shape == whole.shape and ours_.dtype == torch.uint8 and ours_.is_contiguous(), what
        assert torch.equal(ours_, whole), what
    elif not (damaged_below and isinstance(ours_, torch.Tensor)):
        assert ours_ is whole, what


@st.composite
def jpegs(draw):
    height, width = draw(st.integers(1, 70)), draw(st.integers(1, 70))
    gray = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 32 - 1))
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).convert("L") if gray else Image.fromarray(pixels)
    options = {"quality": draw(st.integers(30, 100))}
    if not gray:
        options["subsampling"] = draw(st.sampled_from((0, 1, 2)))  # 4:4:4, 4:2:2, 4:2:0
    if draw(st.booleans()):
        exif = Image.Exif()
        exif[0x0112] = draw(st.integers(1, 8))
        options["exif"] = exif.tobytes()
    out = io.BytesIO()
    image.save(out, "JPEG", **options)
    return out.getvalue()


@st.composite
def windows(draw, limit=80):
    top, left = draw(st.integers(0, limit)), draw(st.integers(0, limit))
    return [top, left, 0], [draw(st.integers(0, limit)), draw(st.integers(0, limit)), 3]


@settings(max_examples=150, deadline=None)
@given(jpegs(), windows(), st.sampled_from(KINDS))
def test_a_window_is_the_whole_decode_cut(data, where, kind):
    start, size = where
    if kind == "GRAY":
        size = [size[0], size[1], 1]
    assert_same_outcome(data, kind, cut_window(start, size), f"{kind} {start} {size}")


@pytest.mark.skipif(not ZOO.is_dir(), reason=f"no odd-image zoo at {ZOO}")
@pytest.mark.parametrize("kind", KINDS)
def test_every_zoo_file_gives_the_whole_decodes_window_or_its_refusal(kind):
    channels = 1 if kind == "GRAY" else 3
    for path in sorted(ZOO.iterdir()):
        data = path.read_bytes()
        try:
            height, width = decoding.decode(data, kind).shape[:2]
            refused = False
        except ValueError:
            height, width, refused = 9, 9, True
        for start, size in (((0, 0), (height, width)), ((height // 3, width // 4), (height // 2, width // 2)),
                            ((height - 1, width - 1), (1, 1)), ((1, 0), (max(0, height - 2), width))):
            window = cut_window([*start, 0], [*size, channels])
            assert_same_outcome(data, kind, window, f"{path.name} {kind} {start} {size}", damaged_below=refused)


ZOO_FOR_DALI = ("jd__grayscale_16x24_sampling2x2.jpg", "jd__restarts.jpg", "jd__rgb.jpg", "jd__jpg-size-1x1.jpg",
                "jd__jpg-size-33x33.jpg", "pil__hopper_16bit_qtables.jpg", "pil__hopper_orientation_6.jpg",
                "pil__hopper_gray.jpg", "ljt__testorig.jpg", "pil__icc_profile_big.jpg")


@pytest.mark.skipif(not ZOO.is_dir(), reason=f"no odd-image zoo at {ZOO}")
def test_image_slice_of_odd_jpegs_matches_dali(dali):
    files = [np.frombuffer((ZOO / name).read_bytes(), np.uint8) for name in ZOO_FOR_DALI]
    anchors = [np.float32([0.1 * (i % 4), 0.05 * (i % 3)]) for i in range(len(files))]
    shapes = [np.float32([0.5 + 0.05 * (i % 5), 0.6]) for i in range(len(files))]

    def outputs(mod, files, anchors, shapes):
        @mod.pipeline_def(batch_size=len(files), num_threads=1, device_id=None, seed=3)
        def pipe():
            fn = mod.fn
            data = fn.external_source(source=lambda: files, batch=True)
            anchor = fn.external_source(source=lambda: anchors, batch=True)
            shape = fn.external_source(source=lambda: shapes, batch=True)
            return (fn.decoders.image_slice(data, anchor, shape),
                    fn.decoders.image_slice(data, anchor, shape, output_type=mod.types.GRAY))
        p = pipe()
        p.build()
        return [[np.array(out.at(i)) for i in range(len(files))] for out in p.run()]

    batch = (files, anchors, shapes)
    for k, (theirs, mine) in enumerate(zip(outputs(dali, *batch), outputs(ours, *batch))):
        for name, a, b in zip(ZOO_FOR_DALI, theirs, mine):
            assert a.shape == b.shape, (name, k, a.shape, b.shape)
            np.testing.assert_array_equal(a, b, err_msg=f"{name}, output {k}")

    # a JPEG cut short (no end marker; its last rows missing): the window above the cut, as DALI decodes it
    truncated = [np.frombuffer((ZOO / "its__32d08f4a5eb10332506ebedbb9bc7257.jpg").read_bytes(), np.uint8)]
    window = ([np.float32([0.1, 0.2])], [np.float32([0.3, 0.25])])
    theirs, mine = outputs(dali, truncated, *window)[0][0], outputs(ours, truncated, *window)[0][0]
    assert theirs.shape == mine.shape
    np.testing.assert_array_equal(theirs, mine)
