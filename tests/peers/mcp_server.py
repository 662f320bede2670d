"""An MCP server on the official Python SDK (`mcp` from PyPI), the peer of the MCP tests.

    python mcp_server.py stdio [--only TOOL]
    python mcp_server.py http PORT [--only TOOL]     # streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: generate_story (text), add (structured output), fail (a tool error), die (the process exits).
`--only TOOL` offers that tool alone.
"""
import os
import sys

from pydantic import BaseModel

from mcp.server.mcpserver import MCPServer
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


TOOLS = {f.__name__: f for f in (generate_story, add, fail, die)}

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
    if args[0] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]))
