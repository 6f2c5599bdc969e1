"""Settings of the event ingress and router: the ``events`` section of :class:`agent_tools.Settings`.

AGENT_TOOLS_EVENTS__TOKENS='{"acme/web": "s3cret-token"}'
AGENT_TOOLS_EVENTS__SOURCES='{"gh": {"type": "github", "secret": "...", "organisation": "acme"}}'
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

# The router workflow id's prefix (with the organisation and project).
DEFAULT_ROUTER_PREFIX = "agent-tools-event-router"


class EventSource(BaseModel):
    """One webhook source, reached at ``POST /v1/webhooks/<name>``.

    ``github``: GitHub webhooks (``X-Hub-Signature-256``, kind ``github.<event>[.<action>]``).
    ``hmac``: Standard Webhooks signing (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``) with
    a timestamp window against replays; the body is ``{"type": kind, "data": payload}`` (or
    ``kind``/``payload``).
    """

    type: Literal["github", "hmac"]
    secret: str = Field(min_length=8)
    organisation: str = "default"
    project: str = "default"
    # Prepended to the kinds an ``hmac`` source sends (``ci`` + ``build.done`` -> ``ci.build.done``).
    kind_prefix: str | None = None


class EventSettings(BaseModel):
    """Ingress tokens and sources, limits, and the router's naming and history budget (``settings.events``)."""

    # "organisation/project" -> bearer token accepted by POST /v1/events for that project.
    tokens: dict[str, str] = Field(default_factory=dict)
    # Local development only: POST /v1/events without a token (organisation/project from the body).
    allow_unauthenticated: bool = False
    sources: dict[str, EventSource] = Field(default_factory=dict)
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    timestamp_tolerance_seconds: int = Field(default=300, ge=1)
    router_id_prefix: str = DEFAULT_ROUTER_PREFIX
    router_max_history_events: int = Field(default=2000, ge=20)
    # The ingress signals the waiting sessions an event matches itself (their waits are kept in the store)
    # and nothing else: no router is signalled. Off (the path before), the waits are also subscribed with the
    # project's EventRouter and every event is routed through it too; the ingress still delivers what it
    # finds, and the router what has no row (waits subscribed by a worker before revision 0005). Workers and
    # the ingress read it each from their own environment; any mix of the two delivers every event.
    direct_delivery: bool = True
    # Rows a subscription's backlog check reads at most (events of the kind since the wait began).
    backlog_scan_limit: int = Field(default=500, ge=1)
    # Where `agent-tools events send` posts, and its bearer token.
    ingress_url: str = "http://127.0.0.1:8080"
    token: str | None = None
    # `agent-tools serve`
    host: str = "127.0.0.1"
    port: int = 8080

    def project_for_token(self, token: str) -> tuple[str, str] | None:
        """The (organisation, project) whose token this is, compared in constant time."""
        import hmac

        found: tuple[str, str] | None = None
        for key, expected in self.tokens.items():
            if hmac.compare_digest(expected.encode(), token.encode()):
                org, _, project = key.partition("/")
                found = (org, project or "default")
        return found
