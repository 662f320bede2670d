"""An A2A client on the official Python SDK (`a2a-sdk` from PyPI), the peer of the tests of `agentic serve`'s
A2A side.

    python a2a_client.py URL card [--card-path P]                 # the resolved agent card
    python a2a_client.py URL send TEXT [--context ID] [--task ID] [--data JSON] [--stream] [--token T]
                                       [--card-path P]

URL is the agent's base URL; the card is read from URL/.well-known/agent-card.json, or URL + P. `send` prints
{"events": [..]}: every StreamResponse the client yields, as protobuf JSON (a `task`, a `message`, or with
`--stream` the status and artifact updates). Errors print {"error": ".."} and exit 1.
"""
import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf import json_format

from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import A2ACardResolver
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest


def option(args, name):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i : i + 2]
        return value
    return None


async def main(args):
    url, command = args[0], args[1]
    rest = args[2:]
    token = option(rest, "--token")
    card_path = option(rest, "--card-path")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        if command == "card":
            card = await A2ACardResolver(http, url).get_agent_card(relative_card_path=card_path)
            print(json.dumps(json_format.MessageToDict(card)))
            return
        stream = "--stream" in rest
        if stream:
            rest.remove("--stream")
        context_id = option(rest, "--context")
        task_id = option(rest, "--task")
        data = option(rest, "--data")
        parts = [Part(text=rest[0])] if rest else []
        if data is not None:
            part = Part()
            json_format.Parse(json.dumps({"data": json.loads(data)}), part)
            parts.append(part)
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=parts,
            context_id=context_id or "",
            task_id=task_id or "",
        )
        client = await create_client(
            url, ClientConfig(streaming=stream, httpx_client=http), relative_card_path=card_path
        )
        events = []
        async for event in client.send_message(SendMessageRequest(message=message)):
            events.append(json_format.MessageToDict(event))
        print(json.dumps({"events": events}))


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except Exception as e:  # noqa: BLE001 - the test reads the message
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(1)
