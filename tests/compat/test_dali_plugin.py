"""fastload.compat.dali.plugin.pytorch against real DALI: both iterators run over identical real DALI
pipelines (a file reader over tiny files whose byte and label are the file's number, so every batch shows
which samples it holds) and must give the same batches, padding, lengths, epochs and errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

pytest.importorskip("nvidia.dali")  # every test here runs DALI's own pipelines: the whole module needs DALI

import nvidia.dali.plugin.base_iterator as dali_base  # noqa: E402
import nvidia.dali.plugin.pytorch as dali_pt  # noqa: E402
from nvidia.dali import fn, pipeline_def  # noqa: E402

import fastload.compat.dali.plugin.base_iterator as ours_base  # noqa: E402
import fastload.compat.dali.plugin.pytorch as ours_pt  # noqa: E402

SIDES = {"dali": (dali_pt, dali_base), "ours": (ours_pt, ours_base)}


pytestmark = pytest.mark.usefixtures("quiet_iterators")  # both sides warn and log about iterator use


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Files 1..11, each holding one byte: its number."""
    folder = tmp_path_factory.mktemp("samples")
    paths = []
    for number in range(1, 12):
        path = folder / f"{number:02d}.bin"
        path.write_bytes(bytes([number]))
        paths.append(str(path))
    return paths


@pipeline_def
def reader_pipe(files, shard_id=0, num_shards=1, pad=False, stick=False):
    data, label = fn.readers.file(files=files, labels=list(range(1, len(files) + 1)), name="Reader",
                                  shard_id=shard_id, num_shards=num_shards, pad_last_batch=pad,
                                  stick_to_shard=stick, random_shuffle=False)
    return data, label


def readers(files, n, batch_size, shard_ids=(0,), num_shards=1, pad=False, stick=False):
    return [reader_pipe(files[:n], s, num_shards, pad, stick, batch_size=batch_size, num_threads=1,
                        device_id=None) for s in shard_ids]


class TorchTensorList:
    """Stands in for fastload's TensorList: ``as_tensor()`` is already a torch tensor, ``at(i)`` a sample."""

    def __init__(self, tl):
        self.samples = [torch.from_numpy(np.array(tl.at(i))) for i in range(len(tl))]
        self._layout = tl.layout()

    def __len__(self):
        return len(self.samples)

    def at(self, i):
        return self.samples[i]

    def layout(self):
        return self._layout

    def as_tensor(self):
        return torch.stack(self.samples)   # RuntimeError when shapes differ, as in DALI


class FastloadLikePipe:
    """A pipeline offering only what fastload's pipeline offers the iterators, over a real DALI pipeline."""

    def __init__(self, pipe):
        self._pipe = pipe
        self.batch_size = pipe.max_batch_size
        self.device_id = pipe.device_id

    def build(self):
        self._pipe.build()

    def run(self):
        return tuple(TorchTensorList(out) for out in self._pipe.run())

    def reset(self):
        self._pipe.reset()

    def reader_meta(self, name):
        return self._pipe.reader_meta(name)

    def epoch_size(self, name):
        return self._pipe.epoch_size(name)


def snapshot(batch):
    """A batch as plain values, to compare: per pipeline, per output, dtype, shape, device and values."""
    return [{name: (str(t.dtype), tuple(t.shape), t.device.type, t.tolist()) for name, t in d.items()}
            for d in batch]


def make(side, pipes, output_map=("data", "label"), cls="DALIGenericIterator", **kw):
    module, base = SIDES[side]
    if isinstance(kw.get("last_batch_policy"), str):
        kw["last_batch_policy"] = getattr(base.LastBatchPolicy, kw["last_batch_policy"])
    if cls == "DALIClassificationIterator":
        return module.DALIClassificationIterator(pipes, **kw)
    return getattr(module, cls)(pipes, list(output_map), **kw)


def drive(it, mode, epochs):
    """What a training script sees over a few epochs, ended and restarted the way `mode` says."""
    seen = [("len", len(it), it.size, it._size, it.batch_size)]
    for _ in range(epochs):
        epoch = []
        try:
            if mode == "len":            # stop after len(it) batches, then reset()
                epoch = [snapshot(next(it)) for _ in range(len(it))]
            elif mode in ("next", "auto-next"):   # next() to StopIteration, then reset() or auto_reset
                while True:
                    epoch.append(snapshot(next(it)))
            else:                        # for loops; "for" also calls reset(), "auto" has auto_reset=True
                epoch = [snapshot(b) for b in it]
        except StopIteration:
            pass
        except Exception as error:       # the same failure on both sides counts as the same behaviour
            epoch.append(type(error).__name__)
        seen += [epoch, ("len", len(it), it.size)]
        if mode in ("len", "next", "for"):
            it.reset()
    return seen


def both(pipes_for, mode="next", epochs=4, **kw):
    """Runs DALI's iterator and ours over identical fresh pipelines; returns (dali, ours)."""
    results = []
    for side in ("dali", "ours"):
        if mode.startswith("auto"):
            kw["auto_reset"] = True
        try:
            it = make(side, pipes_for(side), **dict(kw))
        except Exception as error:
            results.append(("constructor", type(error).__name__))
            continue
        results.append(drive(it, mode, epochs))
    return results


def labels(batch):
    return [d["label"].flatten().tolist() for d in batch]


# -- DALI's documented table --------------------------------------------------------------------------------

TABLE = {  # (policy, last_batch_padded): (last batch of the epoch, first batch of the next), data 1..7, batch 2
    ("PARTIAL", True): ([7], [1, 2]), ("PARTIAL", False): ([7], [2, 3]),
    ("FILL", True): ([7, 7], [1, 2]), ("FILL", False): ([7, 1], [2, 3]),
    ("DROP", True): ([5, 6], [1, 2]), ("DROP", False): ([5, 6], [2, 3]),
}


@pytest.mark.parametrize("sizing", ["reader_name", "size"])
@pytest.mark.parametrize("policy,padded", list(TABLE))
def test_last_batch_policy_table(files, policy, padded, sizing):
    last, first_next = TABLE[policy, padded]
    kw = dict(reader_name="Reader") if sizing == "reader_name" else dict(size=7, last_batch_padded=padded)
    for side in ("ours", "dali"):
        it = make(side, readers(files, 7, 2, pad=padded), last_batch_policy=policy, **kw)
        epoch = [labels(b)[0] for b in it]
        it.reset()
        assert epoch[-1] == last, side
        assert labels(next(it))[0] == first_next, side
        assert [x for b in epoch[:-1] for x in b] == list(range(1, len(epoch[:-1]) * 2 + 1)), side


# -- the full matrix against DALI ----------------------------------------------------------------------------

def reader_cases():
    """(samples, batch, shards, shard ids in this iterator, pad_last_batch, stick_to_shard)."""
    for n, bs in itertools.product([7, 11], [2, 3]):
        for pad in (False, True):
            yield n, bs, 1, (0,), pad, False
            for stick in (False, True):
                yield n, bs, 3, (0, 1, 2), pad, stick           # one process, a pipeline per GPU
                for shard in range(3):
                    yield n, bs, 3, (shard,), pad, stick        # one pipeline of a 3-process job
    for pad, stick, ids in itertools.product((False, True), (False, True), ((0, 1, 2), (1,))):
        yield 4, 3, 3, ids, pad, stick   # shards of 1, 1 and 2 samples: a last batch reaches a whole epoch ahead


@pytest.mark.parametrize("policy", ["FILL", "DROP", "PARTIAL"])
def test_reader_name_matches_dali(files, policy):
    """Every shard setting x reset style, over 4 epochs: same batches, lengths and sizes as DALI's."""
    checked = 0
    for case in reader_cases():
        n, bs, shards, ids, pad, stick = case
        for mode, wrap in [("next", False), ("for", True), ("auto", False), ("auto-next", True), ("iter", True),
                           ("len", False)]:
            def pipes_for(side):
                pipes = readers(files, n, bs, ids, shards, pad, stick)
                return [FastloadLikePipe(p) for p in pipes] if side == "ours" and wrap else pipes
            dali, ours = both(pipes_for, mode, reader_name="Reader", last_batch_policy=policy)
            assert ours == dali, (case, mode, wrap)
            checked += 1
    assert checked == 6 * (4 * 2 * (1 + 2 * 4) + 8)


@pytest.mark.parametrize("policy", ["FILL", "DROP", "PARTIAL"])
def test_size_matches_dali(files, policy):
    """`size` given by hand (summed over the pipelines), one or three pipelines, with and without padding."""
    for n, bs, npipes, pad, extra in itertools.product([7, 11], [2, 3], [1, 3], [False, True], [0, -2]):
        size = n * npipes + extra
        for mode in ("next", "auto", "auto-next", "len"):
            dali, ours = both(lambda side: readers(files, n, bs, [0] * npipes, pad=pad), mode, size=size,
                              last_batch_padded=pad, last_batch_policy=policy)
            assert ours == dali, (n, bs, npipes, pad, size, mode)


@pytest.mark.parametrize("prepare_first_batch", [True, False])
def test_prepare_first_batch_and_classification_iterator(files, prepare_first_batch):
    """DALIClassificationIterator is ["data", "label"]; labels stay int32 [N, 1] as the reader gives them."""
    dali, ours = both(lambda side: readers(files, 11, 3, (0, 1, 2), 3), "for", cls="DALIClassificationIterator",
                      reader_name="Reader", last_batch_policy="PARTIAL",
                      prepare_first_batch=prepare_first_batch)
    assert ours == dali
    first = ours[1][0][0]
    assert list(first) == ["data", "label"]
    assert first["label"][:3] == ("torch.int32", (3, 1), "cpu") and first["data"][0] == "torch.uint8"


def test_attributes_and_len(files):
    for policy in ("FILL", "DROP", "PARTIAL"):
        its = {side: make(side, readers(files, 11, 2, (0, 1, 2), 3), reader_name="Reader",
                          last_batch_policy=policy, output_map=("x", "y")) for side in SIDES}
        for name in ("batch_size", "size", "_size", "output_map"):
            assert getattr(its["ours"], name) == getattr(its["dali"], name), (policy, name)
        assert len(its["ours"]) == len(its["dali"]) == sum(1 for _ in its["dali"])


def test_reset_before_the_epoch_ends_is_ignored(files):
    for side in SIDES:
        it = make(side, readers(files, 7, 2), reader_name="Reader")
        next(it)
        it.reset()   # DALI logs a warning and carries on
        assert [labels(b)[0] for b in it] == [[3, 4], [5, 6], [7, 1]], side


# -- external source -------------------------------------------------------------------------------------

class ExternalInputIterator:
    """As in DALI's "ExternalSource operator" PyTorch tutorial: whole batches, StopIteration ends an epoch."""

    def __init__(self, batch_size, n):
        self.batch_size, self.n = batch_size, n

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i >= self.n:
            self.__iter__()
            raise StopIteration
        count = min(self.batch_size, self.n - self.i)    # a short last batch
        data = [np.full((2,), self.i + k, dtype=np.uint8) for k in range(count)]
        label = [np.array([self.i + k], dtype=np.int32) for k in range(count)]
        self.i += count
        return data, label


@pipeline_def
def external_pipe(source):
    return tuple(fn.external_source(source=source, num_outputs=2))


def sample_source(info):
    if info.idx_in_epoch >= 9:
        raise StopIteration
    return np.array([info.idx_in_epoch], dtype=np.int64)


@pipeline_def
def sample_pipe():
    return fn.external_source(source=sample_source, batch=False)


@pytest.mark.parametrize("mode", ["next", "for", "auto", "auto-next", "iter"])
def test_external_source_matches_dali(mode):
    # The tutorial passes last_batch_padded=True with PARTIAL; with no size DALI ignores both.
    dali, ours = both(lambda side: external_pipe(ExternalInputIterator(3, 8), batch_size=3, num_threads=1,
                                                 device_id=None),
                      mode, cls="DALIClassificationIterator", last_batch_padded=True,
                      last_batch_policy="PARTIAL")
    assert ours == dali
    assert [len(b[0]["label"][3]) for b in ours[1]] == [3, 3, 2]
    dali, ours = both(lambda side: sample_pipe(batch_size=4, num_threads=1, device_id=None), mode,
                      output_map=("x",))
    assert ours == dali
    assert sum(len(b[0]["x"][3]) for b in ours[1]) == 8    # the pipeline drops the incomplete batch


def test_size_with_external_source_matches_dali():
    """size given, the source wraps to whole batches (the other half of the tutorial)."""
    class Wrapping(ExternalInputIterator):
        def __next__(self):
            data = [np.full((2,), (self.i + k) % self.n, dtype=np.uint8) for k in range(self.batch_size)]
            label = [np.array([(self.i + k) % self.n], dtype=np.int32) for k in range(self.batch_size)]
            self.i += self.batch_size
            return data, label
    for policy in ("FILL", "DROP", "PARTIAL"):
        new = lambda side: external_pipe(Wrapping(3, 8), batch_size=3, num_threads=1, device_id=None)  # noqa: E731
        dali, ours = both(new, "next", cls="DALIClassificationIterator", size=8, last_batch_policy=policy)
        assert ours == dali, policy


# -- errors --------------------------------------------------------------------------------------------------

def error_kind(side, pipes_for, **kw):
    with pytest.raises(Exception) as raised:
        it = make(side, pipes_for(), **kw)
        for _ in it:
            pass
    return raised.type


@pytest.mark.parametrize("case", [
    "size_and_reader", "padded_and_reader", "size_zero", "unsized_many", "bad_auto_reset", "bad_policy",
    "duplicate_names", "batch_sizes_differ", "readers_differ", "shard_smaller_than_batch",
    "variable_batch_with_size", "too_many_outputs", "too_few_names"])
def test_errors_match_dali(files, case):
    one = lambda: readers(files, 7, 2)   # noqa: E731
    pipes_for, kw = one, {}
    if case == "size_and_reader":
        kw = dict(size=7, reader_name="Reader")
    elif case == "padded_and_reader":
        kw = dict(reader_name="Reader", last_batch_padded=True)
    elif case == "size_zero":
        kw = dict(size=0)
    elif case == "unsized_many":
        pipes_for = lambda: readers(files, 7, 2, (0, 0))   # noqa: E731
    elif case == "bad_auto_reset":
        kw = dict(reader_name="Reader", auto_reset="sometimes")
    elif case == "bad_policy":
        kw = dict(reader_name="Reader", last_batch_policy=0)
    elif case == "duplicate_names":
        kw = dict(reader_name="Reader", output_map=("x", "x"))
    elif case == "batch_sizes_differ":
        pipes_for = lambda: readers(files, 7, 2) + readers(files, 7, 3)   # noqa: E731
        kw = dict(reader_name="Reader")
    elif case == "readers_differ":
        pipes_for = lambda: readers(files, 7, 2, (0,), 2, pad=True) + readers(files, 7, 2, (1,), 2)  # noqa: E731
        kw = dict(reader_name="Reader")
    elif case == "shard_smaller_than_batch":
        pipes_for = lambda: readers(files, 2, 4)   # noqa: E731
        kw = dict(reader_name="Reader", last_batch_policy="DROP")
    elif case == "variable_batch_with_size":
        pipes_for = lambda: external_pipe(ExternalInputIterator(3, 7), batch_size=3, num_threads=1,  # noqa: E731
                                          device_id=None)
        kw = dict(size=7)
    elif case == "too_many_outputs":
        kw = dict(reader_name="Reader", output_map=("data",))
    elif case == "too_few_names":
        kw = dict(reader_name="Reader", output_map=("data", "label", "extra"))
    dali = error_kind("dali", pipes_for, **kw)
    ours = error_kind("ours", pipes_for, **kw)
    assert ours is dali, (ours, dali)


# -- outputs whose samples differ in shape ---------------------------------------------------------------------

def ragged_source(info):
    if info.idx_in_epoch >= 6:
        raise StopIteration
    return np.arange(info.idx_in_epoch + 1, dtype=np.int32)


@pipeline_def
def ragged_pipe():
    return fn.external_source(source=ragged_source, batch=False)


def test_ragged_outputs_match_dali():
    new = lambda side: ragged_pipe(batch_size=2, num_threads=1, device_id=None)   # noqa: E731
    # DALIGenericIterator (dynamic_shape or not) refuses a batch that is not one dense tensor.
    for dynamic_shape in (False, True):
        assert error_kind("ours", lambda: new("ours"), output_map=("x",), dynamic_shape=dynamic_shape) \
            is error_kind("dali", lambda: new("dali"), output_map=("x",), dynamic_shape=dynamic_shape) \
            is RuntimeError
    # ...and so does it over a fastload-like pipeline, whose TensorList cannot stack such samples.
    with pytest.raises(RuntimeError):
        make("ours", FastloadLikePipe(new("ours")), output_map=("x",))
    tag = dali_pt.DALIRaggedIterator.SPARSE_LIST_TAG
    seen = {side: [[[t.tolist() for t in d["x"]] for d in b]
                   for b in make(side, new(side), ("x",), "DALIRaggedIterator", output_types=[tag])]
            for side in SIDES}
    assert seen["ours"] == seen["dali"] == [[[[0], [0, 1]]], [[[0, 1, 2], [0, 1, 2, 3]]],
                                            [[[0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]]]]
    tag = dali_pt.DALIRaggedIterator.SPARSE_COO_TAG
    seen = {side: [b[0]["x"].to_dense().tolist()
                   for b in make(side, new(side), ("x",), "DALIRaggedIterator", output_types=[tag])]
            for side in SIDES}
    assert seen["ours"] == seen["dali"]


def test_feed_ndarray_and_to_torch_match_dali(files):
    out = readers(files, 7, 2)[0].run()[0].as_tensor()
    for side in SIDES:
        target = torch.zeros((2, 1), dtype=torch.uint8)
        assert SIDES[side][0].feed_ndarray(out, target) is target
        assert target.flatten().tolist() == [1, 2], side
        with pytest.raises(AssertionError):
            SIDES[side][0].feed_ndarray(out, torch.zeros((3, 1), dtype=torch.uint8))
    # A fastload TensorList's tensor is handed over as it is: no copy, its own device.
    tensor = torch.arange(4).reshape(2, 2)
    assert ours_pt.to_torch(type("TL", (), {"as_tensor": lambda self: tensor})()) is tensor


def test_the_plugins_own_operator_module_is_dalis():
    """``nvidia.dali.plugin.pytorch.fn`` is the plugin's own module (torch_python_function only, importable by
    path) and ``TorchPythonFunction`` its ops class, as in DALI's plugin; other operator names are refused."""
    import importlib

    import fastload.compat.dali.plugin.pytorch as plugin
    from fastload.compat.dali import fn, ops
    from fastload.compat.dali.plugin.pytorch.fn import torch_python_function
    dali_plugin = importlib.import_module("nvidia.dali.plugin.pytorch") if _has_dali() else None
    assert torch_python_function is fn.torch_python_function and plugin.TorchPythonFunction is ops.TorchPythonFunction
    if dali_plugin is not None:
        assert [n for n in dir(dali_plugin.fn) if not n.startswith("_")] == ["torch_python_function"]
        assert hasattr(dali_plugin, "TorchPythonFunction")
    with pytest.raises(NotImplementedError, match="plugin.pytorch.fn has: torch_python_function"):
        plugin.fn.resize


def _has_dali() -> bool:
    import importlib.util
    return importlib.util.find_spec("nvidia.dali") is not None
