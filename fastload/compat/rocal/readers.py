"""``amd.rocal.readers``: the readers fastload runs (``fn.readers.file``, ``fn.readers.tfrecord`` for
classification, ``fn.readers.webdataset``, ``fn.readers.cifar10``, ``fn.readers.numpy``,
``fn.readers.mxnet``, ``fn.readers.coco``, ``fn.readers.video`` and ``fn.readers.video_resize``,
``fn.readers.sequence_reader``, ``fn.readers.caffe`` and ``fn.readers.caffe2`` for classification): every
reader of rocAL's readers.py at 0981d5bb, each declared in ``ops_readers`` as ``readers_<name>``
(``spec.namespace("readers")``)."""

from . import ops_readers as _ops_readers  # noqa: F401 (declares them)
from .spec import namespace as _namespace

globals().update(_namespace("readers"))
