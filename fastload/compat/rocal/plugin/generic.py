"""``amd.rocal.plugin.generic``: rocAL's numpy iterators (rocAL_pybind/amd/rocal/plugin/generic.py).

Each step returns ``([outputs...], labels)``: one numpy array per output
(its whole buffer) and the labels as numpy int64 [batch] (int32 (1, batch,
classes) with ``fn.one_hot``) after fn.readers.file, fn.readers.cifar10 and
fn.external_source, and None after any other reader, as rocAL's. ``len()``
is the batches left when it was made (floor). Unlike the PyTorch iterator it does not reset at the epoch's
end (call ``reset()``) and does not cut a LAST_BATCH_PARTIAL batch.
``ROCALNumpyIterator`` (fn.readers.numpy) returns the outputs alone.
"""

from __future__ import annotations

import numpy as np

from .. import types
from ._common import NumpyIterator, check_display, classification_args, one_hot, the_pipeline
from ._common import draw_patches  # noqa: F401 (rocAL's name, refused)


class ROCALGenericIterator:
    def __init__(self, pipeline, tensor_layout=types.NCHW, reverse_channels=False, multiplier=(1.0, 1.0, 1.0),
                 offset=(0.0, 0.0, 0.0), tensor_dtype=types.FLOAT, display=False, device="cpu", device_id=0):
        check_display(display)
        self.loader = the_pipeline(pipeline)
        self.tensor_layout, self.reverse_channels, self.tensor_dtype = tensor_layout, reverse_channels, tensor_dtype
        self.multiplier, self.offset, self.device, self.device_id = multiplier, offset, device, device_id
        self.batch_size = self.loader._batch_size
        self.iterator_length = self.loader.get_remaining_images() // self.batch_size

    def next(self):
        return self.__next__()

    def __next__(self):
        if self.loader.rocal_run() != 0:
            raise StopIteration
        outputs = [t.batch.numpy().copy() for t in self.loader.get_output_tensors()]
        # rocAL's fills labels after fn.external_source and its "labelReader" readers (readers.file and
        # readers.cifar10) only, and returns None with every other reader (TFRecord, Caffe, Caffe2, MXNet,
        # webdataset, COCO, video, sequence)
        if not self.loader._is_external_source_operator and not self.loader.definition.label_reader:
            return outputs, None
        labels = self.loader.get_image_labels()
        if self.loader._one_hot_encoding:
            return outputs, one_hot(labels, self.loader._num_classes)
        return outputs, labels.astype(np.int_)

    def reset(self):
        self.loader.rocal_reset_loaders()

    def __iter__(self):
        return self

    def __len__(self):
        return self.iterator_length


class ROCALClassificationIterator(ROCALGenericIterator):
    """The classification iterator; ``size``, ``auto_reset``, ``fill_last_batch``, ``dynamic_shape`` and
    ``last_batch_padded`` are accepted and, as in rocAL, change nothing."""

    def __init__(self, pipelines, size=0, auto_reset=False, fill_last_batch=True, dynamic_shape=False,
                 last_batch_padded=False, display=False, device="cpu", device_id=0):
        pipe = the_pipeline(pipelines)
        super().__init__(pipe, **classification_args(pipe, display, device, device_id))


class ROCALNumpyIterator(NumpyIterator):
    """fn.readers.numpy's iterator: each step a list of numpy arrays, one per output (``NumpyIterator``)."""

    def __next__(self) -> list[np.ndarray]:
        return [batch.numpy().copy() for batch in self._outputs()]
