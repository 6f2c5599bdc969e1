"""build_context: the newest exchanges that fit the budget, cut only in front of a user message."""

from __future__ import annotations

import random

from agent_tools._messages import Message, ToolCall
from agent_tools._prompt import build_context


def reference(messages: list[Message], budget_chars: int) -> list[Message]:
    """The definition, summed afresh for every cut point."""
    system = [m for m in messages if m.role == "system"]
    rest = [m for m in messages if m.role != "system"]
    used = sum(len(m.content) for m in system)
    cuts = [i for i, m in enumerate(rest) if m.role == "user"]
    if not cuts:
        return [*system, *rest]
    start = cuts[-1]
    for i in reversed(cuts):
        if used + sum(len(m.content) + 20 * len(m.tool_calls) for m in rest[i:]) > budget_chars and i != cuts[-1]:
            break
        start = i
    return [*system, *rest[start:]]


def transcript(rng: random.Random, n: int) -> list[Message]:
    out = [Message(role="system", content="s" * rng.randrange(50))]
    for i in range(n):
        role = rng.choice(["user", "assistant", "assistant", "tool"])
        calls = [ToolCall(id=f"c{i}", name="t", arguments={})] if role == "assistant" and rng.random() < 0.3 else []
        out.append(Message(role=role, content="x" * rng.randrange(200), tool_calls=calls))
    return out


def test_build_context_matches_its_definition() -> None:
    rng = random.Random(7)
    for _ in range(300):
        messages = transcript(rng, rng.randrange(40))
        budget = rng.randrange(2000)
        assert build_context(messages, budget_chars=budget) == reference(messages, budget)


def test_build_context_keeps_the_newest_exchange_and_cuts_before_a_user_message() -> None:
    messages = [Message(role="system", content="sys")]
    for i in range(10):
        messages += [Message(role="user", content=f"u{i}" * 10), Message(role="assistant", content="a" * 30)]
    kept = build_context(messages, budget_chars=130)
    assert kept[0].role == "system" and kept[1].role == "user"
    assert kept[-2].content == "u9" * 10
    assert len(kept) < len(messages)
    assert build_context(messages, budget_chars=0)[1:] == messages[-2:]
