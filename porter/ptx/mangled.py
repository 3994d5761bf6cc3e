"""The parameter types a C++ kernel's mangled name spells out (nvcc keeps the Itanium mangling as
the ``.entry`` name): ``_Z9wmma_bf16PK13__nv_bfloat16S1_Pfiii`` is
``wmma_bf16(const __nv_bfloat16*, const __nv_bfloat16*, float*, int, int, int)``.

Only what kernels' signatures use is read: builtin types, pointers, references, const/volatile/
restrict, class names (plain, ``std::`` and nested ``a::b``) and substitutions (``S_``, ``S0_``, ...).
Anything else (templates, function pointers, ...) makes the whole name unreadable: the result is
None, never a guess. An ``extern "C"`` kernel has no mangled name and so no types here.
"""

from __future__ import annotations

from dataclasses import dataclass

_BUILTIN = {"v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
            "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
            "x": "long long", "y": "unsigned long long", "f": "float", "d": "double", "n": "__int128",
            "o": "unsigned __int128", "e": "long double"}
_BUILTIN_D = {"Dh": "half", "DF16_": "_Float16", "DF16b": "__bf16"}

# C++ element type (the last name component) -> spec dtype, and how many elements one value holds.
_DTYPES = {
    "float": ("f32", 1), "double": ("f64", 1), "half": ("f16", 1), "_Float16": ("f16", 1), "__half": ("f16", 1),
    "half_t": ("f16", 1), "__bf16": ("bf16", 1), "__nv_bfloat16": ("bf16", 1), "bfloat16_t": ("bf16", 1),
    "__half2": ("f16", 2), "__nv_bfloat162": ("bf16", 2), "__nv_fp8_e4m3": ("e4m3", 1),
    "__nv_fp8_e5m2": ("e5m2", 1), "float_e4m3_t": ("e4m3", 1), "float_e5m2_t": ("e5m2", 1),
    "tfloat32_t": ("f32", 1), "int": ("i32", 1), "unsigned int": ("u32", 1), "short": ("i16", 1),
    "unsigned short": ("u16", 1), "char": ("i8", 1), "signed char": ("i8", 1), "unsigned char": ("u8", 1),
    "bool": ("u8", 1), "long": ("i64", 1), "long long": ("i64", 1), "unsigned long": ("u64", 1),
    "unsigned long long": ("u64", 1), "int8_t": ("i8", 1), "uint8_t": ("u8", 1),
    **{f"{base}{n}": (dtype, n) for base, dtype in (("float", "f32"), ("double", "f64"), ("int", "i32"),
                                                    ("uint", "u32"), ("short", "i16"), ("ushort", "u16"),
                                                    ("char", "i8"), ("uchar", "u8"), ("longlong", "i64"),
                                                    ("ulonglong", "u64"), ("long", "i64"), ("ulong", "u64"))
       for n in (1, 2, 3, 4)},
}


@dataclass(frozen=True)
class CxxType:
    """One parameter's C++ type: ``const __half*`` is CxxType("__half", pointers=1, const=True)."""

    name: str  # the element type, as written ("__half", "unsigned int", "cute::half_t")
    pointers: int = 0  # levels of pointer (or reference)
    const: bool = False  # the element type is const-qualified (a pointer to read-only data)

    @property
    def dtype(self) -> str | None:
        """The spec dtype of one element (vector types give their lane type), or None."""
        found = _DTYPES.get(self.name.rsplit("::", 1)[-1])
        return found[0] if found else None

    @property
    def lanes(self) -> int:
        found = _DTYPES.get(self.name.rsplit("::", 1)[-1])
        return found[1] if found else 1

    def __str__(self) -> str:
        return ("const " if self.const else "") + self.name + "*" * self.pointers


class _Unreadable(Exception):
    pass


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.subs: list[CxxType] = []

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos:self.pos + n]

    def take(self, n: int = 1) -> str:
        if self.pos + n > len(self.text):
            raise _Unreadable
        out = self.text[self.pos:self.pos + n]
        self.pos += n
        return out

    def source_name(self) -> str:
        digits = ""
        while self.peek().isdigit():
            digits += self.take()
        if not digits or int(digits) == 0:
            raise _Unreadable
        return self.take(int(digits))

    def nested(self) -> str:
        self.take()  # N
        parts = []
        if self.peek() in ("K", "V", "r"):  # cv-qualifiers of a member function: not a kernel's
            raise _Unreadable
        while self.peek() != "E":
            if self.peek() == "S" and self.peek(2) == "St":
                self.take(2)
                parts.append("std")
            elif self.peek().isdigit():
                if parts and parts != ["std"]:  # every prefix of a nested name is a substitution candidate
                    self.subs.append(CxxType("::".join(parts)))
                parts.append(self.source_name())
            else:
                raise _Unreadable  # templates, substitutions inside names, ...
        self.take()
        return "::".join(parts)

    def name(self) -> str:
        if self.peek() == "L":
            self.take()
        if self.peek() == "N":
            return self.nested()
        if self.peek(2) == "St":
            self.take(2)
            return "std::" + self.source_name()
        if self.peek().isdigit():
            name = self.source_name()
            if self.peek() == "I":
                raise _Unreadable  # a template function: its return type comes first
            return name
        raise _Unreadable

    def substitution(self) -> CxxType:
        self.take()  # S
        if self.peek() == "_":
            self.take()
            index = 0
        else:
            digits = ""
            while self.peek() and self.peek() != "_":
                digits += self.take()
            self.take()
            try:
                index = int(digits, 36) + 1
            except ValueError:
                raise _Unreadable from None
        if index >= len(self.subs):
            raise _Unreadable
        return self.subs[index]

    def type(self) -> CxxType:
        c = self.peek()
        if c in ("P", "R", "O"):
            self.take()
            inner = self.type()
            result = CxxType(inner.name, inner.pointers + 1, inner.const)
            self.subs.append(result)
            return result
        if c in ("K", "V", "r"):
            quals = ""
            while self.peek() in ("K", "V", "r"):
                quals += self.take()
            inner = self.type()
            result = CxxType(inner.name, inner.pointers, inner.const or ("K" in quals and inner.pointers == 0))
            self.subs.append(result)
            return result
        if c in _BUILTIN:
            self.take()
            return CxxType(_BUILTIN[c])
        for code, name in _BUILTIN_D.items():
            if self.text.startswith(code, self.pos):
                self.take(len(code))
                return CxxType(name)
        if c == "S" and self.peek(2) != "St":
            return self.substitution()
        if c == "N" or c.isdigit() or self.peek(2) == "St":
            result = CxxType(self.nested() if c == "N" else self.name())
            self.subs.append(result)
            return result
        raise _Unreadable


def demangle(symbol: str) -> tuple[str, tuple[CxxType, ...]] | None:
    """The function name and parameter types of an Itanium-mangled name, or None when it is not
    one this reader can read in full (``extern "C"`` names, templates, ...)."""
    if not symbol.startswith("_Z"):
        return None
    reader = _Reader(symbol[2:])
    try:
        name = reader.name()
        params: list[CxxType] = []
        while reader.pos < len(reader.text):
            params.append(reader.type())
    except (_Unreadable, ValueError):
        return None
    if params == [CxxType("void")]:
        return name, ()
    if not params or any(p.name == "void" and not p.pointers for p in params):
        return None
    return name, tuple(params)


def mangled_params(symbol: str) -> tuple[CxxType, ...] | None:
    """Just the parameter types of :func:`demangle`."""
    found = demangle(symbol)
    return found[1] if found is not None else None
