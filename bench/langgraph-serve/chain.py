"""The 5-step chain of the `serve` scenario, as LangGraph's dev server hosts it: START -> n0 -> ... -> n4 -> END,
node i writes k{i} = i (the same graph as the harness's bench_concurrent.py)."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

State = TypedDict("State", {"input": int, **{f"k{i}": int for i in range(5)}}, total=False)  # type: ignore[misc]


def make(i):
    key = f"k{i}"

    async def node(state):
        return {key: i}

    return node


g = StateGraph(State)
for i in range(5):
    g.add_node(f"n{i}", make(i))
g.add_edge(START, "n0")
for i in range(4):
    g.add_edge(f"n{i}", f"n{i + 1}")
g.add_edge("n4", END)
graph = g.compile()
