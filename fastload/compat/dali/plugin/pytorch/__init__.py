"""DALI's PyTorch iterators (``nvidia.dali.plugin.pytorch``): pipeline outputs as torch tensors.

Each ``next()`` gives a list with one ``{name: tensor}`` dict per pipeline, the outputs named in the
order the pipeline returns them. A tensor stays on the device its output is on (CPU outputs as CPU
tensors, GPU outputs on the pipeline's GPU). Epochs, shards and the last batch follow DALI's rules; see
:mod:`fastload.compat.dali.plugin.base_iterator`.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import ops  # noqa: F401  (DALI's plugin module has it too)
from ...pipeline import Pipeline
from ...tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU  # noqa: F401
from ...types import TORCH_DTYPES
from ..base_iterator import LastBatchPolicy, _DaliBaseIterator, _require

__all__ = ["DALIGenericIterator", "DALIClassificationIterator", "DALIRaggedIterator", "LastBatchPolicy",
           "Pipeline", "TensorCPU", "TensorGPU", "TensorListGPU", "experimental", "feed_ndarray", "to_torch",
           "to_torch_type"]

to_torch_type = dict(TORCH_DTYPES)  # DALI's map: a DALI type -> its torch dtype


def _tensor_to_torch(tensor):
    """One dense tensor (ours: already torch; DALI's TensorCPU/TensorGPU or a numpy array) as torch.

    Data from a DALI pipeline is copied: its buffers may be reused by the pipeline's next iterations."""
    if isinstance(tensor, torch.Tensor):  # ours (a TensorCPU/TensorGPU view handed over as a plain tensor)
        return tensor if type(tensor) is torch.Tensor else tensor.as_subclass(torch.Tensor)
    if "GPU" in type(tensor).__name__:
        return torch.from_dlpack(tensor).clone()
    return torch.from_numpy(np.array(tensor, copy=True))


def to_torch(output):
    """A whole batch output (TensorList) as one torch tensor, the samples stacked on a new first axis.

    As in DALI, the samples must have one shape: a batch that is not a dense tensor raises RuntimeError
    (DALI's ``dynamic_shape`` no longer changes that; ``DALIRaggedIterator`` returns such outputs)."""
    dense = getattr(output, "is_dense_tensor", None)
    if dense is not None and not dense():
        raise RuntimeError("The batch must be representable as a tensor - it must have uniform shape "
                           "(give every sample one shape, e.g. pad or resize, or use DALIRaggedIterator)")
    return _tensor_to_torch(output.as_tensor())


def _samples_to_torch(output):
    return [_tensor_to_torch(output.at(i)) for i in range(len(output))]


def feed_ndarray(dali_tensor, arr, cuda_stream=None):
    """Copies a DALI tensor or batch into the torch tensor ``arr`` (same dtype and shape), returns ``arr``.

    ``cuda_stream`` is accepted for DALI's signature; the copy runs on torch's current stream."""
    source = to_torch(dali_tensor) if hasattr(dali_tensor, "as_tensor") else _tensor_to_torch(dali_tensor)
    _require(source.dtype == arr.dtype, "The element type of DALI Tensor/TensorList doesn't match the element "
                                        f"type of the target PyTorch Tensor: {source.dtype} vs {arr.dtype}")
    _require(source.shape == arr.shape, f"Shapes do not match: DALI tensor has size {list(source.shape)}, "
                                        f"but PyTorch Tensor has size {list(arr.shape)}")
    arr.copy_(source, non_blocking=cuda_stream is not None)
    return arr


def _named(outputs, output_map):
    """Pairs outputs with names, failing as DALI does when they differ in number."""
    if len(outputs) > len(output_map):
        raise IndexError(f"The pipeline returns {len(outputs)} outputs but output_map names only "
                         f"{len(output_map)}: {output_map}")
    if len(outputs) < len(output_map):
        raise KeyError(f"output_map names {len(output_map)} outputs ({output_map}) but the pipeline returns "
                       f"only {len(outputs)}")
    return zip(output_map, outputs)


class DALIGenericIterator(_DaliBaseIterator):
    """DALI's general PyTorch iterator: any number of outputs, returned as torch tensors.

    Parameters (DALI's)
    ----------
    pipelines : a pipeline or a list of them (one per GPU), all with the same batch size
    output_map : distinct names for the pipeline's outputs, in order
    size : samples in the epoch, summed over the pipelines (deprecated in favour of ``reader_name``);
        -1 with no ``reader_name`` reads one pipeline until it raises StopIteration
    reader_name : the ``name`` of the reader whose shard sets the epoch size and padding
    auto_reset : True/"yes" resets at the end of an epoch; False/"no"/None waits for ``reset()``
    fill_last_batch : deprecated: True is FILL, False is PARTIAL
    dynamic_shape : accepted for backward compatibility, ignored (as in DALI)
    last_batch_padded : without ``reader_name``, the reader's ``pad_last_batch``
    last_batch_policy : a ``LastBatchPolicy``; with data 1..7 and batch 2 the last batch is
        PARTIAL [7], FILL [7, 7] (padded) or [7, 1] (not), DROP [5, 6]; the next epoch starts
        at [1, 2] with padding and at [2, 3] without
    prepare_first_batch : run the first batch while the iterator is made
    """

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, auto_reset=False,
                 fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        _require(len(set(output_map)) == len(output_map), "output_map names should be distinct")
        self.output_map = output_map
        super().__init__(pipelines, size, reader_name, auto_reset, fill_last_batch, last_batch_padded,
                         last_batch_policy, prepare_first_batch)
        self._prepare()

    def _to_framework(self, outputs):
        return {name: to_torch(out) for name, out in _named(outputs, self.output_map)}


class DALIClassificationIterator(DALIGenericIterator):
    """``DALIGenericIterator(pipelines, ["data", "label"], ...)``: the pipeline returns images and labels
    (labels as the reader gives them, int32 of shape [N, 1])."""

    def __init__(self, pipelines, size=-1, reader_name=None, auto_reset=False, fill_last_batch=None,
                 dynamic_shape=False, last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL,
                 prepare_first_batch=True):
        super().__init__(pipelines, ["data", "label"], size, reader_name=reader_name, auto_reset=auto_reset,
                         fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)


class DALIRaggedIterator(_DaliBaseIterator):
    """DALI's iterator for outputs whose samples differ in shape. ``output_types`` tags each output:
    DENSE_TAG (one tensor, the default), SPARSE_LIST_TAG (a list of per-sample tensors) or SPARSE_COO_TAG
    (a sparse COO tensor of 1-D samples: entry (i, j) is element j of sample i)."""

    DENSE_TAG = "dense"
    SPARSE_LIST_TAG = "sparse_list"
    SPARSE_COO_TAG = "sparse_coo"

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, output_types=None,
                 auto_reset=False, fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        _require(len(set(output_map)) == len(output_map), "output_map names should be distinct")
        tags = {self.DENSE_TAG, self.SPARSE_LIST_TAG, self.SPARSE_COO_TAG}
        _require(output_types is None or set(output_types) <= tags,
                 "Only DENSE_TAG, SPARSE_LIST_TAG and SPARSE_COO_TAG are allowed")
        self.output_map = output_map
        self._outputs_types = output_types
        super().__init__(pipelines, size, reader_name, auto_reset, fill_last_batch, last_batch_padded,
                         last_batch_policy, prepare_first_batch)
        self._prepare()

    def _to_framework(self, outputs):
        batch = {}
        for j, (name, out) in enumerate(_named(outputs, self.output_map)):
            tag = self.DENSE_TAG if self._outputs_types is None else self._outputs_types[j]
            if tag == self.DENSE_TAG:
                batch[name] = to_torch(out)
                continue
            samples = _samples_to_torch(out)
            if tag == self.SPARSE_COO_TAG:
                rows = torch.cat([torch.full((len(s),), i, dtype=torch.int64) for i, s in enumerate(samples)])
                cols = torch.cat([torch.arange(len(s), dtype=torch.int64) for s in samples])
                values = torch.hstack(samples)
                samples = torch.sparse_coo_tensor(torch.stack([rows, cols]).to(values.device), values)
            batch[name] = samples
        return batch

from . import experimental, fn  # noqa: E402,F401  (fn: the plugin's own, torch_python_function only)

TorchPythonFunction = ops.TorchPythonFunction  # (the plugin's operator, as DALI's plugin module names it)
from ...unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "nvidia.dali.plugin.pytorch")  # any other name: NotImplementedError naming it
