"""A scripted OpenAI chat-completions server on 127.0.0.1, for driving litellm over a real socket.

Each POST takes the next :class:`Scripted` response from the script: a chat completion with usage,
an HTTP error status with an OpenAI-style error body, a raw (possibly malformed) body, or a stall
longer than the client's timeout. Every request is recorded (path, headers, JSON body) so tests can
assert what reached the wire, and how many times.

The server is bounded so a broken test cannot leave it running: it serves at most ``max_requests``
requests (beyond that it answers 503 without touching the script), it stops itself after
``lifetime_s`` seconds, stalls wake up early when it stops, and all its threads are daemons.
A request that finds the script exhausted gets HTTP 418, a status no client retries, so a test that
sends more requests than it scripted fails at once and loudly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_JSON = ("Content-Type", "application/json")


@dataclass(frozen=True)
class Scripted:
    """One scripted response: wait ``delay_s`` (interrupted by stop), then send status, headers, body."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0


def chat(
    text: str,
    *,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    finish_reason: str = "stop",
    model: str = "test-model",
) -> Scripted:
    """A successful chat completion whose usage block carries the given token counts."""
    payload = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_764_680_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Scripted(body=json.dumps(payload).encode(), headers=(_JSON,))


def error(status: int, message: str, *, headers: Mapping[str, str] | None = None) -> Scripted:
    """An HTTP error with the body shape the OpenAI API uses, plus any extra headers (Retry-After)."""
    payload = {"error": {"message": message, "type": "stub_error", "param": None, "code": str(status)}}
    extra = tuple((headers or {}).items())
    return Scripted(status=status, body=json.dumps(payload).encode(), headers=(_JSON, *extra))


def raw(body: bytes, *, status: int = 200) -> Scripted:
    """Exactly these bytes as a JSON response (used for malformed replies)."""
    return Scripted(status=status, body=body, headers=(_JSON,))


def stall(seconds: float) -> Scripted:
    """Answer only after ``seconds``: longer than the client timeout, so the client gives up first."""
    late = chat("too late")
    return Scripted(status=late.status, body=late.body, headers=late.headers, delay_s=seconds)


@dataclass(frozen=True)
class Received:
    """A request as the server saw it: header names in lower case, the body parsed as JSON (raw bytes
    when it is not JSON)."""

    path: str
    headers: dict[str, str]
    body: Any


class OpenAIStub:
    """Serve ``script`` in order on 127.0.0.1 at an ephemeral port; use as a context manager or stop()."""

    def __init__(self, script: list[Scripted], *, max_requests: int = 32, lifetime_s: float = 30.0) -> None:
        self._script = list(script)
        self._max_requests = max_requests
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.received: list[Received] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._watchdog = threading.Timer(lifetime_s, self.stop)
        self._watchdog.daemon = True

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIStub:
        self._thread.start()
        self._watchdog.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake any stalled handler, release the socket. Safe to call twice."""
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
        self._watchdog.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: Received) -> Scripted:
        with self._lock:
            self.received.append(request)
            if len(self.received) > self._max_requests:
                return error(503, "stub: request cap reached")
            if not self._script:
                return error(418, "stub: no scripted response left")
            return self._script.pop(0)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                try:
                    body = json.loads(data) if data else None
                except ValueError:
                    body = data
                reply = stub._next(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if reply.delay_s and stub._stopping.wait(reply.delay_s):
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:  # the client gave up (timed out) before the stalled answer came
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                """Keep the test output quiet."""

        return Handler
