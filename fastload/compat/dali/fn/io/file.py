"""``fn.io.file.read``: a file's bytes, its path given per sample."""

from ...operators import io_file_read as read  # noqa: F401

from ...unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.io.file")  # any other name: NotImplementedError naming it
