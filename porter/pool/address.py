"""A dask scheduler's address, checked for its form before anything connects to it.

A malformed ``--cluster`` or ``--scheduler`` value used to reach dask, which spent its connect
timeout on it and left a ``Client.__del__`` traceback behind: the form is the user's to fix, and
can be said at once (exit 2), without importing dask.
"""

from __future__ import annotations

import re

from porter.errors import InputError

PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx")

_ADDRESS = re.compile(r"(?:(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://)?"
                      r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
                      r":(?P<port>[0-9]{1,5})")


def scheduler_address(address: str, option: str) -> str:
    """``address`` (``tcp://HOST:PORT``, or ``HOST:PORT`` for tcp) as given, or InputError naming
    ``option`` and the form it needs."""
    match = _ADDRESS.fullmatch(address.strip())
    form = f"PROTOCOL://HOST:PORT, e.g. tcp://10.0.0.5:8786; protocols: {', '.join(PROTOCOLS)}"
    if match is None:
        raise InputError(f"{option} {address!r}: not a dask scheduler address ({form})")
    protocol = (match["protocol"] or "tcp").lower()
    if protocol not in PROTOCOLS:
        raise InputError(f"{option} {address!r}: unknown protocol {protocol!r} ({form})")
    if not 0 < int(match["port"]) < 65536:
        raise InputError(f"{option} {address!r}: the port must be 1 to 65535")
    return address.strip()
