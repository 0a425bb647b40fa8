"""The modules DALI scripts import beyond fn/ops/types: nvidia.dali.tensors (pipeline
outputs are its TensorListCPU/TensorListGPU, samples and dense batches its TensorCPU/TensorGPU),
nvidia.dali.pipeline.experimental, nvidia.dali.plugin.pytorch.experimental (imports; the proxy refuses),
types.to_numpy_type. One script runs unchanged on real DALI 2.4 and on fastload (python -m
fastload.compat.run) and must report the same; and what fastload lacks is refused by name (item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

SCRIPT = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    from nvidia.dali import fn, types
    from nvidia.dali.pipeline.experimental import pipeline_def
    from nvidia.dali.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU
    from nvidia.dali.plugin.pytorch.experimental import proxy  # noqa: F401
    from nvidia.dali.plugin.pytorch import TensorCPU as PluginTensorCPU, to_torch_type

    folder = sys.argv[1]
    files = [os.path.join(folder, name) for name in sorted(os.listdir(folder))]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        data, labels = fn.readers.file(files=files, labels=[10, 11, 12, 13], name="R")
        return data, labels

    p = pipe()
    p.build()
    data, labels = p.run()
    dense = labels.as_tensor()
    sample = labels[1]
    made = TensorListCPU(np.arange(6, dtype=np.int16).reshape(3, 2), "A")
    print(json.dumps({
        "types": [isinstance(data, TensorListCPU), isinstance(labels, TensorListCPU),
                  isinstance(labels, TensorListGPU), isinstance(dense, TensorCPU), isinstance(sample, TensorCPU),
                  isinstance(sample, TensorGPU), PluginTensorCPU is TensorCPU],
        "len": len(labels), "layout": labels.layout(), "dtype": str(labels.dtype),
        "at": labels.at(2).tolist(), "at_dtype": str(labels.at(2).dtype), "as_array": labels.as_array().tolist(),
        "shape": [list(s) for s in labels.shape()], "dense_shape": list(dense.shape()),
        "sample_shape": list(sample.shape()), "sample": np.array(sample).tolist(),
        "is_dense": labels.is_dense_tensor(), "ragged": data.is_dense_tensor(),
        "data_at": [data.at(i).tolist() for i in range(len(data))],
        "as_cpu": isinstance(labels.as_cpu(), TensorListCPU) and labels.as_cpu().as_array().tolist(),
        "reshaped": list(np.array(labels.as_reshaped_tensor([3])).shape),
        "made": [made.as_array().tolist(), made.layout(), str(made.dtype), len(made), made.at(1).tolist()],
        "numpy_types": [types.to_numpy_type(t).__name__ for t in (types.FLOAT, types.UINT8, types.INT32,
                                                                 types.FLOAT16, types.BOOL, types.INT64)],
        "torch_types": [str(to_torch_type[t]) for t in (types.FLOAT, types.UINT8, types.INT64)],
    }, sort_keys=True))
''')


@pytest.fixture
def script(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    for i, payload in enumerate([b"a", b"bb", b"ccc", b"dddd"]):
        (folder / f"{i}.bin").write_bytes(payload)
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    return str(path), str(folder)


def _run(*argv) -> dict:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_one_script_reports_the_same_on_dali_and_on_fastload(script):
    pytest.importorskip("nvidia.dali")
    path, folder = script
    theirs = _run(path, folder)
    mine = _run("-m", "fastload.compat.run", path, folder)
    assert theirs["types"] == [True, True, False, True, True, False, True]
    assert mine == theirs


def test_tensor_list_classes():
    from fastload.compat.dali import types
    from fastload.compat.dali.tensors import TensorCPU, TensorGPU, TensorList, TensorListCPU, TensorListGPU
    cpu = TensorList([torch.zeros(2, 3), torch.ones(2, 3)], "HW", "cpu")
    gpu = TensorList([torch.zeros(2, 3), torch.ones(2, 3)], "HW", "gpu")  # (CPU memory here: no GPU needed)
    assert type(cpu) is TensorListCPU and type(gpu) is TensorListGPU
    assert type(TensorList.from_batch(torch.zeros(4, 2), "", "gpu")) is TensorListGPU
    assert isinstance(gpu.as_cpu(), TensorListCPU) and gpu.as_cpu().as_array().shape == (2, 2, 3)
    assert cpu.as_cpu() is cpu and cpu.layout() == "HW" and cpu.dtype is types.FLOAT and cpu.ndim() == 2
    with pytest.raises(RuntimeError, match="as_cpu"):
        gpu.at(0)
    batch = cpu.as_tensor()
    assert isinstance(batch, TensorCPU) and isinstance(batch, torch.Tensor) and batch.shape() == [2, 2, 3]
    assert batch.shape[0] == 2 and batch.shape == (2, 2, 3) and type(batch + 1) is torch.Tensor
    assert torch.equal(batch, torch.stack([torch.zeros(2, 3), torch.ones(2, 3)]))
    dense = torch.arange(6).reshape(3, 2)
    assert TensorList.from_batch(dense).as_tensor().data_ptr() == dense.data_ptr()  # a view, no copy
    assert isinstance(list(cpu)[1], TensorCPU) and isinstance(gpu[0], TensorGPU)
    assert isinstance(gpu[0].as_cpu(), TensorCPU) and all(type(t) is torch.Tensor for t in cpu.tensors)
    ragged = TensorListCPU([np.zeros(2), np.zeros(3)])
    assert not ragged.is_dense_tensor() and ragged.at(1).shape == (3,)
    with pytest.raises(RuntimeError, match="dense"):
        ragged.as_tensor()
    assert np.array(TensorCPU(np.arange(3))).tolist() == [0, 1, 2]
    from fastload.compat.dali.plugin.pytorch import to_torch
    out = to_torch(cpu)
    assert type(out) is torch.Tensor and out.shape == (2, 2, 3)  # the iterators hand over plain tensors


def test_pipeline_outputs_are_tensor_lists(tmp_path):
    from fastload.compat.dali import fn, pipeline_def
    from fastload.compat.dali.tensors import TensorCPU, TensorListCPU
    (tmp_path / "a").write_bytes(b"x")

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.readers.file(files=[str(tmp_path / "a")], labels=[5])

    data, labels = pipe().run()
    assert isinstance(data, TensorListCPU) and isinstance(labels, TensorListCPU)
    assert isinstance(labels.as_tensor(), TensorCPU) and labels.as_array().tolist() == [[5], [5]]


def test_experimental_modules_import_and_the_proxy_refuses():
    import fastload.compat.dali.pipeline.experimental as experimental
    from fastload.compat.dali.plugin.pytorch.experimental import proxy
    from fastload.compat.dali.types import FLOAT, STRING, to_numpy_type
    assert callable(experimental.pipeline_def)
    with pytest.raises(NotImplementedError, match="debug"):
        experimental.pipeline_def(debug=True)
    for cls in (proxy.DALIServer, proxy.DataLoader):
        with pytest.raises(NotImplementedError, match="DALIGenericIterator"):
            cls(None)
    assert to_numpy_type(FLOAT) is np.float32
    with pytest.raises(KeyError):  # as in DALI
        to_numpy_type(STRING)


@pytest.mark.parametrize("module,name,listed", [
    ("fastload.compat.dali.fn", "fits_reader", "crop_mirror_normalize"),
    ("fastload.compat.dali.fn.readers", "webdatasets", "file"),
    ("fastload.compat.dali.fn.decoders", "video", "image"),
    ("fastload.compat.dali.ops", "FitsReader", "CropMirrorNormalize"),
    ("fastload.compat.dali.types", "PIPELINE_API_BASIC", "FLOAT"),
    ("fastload.compat.dali", "math", "pipeline_def"),
    ("fastload.compat.dali.tensors", "format_batch", "TensorListCPU"),
    ("fastload.compat.dali.plugin.pytorch", "DALIClassificationIteratr", "DALIGenericIterator"),
    ("fastload.compat.dali.plugin.base_iterator", "Foo", "LastBatchPolicy"),
    ("fastload.compat.dali.pipeline", "do_not_exist", "pipeline_def"),
])
def test_unsupported_names_are_refused_by_name(module, name, listed):
    import importlib

    from fastload.compat.dali.unsupported import Unsupported
    mod = importlib.import_module(module)
    with pytest.raises(NotImplementedError, match=rf"\.{name} is not supported; .* has: .*{listed}") as caught:
        getattr(mod, name)
    assert isinstance(caught.value, AttributeError) and isinstance(caught.value, Unsupported)
    assert not hasattr(mod, name) and getattr(mod, name, None) is None  # as any missing attribute
    with pytest.raises(AttributeError) as private:
        getattr(mod, "_private_thing")
    assert not isinstance(private.value, NotImplementedError)


def test_the_unsupported_list_is_generated_from_dali(tmp_path):
    """scripts/dali_unsupported.py writes the list from real DALI's modules and registry; the committed page is
    its output for the layer as it is."""
    pytest.importorskip("nvidia.dali")
    out = tmp_path / "list.md"
    subprocess.run([sys.executable, "scripts/dali_unsupported.py", str(out)], check=True, timeout=300)
    text = out.read_text()
    missing = text.split("## `fn` operators")[1]
    assert "`fn.optical_flow`" in missing and "`fn.readers.video`" in missing
    assert "`fn.crop_mirror_normalize`" not in missing and "`fn.readers.numpy`" not in missing
    run = text.split("### Run")[1].split("### Not run")[0]
    assert "- `readers__File`: `fn.readers.file`, `ops.readers.File`" in run and "`fn.readers.video`" not in run
    not_run = text.split("### Not run")[1].split("## `fn` operators")[0]
    assert "- `OpticalFlow`: `fn.optical_flow`, `ops.OpticalFlow` (20+ files): GPU-only in DALI 2.4" in not_run
    assert "### How much the operators are used" in text  # the ranking and its method
    with open("docs/dali-unsupported.md") as committed:
        assert committed.read() == text
