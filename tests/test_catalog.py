"""Tool catalog: contracts, profiles, levels, organisation switches, user tools, bad arguments."""

from __future__ import annotations

from typing import cast

import pytest
from pydantic import BaseModel

from agent_tools._catalog import PROFILES, ToolCatalog, ToolLevel, ToolSpec
from agent_tools._errors import ConfigurationError
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._user_tools import make_user_tool, tool
from tests.support.fixture_types import Script, WorkerFor


class _Args(BaseModel):
    q: str


def _spec(name: str, level: ToolLevel = ToolLevel.none) -> ToolSpec:
    return ToolSpec(name=name, description=name, args_model=_Args, capability="test", level=level)


def test_builtin_catalog_has_contract_for_every_tool_it_knows() -> None:
    catalog = ToolCatalog.builtin()
    assert "todoWrite" in catalog
    for name in catalog.names():
        spec = catalog.get(name)
        assert spec is not None
        schema = spec.parameters_schema()
        assert schema["type"] == "object", name
        assert spec.description.strip(), name


def test_resolve_applies_profile_level_exclusions_and_org_switches() -> None:
    catalog = ToolCatalog(
        [_spec("todoWrite"), _spec("web_search", ToolLevel.l1_http), _spec("exec_python", ToolLevel.l3_sandbox)]
    )
    assert catalog.resolve(profile=None, tools=["todoWrite", "web_search", "exec_python"], level=ToolLevel.l1_http) == [
        "todoWrite",
        "web_search",
    ]
    assert catalog.resolve(profile=None, tools=["todoWrite", "web_search"], level=ToolLevel.none) == ["todoWrite"]
    assert catalog.resolve(profile=None, tools=["todoWrite", "web_search"], disabled=["web_search"]) == ["todoWrite"]
    assert catalog.resolve(profile=None, tools=["todoWrite", "todoWrite"], exclude=[]) == ["todoWrite"]
    with pytest.raises(ConfigurationError, match="unknown tools"):
        catalog.resolve(profile=None, tools=["nope"])
    with pytest.raises(ConfigurationError, match="unknown tool profile"):
        catalog.resolve(profile="bogus")


def test_profiles_name_each_platform() -> None:
    assert {"rtc", "fyai", "codai", "all"} <= set(PROFILES)
    assert "askUser" in PROFILES["rtc"] and "recall" in PROFILES["fyai"] and "spawn_agent" in PROFILES["codai"]


def test_levels_are_ordered() -> None:
    assert ToolLevel.l4_browser.allows(ToolLevel.l3_sandbox)
    assert not ToolLevel.l1_http.allows(ToolLevel.l3_sandbox)
    assert ToolLevel.none.allows(ToolLevel.none)


def test_user_tool_schema_from_signature() -> None:
    async def weather(city: str, days: int = 3) -> str:
        """Weather forecast."""
        return f"{city} {days}"

    ut = make_user_tool(weather)
    schema = ut.spec.parameters_schema()
    assert schema["properties"]["city"] == {"type": "string"}
    assert schema["properties"]["days"] == {"type": "integer", "default": 3}
    assert schema["required"] == ["city"]
    assert ut.spec.description == "Weather forecast."
    assert ut.spec.summary({"city": "Lisbon"}) == 'weather: "Lisbon"'

    def sync_tool(x: int) -> int:
        return x

    with pytest.raises(ConfigurationError, match="async"):
        make_user_tool(sync_tool)  # type: ignore[arg-type]


@tool(description="Add two numbers")
async def add(a: int, b: int) -> str:
    return str(a + b)


async def test_user_tool_runs_as_activity_and_bad_arguments_reach_the_model(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"say": "", "tool_calls": [
                {"name": "add", "arguments": {"a": 2, "b": 40}},
                {"name": "add", "arguments": {"a": "two", "b": 1}},
                {"name": "todoWrite", "arguments": {"todos": [{"content": "x", "status": "doing"}]}},
                {"name": "no_such_tool", "arguments": {}},
                {"name": "add", "raw_arguments": "{not json"},
            ]},
            {"say": "{{tool_results}}"},
        ]
    )  # fmt: skip
    async with worker_for(tools=[add]) as client:
        handle = await client.start_session("sum", tools=["add", "todoWrite"])
        result = await handle.result()
        history = await handle.workflow.fetch_history()
    assert result.status == SessionStatus.completed
    lines = (result.final_message or "").split("\n")
    assert lines[0] == "42"
    assert lines[1].startswith("Invalid arguments for add: a: Input should be a valid integer")
    assert lines[2].startswith(
        "Invalid arguments for todoWrite: todos.0.status: Input should be 'pending', 'in_progress' or 'completed'"
    )
    assert lines[3].startswith("Unknown tool 'no_such_tool'")
    assert lines[4].startswith("Invalid arguments for add: arguments must be a JSON object")
    # The tool ran as its own activity, with a summary the UI shows.
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    tool_types = [a.activity_type.name for a in scheduled]
    assert tool_types.count("tool:add") == 2
    summaries = [
        e.user_metadata.summary.data for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert any(b"add" in s for s in summaries)


async def test_disabled_for_organisation_removes_the_tool(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.org_disabled_tools = {"acme": ["todoWrite"]}
    settings.model = script(
        [{"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": []}}]}, {"say": "{{last_tool}}"}]
    )
    async with worker_for() as client:
        result = await (await client.start_session("x", organisation="acme", tools=["todoWrite"])).result()
    assert (result.final_message or "").startswith("Unknown tool 'todoWrite'")


def test_every_profile_name_has_a_spec_and_every_spec_one_implementation() -> None:
    """No silent registries: a profile names only tools that exist, and each built-in tool runs in exactly
    one place, an activity or a workflow-native handler."""
    from agent_tools._catalog.profiles import PROFILES
    from agent_tools._catalog.registry import builtin_specs
    from agent_tools.activities._registry import builtin_implementations
    from agent_tools.workflows._port import SessionPort
    from agent_tools.workflows._session import PARTS

    # Listing a part's tools reaches nothing of its port.
    native = {name for part in PARTS for name in part(cast(SessionPort, None)).native_tools()}

    specs = {s.name: s for s in builtin_specs()}
    for profile, names in PROFILES.items():
        missing = [n for n in names if n not in specs]
        assert missing == [], f"profile {profile!r} names tools without a spec: {missing}"
    activities = builtin_implementations()
    both = sorted(set(activities) & set(native))
    assert both == [], f"tools with two implementations: {both}"
    for name, spec in specs.items():
        where = "activity" if name in activities else "workflow" if name in native else None
        assert where is not None, f"{name} has no implementation"
        assert spec.runs_in == where, f"{name} is declared to run in the {spec.runs_in} but runs as a {where}"
    assert set(activities) | set(native) <= set(specs), "an implementation without a contract"


def test_an_unknown_tool_name_in_a_profile_is_an_error() -> None:
    catalog = ToolCatalog.builtin()
    with pytest.raises(ConfigurationError, match="unknown tools"):
        catalog.resolve(profile="mine", extra_profiles={"mine": ["webSearch", "no_such_tool"]})
