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
