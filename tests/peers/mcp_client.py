"""An MCP client on the official Python SDK (`mcp` from PyPI), the peer of tests/process/mcp_serve.rs.

    python mcp_client.py URL list                        # {"server", "instructions", "tools": [..]}
    python mcp_client.py URL call NAME JSON              # {"isError", "text": [..], "structuredContent"}
    python mcp_client.py URL cancel NAME JSON SECONDS    # calls, gives up after SECONDS (the SDK cancels it)

Streamable HTTP at URL; the bearer token comes from AGENTIC_TOKEN when it is set. Prints one JSON object; a
protocol error as {"error": {"code", "message"}}.
"""
import asyncio
import json
import os
import sys

import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


def transport(url):
    token = os.environ.get("AGENTIC_TOKEN")
    if not token:
        return url
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return streamable_http_client(url, http_client=http)


def tool_json(tool):
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }


def result_json(result):
    return {
        "isError": bool(result.is_error),
        "text": [c.text for c in result.content if isinstance(c, types.TextContent)],
        "structuredContent": result.structured_content,
    }


async def main(url, command, args):
    async with Client(transport(url)) as client:
        if command == "list":
            listed = await client.list_tools()
            info = client.server_info
            return {
                "server": {"name": info.name, "title": info.title} if info else None,
                "instructions": client.instructions,
                "tools": [tool_json(t) for t in listed.tools],
            }
        name, arguments = args[0], json.loads(args[1])
        if command == "call":
            try:
                return result_json(await client.call_tool(name, arguments))
            except MCPError as e:
                return {"error": {"code": e.error.code, "message": e.error.message}}
        if command == "cancel":
            try:
                await client.call_tool(name, arguments, read_timeout_seconds=float(args[2]))
            except (MCPError, TimeoutError) as e:
                return {"gave_up": str(e)}
            return {"gave_up": None}
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    try:
        out = asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
    except MCPError as e:
        out = {"error": {"code": e.error.code, "message": e.error.message}}
    print(json.dumps(out))
