"""fastload.compat.rocal's operators against RPP's own golden outputs: the reference files of RPP's QA test
suite (ROCm/rpp f1d37473, utilities/test_suite; see tests/data/rpp/SOURCES.md), computed by RPP from the
same three JPEGs with the same parameters. The images go through rocAL's pipeline as a script would write
it: fn.readers.file, fn.decoders.image, the operator; each output compared in its image's region."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import fastload.compat.rocal.fn as fn
from fastload.compat.rocal import imageops
from fastload.compat.rocal.pipeline import Pipeline

DATA = Path(__file__).resolve().parents[1] / "data" / "rpp"
IMAGES = {"1_img50x50": 50, "2_img100x100": 100, "3_img150x150": 150}

# RPP's QA parameters (HOST/Tensor_image_host.cpp), as rocAL's operators take them
EXACT = {
    "brightness": lambda x: fn.brightness(x, brightness=1.75, brightness_shift=50.0),
    "gamma_correction": lambda x: fn.gamma_correction(x, gamma=1.9),
    "contrast": lambda x: fn.contrast(x, contrast=2.96, contrast_center=128.0),
    "exposure": lambda x: fn.exposure(x, exposure=1.4),
    "color_twist": lambda x: fn.color_twist(x, brightness=1.4, contrast=0.0, hue=60.0, saturation=1.9),
    "color_temperature": lambda x: fn.color_temp(x, adjustment_value=70),
    "flip": lambda x: fn.flip(x, horizontal=1),
}
# within a level: (operator, share of values that may differ by one). rotate: the decode or float order
# flips a rounding (3 of 105,000 values); pixelate: RPP's bilinear shrink to 12.5 % rounds its few
# intermediate pixels otherwise, each then copied to an 8x8 block (40 % of the 50x50 image's values);
# vignette: RPP's own header expects 5 % mismatches between its host and HIP outputs (its golden files
# match neither fast_exp_avx nor an exact exp closer than 6.2 %).
NEAR = {
    "rotate": (lambda x: fn.rotate(x, angle=50.0), 0.001),
    "pixelate": (lambda x: fn.pixelate(x, pixelate_percent=87.5), 0.45),
    "vignette": (lambda x: fn.vignette(x, vignette=6.0), 0.07),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The three QA images as one class of a folder rocAL's file reader reads (sorted: RPP's order)."""
    root = tmp_path_factory.mktemp("rpp") / "images"
    (root / "class").mkdir(parents=True)
    for name in IMAGES:
        shutil.copy(DATA / f"{name}.jpg", root / "class" / f"{name}.jpg")
    return str(root)


def outputs(folder: str, operator) -> list[np.ndarray]:
    """The operator's output for each image, cut to the image's region (rocAL's buffers are the largest)."""
    pipe = Pipeline(batch_size=3, num_threads=1, seed=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=folder)
        pipe.set_outputs(operator(fn.decoders.image(jpegs, file_root=folder)))
    pipe.build()
    (batch,) = pipe.run()
    array = batch.numpy() if hasattr(batch, "numpy") else np.asarray(batch)
    return [np.ascontiguousarray(array[k, :size, :size]) for k, size in enumerate(IMAGES.values())]


@pytest.mark.parametrize("name", EXACT)
def test_bit_for_bit_with_rpps_golden_output(folder, name):
    golden = json.loads((DATA / "golden_sha256.json").read_text())[name]
    for image, out in zip(IMAGES, outputs(folder, EXACT[name])):
        assert out.dtype == np.uint8 and out.shape == (IMAGES[image], IMAGES[image], 3)
        assert hashlib.sha256(out.tobytes()).hexdigest() == golden[image], f"{name}: {image} differs from RPP's"


@pytest.mark.parametrize("name", NEAR)
def test_within_a_level_of_rpps_golden_output(folder, name):
    operator, share = NEAR[name]
    for image, out in zip(IMAGES, outputs(folder, operator)):
        golden = np.asarray(Image.open(DATA / f"{name}_{image}.png")).astype(int)
        diff = np.abs(out.astype(int) - golden)
        assert diff.max() <= 1, f"{name}: {image}: {diff.max()} levels off RPP's"
        assert (diff > 0).mean() <= share, f"{name}: {image}: {(diff > 0).mean():.2%} of values differ"


def test_blend_is_bit_for_bit_rpps():
    """fn.blend's arithmetic (imageops.blend) on RPP's two QA image sets, ratio 0.4 as its QA case (a rocAL
    pipeline reads one folder, so the second set goes in directly here)."""
    import torch
    golden = json.loads((DATA / "golden_sha256.json").read_text())["blend"]
    for image in IMAGES:
        first, second = (torch.from_numpy(np.asarray(Image.open(DATA / f"{prefix}{image}.jpg").convert("RGB")).copy())
                         for prefix in ("", "second_"))
        out = imageops.as_output(imageops.blend(first, second, 0.4), torch.uint8).numpy()
        assert hashlib.sha256(out.tobytes()).hexdigest() == golden[image], f"blend: {image} differs from RPP's"
