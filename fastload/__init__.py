"""fastload: a drop-in, thread-based replacement for torch.utils.data.DataLoader for image training."""

from . import transforms
from .errors import DecodeError, LoaderError
from .loader import DataLoader
from .sources import Encoded, FileList, ImageFolder, Source
from .stats import Stats
from .tarshards import TarShards
from .tfrecords import TFRecords

__all__ = ["DataLoader", "ImageFolder", "FileList", "Encoded", "TarShards", "TFRecords", "Source", "transforms",
           "DecodeError", "LoaderError", "Stats"]
__version__ = "0.1.0"
