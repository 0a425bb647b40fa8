"""``ops.readers``."""

from .. import operators
from . import legacy

File = legacy("File", operators.readers_file)
