"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM), streamed.

The request asks for ``stream: true`` with ``stream_options.include_usage``: text and tool-call deltas
arrive as server-sent events, the last chunk carries the usage, ``data: [DONE]`` ends the stream. A server
that answers with one JSON body instead (some proxies do) is read as a whole reply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_tools._errors import ProviderRequestError, ProviderRetryableError
from agent_tools._messages import Message, ToolCall
from agent_tools.activities._providers.base import (
    ModelRequest,
    ModelResponse,
    clean_text,
    clean_value,
    parse_arguments,
    token_count,
)
from agent_tools.activities._providers.sse import HttpProvider, StreamedReply

# More parallel calls than this in one reply is no model's doing.
MAX_TOOL_CALLS = 128
# Error types an OpenAI-compatible server reports mid-stream that a retry may cure.
_RETRYABLE_STREAM_ERRORS = ("server_error", "rate_limit", "overloaded", "timeout", "internal")


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
        arguments = clean_value(args_text)
    elif isinstance(args_text, str):
        arguments, raw_arguments = parse_arguments(args_text)
    if not raw.get("id") or not fn.get("name"):
        raise ProviderRequestError(f"openai: malformed tool call {str(raw)[:300]!r}")
    return ToolCall(
        id=clean_text(str(raw["id"])),
        name=clean_text(str(fn["name"])),
        arguments=arguments,
        raw_arguments=raw_arguments,
    )


@dataclass
class _CallSlot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Reply(StreamedReply):
    """What the chunks have said so far."""

    calls: dict[int, _CallSlot] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None

    def take(self, event: dict[str, Any]) -> None:
        error = event.get("error")
        if error:
            _raise_stream_error(self.provider, error)
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return  # the usage chunk has no choices; so may a keep-alive
        choice = choices[0]
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise ProviderRequestError(f"{self.provider}: malformed stream chunk: {str(event)[:200]!r}")
        content = delta.get("content")
        if isinstance(content, str):
            self.text.add(content)
        for position, raw in enumerate(delta.get("tool_calls") or []):
            self._take_call(position, raw)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])

    def _take_call(self, position: int, raw: Any) -> None:
        """One tool-call delta: the call's id, a piece of its name, a piece of its arguments."""
        if not isinstance(raw, dict):
            raise ProviderRequestError(f"{self.provider}: malformed tool-call delta: {str(raw)[:200]!r}")
        index = raw.get("index", position)
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProviderRequestError(f"{self.provider}: malformed tool-call delta index: {index!r}")
        slot = self.calls.get(index)
        if slot is None:
            if len(self.calls) >= MAX_TOOL_CALLS:
                raise ProviderRequestError(f"{self.provider}: more than {MAX_TOOL_CALLS} tool calls in one reply")
            slot = self.calls[index] = _CallSlot()
        if raw.get("id"):
            slot.id = str(raw["id"])
        fn = raw.get("function") or {}
        if not isinstance(fn, dict):
            return
        if isinstance(fn.get("name"), str):
            slot.name += fn["name"]
        if isinstance(fn.get("arguments"), str):
            slot.arguments.append(fn["arguments"])
        elif isinstance(fn.get("arguments"), dict):  # Ollama sends whole objects
            slot.arguments.append(json.dumps(fn["arguments"]))

    def response(self) -> ModelResponse:
        if self.finish_reason is None:
            self.ended()
        calls = [
            parse_tool_call({"id": slot.id, "function": {"name": slot.name, "arguments": "".join(slot.arguments)}})
            for _, slot in sorted(self.calls.items())
        ]
        return self.reply(
            calls,
            input_tokens=token_count(self.usage.get("prompt_tokens")),
            output_tokens=token_count(self.usage.get("completion_tokens")),
            finish_reason=self.finish_reason,
        )


def _raise_stream_error(provider: str, error: Any) -> None:
    message = error.get("message") if isinstance(error, dict) else error
    kind = " ".join(str(error.get(k, "")) for k in ("type", "code")) if isinstance(error, dict) else ""
    text = f"{provider}: error in stream: {clean_text(str(message))[:500]}"
    if any(word in kind.lower() for word in _RETRYABLE_STREAM_ERRORS):
        raise ProviderRetryableError(text)
    raise ProviderRequestError(text)


def parse_completion(provider: str, body: dict[str, Any]) -> ModelResponse:
    """A whole (not streamed) chat completion."""
    try:
        choice = body["choices"][0]
        msg = choice["message"]
        tool_calls = [parse_tool_call(tc) for tc in (msg.get("tool_calls") or [])]
        content = msg.get("content") or ""
        if not isinstance(content, str):
            raise TypeError("content is not a string")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ProviderRequestError(f"{provider}: malformed response: {exc!r}: {str(body)[:300]}") from exc
    used = body.get("usage") or {}
    if not isinstance(used, dict):
        used = {}
    return ModelResponse(
        message=Message(role="assistant", content=clean_text(content), tool_calls=tool_calls),
        input_tokens=token_count(used.get("prompt_tokens")),
        output_tokens=token_count(used.get("completion_tokens")),
        finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
    )


class OpenAIProvider(HttpProvider):
    """POST {base_url}/chat/completions, streamed unless ``stream=False`` (servers that cannot)."""

    default_name = "openai"
    path = "/chat/completions"
    reply_type = _Reply

    def payload(self, request: ModelRequest) -> dict[str, Any]:
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
        if request.output is not None:
            # Structured outputs: the server constrains the final answer to the schema. Not ``strict``: strict
            # mode takes only a subset of JSON Schema (every property required, no additional ones), and the
            # activity validates the answer against the whole schema anyway.
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.output.name, "schema": request.output.json_schema, "strict": False},
            }
        if self.stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        return payload

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    def whole(self, body: dict[str, Any]) -> ModelResponse:
        return parse_completion(self.name, body)
