"""fastload.kernels: batch kernels over decoded images, each beside its plain-torch reference.

Installed as the subpackage ``fastload.kernels`` but imports nothing from
``fastload``, so a kernel and its reference can be tested, or reused, alone.
"""
