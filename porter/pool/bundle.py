"""A check as data, for a cluster worker that shares no file system with the machine that asks.

A :class:`Bundle` holds every file one check reads: the spec's folder (the spec, its reference and
baseline callables and the Python files beside them, which they may import), the candidate, and
the source kernel timed beside it; and the check's options with their paths made relative. The
worker unpacks the spec's folder into a folder named by its content, and the rest into one named
by theirs (:func:`unpack`), so that the candidates of one port run find the same spec at the same
path there, and the worker's caches (the parsed spec, the inputs, the references of the run's
shared seeds) serve all of them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from porter.errors import InputError
from porter.gate.check import CheckOptions
from porter.gate.spec import Spec

MAX_FILE_BYTES = 8 << 20
SHIPPED_SUFFIXES = (".toml", ".py", ".json")
SOURCE_FIELDS = ("against", "speed_baseline")


@dataclass(frozen=True)
class Bundle:
    spec_files: dict[str, bytes]  # the spec's folder: relative POSIX path -> contents
    files: dict[str, bytes]  # the candidate and the source kernel: relative path -> contents
    spec: str  # the spec's name in its folder
    candidate: str  # the candidate's relative path
    options: CheckOptions  # source paths relative to the job's folder
    name: str = ""  # the candidate's own path, for messages


def _digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return h.hexdigest()[:32]


def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read the {what} ({err.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{path}: the {what} is over {MAX_FILE_BYTES >> 20} MiB, too large to send to a cluster worker")
    return data


def pack(candidate: Path, spec: Spec, options: CheckOptions) -> Bundle:
    """Everything the check of ``candidate`` reads, as one Bundle (one line, exit 2, for a check
    that reads what cannot travel: a golden folder, a callable outside the spec's folder)."""
    if options.golden is not None:
        raise InputError("--golden with --cluster: golden folders are not sent to cluster workers; "
                         "check on the cluster against the spec's reference or the source kernel")
    folder = spec.path.parent
    spec_files: dict[str, bytes] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in SHIPPED_SUFFIXES:
            spec_files[path.name] = _read(path, "spec folder's file")
    for ref in (spec.reference.callable if spec.reference else None, spec.baseline):
        if ref is None:
            continue
        try:
            inside = ref.path.resolve().relative_to(folder.resolve()).as_posix()
        except ValueError:
            raise InputError(f"{ref.path}: the spec's {ref} lies outside its folder {folder}; a cluster check "
                             "sends that folder only") from None
        spec_files[inside] = _read(ref.path, "spec's callable")
    spec_files.setdefault(spec.source, _read(spec.path, "spec"))
    files = {f"candidate/{candidate.name}": _read(candidate, "candidate")}
    moved: dict[str, Any] = {}  # CheckOptions fields by name, as options_at replaces them
    for field in SOURCE_FIELDS:
        path = getattr(options, field)
        if path is not None:
            where = f"{field}/{Path(path).name}"
            files[where] = _read(Path(path), "source kernel")
            moved[field] = Path(where)
    return Bundle(spec_files=spec_files, files=files, spec=spec.source, candidate=f"candidate/{candidate.name}",
                  options=replace(options, **moved), name=str(candidate))


def _write(files: dict[str, bytes], base: Path) -> Path:
    done = base / ".complete"
    if not done.exists():
        for rel, data in files.items():
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise InputError(f"bundle path {rel!r} leaves the bundle")
            target = base / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        done.write_text("")
    return base


def unpack(bundle: Bundle, root: Path | None = None) -> tuple[Path, Path]:
    """The bundle's files under ``root`` (default: the temporary folder), written once: the spec's
    folder in one named by its content, the rest in one named by theirs. Returns both folders."""
    base = (root or Path(tempfile.gettempdir())) / "porter-bundles"
    return (_write(bundle.spec_files, base / "spec" / _digest(bundle.spec_files)),
            _write(bundle.files, base / "job" / _digest(bundle.files)))


def options_at(bundle: Bundle, job_folder: Path) -> CheckOptions:
    """The bundle's options with their source paths inside the unpacked job folder."""
    moved = {field: job_folder / path for field in SOURCE_FIELDS if (path := getattr(bundle.options, field)) is not None}
    return replace(bundle.options, **moved)
