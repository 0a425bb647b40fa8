"""fastload.compat.dali.noise against real DALI 2.4's CPU operators.

DALI's generator cannot be matched, so: types, shapes and layouts are DALI's exactly, for fn.random.normal
(and fn.normal_distribution), fn.random.beta, fn.random.choice and fn.noise.{gaussian, salt_and_pepper, shot};
what is deterministic is DALI's exactly (tolerance 0: gaussian with stddev=0 -- identity at mean 0, +1 at
mean 0.5 --, salt_and_pepper with prob 0 (identity) and prob 1 (all salt or all pepper, C++-converted values),
shot with factor 0 (zeros) and on negative values (0)); distributions are checked on thousands of values
from fixed seeds (mean, spread, frequencies within the tolerances stated per check), and the same seed gives
the same values.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph

rng = np.random.default_rng(7)
SHAPES = [(13, 17, 3), (24, 9, 3), (31, 40, 3)]
U8 = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in SHAPES]


def both(graph, images=U8, layout="HWC", seed=1):
    dali = import_dali()
    return (run_dali_graph(dali, images, graph, layout, seed=seed),
            run_dali_graph(ours, images, graph, layout, seed=seed))


def assert_like(graph, images=U8, layout="HWC"):
    """Same outputs' types and shapes as DALI's; returns (DALI's, ours)."""
    theirs, mine = both(graph, images, layout)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert (a.dtype, a.shape) == (b.dtype, b.shape), (k, i, a.dtype, b.dtype, a.shape, b.shape)
    return theirs, mine


def assert_exact(graph, images=U8, layout="HWC"):
    theirs, mine = assert_like(graph, images, layout)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            np.testing.assert_array_equal(b, a, err_msg=f"output {k} sample {i}")


def test_random_types_and_shapes_match_dali():
    def graph(mod, x):
        fn, t = mod.fn, mod.types
        return (fn.random.normal(), fn.random.normal(shape=[2, 3]), fn.random.normal(shape=4), fn.random.normal(x),
                fn.random.normal(dtype=t.FLOAT64), fn.random.normal(shape=[5], mean=100, stddev=3, dtype=t.UINT8),
                fn.random.normal(x, dtype=t.INT16), fn.normal_distribution(shape=[3]),
                fn.random.beta(), fn.random.beta(x, alpha=2, beta=0.5), fn.random.beta(shape=[7], dtype=t.FLOAT64),
                fn.random.choice(5), fn.random.choice(5, shape=[6]), fn.random.choice([3, 7, 9], p=[0.1, 0.1, 0.8],
                                                                                      shape=[4]),
                fn.random.choice([0.5, 1.5]), fn.random.choice(np.array([1, 2, 3], np.uint8), shape=[2, 2]),
                fn.random.choice(5, x), fn.random.choice(np.array([[1, 2], [3, 4], [5, 6]], np.int32), shape=[4]))
    assert_like(graph)


def test_random_distributions_and_determinism():
    def graph(mod, x):
        fn, t = mod.fn, mod.types
        return (fn.random.normal(shape=[4000], mean=2.0, stddev=3.0), fn.random.beta(shape=[4000], alpha=2, beta=5),
                fn.random.choice([3, 7, 9], p=[0.2, 0.3, 0.5], shape=[4000]),
                fn.random.normal(shape=[4000], stddev=300, dtype=t.INT8), fn.random.choice(4, shape=[4000]))
    theirs, mine = assert_like(graph, U8[:2])
    for values in (theirs, mine):  # DALI's too: the tolerances hold for both generators
        normal, beta, choice, saturated, uniform = (np.concatenate(out) for out in values)
        assert abs(normal.mean() - 2.0) < 0.1 and abs(normal.std() - 3.0) < 0.1
        assert abs(beta.mean() - 2 / 7) < 0.01 and abs(beta.var() - 10 / 392) < 0.003 and 0 < beta.min()
        freq = [np.mean(choice == v) for v in (3, 7, 9)]
        assert np.allclose(freq, [0.2, 0.3, 0.5], atol=0.02), freq
        # P(300 z >= 126.5) = 0.337 at each end
        assert abs(np.mean(saturated == 127) - 0.337) < 0.02 and abs(np.mean(saturated == -128) - 0.337) < 0.02
        assert set(np.unique(uniform)) == {0, 1, 2, 3} and abs(uniform.mean() - 1.5) < 0.05
    again = run_dali_graph(ours, U8[:2], graph, seed=1)
    other = run_dali_graph(ours, U8[:2], graph, seed=2)
    for a_out, b_out, c_out in zip(mine, again, other):
        assert all(np.array_equal(a, b) for a, b in zip(a_out, b_out))
        assert not all(np.array_equal(a, c) for a, c in zip(a_out, c_out))
    assert not np.array_equal(mine[0][0], mine[0][1])  # each sample draws its own


def test_random_per_sample_arguments():
    """mean, a (choice's pool) and shape given per sample."""
    means = [np.array(m, dtype=np.float32) for m in (-50.0, 50.0)]
    pools = [np.array([1, 2], np.int16), np.array([5, 6, 7], np.int16)]
    shapes = [np.array([2, 3], np.int32), np.array([4, 1], np.int32)]

    def graph(mod, x):
        fn = mod.fn
        mean = fn.external_source(source=lambda: means, batch=True)
        pool = fn.external_source(source=lambda: pools, batch=True)
        shape = fn.external_source(source=lambda: shapes, batch=True)
        return (fn.random.normal(shape=[500], mean=mean), fn.random.choice(pool, shape=[50]),
                fn.random.beta(shape=shape), fn.random.choice(3, shape=shape))
    theirs, mine = assert_like(graph, U8[:2])
    for normal, choice, _, _ in (theirs, mine):
        assert abs(normal[0].mean() + 50) < 0.3 and abs(normal[1].mean() - 50) < 0.3
        assert set(choice[0]) == {1, 2} and set(choice[1]) == {5, 6, 7}


TYPED = [U8, [im.astype(np.int8) for im in U8], [im.astype(np.int16) * 100 - 12800 for im in U8],
         [im.astype(np.uint16) * 250 for im in U8], [im.astype(np.int32) * 1000 for im in U8],
         [im.astype(np.float32) / 7 for im in U8]]


@pytest.mark.parametrize("images", TYPED, ids=lambda images: str(images[0].dtype))
def test_noise_deterministic_cases_match_dali_exactly(images):
    def graph(mod, x):
        noise = mod.fn.noise
        return (noise.gaussian(x, stddev=0), noise.gaussian(x, stddev=0, mean=0.5),
                noise.gaussian(x, stddev=0, mean=-0.5), noise.gaussian(x, stddev=0, mean=1e12),
                noise.salt_and_pepper(x, prob=0), noise.salt_and_pepper(x, prob=1, salt_vs_pepper=1),
                noise.salt_and_pepper(x, prob=1, salt_vs_pepper=0),
                noise.salt_and_pepper(x, prob=1, salt_vs_pepper=0, salt_val=7, pepper_val=300.7),
                noise.salt_and_pepper(x, prob=1, salt_vs_pepper=1, salt_val=-3.7, per_channel=True),
                noise.shot(x, factor=0))
    theirs, mine = assert_like(graph, images)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            np.testing.assert_array_equal(b, a, err_msg=f"output {k} sample {i}")
    assert all(np.array_equal(a, im) for a, im in zip(theirs[0], images))  # stddev 0: identity


def test_shot_noise_of_values_at_or_below_zero_is_zero_as_dali():
    images = [-np.abs(im.astype(np.int16)) for im in U8]
    assert_exact(lambda mod, x: (mod.fn.noise.shot(x, factor=3), mod.fn.noise.shot(x, factor=0.5)), images)
    assert_exact(lambda mod, x: mod.fn.noise.shot(x, factor=2), [im.astype(np.float32) for im in images])


def test_noise_statistics_and_channels():
    big = [rng.integers(20, 236, size=(60, 70, 3), dtype=np.uint8), rng.integers(20, 236, size=(50, 31, 3),
                                                                                  dtype=np.uint8)]
    floats = [im.astype(np.float32) for im in big]

    def graph(mod, x):
        noise = mod.fn.noise
        return (noise.gaussian(x, mean=2, stddev=5), noise.salt_and_pepper(x, prob=0.3, salt_vs_pepper=0.25),
                noise.salt_and_pepper(x, prob=0.3, per_channel=True), noise.shot(x, factor=4))
    for images in (big, floats):
        theirs, mine = assert_like(graph, images)
        for out in (theirs, mine):
            gauss, sp, sp_channel, shot = ([o.astype(np.float64) for o in k] for k in out)
            d = np.concatenate([(g - im).ravel() for g, im in zip(gauss, images)])
            assert abs(d.mean() - 2) < 0.15 and abs(d.std() - 5) < 0.15
            for noisy, grouped in ((sp, True), (sp_channel, False)):
                changed = np.concatenate([(n != im).reshape(-1, 3) for n, im in zip(noisy, images)])
                assert abs(changed.mean() - 0.3) < 0.02
                coherent = np.mean(changed.all(1) == changed.any(1))
                assert coherent == 1.0 if grouped else coherent < 0.8  # whole pixels unless per_channel
            top = np.iinfo(np.uint8).max if images[0].dtype == np.uint8 else 1
            salt = np.concatenate([(n == top).ravel() & (n != im).ravel() for n, im in zip(sp, images)])
            assert abs(salt.mean() - 0.075) < 0.01
            e = np.concatenate([(s - im).ravel() for s, im in zip(shot, images)])
            x = np.concatenate([im.ravel() for im in images]).astype(np.float64)
            e, x = e[x < 150], x[x < 150]  # away from uint8's saturation
            assert abs(e.mean()) < 0.5 and abs(np.mean(e * e) / np.mean(4 * x) - 1) < 0.06
    same = run_dali_graph(ours, big, graph, seed=1)
    assert all(np.array_equal(a, b) for a_out, b_out in zip(same, run_dali_graph(ours, big, graph, seed=1))
               for a, b in zip(a_out, b_out))


def test_noise_layouts_match_dali():
    chw = [np.ascontiguousarray(np.clip(im, 1, 254).transpose(2, 0, 1)) for im in U8]  # none already salt
    theirs, mine = assert_like(lambda mod, x: mod.fn.noise.salt_and_pepper(x, prob=0.5), chw, "CHW")
    for out in (theirs, mine):
        for noisy, im in zip(out[0], chw):
            changed = noisy != im
            assert np.array_equal(changed.all(0), changed.any(0))  # the channel axis first
    dali = import_dali()
    for mod in (dali, ours):
        @mod.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            x = mod.fn.external_source(source=lambda: chw[:1], batch=True, layout="CHW")
            return mod.fn.noise.gaussian(x), mod.fn.noise.shot(x), mod.fn.random.normal(x)
        p = pipe()
        p.build()
        assert [o.layout() for o in p.run()] == ["CHW", "CHW", ""], mod


def _pipe(graph, images=U8[:1], layout="HWC"):
    @ours.pipeline_def(batch_size=len(images), num_threads=1, device_id=None)
    def pipe():
        return graph(ours.fn.external_source(source=lambda: images, batch=True, layout=layout))
    p = pipe()
    p.build()
    return p.run()


def test_refusals_name_the_operator_and_argument():
    fn, t = ours.fn, ours.types
    with pytest.raises(TypeError, match="fn.noise.gaussian: data type torch.float64 is not supported"):
        _pipe(lambda x: fn.noise.gaussian(x), [U8[0].astype(np.float64)])
    with pytest.raises(ValueError, match="fn.noise.salt_and_pepper: prob must be within"):
        _pipe(lambda x: fn.noise.salt_and_pepper(x, prob=1.3))
    with pytest.raises(ValueError, match="'C' must be the first or the last axis"):
        _pipe(lambda x: fn.noise.salt_and_pepper(x), [np.ascontiguousarray(U8[0][:, :, 0])], "HW")
    with pytest.raises(TypeError, match="fn.random.normal: dtype torch.float16 is not supported"):
        _pipe(lambda x: fn.random.normal(dtype=t.FLOAT16))
    with pytest.raises(TypeError, match="fn.random.beta: dtype torch.int32 is not supported"):
        _pipe(lambda x: fn.random.beta(dtype=t.INT32))
    with pytest.raises(ValueError, match="fn.random.beta: alpha must be a positive"):
        _pipe(lambda x: fn.random.beta(alpha=0))
    with pytest.raises(ValueError, match="fn.random.choice: the probabilities p must sum to 1"):
        _pipe(lambda x: fn.random.choice(3, p=[0.5, 0.2, 0.2]))
    with pytest.raises(ValueError, match="fn.random.choice: argument p has 2 values for 3"):
        _pipe(lambda x: fn.random.choice(3, p=[0.5, 0.5]))
    with pytest.raises(ValueError, match="fn.random.normal: argument shape is incompatible with a shape-like"):
        _pipe(lambda x: fn.random.normal(x, shape=[3]))
    with pytest.raises(NotImplementedError, match="fn.noise.shot does not support argument.*gain"):
        _pipe(lambda x: fn.noise.shot(x, gain=2))


def _dali_pipe(graph):
    dali = import_dali()

    @dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return graph(dali.fn, dali.fn.external_source(source=lambda: U8[:1], batch=True, layout="HWC"))
    p = pipe()
    p.build()
    return p.run()


def test_arguments_dali_refuses_are_refused_by_name():
    """A float scalar ``a`` (both a RuntimeError), a probability outside [0, 1], a negative shape: DALI refuses
    them all; fastload names the operator and argument."""
    def float_a(fn, x):
        return fn.random.choice(2.5)
    with pytest.raises(RuntimeError, match="not supported for 0D inputs"):
        _dali_pipe(float_a)
    with pytest.raises(RuntimeError, match="fn.random.choice: data type torch.float32 is not supported for a 0-d"):
        _pipe(lambda x: float_a(ours.fn, x))
    for graph, match in ((lambda fn, x: fn.random.choice(3, p=[-.5, .5, 1]),
                          r"fn.random.choice: argument p: probabilities must be in range \[0, 1\], got -0.5 at "
                          r"index 0"),
                         (lambda fn, x: fn.random.normal(shape=[-1]),
                          r"fn.random.normal: argument shape must not have negative extents, got \[-1\]"),
                         (lambda fn, x: fn.random.choice(4, shape=[2, -3]), "fn.random.choice: argument shape")):
        with pytest.raises(RuntimeError):
            _dali_pipe(graph)
        with pytest.raises(ValueError, match=match):
            _pipe(lambda x, graph=graph: graph(ours.fn, x))
