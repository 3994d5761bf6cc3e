"""Size expressions: arithmetic, the allowed functions, errors, limits, and size resolution."""

from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.errors import InputError
from porter.gate.expr import MAX_INT, check_symbols, evaluate, free_symbols, resolve_sizes

SIZES = {"M": 1000, "N": 999, "K": 72, "Z": 0}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-M", -1000),
        ("+K", 72),
        ("2*M*N*K", 2 * 1000 * 999 * 72),
        ("M > N", 1),
        ("M < N", 0),
        ("0 < K <= 72 < M", 1),
        ("(K == 72) * 5", 5),
        ("K if M > N else N", 72),
        ("0 if Z == 0 else M // Z", 0),  # the branch not taken is never evaluated
        ("  K + 8  ", 80),
        ("1.5 * 2", 3.0),
    ],
)
def test_arithmetic(text: str, value: float) -> None:
    result = evaluate(text, SIZES)
    assert result == value
    assert type(result) is type(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("ceil_div(N, 128)", 8),
        ("cdiv(M, 8)", 125),
        ("ceil_div(-7, 2)", -3),
        ("round_up(N, 128)", 1024),
        ("round_up(1024, 128)", 1024),
        ("min(M, N, K)", 72),
        ("max(M, N)", 1000),
        ("min(K)", 72),
        ("abs(K - M)", 928),
        ("max(ceil_div(M, 128), 1) * 128", 1024),
    ],
)
def test_functions(text: str, value: int) -> None:
    assert evaluate(text, SIZES) == value


def test_numbers_pass_through() -> None:
    assert evaluate(128, {}) == 128
    assert evaluate(0.5, {}) == 0.5


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("ldb + 1", "unknown size symbol 'ldb' (size symbols: K, M, N, Z)"),
        ("open('x')", "function 'open' is not allowed"),
        ("__import__('os')", "function '__import__' is not allowed"),
        ("M.bit_length()", "only calls to ceil_div"),
        ("(1).real", "attribute access is not allowed"),
        ("M // Z", "division by zero"),
        ("M / Z", "division by zero"),
        ("M % Z", "division by zero"),
        ("ceil_div(M, Z)", "division by zero"),
        ("round_up(M, 0)", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("M +", "syntax error in 'M +'"),
        ("", "empty expression"),
        ("M << 2", "operator '<<' is not allowed"),
        ("M and N", "operator 'and' is not allowed"),
        ("not M", "operator 'not' is not allowed"),
        ("M in N", "operator 'in' is not allowed"),
        ("'M'", "'M' is not a number"),
        ("True", "True is not a number"),
        ("[M]", "list is not allowed"),
        ("lambda: 1", "lambda is not allowed"),
        ("min()", "min takes at least 1 argument (got 0)"),
        ("ceil_div(M)", "ceil_div takes 2 arguments (got 1)"),
        ("max(a=1)", "keyword arguments are not allowed"),
        ("ceil_div(M, 2.0)", "ceil_div needs integer arguments"),
        ("10 ** 10 ** 10", "exponent 10000000000 is too large"),
        ("2 ** 65", "exponent 65 is too large"),
        ("2 ** 64 * 2", "result is too large"),
        ("10.0 ** 400", "result is too large"),
        ("1e308 * 10", "not a finite number"),
        ("(-8) ** 0.5", "not a real number"),
        ("M " + "+ 1 " * 400, "longer than 1000 characters"),
        (True, "expected a number or an expression string (got True)"),
        (float("nan"), "not a finite number"),
    ],
)
def test_errors_name_the_key(expr: object, problem: str) -> None:
    with pytest.raises(InputError) as info:
        evaluate(expr, SIZES, where="porter.toml: launch.grid[0]")  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("porter.toml: launch.grid[0]: ")
    assert problem in message
    assert "\n" not in message


def test_unknown_symbol_exact_wording() -> None:
    with pytest.raises(InputError, match=r"^k: unknown size symbol 'ldb' \(no size symbols are defined\)$"):
        evaluate("ldb", {}, where="k")


def test_error_without_where_is_just_the_problem() -> None:
    with pytest.raises(InputError, match=r"^division by zero$"):
        evaluate("1 // 0", {})


def test_huge_exponents_fail_fast() -> None:
    start = time.perf_counter()
    for text in ("10**10**10", "9**9**9**9", "(2**64)**(2**64)", "2**64**64"):
        with pytest.raises(InputError):
            evaluate(text, {})
    assert time.perf_counter() - start < 1.0


def test_limits_allow_u64() -> None:
    assert evaluate("2**64", {}) == MAX_INT
    assert evaluate("-(2**64)", {}) == -MAX_INT
    assert evaluate("1 ** (10**18)", {}) == 1


def test_deep_nesting_is_an_input_error() -> None:
    with pytest.raises(InputError):
        evaluate("-" * 990 + "1", {})
    with pytest.raises(InputError):
        evaluate("(" * 300 + "1" + ")" * 300, {})


def test_free_symbols() -> None:
    assert free_symbols("ceil_div(N, 128) * lda + min(M, K)") == {"N", "lda", "M", "K"}
    assert free_symbols(64) == set()
    assert free_symbols("2 ** 10") == set()
    with pytest.raises(InputError, match=r"^x: function 'exec' is not allowed"):
        free_symbols("exec(M)", where="x")


def test_check_symbols() -> None:
    check_symbols("M + N", {"M", "N"})
    with pytest.raises(InputError, match=r"^k: unknown size symbol 'ldb' \(size symbols: M, N\)$"):
        check_symbols("M + ldb", ["M", "N"], where="k")


def test_resolve_sizes_in_dependency_order() -> None:
    defaults = {"lda": "K + 8", "tiles": "ceil_div(M, 128) * ceil_div(N, 128)", "M": 1024, "N": 512, "K": 64}
    assert resolve_sizes(defaults, {}) == {"lda": 72, "tiles": 32, "M": 1024, "N": 512, "K": 64}
    ragged = resolve_sizes(defaults, {"M": 1000, "K": "2 * 36"})
    assert ragged == {"lda": 80, "tiles": 32, "M": 1000, "N": 512, "K": 72}
    assert list(ragged) == list(defaults)


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ({"a": "b + 1", "b": "c", "c": "a * 2"}, "s: size symbols form a cycle: a -> b -> c -> a"),
        ({"M": "M"}, "s: size symbols form a cycle: M -> M"),
        ({"M": "N + 1"}, "s.M: unknown size symbol 'N' (size symbols: M)"),
        ({"M": "7 / 2"}, "s.M: must be an integer (got 3.5; use // for integer division)"),
        ({"M": 1.5}, "s.M: must be an integer or an expression string (got 1.5)"),
        ({"M": True}, "s.M: must be an integer or an expression string (got True)"),
        ({"M": 0, "N": "8 // M"}, "s.N: division by zero"),
    ],
)
def test_resolve_sizes_errors(defaults: dict, message: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_sizes(defaults, {}, where="s")
    assert str(info.value) == message


# --- fuzzing --------------------------------------------------------------------------------

_TOKENS = [
    *"0123456789+-*/%()<>=!,. ",
    "**", "//", "M", "N", "Z", "ldb", "ceil_div", "cdiv", "round_up", "min", "max", "abs",
    "if", "else", "and", "not", "lambda", "open", "__import__", "e9", "1e308", "j", "'", '"', "[", "]",
    "{", "}", ":", ";", "\n", "\\", "\x00", "é", "2**64", "10**10**10", "_", "x.y", "=",
]  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(st.sampled_from(_TOKENS), max_size=25).map("".join)))
def test_random_text_raises_only_input_error(text: str) -> None:
    try:
        result = evaluate(text, SIZES, where="k")
    except InputError as e:
        assert str(e).startswith("k: ")
    else:
        assert isinstance(result, int | float)
        assert not isinstance(result, bool)
    with contextlib.suppress(InputError):
        free_symbols(text)


class _Invalid(Exception):
    """The oracle's division by zero or overflow: evaluate must raise InputError there."""


def _cap(value: int) -> int:
    if abs(value) > MAX_INT:
        raise _Invalid
    return value


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise _Invalid
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise _Invalid
    return a % b


_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": _floordiv,
    "%": _mod,
    "<": lambda a, b: int(a < b),
    "==": lambda a, b: int(a == b),
    ">=": lambda a, b: int(a >= b),
}
_FUNCS = {
    "min": min,
    "max": max,
    "ceil_div": lambda a, b: -_floordiv(-a, b),
    "round_up": lambda a, b: -_floordiv(-a, b) * b,
}

# A tree is (text, oracle): oracle() gives Python's integer value or raises _Invalid.
_leaves = st.one_of(
    st.integers(-300, 300).map(lambda n: (f"({n})", lambda: n)),
    st.sampled_from(sorted(SIZES)).map(lambda s: (s, lambda: SIZES[s])),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    def binary(op: str, a: tuple, b: tuple) -> tuple:
        return f"({a[0]} {op} {b[0]})", lambda: _cap(_BINARY[op](a[1](), b[1]()))

    def call(name: str, a: tuple, b: tuple) -> tuple:
        return f"{name}({a[0]}, {b[0]})", lambda: _cap(_FUNCS[name](a[1](), b[1]()))

    def power(a: tuple, e: int) -> tuple:
        return f"({a[0]}) ** {e}", lambda: _cap(a[1]() ** e)

    def choose(c: tuple, a: tuple, b: tuple) -> tuple:
        return f"({a[0]} if {c[0]} else {b[0]})", lambda: a[1]() if c[1]() else b[1]()

    return st.one_of(
        st.builds(binary, st.sampled_from(sorted(_BINARY)), children, children),
        st.builds(call, st.sampled_from(sorted(_FUNCS)), children, children),
        st.builds(lambda a: (f"-({a[0]})", lambda: -a[1]()), children),
        st.builds(lambda a: (f"abs({a[0]})", lambda: abs(a[1]())), children),
        st.builds(power, children, st.integers(0, 4)),
        st.builds(choose, children, children, children),
    )


@settings(max_examples=600, deadline=None)
@given(st.recursive(_leaves, _extend, max_leaves=12))
def test_random_trees_agree_with_python(tree: tuple) -> None:
    text, oracle = tree
    try:
        expected = oracle()
    except _Invalid:
        with pytest.raises(InputError):
            evaluate(text, SIZES)
        return
    assert evaluate(text, SIZES) == expected
