"""One settings tree: every capability's section configured from code, from the environment and from ``.env``,
read once; the one-underscore names of the old per-capability classes still work, with a warning, below the
new names."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError

from agent_tools._policy import ExecutionPolicy
from agent_tools._settings import SECTIONS, Settings
from agent_tools.activities._services import Services
from agent_tools.contracts._events.settings import EventSettings
from agent_tools.contracts._memory.settings import MemoryPolicy
from agent_tools.contracts._sandbox import SandboxSettings
from agent_tools.contracts._skills import SkillsSettings
from agent_tools.contracts._web.config import WebConfig


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AGENT_TOOLS_* of the machine running the tests, no .env of the repository."""
    import os

    for name in list(os.environ):
        if name.startswith("AGENT_TOOLS_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_every_capability_is_a_section_of_settings() -> None:
    assert SECTIONS == {
        "web": WebConfig,
        "events": EventSettings,
        "memory": MemoryPolicy,
        "sandbox": SandboxSettings,
        "skills": SkillsSettings,
    }
    for name, model in SECTIONS.items():
        assert Settings.model_fields[name].annotation is model


def test_sections_configured_from_code() -> None:
    s = Settings(
        web=WebConfig(searxng_url="http://searx.internal", allow_loopback=True),
        events=EventSettings(tokens={"acme/web": "tok-1234567890"}),
        memory=MemoryPolicy(working_ttl_days=2),
        sandbox=SandboxSettings(bwrap="/opt/bwrap"),
        skills=SkillsSettings(dir=Path("/srv/skills")),
    )
    assert s.web.searxng_url == "http://searx.internal" and s.web.allow_loopback
    assert s.events.project_for_token("tok-1234567890") == ("acme", "web")
    assert (s.memory.working_ttl_days, s.sandbox.bwrap, s.skills.dir) == (2, "/opt/bwrap", Path("/srv/skills"))


def test_sections_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_WEB__SEARCH_ENGINES", '["searxng", "brave"]')
    monkeypatch.setenv("AGENT_TOOLS_WEB__ALLOW_LOOPBACK", "true")
    monkeypatch.setenv("AGENT_TOOLS_EVENTS__TOKENS", '{"acme/web": "tok-1234567890"}')
    monkeypatch.setenv(
        "AGENT_TOOLS_EVENTS__SOURCES", '{"gh": {"type": "github", "secret": "s3cret-gh", "organisation": "acme"}}'
    )
    monkeypatch.setenv("AGENT_TOOLS_EVENTS__MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("AGENT_TOOLS_MEMORY__PROMOTE_AFTER_USES", "5")
    monkeypatch.setenv("AGENT_TOOLS_SANDBOX__MOUNT_PROC", "false")
    monkeypatch.setenv("AGENT_TOOLS_SKILLS__DIR", "/srv/skills")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names warn about nothing
        s = Settings()
    assert s.web.search_engines == ["searxng", "brave"] and s.web.allow_loopback is True
    assert s.events.project_for_token("tok-1234567890") == ("acme", "web")
    assert s.events.project_for_token("tok-nope") is None
    assert s.events.sources["gh"].type == "github" and s.events.sources["gh"].project == "default"
    assert s.events.max_body_bytes == 2048 and s.memory.promote_after_uses == 5
    assert s.sandbox.mount_proc is False and s.skills.dir == Path("/srv/skills")


def test_a_policy_section_given_in_part_keeps_its_other_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seen failing: "policy.model_step.start_to_close_seconds: Field required" for the first variable alone.
    monkeypatch.setenv("AGENT_TOOLS_POLICY__MODEL_STEP__HEARTBEAT_SECONDS", "30")
    monkeypatch.setenv("AGENT_TOOLS_POLICY__CHILD_SESSION__AWAIT_CALL__MAXIMUM_ATTEMPTS", "7")
    policy = Settings().policy
    default = ExecutionPolicy()
    assert policy.model_step.heartbeat_seconds == 30
    assert policy.model_step.start_to_close_seconds == default.model_step.start_to_close_seconds
    assert policy.model_step.maximum_attempts == default.model_step.maximum_attempts
    assert policy.child_session.await_call.maximum_attempts == 7
    assert policy.child_session.await_call.heartbeat_seconds == default.child_session.await_call.heartbeat_seconds
    assert policy.tool_call == default.tool_call
    # An agent's partial override reads the same way; a bad value is still refused.
    assert ExecutionPolicy.model_validate({"tool_call": {"maximum_attempts": 1}}).tool_call.start_to_close_seconds == (
        default.tool_call.start_to_close_seconds
    )
    with pytest.raises(ValidationError):
        ExecutionPolicy.model_validate({"tool_call": {"start_to_close_seconds": -1}})


def test_sections_from_dot_env(tmp_path: Path) -> None:
    # Before the one tree, WebConfig did not read .env: this line was silently ignored.
    (tmp_path / ".env").write_text("AGENT_TOOLS_WEB__SEARXNG_URL=http://searx.from-dotenv\n")
    assert Settings().web.searxng_url == "http://searx.from-dotenv"
    assert Settings(_env_file=None).web.searxng_url is None  # type: ignore[call-arg]


def test_removed_names_are_refused_with_their_replacements(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-underscore section names were read until 1.0.0: now they stop the settings with the new name,
    rather than being dropped without a word."""
    monkeypatch.setenv("AGENT_TOOLS_WEB_SEARXNG_URL", "http://searx.old")
    monkeypatch.setenv("AGENT_TOOLS_EVENTS_TOKENS", '{"acme/web": "tok-1234567890"}')
    with pytest.raises(SettingsError) as caught:
        Settings(_env_file=None)  # type: ignore[call-arg]
    message = str(caught.value)
    assert "AGENT_TOOLS_WEB_SEARXNG_URL -> AGENT_TOOLS_WEB__SEARXNG_URL" in message
    assert "AGENT_TOOLS_EVENTS_TOKENS -> AGENT_TOOLS_EVENTS__TOKENS" in message
    assert "tok-1234567890" not in message  # names only: a value may be a secret


def test_a_removed_name_in_dot_env_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("AGENT_TOOLS_SKILLS_DIR=/srv/old-skills\n")
    with pytest.raises(SettingsError, match="AGENT_TOOLS_SKILLS_DIR -> AGENT_TOOLS_SKILLS__DIR"):
        Settings()
    (tmp_path / ".env").write_text("AGENT_TOOLS_SKILLS__DIR=/srv/new-skills\n")
    assert Settings().skills.dir == Path("/srv/new-skills")


async def test_a_worker_reads_the_settings_it_was_given(tmp_path: Path) -> None:
    """The engines take their sections from the Settings the worker got, not from the environment."""
    s = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        agents_file=None,
        web=WebConfig(allow_loopback=True, user_agent="from-code/1"),
        memory=MemoryPolicy(context_limit=2),
        sandbox=SandboxSettings(bwrap="/nonexistent/bwrap-from-code"),
    )
    services = await Services.open(s)
    try:
        web = services.web
        assert web.config is s.web and web.fetcher.allow_loopback is True
        assert services.memory.policy is s.memory
        assert services.sandbox.settings is s.sandbox
        assert "bwrap-from-code" in (await services.sandbox.availability()).reason
    finally:
        await services.close()
