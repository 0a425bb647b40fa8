"""fastload.compat.dali.order: DALI's reader order and shuffles, against real DALI 2.4's fn.readers.file."""

import collections

import pytest

from fastload.compat.dali.order import ReaderOrder, dali_shuffle


def _dali_reader_stream(tmp_path, size, batch_size, batches, **reader):
    """The labels real DALI's fn.readers.file yields, batch after batch (label i = file i)."""
    dali = pytest.importorskip("nvidia.dali")
    files = []
    for i in range(size):
        (tmp_path / f"f{i}").write_bytes(b"%d" % i)
        files.append(str(tmp_path / f"f{i}"))

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def pipe():
        _, labels = dali.fn.readers.file(files=files, labels=list(range(size)), name="R", **reader)
        return labels

    p = pipe()
    p.build()
    stream = []
    for _ in range(batches):
        labels, = p.run()
        stream += [int(x) for x in labels.as_array().ravel()]
    return stream, p.reader_meta("R")


@pytest.mark.parametrize("size,shards,batch_size", [(11, 3, 4), (11, 3, 3), (11, 4, 2), (7, 1, 2), (10, 5, 4)])
@pytest.mark.parametrize("stick,pad", [(False, False), (True, False), (False, True), (True, True)])
def test_reader_order_is_dalis_stream(tmp_path, size, shards, batch_size, stick, pad):
    """ReaderOrder's stream equals DALI 2.4's file reader's, for every shard (contiguous blocks, reading on
    past the block or cycling it, padding each block with its last sample to whole batches)."""
    for shard in range(shards):
        count = 7 * batch_size
        theirs, meta = _dali_reader_stream(tmp_path, size, batch_size, 7, shard_id=shard, num_shards=shards,
                                           stick_to_shard=stick, pad_last_batch=pad)
        order = ReaderOrder(size, shard_id=shard, num_shards=shards, batch_size=batch_size,
                            stick_to_shard=stick, pad_last_batch=pad)
        assert order.stream(0, count) == theirs, (shard, meta)
        # the loader's epochs follow each other along the same stream
        epochs = [i for e in range(-(-count // order.num_samples())) for i in order.indices(e)]
        assert epochs[:count] == theirs


@pytest.mark.parametrize("size,shards,batch_size,stick", [(11, 3, 4, True), (30, 2, 4, False), (8, 1, 3, True)])
def test_reader_order_random_shuffle_shuffles_the_list_first_exactly_as_dali(tmp_path, size, shards, batch_size,
                                                                             stick):
    """random_shuffle shuffles the whole file list once (std::shuffle, mt19937 seeded kDaliDataloaderSeed)
    before the shards are cut, so every shard holds a random mix; with initial_fill=1 the buffer passes the
    stream through, and the order is DALI's, sample for sample, for every shard."""
    for shard in range(shards):
        theirs, _ = _dali_reader_stream(tmp_path, size, batch_size, 6, shard_id=shard, num_shards=shards,
                                        stick_to_shard=stick, random_shuffle=True, initial_fill=1)
        order = ReaderOrder(size, shard_id=shard, num_shards=shards, batch_size=batch_size, stick_to_shard=stick,
                            random_shuffle=True, initial_fill=1, seed=5)
        assert order.stream(0, 6 * batch_size) == theirs, shard


def test_dali_shuffle_is_libstdcxx_std_shuffle():
    """Empty and one-item lists, a permutation past the pairing rule's edge (n * n over the generator's 32
    bits: one draw a swap), and 7 files as DALI 2.4.0's readers.file orders them (no DALI needed)."""
    assert dali_shuffle([], 1) == [] and dali_shuffle(["a"], 1) == ["a"]
    assert sorted(dali_shuffle(range(70000), 524287)) == list(range(70000))
    assert dali_shuffle(range(7), 524287) == [3, 0, 2, 4, 5, 1, 6]  # DALI 2.4.0's readers.file, 7 files


def test_reader_order_shuffles_as_dali_does_in_kind():
    """random_shuffle's buffer: the stream's samples, mixed through it (DALI's generator differs); one pass
    of shuffle_after_epoch over a single shard is every sample once, in another order each pass."""
    whole = ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, shuffle_after_epoch=True, seed=3)
    passes = [whole.stream(11 * k, 11) for k in range(3)]
    assert all(sorted(p) == list(range(11)) for p in passes) and passes[0] != passes[1]
    assert whole.stream(0, 11) == passes[0]  # asked again from the start: the same
    block = ReaderOrder(11, shard_id=1, num_shards=3, batch_size=4, shuffle_after_epoch=True, seed=3)
    assert all(len(set(block.stream(4 * k, 4))) == 4 for k in range(5))
    mixed = ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, random_shuffle=True, initial_fill=4, seed=3)
    stream = mixed.stream(0, 44)
    assert sorted(stream[:40]) != stream[:40]
    counts = collections.Counter(stream)  # 4 of each went in; up to 4 may still wait in the buffer
    assert set(counts) == set(range(11)) and all(0 < c <= 8 for c in counts.values())
    assert mixed.stream(0, 44) == stream  # replayed from the start: the same
    again = ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, random_shuffle=True, initial_fill=4, seed=3)
    assert [i for e in range(4) for i in again.indices(e)][:44] == stream[:44]
    with pytest.raises(ValueError, match="shuffle_after_epoch"):
        ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, shuffle_after_epoch=True, stick_to_shard=True)
    with pytest.raises(ValueError, match="shards"):
        ReaderOrder(2, shard_id=0, num_shards=3, batch_size=4)


def test_reader_order_shuffle_list_false_passes_the_list_through_the_buffer_unshuffled():
    """shuffle_list=False (DALI's indexed and LMDB loaders): the buffer gets the list in its own order, so a
    buffer of one passes it through; the default shuffles it first (DALI's file loaders)."""
    plain = ReaderOrder(9, shard_id=1, num_shards=2, batch_size=3, random_shuffle=True, initial_fill=1,
                        shuffle_list=False)
    listed = ReaderOrder(9, shard_id=1, num_shards=2, batch_size=3, random_shuffle=True, initial_fill=1)
    assert plain.stream(0, 10) == [4, 5, 6, 7, 8, 0, 1, 2, 3, 4]
    assert listed.stream(0, 10) == [dali_shuffle(range(9), 524287)[i] for i in [4, 5, 6, 7, 8, 0, 1, 2, 3, 4]]
    mixed = ReaderOrder(9, shard_id=0, num_shards=1, batch_size=3, random_shuffle=True, initial_fill=4,
                        shuffle_list=False)
    assert all(sorted(mixed.indices(e)) == list(range(9)) for e in range(3))
