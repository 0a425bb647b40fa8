"""``amd.rocal.readers``: the readers fastload runs (``fn.readers.file``, ``fn.readers.tfrecord`` for
classification, ``fn.readers.webdataset``, ``fn.readers.cifar10``, ``fn.readers.numpy``,
``fn.readers.mxnet``, ``fn.readers.coco``, ``fn.readers.video``, ``fn.readers.caffe`` and
``fn.readers.caffe2`` for classification); rocAL's others raise NotImplementedError naming themselves."""

from .operators import readers_caffe as caffe  # noqa: F401
from .operators import readers_caffe2 as caffe2  # noqa: F401
from .operators import readers_cifar10 as cifar10  # noqa: F401
from .operators import readers_coco as coco  # noqa: F401
from .operators import readers_file as file  # noqa: F401
from .operators import readers_mxnet as mxnet  # noqa: F401
from .operators import readers_numpy as numpy  # noqa: F401
from .operators import readers_tfrecord as tfrecord  # noqa: F401
from .operators import readers_video as video  # noqa: F401
from .operators import readers_webdataset as webdataset  # noqa: F401
from .operators import unsupported

video_resize = unsupported("readers.video_resize")
sequence_reader = unsupported("readers.sequence_reader")
