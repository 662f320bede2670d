"""An MCP server whose tools have side effects, on the official Python SDK (`mcp` from PyPI): the peer of the
durable tool call tests (SPEC.md §4, tests/process/tool_calls.rs, tests/server_cluster.rs).

    LEDGER=FILE [SLOW_MS=3000] python mcp_ledger.py stdio
    LEDGER=FILE [SLOW_MS=3000] python mcp_ledger.py http PORT      # streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: charge(amount), refund(amount) and slow_charge(amount). Each call appends one JSON line
`{"tool", "args", "idempotency_key"}` to the file LEDGER (the key from the request's `_meta`, `null` without
one) before it answers; slow_charge appends its line, then sleeps SLOW_MS milliseconds (default 3000) before
answering, so a test can kill the caller while the call is under way.
"""
import json
import os
import sys

import anyio

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("agentic-test-ledger")


def record(ctx: Context, tool: str, args: dict) -> None:
    """Appends the call's line to the ledger, flushed to the file before the tool answers."""
    meta = ctx.request_context.meta or {}
    line = json.dumps({"tool": tool, "args": args, "idempotency_key": meta.get("idempotency_key")})
    with open(os.environ["LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(line + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())


@server.tool()
def charge(amount: int, ctx: Context) -> str:
    """Charges the customer's card the amount."""
    record(ctx, "charge", {"amount": amount})
    return f"charged {amount}"


@server.tool()
def refund(amount: int, ctx: Context) -> str:
    """Refunds the amount to the customer's card."""
    record(ctx, "refund", {"amount": amount})
    return f"refunded {amount}"


@server.tool()
async def slow_charge(amount: int, ctx: Context) -> str:
    """Charges the customer's card the amount, slowly: the charge is made at once, the answer comes later."""
    record(ctx, "slow_charge", {"amount": amount})
    await anyio.sleep(int(os.environ.get("SLOW_MS", "3000")) / 1000)
    return f"charged {amount}"


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[0] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]))
