"""``amd.rocal.readers``: the readers fastload runs (``fn.readers.file``, ``fn.readers.tfrecord`` for
classification, ``fn.readers.webdataset``, ``fn.readers.cifar10``, ``fn.readers.numpy``,
``fn.readers.mxnet``, ``fn.readers.coco``, ``fn.readers.video`` and ``fn.readers.video_resize``,
``fn.readers.sequence_reader``, ``fn.readers.caffe`` and ``fn.readers.caffe2`` for classification): every
reader of rocAL's readers.py at 0981d5bb."""

from .ops_readers import readers_caffe as caffe  # noqa: F401
from .ops_readers import readers_caffe2 as caffe2  # noqa: F401
from .ops_readers import readers_cifar10 as cifar10  # noqa: F401
from .ops_readers import readers_coco as coco  # noqa: F401
from .ops_readers import readers_file as file  # noqa: F401
from .ops_readers import readers_mxnet as mxnet  # noqa: F401
from .ops_readers import readers_numpy as numpy  # noqa: F401
from .ops_readers import readers_sequence_reader as sequence_reader  # noqa: F401
from .ops_readers import readers_tfrecord as tfrecord  # noqa: F401
from .ops_readers import readers_video as video  # noqa: F401
from .ops_readers import readers_video_resize as video_resize  # noqa: F401
from .ops_readers import readers_webdataset as webdataset  # noqa: F401
