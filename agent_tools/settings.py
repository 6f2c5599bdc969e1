"""Deployment settings, from the environment (prefix ``AGENT_TOOLS_``) or a ``.env`` file."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_tools.policy import ExecutionPolicy

__all__ = [
    "DEFAULT_PRICES",
    "DEMO_SCRIPT",
    "Price",
    "ProviderEndpoint",
    "Settings",
]

DEMO_SCRIPT = Path(__file__).parent / "demo" / "demo_script.yaml"


class Price(BaseModel):
    """USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0


class ProviderEndpoint(BaseModel):
    """An extra OpenAI-compatible or Anthropic endpoint, addressed as ``<name>:<model>``."""

    kind: str = "openai"  # "openai" (chat completions wire format) or "anthropic" (messages)
    base_url: str
    api_key: str | None = None
    # Ask for a streamed reply (server-sent events); off for a server that cannot stream.
    stream: bool = True


DEFAULT_PRICES: dict[str, Price] = {
    "openai:gpt-4.1-mini": Price(input_per_mtok=0.40, output_per_mtok=1.60),
    "openai:gpt-4.1": Price(input_per_mtok=2.0, output_per_mtok=8.0),
    "openai:gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.60),
    "anthropic:claude-sonnet-4-5": Price(input_per_mtok=3.0, output_per_mtok=15.0),
    "anthropic:claude-haiku-4-5": Price(input_per_mtok=1.0, output_per_mtok=5.0),
}


class Settings(BaseSettings):
    """Everything a deployment configures. Every field has a working default for the embedded demo."""

    model_config = SettingsConfigDict(
        env_prefix="AGENT_TOOLS_", env_file=".env", env_nested_delimiter="__", extra="ignore"
    )

    # Temporal
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    task_queue: str = "agent-tools"
    temporal_ui_url: str = "http://localhost:8233"
    # Custom search attributes need registering on the server; the embedded dev server does it.
    search_attributes: bool = True
    # On SIGTERM/SIGINT the worker stops taking tasks and gives in-flight activities this long to finish
    # (a deploy's stop timeout should be longer); what is still running then is retried elsewhere.
    worker_shutdown_grace_seconds: float = Field(default=30.0, ge=0)

    # OpenTelemetry spans of sessions, turns, model calls and tool calls (agent_tools.tracing).
    tracing: bool = False

    # Store
    database_url: str = "sqlite+aiosqlite:///./agent_tools.db"

    # Models
    model: str | None = Field(default=None, description="Default model spec, e.g. openai:gpt-4.1-mini")
    model_tiers: dict[str, str] = Field(default_factory=dict, description="tier name -> model spec")
    openai_api_key: str | None = None
    openai_base_url: str = "https://api.openai.com/v1"
    anthropic_api_key: str | None = None
    anthropic_base_url: str = "https://api.anthropic.com"
    providers: dict[str, ProviderEndpoint] = Field(default_factory=dict)
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    llm_timeout_seconds: float = 120.0
    # Timeouts and retries of model steps, tool calls, engine activities and child sessions.
    policy: ExecutionPolicy = Field(default_factory=ExecutionPolicy)
    default_max_tokens: int = 4096
    context_char_budget: int = 400_000

    # Agents and tools
    agents_file: Path | None = Path("agents.toml")
    max_steps_per_turn: int = 25
    disabled_tools: list[str] = Field(default_factory=list, description="switched off for every organisation")
    org_disabled_tools: dict[str, list[str]] = Field(default_factory=dict)
    spill_threshold_chars: int = 2000

    # MCP servers whose tools the worker discovers at start (JSON or TOML; see docs/codai-extras.md).
    mcp_config_file: Path | None = Path("mcp.json")

    # Web (SSRF guard): loopback stays refused unless a test or a local deployment opts in.
    web_allow_loopback: bool = False

    def default_model(self) -> str:
        """The model spec used when an agent names none: configured, else by API key, else scripted."""
        if self.model:
            return self.model
        if self.openai_api_key or os.environ.get("OPENAI_API_KEY"):
            return "openai:gpt-4.1-mini"
        if self.anthropic_api_key or os.environ.get("ANTHROPIC_API_KEY"):
            return "anthropic:claude-sonnet-4-5"
        return f"scripted:{DEMO_SCRIPT}"

    def model_for_tier(self, tier: str) -> str:
        return self.model_tiers.get(tier) or self.default_model()

    def disabled_for(self, organisation: str) -> list[str]:
        return [*self.disabled_tools, *self.org_disabled_tools.get(organisation, [])]
