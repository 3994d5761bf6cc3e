"""A coding agent's view of ``porter mcp``: start the server over stdio with the MCP SDK's client,
list its tools and resources, and call ``check`` on a kernel; print what the agent gets back (the
text summary and the Verdict's main fields from the structured content).

    python3 tools/mcp_demo.py examples/gemm_bt_tile/kernel_sm90a.ptx --native

Needs the mcp package (pip install 'porter-kernels[mcp]', or the wheels in .wheels/). Exit code:
the Verdict's (0 passed, 1 failed, 3 not run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent


async def main(args: argparse.Namespace) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = StdioServerParameters(command=sys.executable, args=["-m", "porter", "mcp"], env=env, cwd=str(ROOT))
    async with Client(server, read_timeout_seconds=600) as client:
        info = client.server_info
        print(f"connected: {info.name if info else '?'} {info.version if info else ''} "
              f"(protocol {client.protocol_version})")
        for tool in (await client.list_tools()).tools:
            print(f"tool {tool.name}: {(tool.description or '').splitlines()[0]}")
        resources = (await client.list_resources()).resources
        print(f"resources: {', '.join(str(r.uri) for r in resources)}")
        call = {"candidate": args.candidate, "native": args.native, "sanitize": args.sanitize}
        print(f"\n> tools/call check {json.dumps(call)}")
        result = await client.call_tool("check", call)
        if result.is_error:  # porter's failures are tool results the model can read, not protocol errors
            print(f"isError: {result.structured_content}")
            return int((result.structured_content or {}).get("exit_code", 3))
        print(result.content[0].text)
        v = result.structured_content or {}
        native = v.get("native") or {}
        print(f"\nstructured: status={v.get('status')!r} arch={v.get('arch')!r} gpu={v.get('gpu')!r}")
        print(f"  gates: {[(g['name'], g['status']) for g in v.get('gates', [])]}")
        if native:
            print(f"  native: state={native.get('state')!r} summary={native.get('summary')!r}")
        print(f"  speedup vs source {v.get('speedup_vs_source')}, vs library {v.get('speedup_vs_library')}")
        if args.bad_path:
            print("\n> tools/call check {\"candidate\": \"examples/no_such.ptx\"}")
            failed = await client.call_tool("check", {"candidate": "examples/no_such.ptx"})
            print(f"isError: {failed.is_error} {failed.structured_content}")
        return {"passed": 0, "failed": 1}.get(v.get("status"), 3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate")
    parser.add_argument("--native", action="store_true")
    parser.add_argument("--sanitize", action="store_true")
    parser.add_argument("--bad-path", action="store_true", help="also show the error for a file that is not there")
    sys.exit(anyio.run(main, parser.parse_args()))
