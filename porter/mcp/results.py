"""What a porter tool answers: its value, or its failure, always as a tool result.

Since the 2025-11-25 MCP specification (SEP-1303), a tool's input and execution errors are results
with ``isError: true``: clients hand those to the model, which can read them and correct its call,
while a JSON-RPC error is the client's to handle and the model often never sees it. So every
failure of a porter tool is a result whose structured content is ``{"error": LINE, "exit_code":
N}`` (LINE also as its text): porter's one-line message and exit code (2: the call's input, 3: the
environment), arguments that fail the tool's schema (exit 2), and anything unexpected (exit 70, a bug
in porter as the CLI's; the exception's type only: its message could quote a file, and the
traceback stays in the server's log). Only an unknown tool or a malformed request is left to the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from porter.errors import ExitCode, PorterError
from porter.jsonable import to_jsonable

log = logging.getLogger("porter.mcp")


def tool_result(data: Any, summary: str) -> CallToolResult:
    """``data`` as structured content (what ``--json`` prints), with ``summary`` as its text."""
    structured = to_jsonable(data)
    if not isinstance(structured, dict):
        structured = {"items": structured}
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=structured)


def tool_error(message: str, exit_code: int) -> CallToolResult:
    line = " ".join(message.split())
    return CallToolResult(content=[TextContent(type="text", text=line)],
                          structured_content={"error": line, "exit_code": int(exit_code)}, is_error=True)


def failure(err: Exception) -> CallToolResult:
    if isinstance(err, PorterError):
        return tool_error(str(err), err.exit_code)
    log.error("porter mcp: a tool failed unexpectedly", exc_info=err)
    return tool_error(f"internal error: {type(err).__name__} (the server's log has the details)", ExitCode.INTERNAL)


async def answer(work: Callable[[], CallToolResult]) -> CallToolResult:
    """``work`` in a worker thread (tool calls run side by side); any failure as an error result."""
    try:
        return await anyio.to_thread.run_sync(work)
    except Exception as err:
        return failure(err)


class _StrictTool(Tool):
    """A tool whose arguments that fail its schema are an error result like porter's input errors."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as err:
            if isinstance(err.__cause__, ValidationError):
                return tool_error(f"{self.name}: {_invalid(self.name, err.__cause__)}", ExitCode.INPUT)
            raise


def _invalid(tool: str, err: ValidationError) -> str:
    """The schema's complaints, by argument, without the values given."""
    said = []
    for problem in err.errors()[:5]:
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        why = f"not an argument of {tool}" if problem["type"] == "extra_forbidden" else problem["msg"]
        said.append(f"{where}: {why}")
    return "; ".join(said)


def strict_tool(fn: Callable[..., Any], name: str) -> Tool:
    """``fn`` as a tool that refuses arguments it does not declare (``additionalProperties:
    false``), where the SDK would drop them unseen: a caller learns that an argument it sent
    (say a ``model`` or ``api_base`` for ``port``) was not taken."""
    tool = _StrictTool.from_function(fn, name=name)
    arguments = tool.fn_metadata.arg_model  # made for this function alone: changing it touches no other tool
    arguments.model_config["extra"] = "forbid"
    arguments.model_rebuild(force=True)
    tool.parameters = arguments.model_json_schema(by_alias=True)
    return tool
