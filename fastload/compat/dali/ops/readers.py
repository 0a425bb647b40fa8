"""``ops.readers``."""

from .. import detection, operators
from .classes import legacy

File = legacy("File", operators.readers_file)
COCO = legacy("COCO", detection.readers_coco)

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops.readers")  # any other name: NotImplementedError naming it
