"""``amd.rocal.readers``: the readers fastload runs (``fn.readers.file``, ``fn.readers.tfrecord`` for
classification); others raise NotImplementedError."""

from .operators import readers_file as file  # noqa: F401
from .operators import readers_tfrecord as tfrecord  # noqa: F401
from .operators import unsupported

coco = unsupported("readers.coco")
caffe = unsupported("readers.caffe")
caffe2 = unsupported("readers.caffe2")
mxnet = unsupported("readers.mxnet")
cifar10 = unsupported("readers.cifar10")
numpy = unsupported("readers.numpy")
webdataset = unsupported("readers.webdataset")
video = unsupported("readers.video")
