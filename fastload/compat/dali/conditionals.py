"""DALI's conditionals: ``if``/``elif``/``else``, ``and``, ``or`` and ``not`` on DataNodes in a
``@pipeline_def(enable_conditionals=True)`` function.

DALI runs such a pipeline as if one sample at a time. ``convert(func)`` rewrites the function's source
(its ``ast``) so that each ``if`` statement calls ``if_stmt`` with its two branches as functions, and
``and``/``or``/``not`` call ``and_``/``or_``/``not_``; the rewritten function is compiled with the
original's globals, closure cells and line numbers. The functions it calls that are the user's own code
(not the standard library's, an installed package's or fastload's) are converted too, when called, as
DALI converts them. At run time:

- a plain Python condition runs the taken branch only, as Python does (one branch is traced);
- a DataNode condition (a value per sample) traces both branches, and each variable either branch assigns
  becomes a per-sample ``Select`` of its two values. ``Graph.run_sample`` evaluates by demand, and a select
  asks for its predicate first, then only the chosen branch's value: a branch's operators do not run for
  the samples that do not take it (as DALI splits the batch), and random operators, each drawing from its
  own stream, draw the same whichever branches run.

As in DALI, conditions are per-sample scalars (0-d) on the CPU; ``and``/``or`` take booleans and evaluate
their right side only for the samples that need it; a variable assigned in one branch only (and not
before the ``if``) is an error where it is used after. Refused, with NotImplementedError: ``return``,
``break``, ``continue``, ``yield`` or a global/nonlocal assignment inside an ``if`` on a DataNode, a
``while`` on a DataNode, and ``x if cond else y`` on a DataNode (DALI refuses that one too). Written for
fastload from DALI's documented behaviour; no DALI or autograph code is used.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import sys
import sysconfig
import textwrap
import threading
import types
import warnings
import weakref

import numpy as np
import torch

from ..engine.graph import SKIPPED, DataNode, Op, constant

HELPER = "_fastload_conditionals"  # the name the rewritten code calls this module by (a closure cell)
_TRACE = threading.local()  # why variables were left unbound by the `if`s of the conversion running
_CONVERTED = weakref.WeakKeyDictionary()  # a called function -> its converted form, or _AS_IS
_AS_IS = object()
_LIBRARIES = tuple({os.path.realpath(sysconfig.get_paths()[key]) + os.sep
                    for key in ("stdlib", "platstdlib", "purelib", "platlib")}) + (
    os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..")) + os.sep,)  # fastload's own


class _Unbound:
    def __repr__(self) -> str:
        return "<unbound>"


UNBOUND = _Unbound()  # a variable with no value after an `if` (the rewritten code deletes it)


# ----------------------------------------------------------------------------------------- run time

def bound(scope: dict, names: tuple) -> dict:
    """The variables among ``names`` that have a value in ``scope`` (a ``locals()``)."""
    return {name: scope[name] for name in names if name in scope}


def if_stmt(cond, body, orelse, state: dict, line: int) -> dict:
    """``if cond: body else: orelse``. ``state``: the variables the branches assign, as bound before
    (``body`` and ``orelse`` take it and give them back as bound after). Returns the variables after."""
    if not isinstance(cond, DataNode):
        return body(state) if cond else orelse(state)
    truth = _predicate(cond, line)
    after_true, after_false = body(dict(state)), orelse(dict(state))
    merged = {}
    for name in {**after_true, **after_false}:
        if name not in after_true or name not in after_false:
            other = "else" if name in after_true else "if"
            _left_unbound(name, f"variable {name!r} is assigned in only one branch of the `if` on a DataNode "
                                f"at line {line} (and not before it); DALI needs it assigned in every branch "
                                f"(here in the `{other}` branch too) to use it after the `if`")
            continue
        value = _merge(truth, after_true[name], after_false[name])
        if value is UNBOUND:
            _left_unbound(name, f"variable {name!r} has different values in the two branches of the `if` on a "
                                f"DataNode at line {line} ({after_true[name]!r} and {after_false[name]!r}) "
                                f"that cannot be selected per sample (DataNodes, numbers or arrays, or lists, "
                                f"tuples and dicts of them, can)")
            continue
        merged[name] = value
        getattr(_TRACE, "unbound", {}).pop(name, None)
    return merged


def and_(left, right, line: int):
    """``left and right()``: Python's where ``left`` is a plain value; for a DataNode, per sample:
    ``right``'s value where ``left`` is true (evaluated only there), else False (both boolean scalars)."""
    if not isinstance(left, DataNode):
        return left and right()
    left = _logical(left, "and", "left", line)
    return Select(left, _logical(right(), "and", "right", line), left).outputs[0]


def or_(left, right, line: int):
    """``left or right()``: as ``and_``, True where ``left`` is true, else ``right``'s value."""
    if not isinstance(left, DataNode):
        return left or right()
    left = _logical(left, "or", "left", line)
    return Select(left, left, _logical(right(), "or", "right", line)).outputs[0]


def not_(value, line: int):
    """``not value``: Python's for a plain value; for a DataNode, a boolean scalar per sample."""
    if not isinstance(value, DataNode):
        return not value
    _on_cpu(value, "the operand of `not`", line)
    return Op("_conditional.not", lambda ctx, op, x: torch.tensor(not _scalar(x, "`not`", line)), [value], {},
              fusable=False).outputs[0]


def if_exp(cond, body, orelse, line: int):
    """``body() if cond else orelse()`` for a plain condition; refused for a DataNode, as DALI does."""
    if isinstance(cond, DataNode):
        raise NotImplementedError(f"fastload.compat.dali: a conditional expression (`x if cond else y`) on a "
                                  f"DataNode (line {line}) is not supported, nor by DALI: write an `if` statement")
    return body() if cond else orelse()


def loop_test(cond, line: int):
    """A ``while`` loop's condition: a plain value; refused for a DataNode."""
    if isinstance(cond, DataNode):
        raise NotImplementedError(f"fastload.compat.dali: a `while` loop on a DataNode (line {line}) is not "
                                  f"supported: its number of iterations would differ per sample")
    return cond


def plain_test(cond, why: str, line: int):
    """The condition of an ``if`` whose branches hold ``why`` (a return, break...): a plain value only."""
    if isinstance(cond, DataNode):
        raise NotImplementedError(f"fastload.compat.dali: {why} inside an `if` on a DataNode (line {line}) is "
                                  f"not supported: assign the branches' results to variables and use them "
                                  f"after the `if`")
    return cond


class Select(Op):
    """Per sample: ``if_true``'s value where ``truth`` is true, else ``if_false``'s. It wants ``truth``
    first, then only the chosen input, so the other branch is not evaluated for the sample."""

    def __init__(self, truth: DataNode, if_true, if_false):
        if_true, if_false = _node(if_true), _node(if_false)
        if if_true.device != if_false.device:
            raise ValueError(f"fastload.compat.dali: the two branches of a conditional give a variable values "
                             f"on different devices ({if_true.device} and {if_false.device}); DALI merges "
                             f"only values of the same device")
        layouts = {x.layout() for x in (if_true, if_false)} - {""}
        if len(layouts) > 1:
            raise ValueError(f"fastload.compat.dali: the two branches of a conditional give a variable values "
                             f"of different layouts ({' and '.join(sorted(layouts))}); DALI merges only "
                             f"values of the same layout")
        super().__init__("_conditional.select", None, [truth, if_true, if_false], {}, device=if_true.device,
                         layouts=(layouts.pop() if layouts else "",), fusable=False)

    def _chosen(self, values: dict) -> DataNode:
        return self.inputs[1] if values[self.inputs[0]] else self.inputs[2]

    def wanted(self, values: dict) -> list[DataNode]:
        return [self.inputs[0]] if self.inputs[0] not in values else [self._chosen(values)]

    def run(self, ctx, values: dict) -> tuple:
        return (values[self._chosen(values)],)


def _node(value) -> DataNode:
    return value if isinstance(value, DataNode) else constant(value)  # DALI's constant types (int32...)


def _selectable(value) -> bool:
    return isinstance(value, (DataNode, bool, int, float, np.ndarray, np.generic, torch.Tensor))


def _merge(truth: DataNode, a, b):
    """One variable after an ``if`` on a DataNode: ``a`` from the true branch, ``b`` from the false one."""
    if a is b:
        return a
    if _selectable(a) and _selectable(b):
        if isinstance(a, (bool, int, float)) and type(a) is type(b) and a == b:
            return a
        return Select(truth, a, b).outputs[0]
    if type(a) is type(b) and isinstance(a, (list, tuple)) and len(a) == len(b):
        parts = [_merge(truth, x, y) for x, y in zip(a, b)]
        if any(part is UNBOUND for part in parts):
            return UNBOUND
        return type(a)(*parts) if hasattr(a, "_fields") else type(a)(parts)  # a namedtuple, or a list/tuple
    if type(a) is type(b) is dict and a.keys() == b.keys():
        parts = {key: _merge(truth, a[key], b[key]) for key in a}
        return UNBOUND if any(part is UNBOUND for part in parts.values()) else parts
    try:
        return a if type(a) is type(b) and bool(a == b) else UNBOUND  # e.g. the same string in both branches
    except Exception:
        return UNBOUND


def _on_cpu(node: DataNode, what: str, line: int) -> None:
    if node.device != "cpu":
        raise ValueError(f"fastload.compat.dali: {what} (line {line}) is on the GPU; DALI needs conditions on "
                         f"the CPU: compute it from CPU data")


def _scalar(value, what: str, line: int, boolean: bool = False) -> bool:
    """A sample's condition as a Python bool: a scalar (0-d), of bool type where ``boolean``, as DALI needs."""
    tensor = torch.as_tensor(value)
    if tensor.dim() != 0:
        raise ValueError(f"fastload.compat.dali: {what} (line {line}) got a {tensor.dim()}-d value "
                         f"{tuple(tensor.shape)} for a sample; DALI restricts conditions to scalars (0-d), "
                         f"e.g. `labels[0] == 1` rather than `labels == 1`")
    if boolean and tensor.dtype != torch.bool:
        raise TypeError(f"fastload.compat.dali: {what} (line {line}) got a value of type {tensor.dtype} for a "
                        f"sample; DALI restricts `and` and `or` to booleans: use a comparison")
    return bool(tensor.item())


def _predicate(cond: DataNode, line: int) -> DataNode:
    """An ``if``'s condition, checked per sample (a scalar on the CPU) and made a Python bool."""
    _on_cpu(cond, "the condition of an `if`", line)
    return Op("_conditional.predicate", lambda ctx, op, x: _scalar(x, "the condition of an `if`", line), [cond],
              {}, fusable=False).outputs[0]


def _logical(value, name: str, side: str, line: int) -> DataNode:
    """An operand of ``and``/``or`` (a constant made a node), checked per sample: a boolean scalar."""
    node = _node(value)
    what = f"the {side} operand of `{name}`"
    _on_cpu(node, what, line)

    def check(ctx, op, x):
        _scalar(x, what, line, boolean=True)
        return x
    return Op(f"_conditional.{name}", check, [node], {}, fusable=False).outputs[0]


def _left_unbound(name: str, why: str) -> None:
    reasons = getattr(_TRACE, "unbound", None)
    if reasons is not None:
        reasons[name] = why


# --------------------------------------------------------------------------------------- conversion

def convert(func):
    """``func`` with its conditionals rewritten to run as DALI's (see the module's docstring). ``func``
    itself, with a warning, where its source cannot be read (DALI's conversion falls back so too)."""
    source = _source(func)
    if isinstance(source, str):
        warnings.warn(f"fastload.compat.dali: enable_conditionals: {func!r} is not converted ({source}); "
                      f"an `if` on a DataNode in it will fail", stacklevel=3)
        return func
    definition, filename = source
    new = _compile(func, _Rewriter().visit(definition), filename)

    @functools.wraps(func)
    def converted(*args, **kwargs):
        outer = getattr(_TRACE, "unbound", None)
        _TRACE.unbound = reasons = {} if outer is None else outer
        try:
            return new(*args, **kwargs)
        except NameError as error:  # a variable an `if` on a DataNode left unbound, used after it
            name = error.name  # None for an UnboundLocalError: its message names the variable
            if name is None:
                match = re.search(r"variable '(\w+)'", str(error))
                name = match and match.group(1)
            why = reasons.get(name)
            if why is None:
                raise
            raise RuntimeError(f"fastload.compat.dali: {why}") from error
        finally:
            _TRACE.unbound = outer
    return converted


def converted_call(function):
    """What a call in converted code calls: a function of the user's own code, converted too (as DALI
    converts the functions a pipeline calls); anything else, or what cannot be converted, as it is."""
    if isinstance(function, types.MethodType):
        inner = converted_call(function.__func__)
        return function if inner is function.__func__ else types.MethodType(inner, function.__self__)
    if type(function) is not types.FunctionType:
        return function
    found = _CONVERTED.get(function)
    if found is None:
        found = _CONVERTED[function] = _convert_called(function) or _AS_IS
    return function if found is _AS_IS else found


def _convert_called(function):
    code = function.__code__
    if HELPER in code.co_freevars or code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR) \
            or os.path.realpath(code.co_filename).startswith(_LIBRARIES):
        return None  # converted already (defined in converted code), asynchronous, or a library's
    source = _source(function)
    return None if isinstance(source, str) else _compile(function, _Rewriter().visit(source[0]), source[1])


def _source(func):
    """The function's definition as an ``ast.FunctionDef`` with the file's lines and columns, and its file;
    or why it cannot be had."""
    if not isinstance(func, types.FunctionType) or func.__name__ == "<lambda>":
        return "not a function defined with `def`"
    if hasattr(func, "__wrapped__") or "__class__" in func.__code__.co_freevars:
        return "a wrapped function, or one using super()"
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError) as error:
        return f"its source is not available: {error}"
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(text.splitlines()[0]) - len(dedented.splitlines()[0])
    try:
        tree = ast.parse(dedented)
    except SyntaxError as error:
        return f"its source does not parse alone: {error}"
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef) or definition.name != func.__name__:
        return "its source is not one `def` statement"
    ast.increment_lineno(tree, first - 1)
    for node in ast.walk(tree):
        if hasattr(node, "col_offset") and indent:
            node.col_offset += indent
            node.end_col_offset = (node.end_col_offset or 0) + indent
    definition.decorator_list = []  # pipeline_def (and any other decorator) already applied
    definition.returns = None  # annotations are not evaluated again (the function keeps its own)
    for arg in ast.walk(definition.args):
        if isinstance(arg, ast.arg):
            arg.annotation = None
    return definition, func.__code__.co_filename


def _compile(func, definition: ast.FunctionDef, filename: str):
    """The rewritten definition as a function with ``func``'s globals, defaults, closure cells and
    attributes: compiled inside a factory whose parameters stand for its free variables."""
    freevars = func.__code__.co_freevars
    factory = _parse(f"def _fl_factory({', '.join([HELPER, *freevars])}):\n    return {definition.name}",
                     definition)[0]
    factory.body.insert(0, definition)
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))  # new nodes: their parent's
    code = compile(module, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == func.__name__)
    cells = dict(zip(freevars, func.__closure__ or ()))
    cells[HELPER] = types.CellType(sys.modules[__name__])
    closure = tuple(cells[name] for name in inner.co_freevars)
    new = types.FunctionType(inner, func.__globals__, func.__name__, func.__defaults__, closure or None)
    new.__kwdefaults__ = func.__kwdefaults__
    new.__qualname__, new.__doc__, new.__module__ = func.__qualname__, func.__doc__, func.__module__
    new.__annotations__ = func.__annotations__
    return new


class _Rewriter(ast.NodeTransformer):
    """Rewrites ``if`` statements, ``and``/``or``/``not``, ``x if c else y`` and ``while`` conditions into
    calls of this module's run-time functions (nested functions' too; class bodies are left alone)."""

    def __init__(self):
        self.count = 0
        self.declared: list[set] = []  # global/nonlocal names of each enclosing function

    def visit_FunctionDef(self, node):
        self.declared.append(_declared(node))
        self.generic_visit(node)
        self.declared.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        return node

    def visit_If(self, node):
        names = _assigned(node.body + node.orelse)
        escape = _escape(node.body + node.orelse, set(names) & (self.declared[-1] if self.declared else set()))
        self.generic_visit(node)
        line = node.lineno
        if escape:
            node.test = _call("plain_test", node.test, ast.Constant(escape), ast.Constant(line))
            return node
        self.count += 1
        k = self.count
        true, false, out = f"_fl_if_true_{k}", f"_fl_if_false_{k}", f"_fl_if_{k}"
        template = _parse(f"""
def {true}(_fl_state):
    pass
def {false}(_fl_state):
    pass
{out} = {HELPER}.if_stmt(_fl_test, {true}, {false}, {HELPER}.bound(locals(), {tuple(names)!r}), {line})
""", node)
        for function, statements in zip(template[:2], (node.body, node.orelse)):
            bind = [_parse(f"if {name!r} in _fl_state:\n    {name} = _fl_state[{name!r}]", node)[0]
                    for name in names]
            function.body = bind + statements + _parse(f"return {HELPER}.bound(locals(), {tuple(names)!r})", node)
        call = template[2].value
        call.args[0] = node.test
        call.end_lineno, call.end_col_offset = node.test.end_lineno, node.test.end_col_offset  # `if <test>`
        unpack = []
        for name in names:
            unpack += _parse(f"{name} = {out}.get({name!r}, {HELPER}.UNBOUND)\n"
                             f"if {name} is {HELPER}.UNBOUND:\n    del {name}", node)
        return template + unpack

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if any(_binds(value) for value in node.values[1:]):
            return node  # a walrus (or yield) cannot move into the lambda that delays the right side
        function = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = ast.copy_location(_call(function, value, _lambda(result), ast.Constant(node.lineno)), node)
        return result

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(_call("not_", node.operand, ast.Constant(node.lineno)), node)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if _binds(node.body) or _binds(node.orelse):
            return node
        return ast.copy_location(_call("if_exp", node.test, _lambda(node.body), _lambda(node.orelse),
                                       ast.Constant(node.lineno)), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        node.func = _call("converted_call", node.func)
        return node

    def visit_While(self, node):
        self.generic_visit(node)
        node.test = ast.copy_location(_call("loop_test", node.test, ast.Constant(node.lineno)), node.test)
        return node


def _parse(text: str, where: ast.AST) -> list[ast.stmt]:
    """Generated statements, placed on the first line of ``where`` (the user's statement they stand for)."""
    statements = ast.parse(textwrap.dedent(text)).body
    for statement in statements:
        for node in ast.walk(statement):
            _place(node, where)
    return statements


def _place(node: ast.AST, where: ast.AST) -> None:
    """Locate a generated node at the start of ``where``, on one line (tracebacks show that line)."""
    if "lineno" in node._attributes:
        node.lineno = node.end_lineno = where.lineno
        node.col_offset, node.end_col_offset = where.col_offset, where.col_offset + 2


def _call(function: str, *args: ast.expr) -> ast.Call:
    call = ast.Call(ast.Attribute(ast.Name(HELPER, ast.Load()), function, ast.Load()), list(args), [])
    _place(call.func, args[0])
    _place(call.func.value, args[0])
    return ast.copy_location(call, args[0])


def _lambda(body: ast.expr) -> ast.Lambda:
    empty = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                          defaults=[])
    return ast.copy_location(ast.Lambda(empty, body), body)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def _walk(statements):
    """The nodes of ``statements``, not entering nested scopes (functions, classes, comprehensions), with
    whether each is inside a loop that the statements themselves hold."""
    stack = [(node, False) for node in reversed(statements)]
    while stack:
        node, in_loop = stack.pop()
        yield node, in_loop
        if isinstance(node, _SCOPES):
            continue
        for field, value in reversed(list(ast.iter_fields(node))):
            loop_body = isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and field == "body"
            for child in reversed(value if isinstance(value, list) else [value]):
                if isinstance(child, ast.AST):
                    stack.append((child, in_loop or loop_body))


def _assigned(statements) -> list[str]:
    """The names these statements bind or delete in their scope, in order."""
    names = []
    for node, _ in _walk(statements):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [alias.asname or alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.append(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.append(node.rest)
    return list(dict.fromkeys(names))


def _declared(function: ast.AST) -> set:
    """The names a function declares ``global`` or ``nonlocal``."""
    return {name for node, _ in _walk(function.body) if isinstance(node, (ast.Global, ast.Nonlocal))
            for name in node.names}


def _escape(statements, declared: set) -> str | None:
    """What in an ``if``'s branches keeps them from running as functions (a return, a break out of
    them...), or None."""
    if declared:
        return f"an assignment to the global/nonlocal variable {sorted(declared)[0]!r}"
    for node, in_loop in _walk(statements):
        if isinstance(node, ast.Return):
            return "`return`"
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "`yield`" if not isinstance(node, ast.Await) else "`await`"
        if isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            return "`break`" if isinstance(node, ast.Break) else "`continue`"
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return "a `global`/`nonlocal` statement"
    return None


def _binds(node: ast.AST) -> bool:
    """Whether an expression binds a name or suspends (it cannot move into a lambda unchanged)."""
    return any(isinstance(x, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for x in ast.walk(node))


# ------------------------------------------------------------- DALI's fn._conditional operators, spelled out

def split(input, *, predicate, _if_stmt=False, name=None, preserve=False, bytes_per_sample_hint=None):
    """DALI's ``fn._conditional.split``: (the samples whose predicate is true, the others), each a batch of
    those samples only. The operators after each side run only for its samples; ``merge`` puts them back."""
    truth = _split_predicate(predicate, "fn._conditional.split")
    node = _node(input)
    op = Op("_conditional.split", lambda ctx, op, x, p: (x, SKIPPED) if p else (SKIPPED, x), [node, truth], {},
            device=node.device, num_outputs=2, layouts=(node.layout(),) * 2, fusable=False)
    op.predicate = predicate
    return op.outputs


def merge(true_input, false_input, *, predicate, name=None, preserve=False, bytes_per_sample_hint=None):
    """DALI's ``fn._conditional.merge``: per sample, the true side's value where the predicate is true, else
    the false side's; each side must come from a ``split`` on the same predicate (as DALI needs its
    batches to add up)."""
    truth = _split_predicate(predicate, "fn._conditional.merge")
    for side, node in (("true", true_input), ("false", false_input)):
        if not isinstance(node, DataNode) or not _after_split(node, predicate):
            raise ValueError(f"fastload.compat.dali: fn._conditional.merge: its {side} input {node!r} does not "
                             f"come from a fn._conditional.split on the same predicate, so it does not have "
                             f"the samples the merge takes from it (DALI fails on this too)")
    return _Merge(truth, true_input, false_input).outputs[0]


def validate_logical(input, *, expression_name, expression_side, name=None, preserve=False,
                     bytes_per_sample_hint=None):
    """DALI's ``fn._conditional.validate_logical``: ``input`` as is, checked per sample to be a boolean
    scalar on the CPU (an operand of ``and`` / ``or``)."""
    return _logical(input, expression_name, expression_side, 0)


class _Merge(Select):
    """A ``Select`` of two sides of a split: a sample whose predicate is skipped (an enclosing split's other
    side) is skipped; one whose chosen side has no value is an error naming it."""

    def __init__(self, truth, if_true, if_false):
        super().__init__(truth, if_true, if_false)
        self.name, self.sees_skipped = "_conditional.merge", True

    def wanted(self, values: dict) -> list[DataNode]:
        if values.get(self.inputs[0]) is SKIPPED:
            return []
        return super().wanted(values)

    def run(self, ctx, values: dict) -> tuple:
        if values[self.inputs[0]] is SKIPPED:
            return (SKIPPED,)
        value = values[self._chosen(values)]
        if value is SKIPPED:
            side = "true" if values[self.inputs[0]] else "false"
            raise RuntimeError(f"fastload.compat.dali: fn._conditional.merge: {ctx.name} takes the {side} input, "
                               f"which has no value for it (the inputs are swapped, or split by another "
                               f"predicate)")
        return (value,)


def _split_predicate(predicate, what: str) -> DataNode:
    """A split's or merge's predicate: an argument input (a DataNode) of scalars on the CPU, made a bool."""
    if not isinstance(predicate, DataNode):
        raise TypeError(f"fastload.compat.dali: {what}: predicate must be a DataNode of per-sample scalars (an "
                        f"argument input), not {predicate!r}, as DALI needs")
    return _predicate(predicate, 0)


def _after_split(node: DataNode, predicate: DataNode) -> bool:
    """Whether ``node`` is computed from a side of a split on ``predicate``."""
    seen, stack = set(), [node]
    while stack:
        current = stack.pop()
        op = current.source
        if op is None or op.id in seen:
            continue
        seen.add(op.id)
        if getattr(op, "predicate", None) is predicate:
            return True
        stack.extend([*op.inputs, *op.arg_inputs.values()])
    return False
