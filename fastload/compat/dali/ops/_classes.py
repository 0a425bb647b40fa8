"""How a DALI ``ops`` class is made from an ``fn`` function (its own module: ``ops`` and its submodules
import it, and the package imports the submodules)."""

from __future__ import annotations


def legacy(name: str, function, positional: tuple[str, ...] = ()):
    """A DALI ``ops`` class: ``name(**args)(*inputs, **more_args)`` is ``function(*inputs, **args, **more_args)``
    (``positional``: the constructor arguments DALI also takes by position, ExternalSource's source)."""
    def __init__(self, *args, **kwargs):
        if len(args) > len(positional):
            raise TypeError(f"ops.{name} takes at most {len(positional)} positional arguments")
        self._args = {**dict(zip(positional, args)), **kwargs}

    def __call__(self, *inputs, **args):
        return function(*inputs, **{**self._args, **args})

    return type(name, (), {"__init__": __init__, "__call__": __call__,
                           "__doc__": f"DALI's ops.{name}: see {function.__module__}.{function.__name__}.",
                           "__module__": __name__.rpartition(".")[0]})  # the ops package
