"""Deployment settings: one tree, read once from the environment (prefix ``AGENT_TOOLS_``) and ``.env``.

Each capability has a section (``settings.web``, ``.events``, ``.memory``, ``.sandbox``, ``.skills``) whose
model lives with the capability's contract; the environment reaches a section's field through the nested
delimiter (``AGENT_TOOLS_WEB__SEARXNG_URL``), and code sets it with ``Settings(web=WebConfig(...))``. A worker
reads the tree once and hands each capability its section; nothing below reads the environment again.

The names the sections had when each read the environment itself (``AGENT_TOOLS_WEB_SEARXNG_URL``, one
underscore) were removed in 1.0.0: while one is set, reading settings fails, naming its replacement.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from agent_tools._budget import BudgetSettings
from agent_tools._policy import ExecutionPolicy
from agent_tools.contracts._events.settings import EventSettings
from agent_tools.contracts._memory.settings import MemoryPolicy
from agent_tools.contracts._sandbox import SandboxSettings
from agent_tools.contracts._service import ServiceSettings
from agent_tools.contracts._skills import SkillsSettings
from agent_tools.contracts._web.config import WebConfig

__all__ = [
    "DEFAULT_PRICES",
    "DEMO_SCRIPT",
    "SECTIONS",
    "BudgetSettings",
    "EventSettings",
    "MemoryPolicy",
    "Price",
    "ProviderEndpoint",
    "SandboxSettings",
    "ServiceSettings",
    "Settings",
    "SkillsSettings",
    "WebConfig",
]

# The capability sections, by field name; variables AGENT_TOOLS_<SECTION>_<FIELD> were read until 1.0.0.
SECTIONS: dict[str, type[BaseModel]] = {
    "web": WebConfig,
    "events": EventSettings,
    "memory": MemoryPolicy,
    "sandbox": SandboxSettings,
    "skills": SkillsSettings,
}

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

    # The worker's probe endpoint, HOST:PORT (`agent-tools worker --health`): /healthz and /readyz.
    health_bind: str | None = None
    # Prometheus text at http://HOST:PORT/metrics from the worker: the SDK's temporal_* and our agent_tools_*.
    metrics_bind: str | None = None
    # Worker Deployment versioning (docs/temporal-cloud.md, "Versioned deploys"): with a deployment name the
    # worker runs as version <name>.<build id> (the build id defaults to the package version); sessions are
    # auto_upgrade (move to the current version at their next task; patches keep that safe) or pinned (stay
    # on the version they started on, whose workers must then run until they end).
    deployment_name: str | None = None
    deployment_build_id: str | None = None
    session_versioning: Literal["auto_upgrade", "pinned"] = "auto_upgrade"

    # OpenTelemetry spans of sessions, turns, model calls and tool calls (agent_tools._tracing).
    tracing: bool = False

    # Store
    database_url: str = Field(
        default="sqlite+aiosqlite:///./agent_tools.db",
        description="SQLAlchemy URL; the default SQLite file is relative to the working directory",
    )

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
    agents_file: Path | None = Field(
        default=Path("agents.toml"), description="Agent definitions; a relative path is from the working directory"
    )
    max_steps_per_turn: int = 25
    disabled_tools: list[str] = Field(default_factory=list, description="switched off for every organisation")
    org_disabled_tools: dict[str, list[str]] = Field(default_factory=dict)
    spill_threshold_chars: int = 2000

    # MCP servers whose tools the worker discovers at start (JSON or TOML; see docs/codai-extras.md).
    mcp_config_file: Path | None = Field(
        default=Path("mcp.json"), description="MCP servers; a relative path is from the working directory"
    )

    # Capability sections (AGENT_TOOLS_<SECTION>__<FIELD>).
    web: WebConfig = Field(default_factory=WebConfig)
    events: EventSettings = Field(default_factory=EventSettings)
    memory: MemoryPolicy = Field(default_factory=MemoryPolicy)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    # The HTTP service's session routes: bearer keys and scopes, CORS (AGENT_TOOLS_SERVICE__API_KEYS='[...]').
    # Not in SECTIONS: it never had one-underscore names.
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    # Session-tree budgets per organisation (AGENT_TOOLS_BUDGETS__ORGANISATIONS='{"acme": {"cost_usd": 20}}').
    # Not in SECTIONS: it never had one-underscore names.
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            dotenv_settings,
            RemovedSectionNames(settings_cls, dotenv_settings),
            file_secret_settings,
        )

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
        """The model spec for a tier (``model_tiers``), else the default model."""
        return self.model_tiers.get(tier) or self.default_model()

    def disabled_for(self, organisation: str) -> list[str]:
        """The tools turned off for an organisation: everyone's and its own."""
        return [*self.disabled_tools, *self.org_disabled_tools.get(organisation, [])]


class RemovedSectionNames(PydanticBaseSettingsSource):
    """Refuses ``AGENT_TOOLS_<SECTION>_<FIELD>`` (one underscore), from the environment or ``.env``.

    Those names were read, with a warning, until 1.0.0. Ignoring one now would drop a setting without a word,
    so reading settings fails instead, naming the variable and its replacement.
    """

    def __init__(self, settings_cls: type[BaseSettings], dotenv: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._dotenv = dotenv

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ checks the names and gives no values

    def __call__(self) -> dict[str, Any]:
        found = {k.lower() for k in os.environ}
        if isinstance(self._dotenv, DotEnvSettingsSource):
            found.update(k.lower() for k, v in self._dotenv.env_vars.items() if v is not None)
        renames = [
            f"AGENT_TOOLS_{section}_{name} -> AGENT_TOOLS_{section}__{name}".upper()
            for section, model in SECTIONS.items()
            for name in model.model_fields
            if f"agent_tools_{section}_{name}" in found
        ]
        if renames:
            raise SettingsError(f"settings names removed in 1.0.0 are set; rename them: {', '.join(renames)}")
        return {}
