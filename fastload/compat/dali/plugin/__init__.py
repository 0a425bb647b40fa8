"""DALI's framework plugins (``nvidia.dali.plugin``): iterators that hand pipeline outputs to a framework."""

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "nvidia.dali.plugin")  # any other name: NotImplementedError naming it
