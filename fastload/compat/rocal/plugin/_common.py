"""What rocAL's two iterator plugins share (rocAL_pybind/amd/rocal/plugin/pytorch.py, generic.py)."""

from __future__ import annotations

import numpy as np

from ..ops_common import PREFIX


def one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """rocAL's one-hot labels, int32 of shape (1, batch, classes): label L at place L - 1, label 0 at the
    last place, others all zero (rocalGetOneHotImageLabels, rocAL/source/api/rocal_api_meta_data.cpp)."""
    out = np.zeros((len(labels), num_classes), dtype=np.int32)
    for row, label in enumerate(labels):
        if 0 < label <= num_classes:
            out[row, label - 1] = 1
        elif label == 0:
            out[row, num_classes - 1] = 1
    return out.reshape(1, len(labels), num_classes)


def check_display(display) -> None:
    if display:
        raise NotImplementedError(f"{PREFIX}: display=True (drawing every batch with OpenCV) is not supported")


def draw_patches(*args, **kwargs):
    """rocAL's plugins' drawing helper (OpenCV writes the image, boxes drawn on it): refused, as display."""
    raise NotImplementedError(f"{PREFIX}: draw_patches (rocAL's OpenCV drawing helper) is not supported")


def the_pipeline(pipelines):
    """rocAL's iterators take one pipeline (a list of one is accepted)."""
    if isinstance(pipelines, (list, tuple)):
        if len(pipelines) != 1:
            raise NotImplementedError(f"{PREFIX}: rocAL's iterators take one pipeline, got {len(pipelines)}")
        pipelines = pipelines[0]
    pipelines.build()
    return pipelines


def classification_args(pipe, display, device, device_id) -> dict:
    """The classification iterators' arguments for the generic one: the pipeline's layout, type and
    normalization, which rocAL's iterators keep and do not apply."""
    return dict(tensor_layout=pipe._tensor_layout, tensor_dtype=pipe._tensor_dtype, multiplier=pipe._multiplier,
                offset=pipe._offset, display=display, device=device, device_id=device_id)


def kept(loader) -> int:
    """How many samples of the batch just made are real: all but the padding of a LAST_BATCH_PARTIAL last
    batch (rocAL's iterators: getRemainingImages() < batch_size)."""
    from .. import types
    batch_size = loader._batch_size
    if loader._last_batch_policy is types.LAST_BATCH_PARTIAL and loader.get_remaining_images() < batch_size:
        return batch_size - loader.get_last_batch_padded_size()
    return batch_size


class NumpyIterator:
    """What rocAL's two ROCALNumpyIterators share (fn.readers.numpy's pipelines): each step the outputs
    alone, a list of one whole batch per output, cut to the real samples of a LAST_BATCH_PARTIAL last
    batch; ``len()`` the batches left when it was made; no reset at the epoch's end (call ``reset()``).
    The arrays are fresh each step (rocAL overwrites one set; the values are the same)."""

    def __init__(self, pipeline):
        self.loader = the_pipeline(pipeline)
        self.batch_size = self.loader._batch_size
        self.len = self.loader.get_remaining_images() // self.batch_size

    def _outputs(self) -> list:
        if self.loader.rocal_run() != 0:
            raise StopIteration
        keep = kept(self.loader)
        return [tensor.batch[0:keep] for tensor in self.loader.get_output_tensors()]

    def next(self):
        return self.__next__()

    def reset(self):
        self.loader.rocal_reset_loaders()

    def __iter__(self):
        return self

    def __len__(self):
        return self.len
