"""Size expressions: ``"ceil_div(N, 128)"``, ``"2*M*N*K"``, ``"K + 8"``.

A spec writes every size-like value as an expression over its size symbols. Expressions are
parsed with :mod:`ast` and run by the small interpreter below, never by ``eval``: only numbers,
size symbols, arithmetic, comparisons, ``a if c else b`` and a handful of functions are allowed.
Integer results are capped at ``2**64`` in magnitude and integer exponents at 64, so that a
typo like ``10**10**10`` fails at once instead of eating the machine.

Every error is an :class:`~porter.errors.InputError` whose message starts with ``where`` (the
spec key the expression came from).
"""

from __future__ import annotations

import ast
import functools
import graphlib
import math
import operator
import warnings
from collections.abc import Callable, Collection, Mapping

from porter.errors import InputError

Number = int | float
Expr = str | int | float

MAX_LENGTH = 1000  # characters in one expression
MAX_INT = 2**64  # largest magnitude of an integer result
MAX_EXPONENT = 64  # largest integer exponent of an integer base other than -1, 0, 1


class _Problem(Exception):
    """What is wrong with an expression; the public functions add the key it came from."""


def _error(where: str, problem: str) -> InputError:
    return InputError(f"{where}: {problem}" if where else problem)


def _shorten(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _unknown_symbol(name: str, known: Collection[str]) -> str:
    listing = f"size symbols: {', '.join(sorted(known))}" if known else "no size symbols are defined"
    return f"unknown size symbol {name!r} ({listing})"


def _int_pair(function: str, a: Number, b: Number) -> tuple[int, int]:
    """``a`` and ``b``, which must be integers, the second not 0."""
    for x in (a, b):
        if not isinstance(x, int):
            raise _Problem(f"{function} needs integer arguments (got {x!r})")
    if b == 0:
        raise _Problem("division by zero")
    return int(a), int(b)


def _ceil_div(a: Number, b: Number) -> int:
    a, b = _int_pair("ceil_div", a, b)
    return -(-a // b)


def _round_up(a: Number, b: Number) -> int:
    a, b = _int_pair("round_up", a, b)
    return -(-a // b) * b


def _pow(base: Number, exponent: Number) -> Number:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > MAX_EXPONENT:
        raise _Problem(f"exponent {exponent} is too large (at most {MAX_EXPONENT})")
    return base**exponent


# name -> (function, least and most arguments; None: no upper bound)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "ceil_div": (_ceil_div, 2, 2),
    "cdiv": (_ceil_div, 2, 2),
    "round_up": (_round_up, 2, 2),
    "min": (lambda *a: min(a), 1, None),
    "max": (lambda *a: max(a), 1, None),
    "abs": (abs, 1, 1),
}

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
}

_COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}

_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}

_OPERATOR_TEXT: dict[type[ast.AST], str] = {
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.Invert: "~",
    ast.Not: "not",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.And: "and",
    ast.Or: "or",
}


def _operator_problem(op: ast.AST) -> _Problem:
    return _Problem(f"operator '{_OPERATOR_TEXT.get(type(op), type(op).__name__)}' is not allowed")


def _checked(value: object) -> Number:
    """``value`` as a result: comparisons become 0/1; huge, non-finite or complex values are refused."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            raise _Problem("result is too large (more than 2**64 in magnitude)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Problem(f"result is not a finite number ({value})")
        return value
    raise _Problem("result is not a real number")


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr:
    """The checked tree of ``text`` (cached: a plan evaluates the spec's few expressions thousands
    of times; the tree is only read)."""
    if len(text) > MAX_LENGTH:
        raise _Problem(f"expression is longer than {MAX_LENGTH} characters")
    if not text.strip():
        raise _Problem("empty expression")
    try:
        with warnings.catch_warnings():
            # "1if M else 2" and "'\M'" parse with a SyntaxWarning or DeprecationWarning: keep them quiet
            warnings.simplefilter("ignore")
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise _Problem(f"syntax error in {_shorten(text)}: {e.msg}") from None
    except (ValueError, MemoryError):
        raise _Problem(f"cannot parse {_shorten(text)}") from None
    _names(tree.body)
    return tree.body


def _names(node: ast.expr) -> set[str]:
    """The size symbols ``node`` reads; raises _Problem for anything outside the allowed grammar."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _Problem(f"{node.value!r} is not a number")
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise _operator_problem(node.op)
        return _names(node.left) | _names(node.right)
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise _operator_problem(node.op)
        return _names(node.operand)
    if isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise _operator_problem(op)
        return _names(node.left).union(*(_names(c) for c in node.comparators))
    if isinstance(node, ast.IfExp):
        return _names(node.test) | _names(node.body) | _names(node.orelse)
    if isinstance(node, ast.Call):
        return _call_names(node)
    if isinstance(node, ast.BoolOp):
        raise _operator_problem(node.op)
    if isinstance(node, ast.Attribute):
        raise _Problem("attribute access is not allowed")
    raise _Problem(f"{type(node).__name__.lower()} is not allowed in a size expression")


def _call_names(node: ast.Call) -> set[str]:
    allowed = ", ".join(_FUNCTIONS)
    if not isinstance(node.func, ast.Name):
        raise _Problem(f"only calls to {allowed} are allowed")
    name = node.func.id
    if name not in _FUNCTIONS:
        raise _Problem(f"function {name!r} is not allowed (allowed: {allowed})")
    if node.keywords:
        raise _Problem(f"{name}: keyword arguments are not allowed")
    _, least, most = _FUNCTIONS[name]
    if len(node.args) < least or (most is not None and len(node.args) > most):
        wanted = str(least) if least == most else f"at least {least}"
        raise _Problem(f"{name} takes {wanted} argument{'s' if least != 1 else ''} (got {len(node.args)})")
    return set().union(*(_names(a) for a in node.args))


def _eval(node: ast.expr, symbols: Mapping[str, Number]) -> Number:
    """Run a tree that :func:`_names` accepted."""
    if isinstance(node, ast.Constant):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id not in symbols:
            raise _Problem(_unknown_symbol(node.id, symbols.keys()))
        return _checked(symbols[node.id])
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, symbols), _eval(node.right, symbols)
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise _Problem("division by zero") from None
        except OverflowError:
            raise _Problem("result is too large") from None
    if isinstance(node, ast.UnaryOp):
        return _checked(_UNARY[type(node.op)](_eval(node.operand, symbols)))
    if isinstance(node, ast.Compare):
        # chained like Python: 0 < a <= b stops at the first false link
        left = _eval(node.left, symbols)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, symbols)
            if not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    if isinstance(node, ast.IfExp):
        # lazy like Python, so that "0 if d == 0 else n // d" is safe
        return _eval(node.body, symbols) if _eval(node.test, symbols) else _eval(node.orelse, symbols)
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    function = _FUNCTIONS[node.func.id][0]
    return _checked(function(*(_eval(a, symbols) for a in node.args)))


def _literal(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Problem(f"expected a number or an expression string (got {value!r})")
    return _checked(value)


def evaluate(expr: Expr, symbols: Mapping[str, Number], *, where: str = "") -> Number:
    """The value of ``expr`` with ``symbols`` bound; comparisons give 1 or 0."""
    try:
        if isinstance(expr, str):
            return _eval(_parse(expr), symbols)
        return _literal(expr)
    except _Problem as p:
        raise _error(where, str(p)) from None
    except RecursionError:
        raise _error(where, "expression is nested too deeply") from None


def free_symbols(expr: Expr, *, where: str = "") -> set[str]:
    """The size symbols ``expr`` reads. Also checks the expression's grammar (InputError)."""
    try:
        if isinstance(expr, str):
            return _names(_parse(expr))
        _literal(expr)
        return set()
    except _Problem as p:
        raise _error(where, str(p)) from None
    except RecursionError:
        raise _error(where, "expression is nested too deeply") from None


def check_symbols(expr: Expr, known: Collection[str], *, where: str = "") -> None:
    """InputError if ``expr`` is malformed or reads a symbol outside ``known``."""
    unknown = free_symbols(expr, where=where) - set(known)
    if unknown:
        raise _error(where, _unknown_symbol(min(unknown), known))


def resolve_sizes(
    defaults: Mapping[str, int | str], overrides: Mapping[str, int | str], *, where: str = ""
) -> dict[str, int]:
    """Every size symbol as an integer: ``overrides`` replace ``defaults``, then each expression is
    evaluated after the symbols it reads, whatever the order they were written in.

    Errors name ``where.SYMBOL``; a cycle names its symbols in order (``a -> b -> a``).
    """
    merged = {**defaults, **overrides}

    def label(name: str) -> str:
        return f"{where}.{name}" if where else name

    needs: dict[str, set[str]] = {}
    for name, value in merged.items():
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise _error(label(name), f"must be an integer or an expression string (got {value!r})")
        needs[name] = free_symbols(value, where=label(name))
        unknown = needs[name] - merged.keys()
        if unknown:
            raise _error(label(name), _unknown_symbol(min(unknown), merged.keys()))
    try:
        order = list(graphlib.TopologicalSorter(needs).static_order())
    except graphlib.CycleError as e:
        # the cycle lists each symbol before the ones that read it; show "a reads b reads ... a"
        cycle = " -> ".join(reversed(e.args[1]))
        raise _error(where, f"size symbols form a cycle: {cycle}") from None
    values: dict[str, int] = {}
    for name in order:
        got = evaluate(merged[name], values, where=label(name))
        if not isinstance(got, int):
            raise _error(label(name), f"must be an integer (got {got!r}; use // for integer division)")
        values[name] = got
    return {name: values[name] for name in merged}
