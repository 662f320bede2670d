"""An MCP server on the official Python SDK (`mcp` from PyPI), the peer of the MCP tests.

    python mcp_server.py stdio [--only TOOL]
    python mcp_server.py http PORT [--only TOOL]     # streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: generate_story (text), add (structured output), fail (a tool error), die (the process exits).
`--only TOOL` offers that tool alone; `--only trace_context` offers the tool reporting the W3C `traceparent`
the call carried, in its `_meta` and in its HTTP request's header, and `--only credentials` the tool writing
what credentials the server was given — its environment's `PEER_TOKEN` and the call's `Authorization`
header — to the file `$CREDENTIALS_FILE` (what the world saw; not among the default tools).
"""
import os
import sys

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agentic-test-tools")


def generate_story(topic: str, style: str = "plain") -> str:
    """Writes a one-sentence story about a topic."""
    return f"A {style} story about {topic}."


class Sum(BaseModel):
    total: int


def add(a: int, b: int) -> Sum:
    """Adds two integers."""
    return Sum(total=a + b)


def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"refused: {reason}")


def die() -> str:
    """Ends the server process at once."""
    os._exit(3)


class TraceContext(BaseModel):
    meta: str | None
    header: str | None


def trace_context(ctx: Context) -> TraceContext:
    """Reports the trace context of this call: the `traceparent` of its `_meta` and of its HTTP header."""
    meta = ctx.request_context.meta or {}
    headers = ctx.headers or {}
    return TraceContext(meta=meta.get("traceparent"), header=headers.get("traceparent"))


def credentials(ctx: Context) -> str:
    """Writes the credentials this server was given to $CREDENTIALS_FILE: its environment's PEER_TOKEN and the
    call's Authorization header, one `name=value` a line."""
    headers = ctx.headers or {}
    with open(os.environ["CREDENTIALS_FILE"], "a", encoding="utf-8") as f:
        f.write(f"env={os.environ.get('PEER_TOKEN', '')}\n")
        f.write(f"authorization={headers.get('authorization', '')}\n")
    return "noted"


TOOLS = {f.__name__: f for f in (generate_story, add, fail, die)}
# Offered only when named with `--only`.
EXTRA = {f.__name__: f for f in (trace_context, credentials)}

if __name__ == "__main__":
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i : i + 2]
    for name, f in TOOLS.items():
        if only is None or name == only:
            server.tool()(f)
    if only in EXTRA:
        server.tool()(EXTRA[only])
    if args[0] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]))
