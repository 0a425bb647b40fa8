"""fastload.compat.dali's pipeline engine against real DALI (2.4, CPU operators): graphs that mix file
readers, external sources of every kind and generated inputs, DALI's epochs and its scheduling members
(``_prefetch``, ``_run_once``, ``share_outputs``...), each iteration compared output by output."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastload.compat.dali as ours
from fastload.compat.dali import types

from conftest import import_dali, write_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """7 JPEGs of awkward sizes in 3 classes: a batch of 3 never divides an epoch."""
    sizes = [[(13, 9), (31, 7)], [(8, 21), (17, 17), (5, 3)], [(40, 11), (9, 33)]]
    return write_folder(tmp_path_factory.mktemp("dali_executor"), sizes)


def samples(outputs) -> list:
    """A batch's outputs as plain lists, sample by sample (ragged outputs too)."""
    return [[np.asarray(out.at(i)).tolist() for i in range(len(out))] for out in outputs]


def runs(pipe, count: int, epochs: int = 1) -> list:
    """``count`` run()s per epoch, a StopIteration recorded as "stop", reset() between epochs."""
    got = []
    for _ in range(epochs):
        for _ in range(count):
            try:
                got.append(samples(pipe.run()))
            except StopIteration:
                got.append("stop")
        pipe.reset()
    return got


def _per_sample(info):
    """A per-sample callback of its SampleInfo only (module level: DALI's parallel workers import it)."""
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int32)


def _per_batch(info):
    """A batch callback of its BatchInfo only: ragged samples, 3 per batch."""
    if info.iteration >= 4:
        raise StopIteration
    return [np.full((k + 1, 2), info.iteration * 10 + info.epoch_idx, np.float32) for k in range(3)]


def test_reader_beside_external_sources_and_generated_inputs_is_dalis(dali, folder):
    rng = np.random.default_rng()
    matrices = [rng.uniform(-5, 5, (3, int(rng.integers(1, 4)))).astype(np.float32) for _ in range(3)]

    def define(lib):
        @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=11)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=str(folder), name="Reader")
            info = lib.fn.external_source(source=_per_sample, batch=False, dtype=lib.types.INT32)
            ragged = lib.fn.external_source(source=_per_batch, batch_info=True)
            fixed = lib.fn.external_source(source=lambda: matrices, layout="HW")
            coin = lib.fn.random.coin_flip(probability=0.0)  # generated: always 0 (DALI's values are its own)
            bias = lib.types.Constant(np.int32(5))
            return jpegs, labels, info, ragged, fixed, labels + info[2] * 100 + coin + bias, fixed * 2
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    expected = runs(theirs, 6, epochs=3)
    assert runs(mine, 6, epochs=3) == expected
    assert expected.count("stop") == 6  # 4 batches per epoch, then the source ended each epoch
    assert mine.reader_meta("Reader") == {k: theirs.reader_meta("Reader")[k] for k in mine.reader_meta("Reader")}


def _cycled(lib, folder, source, cycle):
    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=2)
    def pipe():
        _, labels = lib.fn.readers.file(file_root=str(folder), random_shuffle=True, seed=3)
        return labels, lib.fn.external_source(source=source, cycle=cycle)
    return pipe()


@pytest.mark.parametrize("cycle", [None, "no", False, True, "quiet", "raise"])
@pytest.mark.parametrize("kind", ["generator", "iterable"])
def test_cycle_modes_beside_a_reader_are_dalis(dali, folder, cycle, kind):
    data = [[np.full((k + 1,), 10 * b + k, np.int16) for k in range(2)] for b in range(3)]

    def generator():
        yield from data
    source = generator if kind == "generator" else data
    theirs, mine = _cycled(dali, folder, source, cycle), _cycled(ours, folder, source, cycle)
    theirs.build()
    assert runs(mine, 4, epochs=3) == runs(theirs, 4, epochs=3)


def test_a_source_running_out_drops_the_other_sources_batch_as_dali(dali, folder):
    """Every callback is called each iteration; when one runs out, the others' batch is dropped (a counter
    shows it) and the reader does not advance."""
    def define(lib):
        calls = []

        def counter():
            calls.append(len(calls))
            return [np.int64(calls[-1])] * 2

        def short():
            yield [np.float32(1.5)] * 2
            yield [np.float32(2.5)] * 2

        @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
        def pipe():
            _, labels = lib.fn.readers.file(file_root=str(folder))
            return labels, lib.fn.external_source(source=counter), lib.fn.external_source(source=short,
                                                                                          cycle="raise")
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    assert runs(mine, 3, epochs=3) == runs(theirs, 3, epochs=3)


class _Fed:
    """The subclass style: a reader, and an external source fed in iter_setup (a per-sample matrix)."""

    def __init__(self, lib, folder, batches):
        class Fed(lib.Pipeline):
            def __init__(self):
                super().__init__(batch_size=3, num_threads=1, device_id=None, seed=2, prefetch_queue_depth=1)
                self.reader = lib.ops.readers.File(file_root=str(folder))
                self.source = lib.ops.ExternalSource()
                self.batches = iter(batches)

            def define_graph(self):
                _, labels = self.reader()
                self.matrix = self.source(name="matrix")
                return labels, self.matrix, self.matrix * 2

            def iter_setup(self):
                self.feed_input(self.matrix, next(self.batches))
        self.pipe = Fed()


def test_feed_input_beside_a_reader_is_dalis(dali, folder):
    rng = np.random.default_rng()
    batches = [[rng.integers(-9, 9, (2, 2), dtype=np.int32) for _ in range(3)] for _ in range(4)]
    theirs, mine = _Fed(dali, folder, batches).pipe, _Fed(ours, folder, batches).pipe
    theirs.build()
    assert runs(mine, 5) == runs(theirs, 5)  # the fifth: iter_setup's next() runs out


def _parallel_batch(info):
    return [np.full((2,), info.iteration * 100 + info.epoch_idx * 10 + k, np.int32) for k in range(3)]


def test_parallel_sources_beside_a_reader_are_dalis(dali, folder):
    def define(lib):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, py_num_workers=2, py_start_method="fork")
        def pipe():
            _, labels = lib.fn.readers.file(file_root=str(folder))
            per_sample = lib.fn.external_source(source=_per_sample, batch=False, parallel=True,
                                                dtype=lib.types.INT32)
            per_batch = lib.fn.external_source(source=_parallel_batch, batch=True, batch_info=True,
                                               parallel=True)
            return labels, per_sample, per_batch
        return pipe()

    theirs, mine = define(dali), define(ours)
    for pipe in (theirs, mine):
        pipe.start_py_workers()
        pipe.build()
    assert runs(mine, 4) == runs(theirs, 4)


def test_callback_arguments_are_dalis(dali):
    """A batch callable taking one argument gets the iteration number (a BatchInfo with batch_info)."""
    def define(lib):
        @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            plain = lib.fn.external_source(source=lambda i: [np.int32(i)] * 2)
            none = lib.fn.external_source(source=lambda: [np.int32(7)] * 2)
            return plain, none
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    assert runs(mine, 3) == runs(theirs, 3)
    with pytest.raises(TypeError, match="0 or 1"):
        @ours.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def bad():
            return ours.fn.external_source(source=lambda a, b: [np.int32(0)] * 2)
        bad().build()


def _steps(pipe) -> list:
    """A detection loader's loop (NVIDIA's SSD examples): _prefetch, share_outputs, release_outputs,
    schedule_run; with DALI's engine state after each step."""
    got = []
    for _ in range(5):
        pipe._prefetch()
        try:
            out = samples(pipe.share_outputs())
        except StopIteration:
            out = "stop"
        pipe.release_outputs()
        pipe.schedule_run()
        got.append((out, pipe._batches_to_consume, pipe._first_iter, pipe._last_iter, pipe._epoch_idx,
                    str(pipe._api_type), pipe.empty()))
    pipe.reset()
    got.append((pipe._first_iter, pipe._last_iter, pipe._epoch_idx, pipe._consumer_epoch_idx))
    return got


def test_private_scheduling_members_are_dalis(dali, folder):
    def define(lib):
        def batches():
            for b in range(6):
                yield [np.full((1,), b, np.int32)] * 2

        @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=2, seed=4)
        def pipe():
            _, labels = lib.fn.readers.file(file_root=str(folder))
            return labels, lib.fn.external_source(source=batches)
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    for attr in ("_max_batch_size", "_num_threads", "_device_id", "_seed", "_exec_pipelined", "_exec_async",
                 "_prefetch_queue_depth", "_cpu_queue_size", "_gpu_queue_size", "_exec_separated", "_py_pool",
                 "_py_num_workers", "_py_start_method", "_bytes_per_sample", "_set_affinity", "_iterator_data",
                 "_enable_checkpointing", "_is_restored_from_checkpoint", "_conditionals_enabled",
                 "_output_dtype", "_output_ndim", "_output_layout", "is_restored_from_checkpoint"):
        assert getattr(mine, attr) == getattr(theirs, attr), attr
    assert mine._batch_size == 2  # (DALI's earlier name of _max_batch_size, which rocAL keeps)
    assert _steps(mine) == _steps(theirs)
    theirs, mine = define(dali), define(ours)
    theirs.build()
    for pipe in (theirs, mine):  # _run_once: one iteration, no prefetch
        pipe._run_once()
        pipe._run_once()
    assert [samples(p.share_outputs()) for p in (mine, mine)] == [samples(p.share_outputs()) for p in (theirs,
                                                                                                      theirs)]
    assert mine._batches_to_consume == theirs._batches_to_consume == 0


def test_feed_input_before_each_run_gives_each_batch(dali):
    """Fed one batch before each run(): DALI gives the first, then fails (its prefetch ran dry); fastload
    prefetches only what was fed, and gives each."""
    def define(lib):
        @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            return lib.fn.external_source(name="x") + 1
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    got = []
    for i in range(3):
        value = [np.int32([i]), np.int32([i, 5])]
        mine.feed_input("x", value)
        got.append(samples(mine.run()))
        if i == 0:
            theirs.feed_input("x", value)
            assert got[0] == samples(theirs.run())
    assert got == [[[[1], [1, 6]]], [[[2], [2, 6]]], [[[3], [3, 6]]]]


def _by_iteration(iteration):
    """A parallel batch callback given the iteration number (no batch_info): 3 batches an epoch."""
    if iteration >= 3:
        raise StopIteration
    return [np.full((2,), iteration * 10 + k, np.int32) for k in range(2)]


def _three_batches():
    for b in range(3):
        yield [np.full((1,), b, np.int64)] * 2


def test_parallel_iteration_callbacks_and_generators_are_dalis(dali):
    def define(lib):
        @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, py_num_workers=2, py_start_method="fork")
        def pipe():
            return (lib.fn.external_source(source=_by_iteration, parallel=True, batch=True),
                    lib.fn.external_source(source=_three_batches, parallel=True, batch=True, prefetch_queue_depth=3),
                    lib.fn.random.coin_flip(probability=1.0))  # generated beside them: always 1
        return pipe()

    theirs, mine = define(dali), define(ours)
    for pipe in (theirs, mine):
        pipe.start_py_workers()
        pipe.build()
    assert runs(mine, 4, epochs=2) == runs(theirs, 4, epochs=2)


def test_a_short_external_batch_beside_a_reader_is_refused_as_by_dali(dali, folder):
    """Generated inputs follow the external sources' batch size; a reader's batch is always full, so an
    external batch of another size beside it is an error in both (fastload's names the sizes)."""
    def define(lib, reader):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
        def pipe():
            x = lib.fn.external_source(source=lambda: [np.int32([5])] * 2)
            outputs = [x, lib.fn.random.coin_flip(probability=1.0) + x]
            if reader:
                outputs.append(lib.fn.readers.file(file_root=str(folder))[1])
            return tuple(outputs)
        return pipe()

    theirs, mine = define(dali, False), define(ours, False)
    theirs.build()
    assert runs(mine, 1) == runs(theirs, 1) == [[[[5], [5]], [[6], [6]]]]
    theirs, mine = define(dali, True), define(ours, True)
    theirs.build()
    with pytest.raises(RuntimeError):
        theirs.run()
    with pytest.raises(RuntimeError, match="different sizes.*'the readers': 3"):
        mine.run()


def _mixed(lib, folder, batch_size, depth, batches, cycle):
    data = [[np.full((k % 3 + 1,), 100 * b + k, np.int32) for k in range(batch_size)] for b in range(batches)]

    def generator():
        yield from data

    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, prefetch_queue_depth=depth, seed=9)
    def pipe():
        _, labels = lib.fn.readers.file(file_root=str(folder))
        fed = lib.fn.external_source(source=generator, cycle=cycle)
        info = lib.fn.external_source(source=_per_sample, batch=False, dtype=lib.types.INT32)
        return labels, fed, info
    return pipe()


def _play(pipe, steps) -> list:
    """Each step's result: a batch, "stop", or what the engine says (the batches still to take)."""
    got = []
    for step in steps:
        try:
            if step == "reset":
                pipe.reset()
                got.append(("reset", pipe._epoch_idx, pipe._first_iter))
            elif step in ("run", "share"):
                got.append(samples(pipe.run() if step == "run" else pipe.share_outputs()))
            else:
                getattr(pipe, step)()
                got.append((step, pipe._batches_to_consume, pipe._last_iter))
        except StopIteration:
            got.append("stop")
    return got


@settings(max_examples=25, deadline=None, derandomize=True)
@given(batch_size=st.integers(1, 4), depth=st.integers(1, 3), batches=st.integers(1, 4),
       cycle=st.sampled_from([None, "quiet", "raise"]), scheduled=st.booleans(),
       picks=st.lists(st.integers(0, 9), min_size=4, max_size=14))
def test_any_schedule_of_a_mixed_pipeline_is_dalis(folder, batch_size, depth, batches, cycle, scheduled,
                                                  picks):
    """Random pipelines (reader, generator source, per-sample source) driven by random sequences of DALI's
    calls -- run/reset, or schedule_run/_prefetch/_run_once/share_outputs/release_outputs/reset -- give
    DALI's batches, StopIterations and engine state at every step."""
    names = ["schedule_run", "_prefetch", "_run_once", "share", "share", "share", "release_outputs", "reset",
             "share", "schedule_run"] if scheduled else ["run"] * 7 + ["reset"] * 3
    steps = [names[k] for k in picks]
    dali = import_dali()
    theirs, mine = _mixed(dali, folder, batch_size, depth, batches, cycle), _mixed(ours, folder, batch_size,
                                                                                  depth, batches, cycle)
    theirs.build()
    assert _play(mine, steps) == _play(theirs, steps)


def test_deprecated_scheduling_names_run_as_their_successors(dali, folder):
    """The loop of DALI's first plugins (_run, _share_outputs, _release_outputs): DALI 2.4 still has them,
    warning; its _share_outputs returns nothing, fastload's the outputs, as the loops written for it read."""
    def define(lib):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=5)
        def pipe():
            _, labels = lib.fn.readers.file(file_root=str(folder))
            return labels, lib.fn.external_source(source=_per_sample, batch=False, dtype=lib.types.INT32)
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    expected, got = [], []
    with pytest.warns(DeprecationWarning, match="_run is deprecated"):
        mine._run()
    theirs.schedule_run()
    for _ in range(4):
        expected.append(samples(theirs.share_outputs()))
        theirs.release_outputs()
        theirs.schedule_run()
        with pytest.warns(DeprecationWarning, match="_share_outputs is deprecated"):
            got.append(samples(mine._share_outputs()))
        with pytest.warns(DeprecationWarning):
            mine._release_outputs()
            mine._run()
    assert got == expected


def test_a_graph_beside_external_sources_runs_in_pool_threads_that_end(monkeypatch):
    """Its samples run in fastload's pool threads, each op on one core: run in the caller's thread, torch
    fanned each op over every core, 20x slower on a loaded 2-core machine (1.9 s against 0.11 s a batch of
    decode + resize + rotate). The threads end with the batch."""
    import threading

    from fastload.compat.engine.graph import Graph
    from fastload.thread_pool import THREAD_PREFIX
    where, run_sample = set(), Graph.run_sample

    def recording(self, ctx, given=None):
        where.add(threading.current_thread().name)
        return run_sample(self, ctx, given)
    monkeypatch.setattr(Graph, "run_sample", recording)

    @ours.pipeline_def(batch_size=5, num_threads=2, device_id=None)
    def pipe():
        return ours.fn.external_source(source=lambda: [np.int32([k]) for k in range(5)]) * 2

    before = set(threading.enumerate())
    assert samples(pipe().run()) == [[[0], [2], [4], [6], [8]]]
    assert where and all(name.startswith(THREAD_PREFIX) for name in where), where
    assert set(threading.enumerate()) == before


def test_run_with_pipeline_inputs_is_dalis(dali, folder):
    """run(name=batch) feeds the named source first; DALI allows it only without prefetching."""
    rng = np.random.default_rng()
    batches = [[rng.integers(0, 99, (int(rng.integers(1, 4)),)).astype(np.int16) for _ in range(3)]
               for _ in range(3)]

    def define(lib, depth):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, prefetch_queue_depth=depth)
        def pipe():
            _, labels = lib.fn.readers.file(file_root=str(folder))
            return labels, lib.fn.external_source(name="extra") * 3
        return pipe()

    theirs, mine = define(dali, 1), define(ours, 1)
    theirs.build()
    assert [samples(mine.run(extra=b)) for b in batches] == [samples(theirs.run(extra=b)) for b in batches]
    theirs, mine = define(dali, 2), define(ours, 2)
    theirs.build()
    for pipe in (theirs, mine):
        with pytest.raises(RuntimeError, match="prefetch_queue_depth"):
            pipe.run(extra=batches[0])


@pytest.mark.parametrize("reader", [{"random_shuffle": True, "seed": 4, "initial_fill": 3},
                                    {"shard_id": 1, "num_shards": 2, "pad_last_batch": True},
                                    {"stick_to_shard": True, "shard_id": 2, "num_shards": 3}])
def test_two_readers_and_a_source_side_by_side_are_dalis(dali, folder, reader):
    """Images and a second reader (masks, say) beside a per-sample source: each reader's own order
    (shuffled, sharded, padded) sample for sample, each epoch of the source."""
    def define(lib):
        @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=8)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=str(folder), **reader)
            other, other_labels = lib.fn.readers.file(file_root=str(folder), random_shuffle=True, seed=21)
            info = lib.fn.external_source(source=lambda i: _per_batch(types.BatchInfo(i, 0))[:3])
            return labels, other_labels, info, jpegs, other
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    assert runs(mine, 5, epochs=2) == runs(theirs, 5, epochs=2)


@pytest.mark.parametrize("kind", ["dtype", "ndim"])
@pytest.mark.parametrize("through", ["external_source", "python_function"])
def test_a_batch_of_mixed_types_or_ranks_is_refused_as_by_dali(dali, kind, through):
    """DALI refuses to make a batch whose samples differ in type or number of dimensions (a RuntimeError);
    fastload too, naming the output, where its samples come from a source or an operator."""
    def sample(info):
        odd = info.idx_in_batch == 1
        if kind == "dtype":
            return np.zeros((2, 3), np.float32 if odd else np.int32)
        return np.zeros((2, 3, 1) if odd else (2, 3), np.int32)

    def define(lib):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=2, exec_dynamic=False)
        def pipe():
            if through == "external_source":
                return lib.fn.external_source(lambda: [sample(types.SampleInfo(i, i, 0, 0)) for i in range(3)])
            x = lib.fn.external_source(sample, batch=False)
            return lib.fn.python_function(x, function=lambda v: v)
        return pipe()

    for lib in (dali, ours):
        p = define(lib)
        p.build()
        with pytest.raises(RuntimeError, match="type|dimensions"):
            p.run()
    with pytest.raises(RuntimeError, match=r"output 0 of the pipeline \((external_source|python_function)\)"):
        define(ours).run()


def test_a_reader_only_graph_that_does_not_fuse_warns_of_nothing(tmp_path):
    """Nothing but a reader: no operator runs one by one, so no warning; why it does not fuse names it."""
    import warnings
    (tmp_path / "a").write_bytes(b"abc")

    @ours.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        return ours.fn.readers.file(files=[str(tmp_path / "a")])[0]

    p = pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.build()
    assert p.unfused.startswith("readers.file read in the loader's threads, not fused: ")
    assert samples(p.run()) == [[[97, 98, 99], [97, 98, 99]]]


def test_a_graph_runs_straight_only_where_the_walk_would_run_every_op_in_the_same_order(dali, folder,
                                                                                          monkeypatch):
    """A graph without batch ops or conditionals runs its ops in one pass (``Graph.straight``); its values
    and the order its ops run in are the demand-driven walk's. A graph with a conditional is walked, and
    still equals real DALI."""
    from fastload.compat.engine import graph as engine

    def plain(mod):
        fn = mod.fn
        jpegs, labels = fn.readers.file(file_root=str(folder), name="Reader")
        images = fn.decoders.image(jpegs)
        flipped = fn.flip(images, horizontal=fn.random.coin_flip(seed=3))
        return fn.cast(fn.reductions.sum(flipped, axes=[0, 1]), dtype=mod.types.INT64), labels

    def conditional(mod):
        fn = mod.fn
        jpegs, labels = fn.readers.file(file_root=str(folder), name="Reader")
        images = fn.decoders.image(jpegs)
        if labels[0] > 0:
            images = fn.flip(images, horizontal=1)
        else:
            images = fn.flip(images, vertical=1)
        return fn.cast(fn.reductions.sum(images, axes=[0, 1]), dtype=mod.types.INT64), labels

    def build(mod, graph, conditionals=False):
        @mod.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=5, enable_conditionals=conditionals)
        def pipe():
            return graph(mod)
        built = pipe()
        built.build()
        return built

    ran = []
    original = engine.Op.run
    monkeypatch.setattr(engine.Op, "run", lambda op, ctx, values: ran.append(op.name) or original(op, ctx, values))
    straight = build(ours, plain)
    assert straight._graph.straight
    got = runs(straight, 3)
    order, ran[:] = list(ran), []
    walk = build(ours, plain)
    walk._graph.straight = False  # the walk, on the same graph, before its first batch
    assert runs(walk, 3) == got and ran == order
    assert got == runs(build(dali, plain), 3)

    walked = build(ours, conditional, conditionals=True)
    assert not walked._graph.straight
    assert runs(walked, 3) == runs(build(dali, conditional, conditionals=True), 3)


def test_a_batch_of_one_shape_comes_out_dense_and_a_ragged_one_as_samples(dali, folder):
    """Samples of one shape and type are copied into one batch tensor as they end (``BatchBuffers``):
    ``as_tensor()`` is that tensor, not a copy, and each sample a view of it; decoded images of awkward
    sizes stay separate samples. Values as real DALI's either way."""
    def graph(mod):
        fn = mod.fn
        jpegs, labels = fn.readers.file(file_root=str(folder), name="Reader")
        images = fn.decoders.image(jpegs)
        return images, fn.resize(images, resize_x=6, resize_y=5), labels

    built = _built(ours, graph)
    images, resized, labels = built.run()
    assert not images.is_dense_tensor() and images._dense is None
    for out in (resized, labels):
        batch = out.as_tensor()
        assert batch.data_ptr() == out.as_tensor().data_ptr()  # the batch itself, each time
        assert all(out[i].data_ptr() == batch[i].data_ptr() for i in range(3))
    assert runs(_built(ours, graph), 3) == runs(_built(dali, graph), 3)


def _built(mod, graph):
    @mod.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=5)
    def pipe():
        return graph(mod)
    built = pipe()
    built.build()
    return built
