"""``tomllib`` on Python 3.11+, its backport ``tomli`` on 3.10: one import site for the package."""

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["tomllib"]
