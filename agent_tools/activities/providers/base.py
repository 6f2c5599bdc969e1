"""Provider-neutral request/response and the HTTP error mapping shared by the real providers."""

from __future__ import annotations

import email.utils
import time
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, Field

from agent_tools.errors import ProviderRequestError, ProviderRetryableError
from agent_tools.messages import Message


class ToolSchema(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    model: str
    messages: list[Message]
    tools: list[ToolSchema] = Field(default_factory=list)
    max_tokens: int | None = None
    # Who is asking (agent, session): the scripted model picks its script by it; real providers ignore it.
    meta: dict[str, Any] = Field(default_factory=dict)


class ModelResponse(BaseModel):
    message: Message
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None


class Provider(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_to_datetime(value) if value else None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


def _provider_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if body.get("message"):
            return str(body["message"])
    return str(body)[:500]


async def post_json(
    client: httpx.AsyncClient, provider: str, url: str, *, headers: dict[str, str], payload: dict[str, Any]
) -> dict[str, Any]:
    """POST and map failures: 429/5xx/timeouts are retryable, other 4xx and nonsense are not."""
    try:
        response = await client.post(url, headers=headers, json=payload)
    except httpx.TimeoutException as exc:
        raise ProviderRetryableError(f"{provider}: request timed out ({exc.__class__.__name__})") from exc
    except httpx.TransportError as exc:
        raise ProviderRetryableError(f"{provider}: connection failed: {exc}") from exc
    if response.status_code == 429 or response.status_code >= 500:
        raise ProviderRetryableError(
            f"{provider} HTTP {response.status_code}: {_provider_message(response)}",
            status=response.status_code,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )
    if response.status_code >= 400:
        raise ProviderRequestError(
            f"{provider} HTTP {response.status_code}: {_provider_message(response)}", status=response.status_code
        )
    try:
        body = response.json()
    except ValueError as exc:
        raise ProviderRequestError(f"{provider}: malformed response (not JSON): {response.text[:200]!r}") from exc
    if not isinstance(body, dict):
        raise ProviderRequestError(f"{provider}: malformed response (not a JSON object)")
    return body
