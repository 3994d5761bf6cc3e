"""The CUDA tools porter drives: find them, assemble PTX with ptxas, disassemble cubins.

``find_toolchain()`` finds every copy of ``ptxas``, ``nvdisasm`` and ``cuobjdump`` in a fixed order
of folders and picks one consistent set that the local driver can use (see :func:`find_toolchain` and
:mod:`porter.ptx.selection`); ``Toolchain.isa`` says which PTX ISA versions its ptxas accepts.
``Toolchain.assemble`` runs ``ptxas -v`` and turns what it printed into
structured diagnostics (with the offending PTX lines) and per-function resource usage; results are
cached on disk by content, failures included, because the repair loop re-assembles the same text
often. ``Toolchain.disassemble`` gives the SASS opcodes per function, which is how porter proves that
a kernel really uses the tensor-core instructions it claims to.

ptxas is run inside a fresh temporary folder with relative file names, so its messages read
``ptxas kernel.ptx, line 26; error : ...`` and the log and command are the same on every run of the
same input (which is what makes a cached result indistinguishable from a fresh one).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import cast

from porter.errors import EnvironmentProblem, InputError
from porter.install import install_hint
from porter.ptx.assembly import Assembly, Diagnostic, EntryResources, Severity
from porter.ptx.isa import IsaSupport, isa_of_release, parse_probe, probe_text
from porter.ptx.selection import choose, driver_problem

TOOL_NAMES = ("ptxas", "nvdisasm", "cuobjdump")
DEFAULT_PTXAS_TIMEOUT_S = 300.0

# Where wheels put the binaries, relative to a site-packages folder. The CUDA 12 wheel
# nvidia-cuda-nvcc-cu12 ships only ptxas, under nvidia/cuda_nvcc/bin (no CUDA 12 wheel of nvdisasm
# or cuobjdump exists).
_WHEEL_BIN_DIRS = (
    "nvidia/cu13/bin",
    "nvidia/cuda_nvcc/bin",
    "nvidia/cuda_nvdisasm/bin",
    "nvidia/cuda_cuobjdump/bin",
)
_DISASSEMBLE_TIMEOUT_S = 120.0
# Bumped whenever the cached JSON layout or the log parsing changes, so old entries are not reused.
_CACHE_FORMAT = 1



# ---------------------------------------------------------------------------------------------
# Tool discovery
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    """One found binary. ``source`` names the rule that found it: PORTER_CUDA_HOME, CUDA_HOME, PATH
    or pip wheel."""

    name: str
    path: Path
    version: str  # "13.0.88", or "unknown" when --version printed nothing recognisable
    source: str


DETECT = "detect"  # find_toolchain's default: ask the local CUDA driver for its version


def find_toolchain(env: Mapping[str, str] | None = None, *, driver: str | None = DETECT) -> Toolchain:
    """Find ptxas, nvdisasm and cuobjdump; a tool that is not found is ``None``.

    Every copy of each tool is looked for in these folders: ``$PORTER_CUDA_HOME/bin`` and
    ``$PORTER_CUDA_HOME``, ``$CUDA_HOME/bin``, ``PATH``, then the bin folders of NVIDIA's pip wheels
    under every ``sys.path`` entry (CUDA 13's ``nvidia/cu13/bin``, CUDA 12's ``nvidia/cuda_nvcc/bin``).
    :func:`porter.ptx.selection.choose` then picks one set: what ``PORTER_CUDA_HOME`` (``--toolchain``)
    holds, else a ptxas whose cubins the driver of CUDA version ``driver`` loads (by default the
    local driver's, :func:`driver_cuda_version`; None: no constraint), from the most complete and
    newest release. ``env`` replaces ``os.environ`` for the lookup (including ``PORTER_CACHE_DIR``,
    the assembly cache folder; default ``~/.cache/porter/ptxas``).
    """
    env = os.environ if env is None else env
    if home := env.get("PORTER_CUDA_HOME"):  # a folder named for its ptxas must hold one, never be passed over
        toolchain_home(Path(home), named_by=f"PORTER_CUDA_HOME={home}")
    cache_dir = env.get("PORTER_CACHE_DIR")
    if driver == DETECT:
        driver = driver_cuda_version()
    choice = choose({name: _find_copies(name, env) for name in TOOL_NAMES}, driver)
    return Toolchain(
        ptxas=choice.ptxas,
        nvdisasm=choice.nvdisasm,
        cuobjdump=choice.cuobjdump,
        cache_dir=Path(cache_dir).expanduser() if cache_dir else Path.home() / ".cache" / "porter" / "ptxas",
        notes=choice.notes,
        why=choice.why,
        driver=driver,
    )


def toolchain_home(folder: Path, *, named_by: str = "") -> Path:
    """``folder`` as ``--toolchain`` (or ``PORTER_CUDA_HOME``: ``named_by`` says which, as the user
    wrote it) names it, absolute, to be ``PORTER_CUDA_HOME``; InputError unless it holds a ptxas that
    runs, in ``folder/bin`` or ``folder`` itself (a CUDA toolkit, a pip wheel's ``nvidia/cu13`` or
    ``nvidia/cuda_nvcc`` folder, or any folder with ptxas copied into it)."""
    named_by = named_by or f"--toolchain {folder}"
    home = folder.expanduser().absolute()
    if not home.is_dir():
        raise InputError(f"{named_by}: no such folder")
    for candidate in (home / "bin" / "ptxas", home / "ptxas"):
        if candidate.is_file() and os.access(candidate, os.X_OK) and _tool_version(str(candidate)) is not None:
            return home
    raise InputError(f"{named_by}: no ptxas that runs in {home / 'bin'} or {home}")


def driver_cuda_version() -> str | None:
    """The CUDA version of the local GPU driver (``"13.0"``), asked of ``libcuda`` without starting it
    (``cuDriverGetVersion`` needs no ``cuInit`` and makes no context); None where there is no driver."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0 or version.value <= 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def search_dirs(env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The folders searched for CUDA tools, in order (see :func:`find_toolchain`).

    Public so that other tools (ncu, compute-sanitizer) can be looked up the same way.
    """
    return tuple(folder for folder, _ in _search_folders(os.environ if env is None else env))


def _search_folders(env: Mapping[str, str]) -> Iterator[tuple[Path, str]]:
    """Each folder with the name of the rule that contributes it."""
    if home := env.get("PORTER_CUDA_HOME"):
        yield Path(home) / "bin", "PORTER_CUDA_HOME"
        yield Path(home), "PORTER_CUDA_HOME"
    if home := env.get("CUDA_HOME"):
        yield Path(home) / "bin", "CUDA_HOME"
    for entry in env.get("PATH", "").split(os.pathsep):
        if entry:  # an empty PATH entry would mean the current directory
            yield Path(entry), "PATH"
    for entry in sys.path:
        if entry:  # "" is the current directory, never a site-packages folder
            for sub in _WHEEL_BIN_DIRS:
                yield Path(entry) / sub, "pip wheel"


def _find_copies(name: str, env: Mapping[str, str]) -> tuple[Tool, ...]:
    """Every runnable copy of ``name`` in the search folders, in search order (one per file)."""
    copies: list[Tool] = []
    seen: set[Path] = set()
    for folder, source in _search_folders(env):
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            version = _tool_version(str(path))
            if version is not None:
                copies.append(Tool(name=name, path=path, version=version, source=source))
    return tuple(copies)


def find_copies(name: str, env: Mapping[str, str] | None = None) -> tuple[Tool, ...]:
    """Every copy of ``name`` (ptxas, nvdisasm, cuobjdump) porter can see, in search order: what
    :func:`find_toolchain` chooses from."""
    if name not in TOOL_NAMES:
        raise ValueError(f"unknown tool {name!r}; expected one of {', '.join(TOOL_NAMES)}")
    return _find_copies(name, os.environ if env is None else env)


@cache
def _tool_version(path: str) -> str | None:
    """``"13.0.88"`` from ``--version`` ("release 13.0, V13.0.88"); None if the file cannot run."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout + proc.stderr
    match = re.search(r"\bV(\d+(?:\.\d+)+)", text) or re.search(r"release (\d+(?:\.\d+)+)", text)
    return match.group(1) if match else "unknown"


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AssembleResult(Assembly):
    """One ptxas run, with its cubin (None unless ``ok``) and the command that made it."""

    cubin: bytes | None
    command: tuple[str, ...]  # the argv, run inside a temporary folder holding the PTX file

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)


@dataclass(frozen=True)
class SassFunction:
    name: str
    instructions: tuple[str, ...]  # "@!P0 BRA `(.L_x_1)": no address, no encoding, no ';'
    opcodes: dict[str, int]  # full opcode -> count, e.g. "HGMMA.64x16x16.F32.BF16": 1

    def bases(self) -> dict[str, int]:
        """Counts by opcode base, the text before the first '.': ``HGMMA``, ``LDG``."""
        counts: Counter[str] = Counter()
        for opcode, n in self.opcodes.items():
            counts[opcode.split(".", 1)[0]] += n
        return dict(counts)

    def count(self, base: str) -> int:
        return self.bases().get(base, 0)


@dataclass(frozen=True)
class Disassembly:
    functions: dict[str, SassFunction]  # by symbol; a callee placed inside an entry is "$entry$callee"
    tool: str  # "nvdisasm 13.5.37"
    text: str  # the tool's full output

    def histogram(self) -> dict[str, int]:
        """Full-opcode counts over all functions."""
        counts: Counter[str] = Counter()
        for function in self.functions.values():
            counts.update(function.opcodes)
        return dict(counts)

    def bases(self) -> dict[str, int]:
        """Opcode-base counts over all functions."""
        counts: Counter[str] = Counter()
        for function in self.functions.values():
            counts.update(function.bases())
        return dict(counts)

    def count(self, base: str) -> int:
        return self.bases().get(base, 0)


# ---------------------------------------------------------------------------------------------
# The toolchain
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Toolchain:
    ptxas: Tool | None
    nvdisasm: Tool | None
    cuobjdump: Tool | None
    cache_dir: Path
    notes: tuple[str, ...] = ()  # what the choice among several toolchains could not make consistent
    why: str = ""  # why this ptxas among several (porter.ptx.selection.choose's deciding rule)
    driver: str | None = None  # the driver's CUDA version the choice was made for; None: no driver seen

    @property
    def can_disassemble(self) -> bool:
        return self.nvdisasm is not None or self.cuobjdump is not None

    def isa(self) -> IsaSupport | None:
        """The PTX ISA versions this ptxas accepts (asked of ptxas once per binary, else from the
        table of CUDA releases); None without ptxas or when neither says."""
        return None if self.ptxas is None else _isa_support(str(self.ptxas.path), self.ptxas.version)

    def driver_problem(self, driver: str | None) -> str | None:
        """One line when a driver of CUDA version ``driver`` cannot load this ptxas's cubins."""
        return None if self.ptxas is None else driver_problem(self.ptxas, driver)

    def require(self, name: str) -> Tool:
        """The tool ``name``, or EnvironmentProblem saying how to install it."""
        if name not in TOOL_NAMES:
            raise ValueError(f"unknown tool {name!r}; expected one of {', '.join(TOOL_NAMES)}")
        tool: Tool | None = getattr(self, name)
        if tool is None:
            raise EnvironmentProblem(
                f"{name} not found (searched $PORTER_CUDA_HOME/bin, $CUDA_HOME/bin, PATH and pip wheels);"
                f" install it with: {install_hint(name)}"
            )
        return tool

    def assemble(
        self,
        ptx: str,
        arch: str,
        *,
        flags: Sequence[str] = (),
        filename: str = "kernel.ptx",
        use_cache: bool = True,
        timeout_s: float = DEFAULT_PTXAS_TIMEOUT_S,
    ) -> AssembleResult:
        """Run ``ptxas -v -arch=<arch> [flags] <filename> -o out.cubin`` on ``ptx``.

        A failed assembly is a result with ``ok=False`` and its diagnostics, never an exception;
        so is a run that exceeds ``timeout_s`` (a fatal diagnostic; such runs are not cached).
        """
        if isinstance(flags, str):
            raise TypeError("flags must be a sequence of arguments, not one string")
        if not filename or Path(filename).name != filename or filename in (".", ".."):
            raise InputError(f"PTX file name {filename!r} must be a plain file name")
        ptxas = self.require("ptxas")
        command = (str(ptxas.path), "-v", f"-arch={arch}", *flags, filename, "-o", "out.cubin")
        if not use_cache:
            return _run_ptxas(ptx, arch, command, filename, ptxas.version, timeout_s)[0]
        key = _cache_key(ptx, arch, ptxas, tuple(flags), filename)
        with _assembling(key):  # a second request for the same text waits for the first's result
            hit = _cache_load(self.cache_dir, key)
            if hit is not None:
                return hit
            result, timed_out = _run_ptxas(ptx, arch, command, filename, ptxas.version, timeout_s)
            if not timed_out:
                _cache_store(self.cache_dir, key, result)
            return result

    def disassemble(self, cubin: bytes) -> Disassembly:
        """SASS of ``cubin`` by ``nvdisasm -c``, or ``cuobjdump -sass`` when nvdisasm is missing.

        Once per cubin and tool in a process: the signature check, the sanitizer's findings and
        the profiler's hot spots of one candidate all read the same disassembly."""
        tool = self.nvdisasm or self.cuobjdump or self.require("nvdisasm")
        return _disassemble(str(tool.path), tool.name, tool.version, cubin)


_ASSEMBLING: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_ASSEMBLING_LOCK = threading.Lock()


@contextmanager
def _assembling(key: str) -> Iterator[None]:
    """Hold the lock of one assembly (by cache key) in this process: a candidate assembled ahead
    (``porter.gate.check.prepare``) and its own check asking at once run ptxas once."""
    with _ASSEMBLING_LOCK:
        lock = _ASSEMBLING.get(key)
        if lock is None:
            lock = _ASSEMBLING[key] = threading.Lock()
    with lock:
        yield


@lru_cache(maxsize=64)
def _disassemble(path: str, name: str, version: str, cubin: bytes) -> Disassembly:
    with tempfile.TemporaryDirectory(prefix="porter-sass-") as tmp:
        cubin_path = Path(tmp) / "kernel.cubin"
        cubin_path.write_bytes(cubin)
        option = "-c" if name == "nvdisasm" else "-sass"
        try:
            proc = subprocess.run(
                [path, option, str(cubin_path)],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=_DISASSEMBLE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise EnvironmentProblem(f"{name} took over {_DISASSEMBLE_TIMEOUT_S:.0f} s") from exc
    if proc.returncode != 0:
        reason = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[0]
        raise EnvironmentProblem(f"{name} {version} could not disassemble the cubin: {reason}")
    return Disassembly(functions=_parse_sass(proc.stdout), tool=f"{name} {version}", text=proc.stdout)


@cache
def _isa_support(path: str, version: str) -> IsaSupport | None:
    """Ask ptxas which PTX ISA it accepts: it refuses a module of ``.version 99.9`` by naming its
    newest. Without an answer (a wrapper that hides the message), the release table decides."""
    with tempfile.TemporaryDirectory(prefix="porter-isa-") as tmp:
        (Path(tmp) / "probe.ptx").write_text(probe_text(), encoding="utf-8")
        try:
            proc = subprocess.run([path, "-arch=sm_80", "probe.ptx", "-o", "probe.cubin"], cwd=tmp,
                                  capture_output=True, text=True, errors="replace", timeout=60, check=False)
            said = parse_probe(proc.stderr + proc.stdout)
        except (OSError, subprocess.TimeoutExpired):
            said = None
    if said is not None:
        return IsaSupport(ptxas=version, max_ptx=said, source="probed")
    table = isa_of_release(version)
    return IsaSupport(ptxas=version, max_ptx=table, source="table") if table else None


# ---------------------------------------------------------------------------------------------
# Running ptxas and reading its log
# ---------------------------------------------------------------------------------------------


def _run_ptxas(
    ptx: str, arch: str, command: tuple[str, ...], filename: str, version: str, timeout_s: float
) -> tuple[AssembleResult, bool]:
    """Assemble in a fresh folder; returns the result and whether ptxas timed out."""
    with tempfile.TemporaryDirectory(prefix="porter-ptxas-") as tmp:
        (Path(tmp) / filename).write_text(ptx, encoding="utf-8")
        start = time.perf_counter()
        # Own session, so that on timeout the whole process group (a wrapper script and the real
        # ptxas under it) is killed and no orphan keeps the pipes open.
        try:
            proc = subprocess.Popen(
                command,
                cwd=tmp,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except OSError as exc:
            raise EnvironmentProblem(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            timed_out = True
        wall_s = time.perf_counter() - start
        cubin_path = Path(tmp) / "out.cubin"
        ok = not timed_out and proc.returncode == 0 and cubin_path.is_file()
        cubin = cubin_path.read_bytes() if ok else None
    log = stderr + stdout
    diagnostics, resources = _parse_ptxas_log(log, ptx)
    if timed_out:
        diagnostics += (Diagnostic(None, "fatal", f"ptxas timed out after {timeout_s:g} s and was killed"),)
    result = AssembleResult(
        ok=ok,
        arch=arch,
        cubin=cubin,
        diagnostics=diagnostics,
        resources=resources,
        command=command,
        wall_s=wall_s,
        cached=False,
        ptxas_version=version,
        log=log,
    )
    return result, timed_out


_LINE_MESSAGE = re.compile(
    r"^ptxas .+?, line (?P<line>\d+); (?P<sev>error|warning|info|fatal)\s*: (?P<msg>.*)$"
)
_PLAIN_MESSAGE = re.compile(r"^ptxas (?P<sev>error|warning|info|fatal)\s*: (?P<msg>.*)$")
_CODE_PREFIX = re.compile(r"^\((?P<code>[A-Z]\d+)\)\s*")
_COMPILING = re.compile(r"^Compiling entry function '(?P<name>[^']+)'")
_PROPERTIES = re.compile(r"^Function properties for (?P<name>\S+)")
_USED = re.compile(r"^Used (?P<registers>\d+) registers(?P<rest>.*)$")
_ROUTINE_INFO = re.compile(r"^(\d+ bytes gmem|Compile time = )")
_STACK = re.compile(
    r"^\s+(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
_USAGE_ITEMS = {
    "barriers": re.compile(r"^used (\d+) barriers$"),
    "shared_bytes": re.compile(r"^(\d+) bytes smem$"),
    "cumulative_stack": re.compile(r"^(\d+) bytes cumulative stack size$"),
}
_CMEM = re.compile(r"^(?P<bytes>\d+) bytes cmem\[(?P<bank>\d+)\]$")


def _parse_ptxas_log(log: str, ptx: str) -> tuple[tuple[Diagnostic, ...], dict[str, EntryResources]]:
    """Split the ``-v`` log into diagnostics and per-function resources.

    The resource lines come as "Compiling entry function 'k'" / "Function properties for k" /
    an indented stack line / "Used N registers, ..."; the stack and "Used" lines belong to the
    function most recently named.
    """
    source_lines = ptx.splitlines()
    diagnostics: list[Diagnostic] = []
    resources: dict[str, EntryResources] = {}
    current: str | None = None
    for raw in log.splitlines():
        if stack := _STACK.match(raw):
            if current is not None:
                resources[current] = replace(
                    resources[current],
                    stack_frame=int(stack["stack"]),
                    spill_stores=int(stack["stores"]),
                    spill_loads=int(stack["loads"]),
                )
            continue
        line_match = _LINE_MESSAGE.match(raw)
        match = line_match or _PLAIN_MESSAGE.match(raw)
        if match is None:
            continue
        severity, message = cast(Severity, match["sev"]), match["msg"].strip()
        if severity == "info" and line_match is None:
            if named := _COMPILING.match(message) or _PROPERTIES.match(message):
                current = named["name"]
                resources.setdefault(current, EntryResources(name=current))
                continue
            if used := _USED.match(message):
                if current is not None:
                    resources[current] = _with_usage(resources[current], used)
                continue
            if _ROUTINE_INFO.match(message):
                continue
        code = None
        if prefix := _CODE_PREFIX.match(message):
            code, message = prefix["code"], message[prefix.end() :]
        line = int(line_match["line"]) if line_match else None
        context = _context(source_lines, line) if line is not None else ""
        diagnostics.append(Diagnostic(line, severity, message, code, context))
    return tuple(diagnostics), resources


def _with_usage(resources: EntryResources, used: re.Match[str]) -> EntryResources:
    """Add ``Used 32 registers, used 1 barriers, 1024 bytes smem, 372 bytes cmem[0]`` to ``resources``."""
    counts: dict[str, int] = {}
    constant: dict[int, int] = {}
    for item in (part.strip() for part in used["rest"].split(",")):
        if cmem := _CMEM.match(item):
            constant[int(cmem["bank"])] = int(cmem["bytes"])
            continue
        for name, pattern in _USAGE_ITEMS.items():
            if found := pattern.match(item):
                counts[name] = int(found.group(1))
    return replace(resources, registers=int(used["registers"]), constant_bytes=constant,
                   barriers=counts.get("barriers", resources.barriers),
                   shared_bytes=counts.get("shared_bytes", resources.shared_bytes),
                   cumulative_stack=counts.get("cumulative_stack", resources.cumulative_stack))


def _context(source_lines: list[str], line: int) -> str:
    if not 1 <= line <= len(source_lines):
        return ""
    first, last = max(1, line - 2), min(len(source_lines), line + 2)
    width = len(str(last))
    return "\n".join(
        f"{'>' if n == line else ' '} {n:>{width}} | {source_lines[n - 1].rstrip()}"
        for n in range(first, last + 1)
    )


# ---------------------------------------------------------------------------------------------
# The on-disk cache
# ---------------------------------------------------------------------------------------------


def _cache_key(ptx: str, arch: str, ptxas: Tool, flags: tuple[str, ...], filename: str) -> str:
    material = json.dumps(
        [_CACHE_FORMAT, ptx, arch, str(ptxas.path), ptxas.version, list(flags), filename], ensure_ascii=False
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _cache_paths(cache_dir: Path, key: str) -> tuple[Path, Path]:
    folder = cache_dir / key[:2]
    return folder / f"{key}.json", folder / f"{key}.cubin"


def _cache_load(cache_dir: Path, key: str) -> AssembleResult | None:
    """The cached result, or None when absent or unreadable in any way (it is then rewritten)."""
    meta_path, cubin_path = _cache_paths(cache_dir, key)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        cubin = None
        if meta["cubin_sha256"] is not None:
            cubin = cubin_path.read_bytes()
            if hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"]:
                return None
        return AssembleResult(
            ok=bool(meta["ok"]),
            arch=str(meta["arch"]),
            cubin=cubin,
            diagnostics=tuple(Diagnostic(**d) for d in meta["diagnostics"]),
            resources={
                r["name"]: EntryResources(
                    **{**r, "constant_bytes": {int(k): int(v) for k, v in r["constant_bytes"].items()}}
                )
                for r in meta["resources"]
            },
            command=tuple(meta["command"]),
            wall_s=float(meta["wall_s"]),
            cached=True,
            ptxas_version=str(meta["ptxas_version"]),
            log=str(meta["log"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _cache_store(cache_dir: Path, key: str, result: AssembleResult) -> None:
    """Write the cubin, then the JSON that points at it; a cache that cannot be written is skipped."""
    meta_path, cubin_path = _cache_paths(cache_dir, key)
    meta = {
        "ok": result.ok,
        "arch": result.arch,
        "cubin_sha256": hashlib.sha256(result.cubin).hexdigest() if result.cubin is not None else None,
        "diagnostics": [asdict(d) for d in result.diagnostics],
        "resources": [asdict(r) for r in result.resources.values()],
        "command": list(result.command),
        "wall_s": result.wall_s,
        "ptxas_version": result.ptxas_version,
        "log": result.log,
    }
    try:
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        if result.cubin is not None:
            _write_atomic(cubin_path, result.cubin)
        _write_atomic(meta_path, json.dumps(meta, ensure_ascii=False).encode("utf-8"))
    except OSError:
        return


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------------------------
# SASS
# ---------------------------------------------------------------------------------------------

_SASS_ADDRESS = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(?P<text>.*)$")
_TRAILING_COMMENT = re.compile(r"\s*/\*[^*]*\*/\s*$")
# nvdisasm: ".type name,@function" (also for callees placed inside an entry's section);
# cuobjdump: "Function : name".
_FUNCTION_HEADER = re.compile(r"^\s*(?:\.type\s+(?P<type>[^\s,]+),\s*@function|Function : (?P<name>\S+))")


def _parse_sass(text: str) -> dict[str, SassFunction]:
    instructions: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        if header := _FUNCTION_HEADER.match(raw):
            current = instructions.setdefault(header["type"] or header["name"], [])
            continue
        found = _SASS_ADDRESS.match(raw)
        if found is None or current is None:
            continue
        instruction = _TRAILING_COMMENT.sub("", found["text"]).rstrip().rstrip(";").rstrip()
        if instruction:
            current.append(instruction)
    return {
        name: SassFunction(name=name, instructions=tuple(body), opcodes=dict(Counter(map(_opcode, body))))
        for name, body in instructions.items()
    }


def _opcode(instruction: str) -> str:
    """``@!P0 BRA `(.L_x_1)`` -> ``BRA``: the first word after an optional predicate."""
    words = instruction.split()
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
