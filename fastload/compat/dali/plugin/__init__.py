"""DALI's framework plugins (``nvidia.dali.plugin``): iterators that hand pipeline outputs to a framework."""
