"""rocAL's operators, one declaration each (``OpSpec``): the single source that ``fn``, ``fn.readers``,
``fn.decoders``, ``fn.random``, the legacy names, refusal messages, lowering and the COCO box rules read.

Why: without it an operator was written several times -- its function, a table of its ranges, a list of
names in each of ``fn``'s modules, the set of names the COCO boxes stay under, the name strings lowering
looks for, the list of supported names in every refusal -- and the copies drifted. Now each operator is
its function in its family's module (``ops_*``, ``audio``) with ``@operator(...)`` above it (or a
``colour_operator(...)`` declaration for the table-driven colour family), and everything else is built
from ``OPERATORS``:

* ``name``: what rocAL calls it, dotted for the sub-modules ("readers.file", "decoders.image",
  "random.coin_flip"); the graph node it makes is ``"rocal." + name`` (``node``);
* the arguments and rocAL's defaults: the function's signature (``args``), written once, there;
* ``ranges``: where an argument left None is drawn from per sample (rocAL's node headers);
* ``output``: the output buffer rule (``SOURCE``: the input's buffer; ``SIZE``: the size the arguments
  ask, the input's where they ask none; ``RESIZED``: rocAL's resize rule on the input's buffer;
  ``TRANSPOSED``: the input's, its sides swapped where the perm swaps them; ``READ``: what the reader or
  decoder reads; ``NOT_IMAGE``: no image: labels, random values, audio, arrays);
* ``boxes``: what fn.readers.coco's boxes do through it (``KEEP``: they stay, rocAL has no meta node and
  moves no pixel; ``MOVE``: rocAL's meta node moves them; ``UNMOVED``: rocAL moves the pixels and leaves
  the boxes, which fastload refuses; ``REFUSED``: not reproduced);
* ``legacy``: the other names rocAL's API has for it ("centre_crop", "random.uniform");
* ``supported``: False for the names fastload keeps only to refuse them, naming themselves.

The JSON pipeline's operations (``json_pipeline.JSON_OPERATIONS``) are rocAL's C API functions and name
the operator each one is (``JsonOperation.rocal``), checked against ``OPERATORS`` by the tests.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable, Mapping

SOURCE, SIZE, RESIZED, TRANSPOSED, READ, NOT_IMAGE = "source", "size", "resized", "transposed", "read", "not an image"
KEEP, MOVE, UNMOVED, REFUSED = "keep", "move", "unmoved", "refused"


@dataclass(frozen=True)
class OpSpec:
    """One rocAL operator: see the module's docstring for each field."""

    name: str
    impl: Callable
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    output: str = SOURCE
    boxes: str = REFUSED
    legacy: tuple[str, ...] = ()
    supported: bool = True

    @property
    def node(self) -> str:
        """The name of the graph node the operator makes."""
        return "rocal." + self.name

    @property
    def args(self) -> dict[str, object]:
        """The operator's arguments and rocAL's defaults (``inspect.Parameter.empty`` for a required one),
        read from its function's signature, where they are written."""
        return {name: p.default for name, p in inspect.signature(self.impl).parameters.items()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


OPERATORS: dict[str, OpSpec] = {}


def declare(spec: OpSpec) -> OpSpec:
    """Add ``spec`` to ``OPERATORS``; a name declared twice is an error (the point is one declaration)."""
    for name in (spec.name, *spec.legacy):
        if name in OPERATORS or any(name in other.legacy for other in OPERATORS.values()):
            raise RuntimeError(f"rocAL operator {name!r} declared twice")
    OPERATORS[spec.name] = spec
    return spec


def operator(name: str | None = None, *, ranges: Mapping[str, tuple[float, float]] | None = None,
             output: str = SOURCE, boxes: str = REFUSED, legacy: tuple[str, ...] = (), supported: bool = True):
    """A decorator declaring the function below it as rocAL operator ``name`` (default: the function's
    name, with a leading ``readers_``/``decoders_`` made ``readers.``/``decoders.``); the function is
    returned unchanged, its spec at ``function.spec``."""
    def declared(impl: Callable) -> Callable:
        spec = declare(OpSpec(name or _dotted(impl.__name__), impl, dict(ranges or {}), output, boxes, tuple(legacy),
                              supported))
        impl.spec = spec
        return impl
    return declared


def _dotted(function_name: str) -> str:
    for module in ("readers", "decoders"):
        if function_name.startswith(module + "_"):
            return module + "." + function_name.removeprefix(module + "_")
    return function_name


def namespace(module: str = "") -> dict[str, Callable]:
    """The functions of rocAL's ``fn`` (``module`` ""), ``fn.readers``, ``fn.decoders`` or ``fn.random``
    (``module`` "readers", ...): each declared operator under its name and its legacy names there."""
    prefix = module + "." if module else ""
    found = {}
    for spec in OPERATORS.values():
        for name in (spec.name, *spec.legacy):
            rest = name.removeprefix(prefix) if prefix else name
            if (not prefix or name.startswith(prefix)) and "." not in rest:
                found[rest] = spec.impl
    return found


def supported_names() -> list[str]:
    """The operators fastload runs, in the order they were declared (for refusals that list them)."""
    return [spec.name for spec in OPERATORS.values() if spec.supported]


def boxes_rule(name: str) -> str:
    """What fn.readers.coco's boxes do through operator ``name`` (``REFUSED`` for one not declared)."""
    spec = OPERATORS.get(name)
    return REFUSED if spec is None else spec.boxes
