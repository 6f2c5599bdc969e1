"""Settings of the HTTP service's session routes: bearer keys with their scopes, CORS, the event stream.

``AGENT_TOOLS_SERVICE__API_KEYS`` is a JSON list of keys::

    [{"key": "k-console", "name": "console", "scopes": ["read", "answer"], "agents": ["assistant"]}]

A key's secret is a ``SecretStr``: it never shows in a repr, a log line or a validation error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

Scope = Literal["start", "answer", "read"]
SCOPES: tuple[Scope, ...] = ("start", "answer", "read")
MIN_KEY_CHARS = 16


class ServiceKey(BaseModel):
    """One bearer key: what it may do (``scopes``), for which agents, and in which memory scope it starts."""

    # A key refused at start-up must not be printed in the refusal: nothing about the secret itself fails
    # validation (its length is checked by the service, which names the key by its name).
    model_config = ConfigDict(hide_input_in_errors=True)

    key: SecretStr = Field(description=f"The bearer secret (at least {MIN_KEY_CHARS} characters)")
    name: str = Field(
        default="api", min_length=1, max_length=100, description="Shown as who answered or decided; never the key"
    )
    scopes: list[Scope] = Field(default_factory=lambda: list(SCOPES))
    agents: list[str] | Literal["all"] = "all"
    organisation: str = Field(default="default", min_length=1, max_length=100)
    project: str = Field(default="default", min_length=1, max_length=100)
    user: str = Field(default="default", min_length=1, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _bare_secret(cls, data: Any) -> Any:
        """A bare string is a key with every scope: never refused, so never echoed in a refusal."""
        return {"key": data} if isinstance(data, str) else data

    def allows_agent(self, agent: str | None) -> bool:
        return self.agents == "all" or (agent is not None and agent in self.agents)


class ServiceSettings(BaseModel):
    """The session routes' keys (none configured: every session route answers 401), CORS origins (none:
    no cross-origin browser may call), and the event stream's pacing."""

    model_config = ConfigDict(hide_input_in_errors=True)

    api_keys: list[ServiceKey] = Field(default_factory=list)
    cors_origins: list[str] = Field(
        default_factory=list, description='Origins allowed to call, e.g. ["https://app.example"]'
    )
    # An idle event stream sends a comment this often, so that proxies and browsers keep it open.
    keepalive_seconds: float = Field(default=15.0, gt=0, le=300)
    # How often a stream asks a busy session for new items (it asks an idle one less and less often).
    poll_seconds: float = Field(default=0.1, gt=0, le=5)
    # A route whose session does not answer in this long (no worker: a query or an update waits for one)
    # answers 503.
    call_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    # Bodies of the session routes larger than this are refused (413) before they are parsed.
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    # Prometheus text at http://HOST:PORT/metrics from the service: its Temporal client's temporal_* and
    # its requests' agent_tools_http_* (agent_tools._service.metrics). A port of its own, not the worker's.
    metrics_bind: str | None = Field(default=None, max_length=300)

    def key_problems(self) -> str | None:
        """Why the keys cannot be used (a key too short to be a secret), naming keys by name; or None."""
        short = [k.name for k in self.api_keys if len(k.key.get_secret_value()) < MIN_KEY_CHARS]
        if short:
            return f"service keys {', '.join(map(repr, short))} are shorter than {MIN_KEY_CHARS} characters"
        return None
