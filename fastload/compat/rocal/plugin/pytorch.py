"""``amd.rocal.plugin.pytorch``: rocAL's PyTorch iterators (rocAL_pybind/amd/rocal/plugin/pytorch.py).

Each step returns ``([outputs...], labels)``: one torch tensor per pipeline
output (its whole buffer, in the operator's layout and type) and the labels,
int64 of shape [batch] (int32 (1, batch, classes) with ``fn.one_hot``), all
on the iterator's device ("cpu", else cuda:device_id); after
``fn.readers.webdataset``, in place of labels, the samples' other members
(per extension a list of uint8 numpy arrays, as rocAL). ``len()`` is the
batches left when it was made (floor). At the epoch's end it resets the
pipeline's loaders itself and stops; with LAST_BATCH_PARTIAL the last batch
is cut to the shard's real samples. The tensors are fresh each step (rocAL
overwrites one set; the values are the same).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .. import types
from ._common import NumpyIterator, check_display, classification_args, kept, one_hot, the_pipeline
from ._common import draw_patches  # noqa: F401 (rocAL's name, refused)


class ROCALGenericIterator:
    def __init__(self, pipeline, tensor_layout=types.NCHW, reverse_channels=False, multiplier=(1.0, 1.0, 1.0),
                 offset=(0.0, 0.0, 0.0), tensor_dtype=types.FLOAT, device="cpu", device_id=0, display=False):
        check_display(display)
        self.loader = the_pipeline(pipeline)
        self.tensor_layout, self.reverse_channels, self.tensor_dtype = tensor_layout, reverse_channels, tensor_dtype
        self.multiplier, self.offset = multiplier, offset
        self.batch_size = self.loader._batch_size
        self.device = _device(device, device_id)
        self.iterator_length = self.loader.get_remaining_images()

    def next(self):
        return self.__next__()

    def __next__(self):
        if self.loader.rocal_run() != 0:
            self.loader.rocal_reset_loaders()
            raise StopIteration
        outputs = [torch.from_numpy(t.batch.numpy()).to(self.device) for t in self.loader.get_output_tensors()]
        keep = kept(self.loader)
        if self.loader.definition.webdataset is not None:  # its members in place of labels, as rocAL's
            return [out[0:keep] for out in outputs], [batch[0:keep] for batch in self.loader.get_ascii_datas()]
        labels = self.loader.get_image_labels()
        if self.loader._one_hot_encoding:
            labels = torch.from_numpy(one_hot(labels, self.loader._num_classes)).to(self.device)
            return [out[0:keep] for out in outputs], labels[:, 0:keep]
        labels = torch.from_numpy(labels).long().to(self.device)
        return [out[0:keep] for out in outputs], labels[..., 0:keep]

    def reset(self):
        self.loader.rocal_reset_loaders()

    def __iter__(self):
        return self

    def __len__(self):
        return self.iterator_length // self.batch_size


class ROCALClassificationIterator(ROCALGenericIterator):
    """The classification iterator: ``size``, ``auto_reset``, ``fill_last_batch``, ``dynamic_shape`` and
    ``last_batch_padded`` are accepted and, as in rocAL, change nothing."""

    def __init__(self, pipelines, size=0, auto_reset=False, fill_last_batch=True, dynamic_shape=False,
                 last_batch_padded=False, display=False, device="cpu", device_id=0):
        pipe = the_pipeline(pipelines)
        super().__init__(pipe, **classification_args(pipe, display, device, device_id))


class ROCALNumpyIterator(NumpyIterator):
    """fn.readers.numpy's iterator: each step a list of torch tensors on ``device`` ("cpu", else
    cuda:device_id), one per output (``NumpyIterator``)."""

    def __init__(self, pipeline, device="cpu", device_id=0):
        super().__init__(pipeline)
        self.device = _device(device, device_id)

    def __next__(self) -> list[torch.Tensor]:
        return [batch.clone().to(self.device) for batch in self._outputs()]


class ROCALAudioIterator:
    """rocAL's audio iterator (rocAL_pybind/amd/rocal/plugin/pytorch.py): each step ``(outputs, labels,
    roi)``: per output [batch, X, Y] cut to the batch's largest region (a [batch, 1] output whole), the
    labels int64 [batch], and the last output's regions as int32 [batch, 2] (extents; [0, 1] for a
    [batch, 1] output). ``len()`` is the samples left when it was made, as rocAL's. ``size`` stops once
    that many samples were given (rocAL counts batch_size a step); ``auto_reset`` resets the loaders at the
    end."""

    def __init__(self, pipeline, tensor_dtype=types.FLOAT, size=-1, auto_reset=False, device="cpu", device_id=0):
        self.loader = the_pipeline(pipeline)
        self.batch_size, self.size, self.auto_reset = self.loader._batch_size, int(size), bool(auto_reset)
        self.device = _device(device, device_id)
        self.iterator_length = self.loader.get_remaining_images()
        self.batch_count = 0

    def next(self):
        return self.__next__()

    def __next__(self):
        if self.loader.rocal_run() != 0 or (self.size > 0 and self.batch_count >= self.size):
            if self.auto_reset:
                self.reset()
            raise StopIteration
        self.batch_count += self.batch_size  # rocAL counts samples against size
        outputs, rois = [], None
        for tensor in self.loader.get_output_tensors():
            rois = tensor.rois()
            width, height = int(rois[:, -2].max()), int(rois[:, -1].max())
            batch = tensor.batch if width == 0 or height == 0 else tensor.batch[:, :width, :height]
            outputs.append(batch.clone().to(self.device))
        labels = torch.from_numpy(self.loader.get_image_labels().astype(np.int64)).to(self.device)
        roi = torch.from_numpy(rois[:, -2:].copy())
        keep = kept(self.loader)
        if keep < self.batch_size:
            return [out[:keep] for out in outputs], labels[:keep], roi[:keep]
        return outputs, labels, roi

    def reset(self):
        self.batch_count = 0
        self.loader.rocal_reset_loaders()

    def __iter__(self):
        return self

    def __len__(self):
        return self.iterator_length


_warned_no_gpu = False


def _device(device, device_id) -> torch.device:
    global _warned_no_gpu
    if device == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", device_id)
    if not _warned_no_gpu:
        _warned_no_gpu = True
        warnings.warn(f"fastload.compat.rocal: device={device!r} but there is no GPU: the iterator's tensors stay "
                      f"on the CPU", stacklevel=3)
    return torch.device("cpu")
