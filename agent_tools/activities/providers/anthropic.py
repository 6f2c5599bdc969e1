"""Anthropic messages API."""

from __future__ import annotations

from typing import Any

import httpx

from agent_tools.activities.providers.base import ModelRequest, ModelResponse, post_json
from agent_tools.errors import ProviderRequestError
from agent_tools.messages import Message, ToolCall

ANTHROPIC_VERSION = "2023-06-01"


def to_anthropic(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """System text plus alternating user/assistant turns; tool results ride in user turns as blocks."""
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # the API wants strict alternation: merge neighbours
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            system_parts.append(m.content)
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            for tc in m.tool_calls:
                blocks.append({"type": "tool_use", "id": tc.id, "name": tc.name, "input": tc.arguments})
            push("assistant", blocks or [{"type": "text", "text": "(no content)"}])
        elif m.role == "tool":
            push("user", [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}])
        else:
            push("user", [{"type": "text", "text": m.content or "(empty)"}])
    return "\n\n".join(system_parts), out


class AnthropicProvider:
    """POST {base_url}/v1/messages."""

    def __init__(self, client: httpx.AsyncClient, *, base_url: str, api_key: str | None, name: str = "anthropic"):
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.name = name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        system, messages = to_anthropic(request.messages)
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens or 4096,
        }
        if system:
            payload["system"] = system
        if request.tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        body = await post_json(self.client, self.name, f"{self.base_url}/v1/messages", headers=headers, payload=payload)
        try:
            texts: list[str] = []
            calls: list[ToolCall] = []
            for block in body["content"]:
                if block["type"] == "text":
                    texts.append(block["text"])
                elif block["type"] == "tool_use":
                    calls.append(ToolCall(id=block["id"], name=block["name"], arguments=block.get("input") or {}))
            used = body.get("usage") or {}
        except (KeyError, TypeError) as exc:
            raise ProviderRequestError(f"{self.name}: malformed response: {exc!r}: {str(body)[:300]}") from exc
        return ModelResponse(
            message=Message(role="assistant", content="".join(texts), tool_calls=calls),
            input_tokens=int(used.get("input_tokens") or 0),
            output_tokens=int(used.get("output_tokens") or 0),
            finish_reason=body.get("stop_reason"),
        )
