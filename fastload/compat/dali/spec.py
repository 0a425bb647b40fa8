"""DALI's operators, one declaration each (``OpSpec``): the single source that ``fn`` and its sub-modules,
``ops`` and its sub-modules, DALI's deprecated and legacy names, the refusals and docs/dali-unsupported.md read.

Why: names kept in several hand-written lists (``fn``'s modules, ``ops``' classes, the legacy names) drift
apart -- one spelling runs while its twin is refused. So each operator is its builder function in its family's
module (``operators``, ``detection``, ``geometry``, ``affine``, ``effects``, ``pointwise``, ``arrays``,
``reductions``, ``noise``, ``python_function``, ``filters``, ``remap``, ``resize_crop``, ``boxes``,
``record_readers`` with ``numpy_readers`` and ``lmdb_readers``, ``audio``) with ``@operator(...)`` above it
(or ``operator(...)(builder)`` for one a factory makes), and the
rest is made from ``OPERATORS`` at import, by plain lookups (every name stays greppable in its declaration):

* ``name``: the ``fn`` name, dotted for sub-modules ("decoders.image", "random.coin_flip"); also the name of
  the graph node the builder makes (lowering reads it);
* ``ops``: the ``ops`` class name ("decoders.Image"); DALI's schema is it with "." as "__"
  ("decoders__Image");
* ``aliases``: DALI 2.4's deprecated schemas for the same operator, ``fn`` name to ``ops`` name
  ({"image_decoder": "ImageDecoder"}); tests/compat/test_dali_spec.py checks them against DALI's registry;
* ``legacy``: ``ops`` class names of older DALI releases that 2.4 has no schema for ("nvJPEGDecoder");
* ``fused``: whether ``lowering`` reads the node into the fused fast path's plan;
* ``positional``: the ``ops`` constructor arguments DALI also takes by position (ExternalSource's source);
* ``input_sets``: whether it takes DALI's input sets (the Python operators do not, as in DALI).

Every ``fn`` function (and so every ``ops`` class, which calls it) whose spec has ``input_sets`` takes DALI's
input sets: a list of DataNodes given as a regular input runs the operator once per element (``call``).

An operator refused on purpose (GPU-only in DALI 2.4, say: ``remap``'s and ``gpu_only``'s) is declared with
``refused(name, ops, reason)`` in ``REFUSED``, which every ``fn`` and ``ops`` module's refusal reads: looking it
up raises NotImplementedError giving the reason.
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..engine.graph import DataNode
from .unsupported import refuse

FN, OPS = "fn", "ops"
PACKAGE = __name__.rpartition(".")[0]  # fastload.compat.dali


@dataclass(frozen=True)
class OpSpec:
    """One DALI operator: see the module's docstring for each field."""

    name: str
    ops: str
    impl: Callable
    aliases: Mapping[str, str] = field(default_factory=dict)
    legacy: tuple[str, ...] = ()
    fused: bool = False
    positional: tuple[str, ...] = ()
    input_sets: bool = True

    @property
    def schema(self) -> str:
        """DALI's schema name ("decoders__Image")."""
        return self.ops.replace(".", "__")

    @property
    def schemas(self) -> tuple[str, ...]:
        """DALI's schema and the deprecated schemas naming the same operator."""
        return (self.schema, *(name.replace(".", "__") for name in self.aliases.values()))

    def names(self, api: str) -> tuple[str, ...]:
        """The operator's names in ``fn`` (``api`` FN) or ``ops`` (OPS), dotted, its own first."""
        if api == FN:
            return (self.name, *self.aliases)
        return (self.ops, *self.aliases.values(), *self.legacy)


OPERATORS: dict[str, OpSpec] = {}
REFUSED: dict[str, str] = {}  # "fn.<name>" and "ops.<Name>" of an operator refused on purpose -> why


def refused(name: str, ops: str, reason: str) -> None:
    """Declare DALI's ``fn.<name>`` / ``ops.<ops>`` refused on purpose (a GPU-only operator, say): its refusal
    says ``reason``."""
    REFUSED[f"{FN}.{name}"] = REFUSED[f"{OPS}.{ops}"] = reason


def declare(spec: OpSpec) -> OpSpec:
    """Add ``spec`` to ``OPERATORS``; a name declared twice is an error (the point is one declaration)."""
    for api in (FN, OPS):
        taken = {name for other in OPERATORS.values() for name in other.names(api)}
        for name in spec.names(api):
            if name in taken:
                raise RuntimeError(f"DALI operator {api}.{name} declared twice")
    OPERATORS[spec.name] = spec
    return spec


def operator(name: str, ops: str, *, aliases: Mapping[str, str] | None = None, legacy: tuple[str, ...] = (),
             fused: bool = False, positional: tuple[str, ...] = (), input_sets: bool = True):
    """A decorator declaring the builder below it as DALI's ``fn.<name>`` / ``ops.<ops>``; the builder is
    returned unchanged (modules inside the layer call it directly), its spec at ``builder.spec``."""
    def declared(impl: Callable) -> Callable:
        impl.spec = declare(OpSpec(name, ops, impl, dict(aliases or {}), tuple(legacy), fused, tuple(positional),
                                   input_sets))
        return impl
    return declared


# ------------------------------------------------------------------------------------------ input sets

def _is_input_set(value) -> bool:
    """DALI's rule: a list holding DataNodes is an input set (a tuple is not one; a list holding none is passed
    on as it is: external_source's source)."""
    return isinstance(value, list) and any(isinstance(x, DataNode) for x in value)


def _outputs(result) -> list:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def call(spec: OpSpec) -> Callable:
    """The ``fn`` function of ``spec``: its builder, run once per input set where a regular input is a list
    of DataNodes (DALI's multiple input sets: the other inputs repeat, all lists have one length, and the
    result is a list of each set's output -- a list per output where there are several, in DALI's order).
    The instances share one random stream, as DALI's share one seed."""
    impl = spec.impl

    @functools.wraps(impl)
    def run(*inputs, **args):
        for i, x in enumerate(inputs):
            if isinstance(x, (list, tuple)) and any(isinstance(y, DataNode) for y in x) \
                    and not (isinstance(x, list) and all(isinstance(y, DataNode) for y in x)):
                raise TypeError(f"fastload.compat.dali: fn.{spec.name}: input {i} is a {type(x).__name__} holding "
                                f"DataNodes; an input set is a list of DataNodes only")
        for key, value in args.items():
            if isinstance(value, DataNode) and value.source is not None and value.source.name == "per_frame":
                raise NotImplementedError(f"fastload.compat.dali: fn.{spec.name}: argument {key} is per-frame "
                                          f"(fn.per_frame): fastload's operators take one value per sample")
        if not any(_is_input_set(x) for x in inputs):
            return impl(*inputs, **args)
        if not spec.input_sets:
            raise TypeError(f"fastload.compat.dali: fn.{spec.name}: expected inputs of type `DataNode`, received "
                            f"a list: Python Operators do not support Multiple Input Sets (as in DALI)")
        lengths = {len(x) for x in inputs if _is_input_set(x)}
        if len(lengths) != 1:
            raise ValueError(f"fastload.compat.dali: all argument lists for Multiple Input Sets used with "
                             f"operator fn.{spec.name} must have the same length (got lengths "
                             f"{sorted(lengths)})")
        (count,) = lengths
        sets = [[x[i] if _is_input_set(x) else x for x in inputs] for i in range(count)]
        results = [_outputs(impl(*inputs_of_set, **args)) for inputs_of_set in sets]
        if count == 1:
            return results[0][0] if len(results[0]) == 1 else results[0]
        first = results[0][0].source
        for outputs in results[1:]:
            op = outputs[0].source
            op.ordinal, op.seed = first.ordinal, first.seed
        if len(results[0]) == 1:
            return [outputs[0] for outputs in results]
        return [[outputs[k] for outputs in results] for k in range(len(results[0]))]

    run.__name__ = run.__qualname__ = spec.name.rpartition(".")[2]
    run.spec = spec
    return run


def legacy_class(spec: OpSpec, name: str, function: Callable):
    """DALI's ``ops`` class ``name``: ``name(**args)(*inputs, **more_args)`` is
    ``function(*inputs, **args, **more_args)`` (``spec.positional``: constructor arguments also taken by
    position)."""
    positional = spec.positional

    def __init__(self, *args, **kwargs):
        if len(args) > len(positional):
            raise TypeError(f"ops.{name} takes at most {len(positional)} positional arguments")
        self._args = {**dict(zip(positional, args)), **kwargs}

    def __call__(self, *inputs, **args):
        return function(*inputs, **{**self._args, **args})

    short = name.rpartition(".")[2]
    return type(short, (), {"__init__": __init__, "__call__": __call__, "spec": spec,
                            "__doc__": f"DALI's ops.{name}: fn.{spec.name} "
                                       f"({spec.impl.__module__}.{spec.impl.__name__}).",
                            "__module__": f"{PACKAGE}.{OPS}.{name}".rpartition(".")[0]})


# ------------------------------------------------------------------------------------------ namespaces

def _module(package: str, path: str, dali_name: str) -> types.ModuleType:
    """The module ``package.path`` (made, and set on its parent, the first time it is asked for)."""
    full = f"{package}.{path}" if path else package
    if full in sys.modules:
        return sys.modules[full]
    parent_path, _, short = path.rpartition(".")
    module = types.ModuleType(full, f"DALI's ``{dali_name}``: made from fastload.compat.dali.spec's declarations.")
    module.__path__ = []  # a package: ``import ...fn.experimental.decoders`` finds its child in sys.modules
    module.__getattr__ = refuse(full, dali_name, nearby(package.rpartition(".")[2]), REFUSED)
    sys.modules[full] = module
    setattr(_module(package, parent_path, dali_name.rpartition(".")[0]), short, module)
    return module


FUNCTIONS: dict[str, Callable] = {}  # fn name (dotted), deprecated ones too -> the fn function
CLASSES: dict[str, type] = {}  # ops name (dotted), deprecated and legacy ones too -> the ops class


def function(spec: OpSpec) -> Callable:
    """The ``fn`` function of ``spec`` (one object, under each of its ``fn`` names)."""
    if spec.name not in FUNCTIONS:
        FUNCTIONS[spec.name] = call(spec)
    return FUNCTIONS[spec.name]


def install(api: str) -> None:
    """Put every declared operator's names on ``fn`` (``api`` FN) or ``ops`` (OPS) and their sub-modules."""
    package = f"{PACKAGE}.{api}"
    for spec in OPERATORS.values():
        run = function(spec)
        for name in spec.names(api):
            path, _, short = name.rpartition(".")
            module = _module(package, path, f"{api}.{path}" if path else api)
            if api == FN:
                value = FUNCTIONS[name] = run
            else:
                value = CLASSES[name] = legacy_class(spec, name, run)
            setattr(module, short, value)


def names(api: str) -> list[str]:
    """Every dotted ``fn`` or ``ops`` name fastload has."""
    return sorted(name for spec in OPERATORS.values() for name in spec.names(api))


def nearby(api: str) -> Callable[[], list[str]]:
    """What a refusal on ``fn`` or ``ops`` (``api``) looks through for close names: all of the API's."""
    return lambda: [f"{api}.{name}" for name in names(api)]


def schemas_run() -> set[str]:
    """The DALI schemas fastload runs: each declared operator's and its aliases'."""
    return {schema for spec in OPERATORS.values() for schema in spec.schemas}


def schema_lines(registry: Mapping[str, tuple[str, str]], usage: Mapping | None = None) -> list[str]:
    """docs/dali-unsupported.md's section on DALI's operator schemas, those fastload runs and those it does not;
    ``registry`` maps each of DALI's (its ``ops._registry`` less the internal ones) to its ``fn`` and ``ops``
    names, as DALI names them. ``usage`` (scripts/dali_usage.json: its "method" and its "files", fn name ->
    files found in public code) orders the schemas not run, most used first, each with its count and the
    reason it is refused where it is refused on purpose."""
    run = schemas_run()
    files = dict((usage or {}).get("files", {}))
    done = sorted(name for name in registry if name in run)
    not_done = sorted((name for name in registry if name not in run),
                      key=lambda name: (-files.get(registry[name][0], -1), name))

    def row(schema: str) -> str:
        fn_name, ops_name = registry[schema]
        count = files.get(fn_name)
        found = "" if count is None or schema in run else \
            f" ({count}{'+' if count >= 10 else ''} file{'' if count == 1 else 's'})"
        why = REFUSED.get(f"{FN}.{fn_name}")
        return f"- `{schema}`: `fn.{fn_name}`, `ops.{ops_name}`{found}{f': {why}' if why else ''}"

    ranking = [] if usage is None else [
        "### How much the operators are used", "", usage["method"], "",
        "Looked up (searched " + usage["searched"] + "), most used first: " + ", ".join(
            f"`fn.{name}` {count}" + (" (run)" if f"{FN}.{name}" in _run_names() else "")
            for name, count in sorted(files.items(), key=lambda item: (-item[1], item[0]))) + ".", ""]

    return [f"## DALI's operator schemas: {len(done)} of {len(registry)} run", "",
            "Every operator schema in DALI's registry (with the PyTorch plugin's), deprecated ones included (each is "
            "its own `fn` function and `ops` class). What fastload runs is `fastload.compat.dali.spec.OPERATORS`: "
            "each operator declared once, with `@operator(...)`, beside its builder; an operator that runs has "
            "all its names in both `fn` and `ops`.", "",
            *ranking,
            f"### Run ({len(done)})", "", *map(row, done), "",
            f"### Not run ({len(not_done)})", "", *(["Most used first (files found in public code, as above)."]
                                                     if usage is not None else []), "", *map(row, not_done), ""]


def _run_names() -> set[str]:
    """``fn.<name>`` of every operator that runs, and ``fn.<family>.*`` of each family one of them is in."""
    names = {f"{FN}.{name}" for spec in OPERATORS.values() for name in spec.names(FN)}
    return names | {f"{FN}.{name.rpartition('.')[0]}.*" for name in names if "." in name[3:]}
