"""fastload.compat.dali.batch_ops against real DALI 2.4's CPU operators: fn.permute_batch exactly (constant
and per-sample indices, before and after per-sample operators, after a file reader, DALI's errors), and
fn.batch_permutation by its properties (int32 scalars, a permutation of the batch, no fixed points,
repetitions, a batch of one), its distribution and its seeded determinism (DALI's generator is not
reproduced)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph

rng = np.random.default_rng(17)
RAGGED = [rng.integers(-300, 300, size=s).astype(np.int16) for s in [(13, 17), (24, 9), (31, 40), (5, 3), (7, 11)]]


def values(outputs) -> list:
    return [[(a.dtype, a.shape, a.tolist()) for a in out] for out in outputs]


@pytest.mark.parametrize("indices", [[4, 0, 0, 2, 1], [1, 2, 3, 4, 0], [3, 3, 3, 3, 3]])
def test_permute_batch_is_dalis_with_constant_indices_around_per_sample_operators(indices):
    dali = import_dali()

    def graph(mod, x):
        permuted = mod.fn.permute_batch(x, indices=indices)
        doubled = mod.fn.permute_batch(mod.fn.cast(x, dtype=mod.types.FLOAT) * 2, indices=indices[::-1])
        return permuted, mod.fn.cast(permuted, dtype=mod.types.INT32) - 5, doubled, x

    theirs, mine = run_dali_graph(dali, RAGGED, graph, "HW"), run_dali_graph(ours, RAGGED, graph, "HW")
    assert values(mine) == values(theirs)
    assert [a.tolist() for a in mine[0]] == [RAGGED[k].tolist() for k in indices]


def test_permute_batch_by_batch_permutation_keeps_type_and_layout_as_dali():
    dali = import_dali()
    for mod in (dali, ours):
        @mod.pipeline_def(batch_size=5, num_threads=2, device_id=None, seed=4)
        def pipe():
            x = mod.fn.external_source(lambda: RAGGED, layout="HW")
            perm = mod.fn.batch_permutation()
            return mod.fn.permute_batch(x, indices=perm), perm

        p = pipe()
        p.build()
        for _ in range(3):
            out, perm = p.run()
            assert out.layout() == "HW" and str(out.dtype).endswith("INT16") and str(perm.dtype).endswith("INT32")
            order = [int(perm.at(i)) for i in range(5)]
            assert sorted(order) == list(range(5)) and all(perm.at(i).shape == () for i in range(5))
            assert [out.at(i).tolist() for i in range(5)] == [RAGGED[k].tolist() for k in order]


def test_permute_batch_after_a_file_reader_is_dalis(tmp_path):
    dali = import_dali()
    files = []
    for i in range(7):
        (tmp_path / f"f{i}").write_bytes(bytes(range(i, 3 * i + 2)))
        files.append(str(tmp_path / f"f{i}"))

    def run(mod):
        @mod.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=1)
        def pipe():
            data, labels = mod.fn.readers.file(files=files, labels=[10 + i for i in range(7)])
            return mod.fn.permute_batch(data, indices=[2, 0, 2]), mod.fn.permute_batch(labels, indices=[1, 1, 0])
        p = pipe()
        p.build()
        return [[[out.at(i).tolist() for i in range(len(out))] for out in p.run()] for _ in range(4)]

    assert run(ours) == run(dali)


@pytest.mark.parametrize("indices,match", [([4, 0, 0, 2], "does not match the current batch size"),
                                           ([5, 0, 0, 2, 1], "out of range"), ([-1, 0, 0, 2, 1], "out of range"),
                                           ("int64", "int32"), ("float", "int32"), ("vector", "0-d|dimension")])
def test_permute_batch_refuses_what_dali_refuses(indices, match):
    dali = import_dali()

    def graph(mod, x):
        if isinstance(indices, list):
            return mod.fn.permute_batch(x, indices=indices)
        perm = mod.fn.batch_permutation()
        given = {"int64": mod.fn.cast(perm, dtype=mod.types.INT64), "float": perm * 1.0,
                 "vector": mod.fn.stack(perm, perm)}[indices]
        return mod.fn.permute_batch(x, indices=given)

    with pytest.raises(RuntimeError):
        run_dali_graph(dali, RAGGED, graph, "HW")
    with pytest.raises(RuntimeError, match=match):
        run_dali_graph(ours, RAGGED, graph, "HW")


def permutations(batch_size: int, batches: int, pipeline_seed: int = 3, **args) -> list[list[int]]:
    @ours.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=pipeline_seed)
    def pipe():
        return ours.fn.batch_permutation(**args)
    p = pipe()
    p.build()
    got = []
    for _ in range(batches):
        out, = p.run()
        assert str(out.dtype).endswith("INT32") and all(out.at(i).shape == () for i in range(batch_size))
        got.append([int(out.at(i)) for i in range(batch_size)])
    return got


def test_batch_permutation_properties_and_distribution():
    plain = permutations(5, 120)
    assert all(sorted(p) == list(range(5)) for p in plain) and len({tuple(p) for p in plain}) > 40
    places = collections.Counter((i, k) for p in plain for i, k in enumerate(p))  # 24 expected of each
    assert len(places) == 25 and min(places.values()) >= 8 and max(places.values()) <= 44
    deranged = permutations(4, 60, no_fixed_points=True)
    assert all(sorted(p) == list(range(4)) and all(k != i for i, k in enumerate(p)) for p in deranged)
    assert len({tuple(p) for p in deranged}) == 9  # every derangement of 4 turns up in 60 draws
    repeated = permutations(6, 40, allow_repetitions=True)
    assert all(0 <= k < 6 for p in repeated for k in p) and any(len(set(p)) < 6 for p in repeated)
    both = permutations(3, 40, allow_repetitions=True, no_fixed_points=True)
    assert all(k != i for p in both for i, k in enumerate(p)) and any(len(set(p)) < 3 for p in both)


def test_batch_permutation_of_one_sample_is_dalis():
    dali = import_dali()
    for args in ({}, {"no_fixed_points": True}, {"no_fixed_points": True, "allow_repetitions": True}):
        for mod in (dali, ours):
            @mod.pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=2)
            def pipe():
                return mod.fn.batch_permutation(**args)
            p = pipe()
            p.build()
            assert p.run()[0].at(0).tolist() == 0, (mod, args)


def test_batch_permutation_is_seeded():
    """One pipeline seed, one permutation per batch; an operator's own seed draws alike in any pipeline."""
    assert permutations(6, 5, 8) == permutations(6, 5, 8) != permutations(6, 5, 9)
    assert permutations(6, 5, 8, seed=21) == permutations(6, 5, 9, seed=21) != permutations(6, 5, 8, seed=22)


def test_batch_operators_refuse_what_fastload_does_not_run():
    def build(body, conditionals=False):
        @ours.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1, enable_conditionals=conditionals)
        def pipe():
            return body()
        p = pipe()
        p.build()
        return p.run()

    with pytest.raises(ValueError, match="CPU"):
        build(lambda: ours.fn.batch_permutation(device="gpu"))
    with pytest.raises(NotImplementedError, match="permute_batch does not support argument"):
        build(lambda: ours.fn.permute_batch(ours.fn.batch_permutation(), indices=[0, 1], axes=[0]))
    with pytest.raises(TypeError, match="indices"):
        build(lambda: ours.fn.permute_batch(ours.fn.batch_permutation(), indices=[0.5, 1]))

    out, = build(lambda: ours.ops.PermuteBatch(indices=[1, 0])(ours.ops.BatchPermutation()()))
    assert sorted(int(t) for t in out.tensors) == [0, 1]  # the ops API too


def test_batch_operators_in_a_conditional_branch_run_on_its_samples_as_dali():
    """DALI runs a batch operator in a branch on the samples that take it (its split batch), in batch order:
    permute_batch's indices index them, batch_permutation permutes them."""
    dali = import_dali()
    batch = [np.int32(v) for v in (10, 0, 11, -3, 12, 13)]  # 4 take the branch, 2 do not

    def run(mod):
        @mod.pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=1, enable_conditionals=True)
        def pipe():
            x = mod.fn.external_source(lambda: batch)
            if x > 0:
                x = mod.fn.permute_batch(x, indices=[2, 0, 3, 3]) * 2
                y = mod.fn.batch_permutation()
            else:
                x = mod.fn.permute_batch(x, indices=[1, 0])
                y = mod.fn.batch_permutation(no_fixed_points=True)
            return x, y
        p = pipe()
        p.build()
        return [[int(out.at(i)) for i in range(6)] for out in p.run()]

    theirs, mine = run(dali), run(ours)
    assert mine[0] == theirs[0] == [24, -3, 20, 0, 26, 26]
    taking, others = [0, 2, 4, 5], [1, 3]
    for y in (theirs[1], mine[1]):
        assert sorted(y[i] for i in taking) == [0, 1, 2, 3] and [y[i] for i in others] == [1, 0]


def test_permute_batch_after_a_split_runs_on_its_side_as_dali():
    dali = import_dali()
    batch = [np.int32(v) for v in (10, 0, 11, -3, 12, 13)]

    def run(mod):
        @mod.pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=1)
        def pipe():
            x = mod.fn.external_source(lambda: batch)
            positive = x > 0
            yes, no = mod.fn._conditional.split(x, predicate=positive)
            return mod.fn._conditional.merge(mod.fn.permute_batch(yes, indices=[3, 1, 0, 2]),
                                             mod.fn.permute_batch(no, indices=[0, 0]), predicate=positive)
        p = pipe()
        p.build()
        return [int(p.run()[0].at(i)) for i in range(6)]

    assert run(ours) == run(dali) == [13, 0, 11, 0, 10, 12]
