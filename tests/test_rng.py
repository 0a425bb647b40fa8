import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.rng import SampleRandom


def test_streams_are_pure_functions_of_seed_epoch_index():
    draws = [SampleRandom(1, 2, 3).random() for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]
    firsts = {SampleRandom(s, e, i).random() for s in range(3) for e in range(3) for i in range(50)}
    assert len(firsts) == 450


def test_uniform_and_randint_ranges():
    rng = SampleRandom(0, 0, 0)
    values = [rng.random() for _ in range(20000)]
    assert 0.0 <= min(values) and max(values) < 1.0
    assert abs(sum(values) / len(values) - 0.5) < 0.01
    ints = [rng.randint(3, 7) for _ in range(4000)]
    assert set(ints) == {3, 4, 5, 6}
    assert all(rng.randint(5, 6) == 5 for _ in range(100))


def test_a_repeat_has_its_own_stream_and_repeat_zero_is_the_plain_one():
    first = SampleRandom(1, 2, 3)
    assert SampleRandom(1, 2, 3, 0).random() == SampleRandom(1, 2, 3).random()
    draws = {SampleRandom(1, 2, 3, repeat).random() for repeat in range(100)}
    assert len(draws) == 100 and first.random() in draws
    # a repeat's stream is not another sample's or epoch's
    others = {SampleRandom(s, e, i).random() for s in range(3) for e in range(3) for i in range(50)}
    assert not (draws - {SampleRandom(1, 2, 3).random()}) & others


def test_the_native_crop_draw_gives_the_python_draws_values():
    import math
    import random

    from fastload.rng import draw_resized_crop
    from fastload.transforms import _rrc_params
    if draw_resized_crop is None:
        pytest.skip("fastload._jpeg is not built")
    pick = random.Random(11)
    for trial in range(20_000):
        seed = pick.choice([0, 7, 2**63 + 5, 2**64 - 1, -3, pick.getrandbits(70)])  # sums past 2**64 too
        epoch, index, repeat = pick.randrange(1000), pick.randrange(10**7), pick.choice([0, 0, 1, 9])
        width, height = pick.randrange(1, 5000), pick.randrange(1, 5000)
        if trial % 5 == 0:  # thin images: torchvision's fallback box
            width, height = (pick.randrange(1, 6), pick.randrange(1, 6000))[::pick.choice([1, -1])]
        low = pick.choice([0.08, 0.5, 1.0, pick.random()])
        high = max(low, pick.choice([1.0, pick.random()]))
        ratio = sorted([pick.choice([3 / 4, 1.0, pick.uniform(0.1, 3)]), pick.choice([4 / 3, pick.uniform(0.1, 3)])])
        hflip_p, vflip_p = pick.choice([0.0, 0.5, 1.0]), pick.choice([0.0, 0.3])
        rng = SampleRandom(seed, epoch, index, repeat)
        expected = _rrc_params(width, height, (low, high), ratio, rng)
        expected += (hflip_p > 0 and rng.random() < hflip_p, vflip_p > 0 and rng.random() < vflip_p)
        got = draw_resized_crop(seed, epoch, index, repeat, width, height, low, high, math.log(ratio[0]),
                                math.log(ratio[1]), ratio[0], ratio[1], hflip_p, vflip_p)
        assert got == expected, (seed, epoch, index, repeat, width, height, low, high, ratio)


def test_plan_draw_is_plan_sample_of_the_samples_stream():
    from fastload import transforms as T
    from fastload.transforms import compile_plan
    from torchvision.transforms import v2
    tensor = [v2.PILToTensor()]
    for steps, native in [([T.RandomResizedCrop(224), T.RandomHorizontalFlip()], True),
                          ([T.RandomResizedCrop((100, 60), scale=(0.5, 0.9)), T.RandomVerticalFlip(0.3)], True),
                          ([T.RandomResizedCrop(64), T.ColorJitter(0.4, 0.4)], False),
                          ([T.Resize(80), T.CenterCrop(64), T.RandomHorizontalFlip()], False)]:
        plan = compile_plan(T.Compose(steps + tensor))
        assert plan.native_draw == (native and plan.native_draw)  # False where the extension is missing
        for index in range(300):
            width, height = 50 + index * 7 % 900, 30 + index * 13 % 700
            assert plan.draw(width, height, 5, 2, index, index % 3) == plan.sample(
                width, height, SampleRandom(5, 2, index, index % 3))


def test_a_front_ends_crop_geometry_keeps_its_own_draw():
    """DALI's and rocAL's crop geometries subclass RandomResizedCrop's and draw their own way: Plan.draw
    must call their sample, never the native torchvision draw."""
    import torch
    from PIL import Image

    from fastload.compat.dali.lowering import DaliRandomCropGeometry
    from fastload.transforms import Plan
    geometry = DaliRandomCropGeometry((64, 64), (0.08, 1.0), (3 / 4, 4 / 3))
    plan = Plan(geometry=geometry, resample=Image.Resampling.BILINEAR, hflip_p=0.5, output_size=(64, 64),
                dtype=torch.uint8, scale=None, shift=None)
    assert not plan.native_draw
    for index in range(50):
        assert plan.draw(500, 375, 1, 0, index, 0) == plan.sample(500, 375, SampleRandom(1, 0, index, 0))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2 ** 64 - 1), st.integers(0, 2 ** 20), st.integers(0, 2 ** 40), st.integers(0, 300))
def test_randoms_are_the_next_values_of_random(seed, epoch, index, count):
    """``randoms(n)`` is n calls of ``random()`` in one pass, bit for bit, and leaves the stream where they
    would (the draws after it are the same)."""
    one, many = SampleRandom(seed, epoch, index), SampleRandom(seed, epoch, index)
    expected = [one.random() for _ in range(count)]
    assert many.randoms(count).tolist() == expected
    assert many.random() == one.random()
