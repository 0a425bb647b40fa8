"""fastload.compat.dali.auto_aug against real DALI 2.4's ``nvidia.dali.auto_aug`` on the CPU.

Per augmentation: every augmentation of DALI's suite -- with its default range and the ranges the
AutoAugment, RandAugment and TrivialAugment suites give it -- called with per-sample magnitude bins and
signs (``core.signed_bin`` of fed values), gives DALI's pixels exactly (tolerance 0) on random images
of awkward sizes and on two-frame videos (FHWC). ``core.select`` picks the augmentation DALI's does per
sample. Distributions: policies whose augmentations write down what ran (which, in which order, at
which signed magnitude) run over 600 samples in both; each outcome's frequency agrees with DALI's within
0.065 (over 4 standard deviations of the difference of two such frequencies), and with the exact
probability where it is simple (TrivialAugment).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import fastload.compat.dali as ours
from fastload.compat.dali.auto_aug import augmentations as our_augs  # noqa: F401  (imports the package)

from conftest import run_dali_graph

pytestmark = pytest.mark.usefixtures("quiet_iterators")

rng = np.random.default_rng(39)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3), (8, 8, 3)]]
IMAGES[3][:, :, 1] = 77  # a flat channel (auto_contrast leaves it, equalize keeps it)
SHAPES = [np.array(im.shape, dtype=np.int32) for im in IMAGES]
BINS = [np.array(b, dtype=np.int32) for b in (0, 4, 10, 7)]
SIGNS = [np.array(s, dtype=np.int32) for s in (0, 1, 1, 0)]


def auto_aug(mod, name):
    return importlib.import_module(f"{mod.__name__}.auto_aug.{name}")


def run(mod, images, graph, conditionals=False, batch=None, layout="HWC"):
    return run_dali_graph(mod, images, graph, layout, seed=7, conditionals=conditionals, batch=batch)


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


VIDEOS = [np.stack([im, im[::-1, ::-1]]) for im in IMAGES]  # FHWC: two frames each


@pytest.mark.parametrize("kind", ["images", "videos"])
def test_every_augmentation_matches_dali(dali, kind):
    samples = IMAGES if kind == "images" else VIDEOS

    def graph(mod, x):
        core = auto_aug(mod, "core")
        bins, signs, shapes = fed(mod, BINS), fed(mod, SIGNS), fed(mod, SHAPES)
        outs = []
        for _, aug, extra in variants(mod):
            extra = {k: (shapes if v == "fed" else v) for k, v in extra.items()}
            outs.append(aug(x, magnitude_bin=core.signed_bin(bins, random_sign=signs), num_magnitude_bins=11,
                            **extra))
        return tuple(outs)
    layout = "HWC" if kind == "images" else "FHWC"
    theirs, mine = run(dali, samples, graph, layout=layout), run(ours, samples, graph, layout=layout)
    names = [name for name, _, _ in variants(ours)]
    for name, a_out, b_out in zip(names, theirs, mine):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (name, i, a.dtype, b.dtype, a.shape, b.shape)
            diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
            assert diff.max() == 0, f"{name}, sample {i}: {int((diff > 0).sum())} values differ by up to {diff.max()}"


def test_select_runs_the_augmentation_dali_selects(dali):
    indices = [np.array(i, dtype=np.int32) for i in (2, 0, 1, 2)]

    def graph(mod, x):
        a, core = auto_aug(mod, "augmentations"), auto_aug(mod, "core")
        bins, signs, idx = fed(mod, BINS), fed(mod, SIGNS), fed(mod, indices)
        return core.select([a.invert, a.solarize, a.rotate], idx, x,
                           magnitude_bin=core.signed_bin(bins, random_sign=signs), num_magnitude_bins=11)
    theirs, mine = run(dali, IMAGES, graph, conditionals=True), run(ours, IMAGES, graph, conditionals=True)
    for a, b in zip(theirs[0], mine[0]):
        np.testing.assert_array_equal(a, b)


def test_policies_run_on_images():
    """auto_augment (each policy), rand_augment and trivial_augment_wide build and run, with relative
    translations (``shape``) and absolute ones; outputs are the inputs' shape and type. (Real DALI runs
    the same calls too, but takes 30 s to build them: its conditionals; the draws are compared below.)"""
    def graph(mod, x):
        aa, ra, ta = (auto_aug(mod, n) for n in ("auto_augment", "rand_augment", "trivial_augment"))
        shapes = fed(mod, SHAPES * 4)
        return (aa.auto_augment(x, seed=3), aa.auto_augment(x, "reduced_image_net"),
                aa.auto_augment(x, "svhn", shape=shapes, fill_value=None),
                aa.auto_augment_image_net(x, max_translate_abs=(5, 7), interp_type=mod.types.INTERP_NN),
                aa.auto_augment(x, "reduced_cifar10", shape=shapes, max_translate_rel=0.3),
                ra.rand_augment(x, n=2, m=9), ra.rand_augment(x, n=1, m=30, shape=shapes, excluded=["rotate"]),
                ra.rand_augment(x, n=3, m=5, monotonic_mag=False, fill_value=0),
                ta.trivial_augment_wide(x), ta.trivial_augment_wide(x, num_magnitude_bins=5, shape=shapes))
    outs = run(ours, IMAGES * 4, graph, conditionals=True)
    for out in outs:
        for image, sample in zip(IMAGES * 4, out):
            assert sample.dtype == np.uint8 and sample.shape == image.shape
    assert any(not np.array_equal(a, b) for out in outs for a, b in zip(IMAGES * 4, out))


def _markers(mod):
    """Augmentations of a float32 value that write down what ran: value * 100 + 10 * id + parameter."""
    core = auto_aug(mod, "core")

    @core.augmentation(mag_range=(1, 3), randomly_negate=True)
    def first(data, m):
        return data * 100 + 10 + m

    @core.augmentation(mag_range=(4, 6))
    def second(data, m):
        return data * 100 + 20 + m

    @core.augmentation
    def third(data, _):
        return data * 100 + 30
    return first, second, third, core


def _frequencies(mod, graph, batch=600):
    values = [np.zeros((), dtype=np.float32)] * batch

    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=11, enable_conditionals=True)
    def pipe():
        return graph(mod, mod.fn.external_source(source=lambda: values, batch=True))
    p = pipe()
    p.build()
    out = p.run()[0]
    counts = {}
    for i in range(batch):
        key = round(float(np.array(out.at(i))), 3)
        counts[key] = counts.get(key, 0) + 1
    return {key: count / batch for key, count in counts.items()}


def _close(theirs: dict, mine: dict, expected: dict | None = None):
    for key in set(theirs) | set(mine) | set(expected or {}):
        assert abs(theirs.get(key, 0) - mine.get(key, 0)) < 0.065, (key, theirs.get(key), mine.get(key))
        if expected is not None:
            assert abs(expected.get(key, 0) - mine.get(key, 0)) < 0.055, (key, expected.get(key), mine.get(key))


def test_trivial_augment_draws_as_dali(dali):
    def graph(mod, x):
        first, second, third, _ = _markers(mod)
        return auto_aug(mod, "trivial_augment").apply_trivial_augment([first, second, third], x, num_magnitude_bins=3)
    expected = {}
    for m in (1, 2, 3):
        for sign in (1, -1):
            expected[10 + sign * m] = 1 / 18
    for m in (4, 5, 6):
        expected[20 + m] = 1 / 9
    expected[30] = 1 / 3
    _close(_frequencies(dali, graph), _frequencies(ours, graph), expected)


def test_rand_augment_draws_as_dali(dali):
    def graph(mod, x):
        first, second, third, _ = _markers(mod)
        return auto_aug(mod, "rand_augment").apply_rand_augment([first, second, third], x, n=2, m=1,
                                                                num_magnitude_bins=3)
    _close(_frequencies(dali, graph), _frequencies(ours, graph))


def test_auto_augment_draws_as_dali(dali):
    def graph(mod, x):
        first, second, third, core = _markers(mod)
        policy = core.Policy("markers", 3, [[(first, 0.3, 2), (second, 0.8, 0)], [(third, 0.5, None)],
                                            [(second, 1.0, 2), (first, 0.6, 1), (third, 0.9, None)]])
        return auto_aug(mod, "auto_augment").apply_auto_augment(policy, x, seed=5)
    _close(_frequencies(dali, graph), _frequencies(ours, graph))


def test_errors_and_refusals_as_dali(dali):
    for mod in (dali, ours):
        ra, aa = auto_aug(mod, "rand_augment"), auto_aug(mod, "auto_augment")
        with pytest.raises(Exception, match="magnitude bin `m` must be an integer"):
            run(mod, IMAGES, lambda mod, x: ra.rand_augment(x, n=2, m=31), conditionals=True)
        with pytest.raises(Exception, match="does not contain augmentation with this name"):
            run(mod, IMAGES, lambda mod, x: ra.rand_augment(x, n=2, m=3, excluded=["warp"]), conditionals=True)
        with pytest.raises(Exception, match="`max_translate_rel` cannot be used without image shapes"):
            run(mod, IMAGES, lambda mod, x: aa.auto_augment(x, max_translate_rel=0.5), conditionals=True)
    with pytest.raises(NotImplementedError, match="nvidia.dali.auto_aug.warp is not supported"):
        ours.auto_aug.warp
    floats = [im.astype(np.float32) for im in IMAGES]
    with pytest.raises(NotImplementedError, match="auto_aug invert of torch.float32 images is not supported"):
        run(ours, floats, lambda mod, x: auto_aug(mod, "augmentations").invert(x))


def test_run_aliases_nvidia_dali_auto_aug():
    """``python -m fastload.compat.run`` resolves ``nvidia.dali.auto_aug.*`` to fastload's modules (asked of
    its finder directly: installing it here would hide the real DALI from the other tests)."""
    from fastload.compat import run as alias
    finder = alias.AliasFinder()
    for name in ("auto_aug", "auto_aug.core", "auto_aug.trivial_augment", "auto_aug.augmentations"):
        target = finder.find_spec(f"nvidia.dali.{name}").loader.target
        assert target == f"fastload.compat.dali.{name}"
        assert importlib.import_module(target).__name__ == target
