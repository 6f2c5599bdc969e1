"""Pure delegation rules: no Temporal, no I/O."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_tools._catalog.profiles import PROFILES
from agent_tools._catalog.registry import ToolCatalog
from agent_tools._catalog.spec import ToolLevel
from agent_tools._messages import Message, ToolCall
from agent_tools._settings import Settings
from agent_tools.activities._delegation import allowed_models, conversation_for_handoff, resolve_model, tier_model
from agent_tools.contracts._delegation import (
    COST_CEILING_USD,
    INVOKE_WAIT_SECONDS,
    MAX_CHAIN_DEPTH,
    ROLES,
    SPAWN_FANOUT_CAP,
    SPAWN_MAX_TOKENS,
    ChildRecord,
    InvokeSubAgentArgs,
    clamp_steps,
    handoff_refusal,
    invoke_refusal,
    notification_text,
    spawn_result_text,
)

FACES = [
    "subAgent", "listSubAgent", "getSubAgentMessage", "stopSubAgent", "sendMessageToSubAgent",
    "invoke_sub_agent", "hand_off_to_agent", "spawn_agent", "delegate_to_model",
]  # fmt: skip


def test_every_face_is_in_the_catalog_and_its_profile() -> None:
    catalog = ToolCatalog.builtin()
    for name in FACES:
        assert name in catalog, name
        assert name in PROFILES["all"]
    assert all(catalog.get(n).runs_in == "workflow" for n in FACES if n != "delegate_to_model")  # type: ignore[union-attr]
    assert catalog.get("delegate_to_model").runs_in == "activity"  # type: ignore[union-attr]


def test_contract_defaults() -> None:
    assert (MAX_CHAIN_DEPTH, INVOKE_WAIT_SECONDS, SPAWN_FANOUT_CAP, COST_CEILING_USD, SPAWN_MAX_TOKENS) == (
        5, 240, 4, 5.0, 4096
    )  # fmt: skip


def test_roles_table_matches_codai() -> None:
    table = {r.name: (r.tier, r.max_steps, r.max_level) for r in ROLES.values()}
    assert table == {
        "explore": ("small", 6, ToolLevel.l1_http),
        "research": ("small", 8, ToolLevel.l1_http),
        "code": ("large", 12, None),
        "verify": ("small", 6, ToolLevel.l3_sandbox),
        "summarize": ("small", 3, ToolLevel.l1_http),
    }


@pytest.mark.parametrize(
    ("requested", "role", "expected"),
    [
        (None, "explore", 6),
        (0, "explore", 1),
        (-3, "code", 1),
        (50, "code", 12),
        (10, "summarize", 3),
        (2, "verify", 2),
    ],
)
def test_max_steps_clamp(requested: int | None, role: str, expected: int) -> None:
    assert clamp_steps(requested, ROLES[role]) == expected


def test_spawn_codai_shapes() -> None:
    assert spawn_result_text("code", "diff") == "SUB-AGENT[code] RESULT: diff"
    spec = ToolCatalog.builtin().get("spawn_agent")
    assert spec is not None
    with pytest.raises(ValidationError) as info:
        spec.validate_arguments({"role": "poet"})
    assert json.loads(spec.invalid_arguments("spawn_agent", info.value))["error"] == "invalid_arguments"


def test_invoke_refusals() -> None:
    ok = invoke_refusal(caller="a", target="b", grants=["b"], chain=["a"])
    assert ok is None
    not_granted = invoke_refusal(caller="a", target="c", grants=["b"], chain=["a"])
    assert not_granted is not None and "Grant 'c' on the Sub-agents tab of 'a'" in not_granted
    repeat = invoke_refusal(caller="b", target="a", grants=["a"], chain=["a", "b"])
    assert repeat is not None and "already in the delegation chain a -> b" in repeat
    deep = invoke_refusal(caller="e", target="f", grants=["f"], chain=["a", "b", "c", "d", "e"])
    assert deep is not None and "at most 5 agents deep" in deep
    assert invoke_refusal(caller="d", target="e", grants=["e"], chain=["a", "b", "c", "d"]) is None
    with pytest.raises(ValidationError):
        InvokeSubAgentArgs(agent_name="a")  # neither a task nor a run to resume
    assert InvokeSubAgentArgs(agent_name="a", resume_execution_id="x").task_input == ""


def test_handoff_refusals() -> None:
    base = {"caller": "front", "grants": ["billing"], "parent_id": None, "already": False}
    assert handoff_refusal(target="billing", **base) is None  # type: ignore[arg-type]
    assert "one-to-one" in (handoff_refusal(target="billing", **{**base, "parent_id": "p"}) or "")  # type: ignore[arg-type]
    assert "already been handed off" in (handoff_refusal(target="billing", **{**base, "already": True}) or "")  # type: ignore[arg-type]
    assert "calling agent" in (handoff_refusal(target="front", **base) or "")  # type: ignore[arg-type]
    assert "Sub-agents tab" in (handoff_refusal(target="sales", **base) or "")  # type: ignore[arg-type]


def test_handoff_history_drops_system_and_unanswered_calls() -> None:
    transcript = [
        Message(role="system", content="sys"),
        Message(role="user", content="hi"),
        Message(role="assistant", content="", tool_calls=[ToolCall(id="c1", name="todoWrite")]),
        Message(role="tool", tool_call_id="c1", content="ok"),
        Message(
            role="assistant",
            content="passing you on",
            tool_calls=[ToolCall(id="c2", name="hand_off_to_agent")],
        ),
    ]
    out = conversation_for_handoff(transcript)
    assert [(m.role, m.content, [c.id for c in m.tool_calls]) for m in out] == [
        ("user", "hi", []),
        ("assistant", "", ["c1"]),
        ("tool", "ok", []),
        ("assistant", "passing you on", []),
    ]


def test_model_resolution() -> None:
    s = Settings(model_tiers={"small": "openai:gpt-4o-mini", "alt": "scripted:/x"}, prices={}, agents_file=None)
    assert resolve_model(s, "alt") == "scripted:/x"
    assert resolve_model(s, "openai:gpt-4o-mini") == "openai:gpt-4o-mini"
    assert resolve_model(s, "openai:gpt-5") is None
    assert resolve_model(s, "own:model", "own:model") == "own:model"
    assert set(allowed_models(s)) == {"small", "alt", "openai:gpt-4o-mini", "scripted:/x"}
    assert tier_model(s, "small", "parent:m") == "openai:gpt-4o-mini"
    assert tier_model(s, "large", "parent:m") == "parent:m"


def test_children_inherit_only_delegation_options_and_notifications_read_well() -> None:
    from agent_tools._session import SessionOptions

    opts = SessionOptions.model_validate({"delegation_fanout_cap": 2, "continue_as_new_after_turns": 1})
    assert opts.delegation_only().model_dump() == {"delegation_fanout_cap": 2}
    rec = ChildRecord(session_id="p/sub-1", face="subAgent", agent="a", title="T", created_at="", updated_at="")
    rec.status, rec.final_message = "completed", "42"
    assert notification_text(rec) == "Sub-agent 'T' (p/sub-1) completed. Its final message:\n42"
    rec.status = "stopped"
    assert notification_text(rec) == "Sub-agent 'T' (p/sub-1) was stopped."
    rec.status, rec.error = "failed", "boom"
    assert notification_text(rec) == "Sub-agent 'T' (p/sub-1) failed: boom"
