"""``porter mcp --http``: a bearer token in front of the SDK's streamable HTTP app.

The SDK's Host and Origin checks stop a web page from calling a server on 127.0.0.1; they do not
stop another process on the machine (on a shared GPU box, another user's). Such a process could
run a port with the owner's API key, or check a spec whose Python runs as the owner. So the HTTP
transport takes only requests that carry the server's token (``Authorization: Bearer TOKEN``),
compared in constant time; any other request gets 401 before it reaches the MCP app.

Each start makes a new token (:func:`secrets.token_urlsafe`, 256 bits), says it once on stderr and
writes it, readable by its owner only (mode 0600), to :func:`default_token_file` (the user's state
folder, one file per port). ``--token-file PATH`` names the file instead, and a token already
there is reused (a client configured once keeps working across restarts), if only its owner can
read it and it holds a token of :data:`MIN_TOKEN_CHARS` or more characters.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from porter.errors import InputError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MIN_TOKEN_CHARS = 32
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]+")  # RFC 6750's b64token: what fits an Authorization header
_MAX_TOKEN_FILE_BYTES = 4096


@dataclass(frozen=True)
class ServerToken:
    value: str
    file: Path
    made: bool  # False: reused from an existing file


def default_token_file(port: int) -> Path:
    """``$XDG_STATE_HOME/porter/mcp-PORT.token`` (``~/.local/state`` without it): in the user's
    own folder, outside any repository (so never committed), one per port (two servers, two files)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "porter" / f"mcp-{port}.token"


def server_token(file: Path, *, reuse: bool) -> ServerToken:
    """A new token, written to ``file``; with ``reuse`` (``--token-file``), the token already in
    ``file`` if there is one (checked: see :func:`read_token`)."""
    if reuse and file.exists():
        return ServerToken(read_token(file), file, made=False)
    token = secrets.token_urlsafe(32)
    write_token(file, token)
    return ServerToken(token, file, made=True)


def read_token(file: Path) -> str:
    """The token in ``file``: refused (one line, exit 2) unless it is a regular file of this user
    that no one else can read or write, holding one token of at least MIN_TOKEN_CHARS characters."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)  # non-blocking: a FIFO planted there cannot hang the start
    except OSError as err:
        raise InputError(f"--token-file {file}: cannot read ({err.strerror})") from None
    try:
        _check_owned_by_me_alone(file, os.fstat(fd))
        raw = os.read(fd, _MAX_TOKEN_FILE_BYTES + 1)
    finally:
        os.close(fd)
    token = raw.decode("ascii", errors="replace").strip()
    if len(raw) > _MAX_TOKEN_FILE_BYTES or len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token):
        raise InputError(f"--token-file {file}: needs one token of {MIN_TOKEN_CHARS} or more characters "
                         "(letters, digits and -._~+/=), e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return token


def _check_owned_by_me_alone(file: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"--token-file {file}: not a regular file")
    if info.st_uid != os.getuid():
        raise InputError(f"--token-file {file}: owned by another user")
    if info.st_mode & 0o077:
        raise InputError(f"--token-file {file}: group or others may read or write it "
                         f"(mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it")


def write_token(file: Path, token: str) -> None:
    """Write ``token`` to ``file``, mode 0600 from the start (a temporary file in the same folder,
    renamed over it: never a moment readable by others, never through a planted symlink)."""
    file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=file.parent, prefix=".mcp-token-")  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401; the
    lifespan messages (which start and stop the MCP session manager) pass through."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or (scope["type"] == "http" and self._authorized(scope)):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http":
            await _unauthorized(send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    def _authorized(self, scope: Scope) -> bool:
        given = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        if len(given) != 1:
            return False
        scheme, _, credentials = given[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._token)


async def _unauthorized(send: Send) -> None:
    body = b"porter mcp: this server takes only requests with its token (Authorization: Bearer TOKEN)\n"
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"www-authenticate", b'Bearer realm="porter mcp"'),
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def serve_http(server: MCPServer, token: str, *, host: str, port: int) -> None:
    """Serve ``server``'s streamable HTTP app (path /mcp) behind :class:`BearerAuth` with uvicorn,
    as the SDK's own ``run_streamable_http_async`` serves it without."""
    import uvicorn

    app = BearerAuth(server.streamable_http_app(host=host), token)
    config = uvicorn.Config(app, host=host, port=port, log_level=server.settings.log_level.lower())
    await uvicorn.Server(config).serve()
