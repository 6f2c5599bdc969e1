"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent_tools.activities.providers.base import ModelRequest, ModelResponse, post_json
from agent_tools.errors import ProviderRequestError
from agent_tools.messages import Message, ToolCall


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.name, "arguments": tc.raw_arguments or json.dumps(tc.arguments)},
                    }
                    for tc in m.tool_calls
                ]
            out.append(item)
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def parse_tool_call(raw: dict[str, Any]) -> ToolCall:
    fn = raw.get("function") or {}
    args_text = fn.get("arguments")
    arguments: dict[str, Any] = {}
    raw_arguments: str | None = None
    if isinstance(args_text, dict):
        arguments = args_text
    elif isinstance(args_text, str) and args_text.strip():
        try:
            parsed = json.loads(args_text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            arguments = parsed
        else:
            raw_arguments = args_text
    if not raw.get("id") or not fn.get("name"):
        raise ProviderRequestError(f"openai: malformed tool call {raw!r}")
    return ToolCall(id=str(raw["id"]), name=str(fn["name"]), arguments=arguments, raw_arguments=raw_arguments)


class OpenAIProvider:
    """POST {base_url}/chat/completions."""

    def __init__(self, client: httpx.AsyncClient, *, base_url: str, api_key: str | None, name: str = "openai"):
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.name = name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        payload: dict[str, Any] = {"model": request.model, "messages": to_openai_messages(request.messages)}
        if request.max_tokens:
            payload["max_tokens"] = request.max_tokens
        if request.tools:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
            payload["parallel_tool_calls"] = True
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        body = await post_json(
            self.client, self.name, f"{self.base_url}/chat/completions", headers=headers, payload=payload
        )
        try:
            choice = body["choices"][0]
            msg = choice["message"]
            tool_calls = [parse_tool_call(tc) for tc in (msg.get("tool_calls") or [])]
            content = msg.get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (KeyError, IndexError, TypeError) as exc:
            raise ProviderRequestError(f"{self.name}: malformed response: {exc!r}: {str(body)[:300]}") from exc
        used = body.get("usage") or {}
        return ModelResponse(
            message=Message(role="assistant", content=content, tool_calls=tool_calls),
            input_tokens=int(used.get("prompt_tokens") or 0),
            output_tokens=int(used.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
        )
