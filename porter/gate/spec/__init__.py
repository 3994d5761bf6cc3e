"""The hot-loop spec (``porter.toml``): how a kernel is called and what it computes.

:func:`load_spec` reads and checks a spec completely before anything runs: every key, every
expression's symbols, and every size-dependent value (shapes, launch, scalars, fills, tolerances,
costs) evaluated for the default sizes and for each sweep entry. A spec that loads is one the
verifier can run; each error names the file and the key path (``porter.toml: params[2].shape[1]:
unknown size symbol 'ldb'``), and errors found under a sweep entry name it (``sweep[1]: ...``).
The format is described in docs/spec.md.

The package, one job a module: :mod:`~porter.gate.spec.types` (the data types and limits),
:mod:`~porter.gate.spec.model` (:class:`Spec` and the values it evaluates at given sizes),
:mod:`~porter.gate.spec.reader` (the TOML reader), :mod:`~porter.gate.spec.directives` (a
candidate's porter-launch, porter-param and porter-kernel lines) and :mod:`~porter.gate.spec.match`
(the spec against a PTX entry). This module gives the names the rest of porter uses.
"""

from porter.gate.spec.directives import declared_spec, launch_directive, with_launch
from porter.gate.spec.match import check_against_entry, check_against_module
from porter.gate.spec.model import Spec
from porter.gate.spec.reader import load_spec, parse_spec
from porter.gate.spec.types import (
    DEFAULT_ALIGN,
    DEFAULT_NATIVE_SHARE,
    PERTURB,
    TENSORMAP_BYTES,
    WIDE,
    CallableRef,
    Domain,
    FillSpec,
    LaunchDims,
    LaunchSpec,
    ParamSpec,
    TensorMapGeometry,
    Tolerance,
    default_fill,
)

__all__ = [
    "DEFAULT_ALIGN",
    "DEFAULT_NATIVE_SHARE",
    "PERTURB",
    "TENSORMAP_BYTES",
    "WIDE",
    "CallableRef",
    "Domain",
    "FillSpec",
    "LaunchDims",
    "LaunchSpec",
    "ParamSpec",
    "Spec",
    "TensorMapGeometry",
    "Tolerance",
    "check_against_entry",
    "check_against_module",
    "declared_spec",
    "default_fill",
    "launch_directive",
    "load_spec",
    "parse_spec",
    "with_launch",
]
