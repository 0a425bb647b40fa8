"""fastload's fn.readers.file shuffle against real DALI 2.4's: its shuffle buffer (loader.h's
ReadOne) keeps each reader epoch whole, so an epoch is a permutation of the shard it read whatever
initial_fill, and only the iterator's cut of an unpadded last batch mixes epochs. The script runs on both
(files whose label is their number; labels only, no decode) and the distinct samples of each iterator
epoch are compared; with an explicit seed the stream is DALI's sample for sample."""

from __future__ import annotations
import importlib

import pytest

import fastload.compat.dali as ours
import fastload.compat.dali.plugin.pytorch as ours_pt
from fastload.compat.dali.order import DaliLoaderRandom, ReaderOrder

from conftest import import_dali


def side_modules(side):
    """(the library, its PyTorch plugin) that ``side`` ("dali" or "ours") names; "dali" skips the calling
    test where DALI is not installed."""
    if side == "ours":
        return ours, ours_pt
    return import_dali(), importlib.import_module("nvidia.dali.plugin.pytorch")


pytestmark = pytest.mark.usefixtures("quiet_iterators")  # both sides warn and log about iterator use


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """2000 one-byte files; the label is the file's number."""
    folder = tmp_path_factory.mktemp("shuffle")
    paths = []
    for i in range(2000):
        path = folder / f"{i:04d}"
        path.write_bytes(b"x")
        paths.append(str(path))
    return paths


def epochs(side, files, size, epochs=3, batch_size=4, shard_id=0, num_shards=1, policy="PARTIAL", **reader):
    """The labels of each iterator epoch, as ``side`` (dali or ours) runs the script."""
    lib, plugin = side_modules(side)

    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=11)
    def pipe():
        _, labels = lib.fn.readers.file(files=files[:size], labels=list(range(size)), name="R",
                                        shard_id=shard_id, num_shards=num_shards, **reader)
        return labels

    it = plugin.DALIGenericIterator([pipe()], ["label"], reader_name="R", auto_reset=True,
                                    last_batch_policy=getattr(plugin.LastBatchPolicy, policy))
    out = []
    for _ in range(epochs):
        out.append([int(x) for batch in it for x in batch[0]["label"].reshape(-1)])
    return out


def distinct(runs):
    return [len(set(run)) for run in runs]


@pytest.mark.parametrize("size", [7, 31, 100])
@pytest.mark.parametrize("initial_fill", [8, 1024])
@pytest.mark.parametrize("pad", [True, False])
@pytest.mark.parametrize("seed", [None, 5])
def test_each_epoch_as_many_distinct_samples_as_dali(files, size, initial_fill, pad, seed):
    """Padded: every epoch a permutation of the shard, on both. Unpadded, the iterator's cut of the last
    batch carries samples into the next epoch, as many on both; which ones repeat depends on the draws, so
    with the reader's seed given (the same draws) the epochs are DALI's, and without it (DALI derives its
    reader's seed from the pipeline's in its backend) only the first epoch and the counts' sizes agree."""
    reader = dict(random_shuffle=True, initial_fill=initial_fill, pad_last_batch=pad)
    if seed is not None:
        reader["seed"] = seed
    theirs, mine = epochs("dali", files, size, **reader), epochs("ours", files, size, **reader)
    assert [len(e) for e in mine] == [len(e) for e in theirs]
    if pad:
        assert distinct(mine) == distinct(theirs) == [size] * 3
    elif seed is not None:
        assert mine == theirs
    else:
        assert distinct(mine)[0] == distinct(theirs)[0] == size
        assert all(size - 2 * k - 3 <= d <= size for k, d in enumerate(distinct(mine)))  # a batch at most


@pytest.mark.parametrize("initial_fill", [8, 1024])
def test_a_large_shard_is_a_permutation_each_epoch_as_in_dali(files, initial_fill):
    """2000 samples (labels only): a ring far smaller than the shard (8) or not (1024)."""
    reader = dict(random_shuffle=True, initial_fill=initial_fill, pad_last_batch=True)
    theirs = epochs("dali", files, 2000, epochs=2, batch_size=64, **reader)
    mine = epochs("ours", files, 2000, epochs=2, batch_size=64, **reader)
    assert distinct(mine) == distinct(theirs) == [2000, 2000]
    assert mine != [sorted(e) for e in mine]


@pytest.mark.parametrize("stick,pad", [(True, True), (False, True), (True, False), (False, False)])
def test_shards_distinct_samples_as_dali(files, stick, pad):
    """Three shards of 31 (10, 10 and 11 samples): each reads its own shard or moves on to the next; the
    reader's seed given, so the unpadded epochs' repeats (which depend on the draws) are DALI's too."""
    reader = dict(random_shuffle=True, pad_last_batch=pad, stick_to_shard=stick, initial_fill=8, seed=3)
    for shard in range(3):
        theirs = epochs("dali", files, 31, shard_id=shard, num_shards=3, **reader)
        mine = epochs("ours", files, 31, shard_id=shard, num_shards=3, **reader)
        assert distinct(mine) == distinct(theirs), (shard, distinct(mine), distinct(theirs))
        assert mine == theirs
        if pad:  # each epoch a permutation of the shard it read
            sizes = [10, 10, 11] if stick else [[10, 10, 11][(shard + e) % 3] for e in range(3)]
            assert distinct(mine) == ([10, 10, 11][shard:shard + 1] * 3 if stick else sizes)


def test_shuffle_after_epoch_distinct_samples_as_dali(files):
    reader = dict(shuffle_after_epoch=True, pad_last_batch=True)
    for shard in range(2):
        theirs = epochs("dali", files, 31, shard_id=shard, num_shards=2, **reader)
        mine = epochs("ours", files, 31, shard_id=shard, num_shards=2, **reader)
        assert [len(e) for e in mine] == [len(e) for e in theirs]  # it sticks to its shard (DALI implies it)
        assert distinct(mine) == distinct(theirs) == [15 + shard] * 3  # shards of 15 and 16


def _dali_stream(files, size, batch_size, batches, **reader):
    dali = import_dali()

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def pipe():
        _, labels = dali.fn.readers.file(files=files[:size], labels=list(range(size)), name="R", **reader)
        return labels

    p = pipe()
    p.build()
    return [int(x) for _ in range(batches) for x in p.run()[0].as_array().ravel()]


@pytest.mark.parametrize("size,shards,stick,pad,fill", [(31, 1, False, True, 8), (31, 1, False, False, 1024),
                                                        (7, 1, False, True, 8), (31, 3, True, True, 4),
                                                        (31, 3, False, False, 8), (100, 2, False, True, 16)])
def test_explicit_seed_gives_dalis_stream_exactly(files, size, shards, stick, pad, fill):
    """With the reader's seed given, the draws are DALI's generator's (minstd_rand0 through seed_seq,
    uniform_int_distribution): the stream equals DALI's, sample for sample, padding included."""
    batches = 3 * -(-size // shards // 4) + 2
    for shard in range(shards):
        reader = dict(random_shuffle=True, initial_fill=fill, seed=5, shard_id=shard, num_shards=shards,
                      stick_to_shard=stick, pad_last_batch=pad)
        theirs = _dali_stream(files, size, 4, batches, **reader)
        order = ReaderOrder(size, shard_id=shard, num_shards=shards, batch_size=4, stick_to_shard=stick,
                            pad_last_batch=pad, random_shuffle=True, initial_fill=fill, seed=5)
        assert order.stream(0, len(theirs)) == theirs, shard
        assert [i for e in range(batches) for i in order.indices(e)][:len(theirs)] == theirs
        assert order.stream(8, 8) == theirs[8:16]  # an earlier start replays from the beginning


def test_dali_loader_random_is_libstdcxx_minstd_through_seed_seq():
    """Known draws (those that give DALI's streams above; no DALI needed): a bound of 1 still draws."""
    generator = DaliLoaderRandom(5)
    assert [generator.below(b) for b in (8, 8, 8, 1, 8, 1000)] == [2, 4, 1, 0, 4, 835]
    zero = DaliLoaderRandom(0)
    assert zero.state == 532167439 and [zero.below(b) for b in (2, 3, 1000)] == [1, 2, 207]
