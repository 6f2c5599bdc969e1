"""What the command line tells a person to run next names the server they used."""

from __future__ import annotations

from agent_tools._cli.sessions import _how_to_follow
from agent_tools._settings import Settings


def test_after_an_embedded_run_on_its_own_ports_the_hint_keeps_them() -> None:
    custom = Settings(temporal_address="localhost:7399", temporal_ui_url="http://localhost:8399")
    hint = _how_to_follow("session-1", embedded=custom)
    assert "`agent-tools dev --port 7399 --ui-port 8399`" in hint
    assert "`AGENT_TOOLS_TEMPORAL_ADDRESS=localhost:7399 agent-tools watch session-1`" in hint
    default = Settings(temporal_address="localhost:7233", temporal_ui_url="http://localhost:8233")
    plain = _how_to_follow("session-1", embedded=default)
    assert "`agent-tools dev`" in plain and "`agent-tools watch session-1`" in plain
    assert "AGENT_TOOLS_TEMPORAL_ADDRESS" not in plain
    assert "agent-tools watch session-1" in _how_to_follow("session-1", embedded=None)


def test_the_ui_link_is_the_connected_servers_unless_one_is_configured() -> None:
    from agent_tools._client import ui_base

    assert ui_base(Settings(), "temporal.internal:7233") == "http://temporal.internal:8233"
    assert ui_base(Settings(), "[::1]:7233") == "http://[::1]:8233"
    assert ui_base(Settings(), "localhost:7299") == "http://localhost:8233"
    assert ui_base(Settings(), "acme.a1b2c.tmprl.cloud:7233") == "https://cloud.temporal.io"
    configured = Settings(temporal_ui_url="https://temporal.example.com/")
    assert ui_base(configured, "temporal.internal:7233") == "https://temporal.example.com"
