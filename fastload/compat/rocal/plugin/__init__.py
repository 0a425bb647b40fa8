"""rocAL's iterators: ``plugin.pytorch`` (torch tensors) and ``plugin.generic`` (numpy)."""
