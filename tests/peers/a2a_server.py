"""A2A agents on the official Python SDK (`a2a-sdk` from PyPI), the peer of the A2A tests.

    python a2a_server.py PORT [CANCELLED_FILE]

Serves, on http://127.0.0.1:PORT, JSON-RPC with the 1.0 methods and the 0.3 names (`enable_v0_3_compat`):

- `/chat`: answers `<TEXT IN CAPITALS> (turn N; earlier: a, b)`, remembering the texts it was sent per
  context id, so that a second turn shows whether the context id was kept; the tenant of the request, when
  there is one, is added as ` [tenant T]`. Its card is also served at `/.well-known/acme/agent-card.json`
  (the multi-tenant convention of a card URL naming the tenant). Streams its answer in two artifact chunks.
- `/travel`: a first message opens a task in `input-required`, asking `Which city should I book <TEXT> in?`;
  the next message of the same task completes it with the artifact `Booked <TEXT> in <ANSWER>.`
- `/legacy`: the chat agent behind a card that declares protocol 0.3 only (clients must use `message/send`).
- `/slow`: works for 30 s unless its task is cancelled.

The ids of the tasks `/travel` and `/slow` are asked to cancel are appended to CANCELLED_FILE, one a line.
When `$HEADERS_FILE` is set, every request's path and `Authorization` header are appended to it, one
`PATH authorization=VALUE` a line (what the world saw).
- `/broken/.well-known/agent-card.json`: a card that does not parse (a JSON list).
"""
import asyncio
import os
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

PORT = int(sys.argv[1])
# Where the slow agent writes the ids of the tasks it was asked to cancel, one a line (optional).
CANCELLED_FILE = sys.argv[2] if len(sys.argv) > 2 else None
BASE = f"http://127.0.0.1:{PORT}"


def card(name: str, description: str, path: str, version: str = "1.0") -> AgentCard:
    return AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{BASE}{path}/", protocol_binding="JSONRPC", protocol_version=version)
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=name, name=name, description=description, tags=["test"])],
    )


async def start(context: RequestContext, queue: EventQueue) -> TaskUpdater:
    """The updater of the request's task, enqueuing the task first when it is new."""
    task = context.current_task
    if task is None:
        task = new_task_from_user_message(context.message)
        await queue.enqueue_event(task)
    return TaskUpdater(queue, task.id, task.context_id)


class Chat(AgentExecutor):
    def __init__(self) -> None:
        self.history: dict[str, list[str]] = {}

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await start(context, queue)
        text = context.get_user_input()
        earlier = self.history.setdefault(updater.context_id, [])
        answer = f"{text.upper()} (turn {len(earlier) + 1}; earlier: {', '.join(earlier) or 'nothing'})"
        if context.tenant:
            answer += f" [tenant {context.tenant}]"
        earlier.append(text)
        await updater.start_work()
        half = len(answer) // 2
        await updater.add_artifact([new_text_part(answer[:half])], artifact_id="answer", name="answer")
        await updater.add_artifact(
            [new_text_part(answer[half:])], artifact_id="answer", name="answer", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await start(context, queue)
        await updater.cancel()


class Travel(AgentExecutor):
    def __init__(self) -> None:
        self.trips: dict[str, str] = {}

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await start(context, queue)
        text = context.get_user_input()
        trip = self.trips.get(updater.task_id)
        if trip is None:
            self.trips[updater.task_id] = text
            question = new_text_message(
                f"Which city should I book {text} in?", context_id=updater.context_id, task_id=updater.task_id
            )
            await updater.requires_input(question)
            return
        await updater.add_artifact([new_text_part(f"Booked {trip} in {text}.")], name="booking")
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        record_cancel(context.task_id)
        updater = await start(context, queue)
        await updater.cancel()


def record_cancel(task_id: str | None) -> None:
    """Appends the id of a task the agent is asked to cancel to CANCELLED_FILE."""
    if CANCELLED_FILE:
        with open(CANCELLED_FILE, "a") as f:
            f.write(f"{task_id}\n")


class Slow(AgentExecutor):
    """Works for 30 s, in steps of 100 ms, unless its task is cancelled."""

    def __init__(self) -> None:
        self.cancelled: set[str] = set()

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await start(context, queue)
        await updater.start_work()
        for _ in range(300):
            if updater.task_id in self.cancelled:
                return
            await asyncio.sleep(0.1)
        await updater.add_artifact([new_text_part("slow work done")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        self.cancelled.add(context.task_id)
        record_cancel(context.task_id)
        updater = await start(context, queue)
        await updater.cancel()


def agent(path: str, executor: AgentExecutor, agent_card: AgentCard) -> Mount:
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=agent_card)
    routes = create_agent_card_routes(agent_card) + create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    return Mount(path, routes=routes)


chat_card = card("chat", "Repeats what it is told in capitals, remembering the conversation.", "/chat")
routes = [
    Route("/broken/.well-known/agent-card.json", lambda _request: JSONResponse(["not", "a", "card"])),
    *create_agent_card_routes(chat_card, card_url="/.well-known/acme/agent-card.json"),
    agent("/chat", Chat(), chat_card),
    agent("/travel", Travel(), card("travel", "Books trips, asking where to.", "/travel")),
    agent("/legacy", Chat(), card("legacy", "The chat agent, on protocol 0.3.", "/legacy", version="0.3")),
    agent("/slow", Slow(), card("slow", "Works for 30 seconds unless cancelled.", "/slow")),
]



class RecordHeaders:
    """ASGI middleware appending each request's path and Authorization header to $HEADERS_FILE."""

    def __init__(self, app, path: str) -> None:
        self.app, self.path = app, path

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            value = headers.get(b"authorization", b"").decode("latin-1")
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(f"{scope['path']} authorization={value}\n")
        await self.app(scope, receive, send)


if __name__ == "__main__":
    app = Starlette(routes=routes)
    if os.environ.get("HEADERS_FILE"):
        app = RecordHeaders(app, os.environ["HEADERS_FILE"])
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
