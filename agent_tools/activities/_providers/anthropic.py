"""Anthropic messages API, streamed.

With ``stream: true`` the reply arrives as ``message_start`` (input usage), ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``) / ``content_block_stop`` per block,
``message_delta`` (stop reason, output usage) and ``message_stop``; ``ping`` and unknown events are
skipped, and an ``error`` event is mapped like an HTTP error.
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
    TextSink,
    clean_text,
    clean_value,
    parse_arguments,
    token_count,
)
from agent_tools.activities._providers.sse import HttpProvider, StreamedReply
from agent_tools.contracts._output import OUTPUT_TOOL, OutputContract

ANTHROPIC_VERSION = "2023-06-01"
MAX_BLOCKS = 256
# Anthropic's error types that a retry may cure (the others are the request's fault).
_RETRYABLE_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


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


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _raise_error(provider: str, body: dict[str, Any]) -> None:
    error = _obj(body.get("error"))
    kind = str(error.get("type", ""))
    text = f"{provider}: error in stream ({kind or 'unknown'}): {clean_text(str(error.get('message', body)))[:500]}"
    if kind in _RETRYABLE_ERRORS:
        raise ProviderRetryableError(text)
    raise ProviderRequestError(text)


@dataclass
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    json_parts: list[str] = field(default_factory=list)


@dataclass
class _Reply(StreamedReply):
    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None

    def take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            usage = _obj(_obj(event.get("message")).get("usage"))
            self.input_tokens = token_count(usage.get("input_tokens"))
            self.output_tokens = token_count(usage.get("output_tokens"))
        elif kind == "content_block_start":
            self._block_start(event)
        elif kind == "content_block_delta":
            self._block_delta(event)
        elif kind == "message_delta":
            self._message_delta(event)
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            _raise_error(self.provider, event)

    def _block_start(self, event: dict[str, Any]) -> None:
        block = event.get("content_block")
        index = event.get("index")
        if not isinstance(block, dict) or not isinstance(index, int) or isinstance(index, bool):
            raise ProviderRequestError(f"{self.provider}: malformed content_block_start: {str(event)[:200]!r}")
        if index not in self.blocks and len(self.blocks) >= MAX_BLOCKS:
            raise ProviderRequestError(f"{self.provider}: more than {MAX_BLOCKS} content blocks in one reply")
        entry = self.blocks[index] = _Block(kind=str(block.get("type", "")))
        if entry.kind == "tool_use":
            entry.id = str(block.get("id") or "")
            entry.name = str(block.get("name") or "")
            entry.input = clean_value(block["input"]) if isinstance(block.get("input"), dict) else {}
        elif entry.kind == "text" and isinstance(block.get("text"), str):
            self.text.add(block["text"])

    def _block_delta(self, event: dict[str, Any]) -> None:
        delta = _obj(event.get("delta"))
        index = event.get("index")
        target = self.blocks.get(index) if isinstance(index, int) else None
        if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
            self.text.add(delta["text"])
        elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            if target is None or target.kind != "tool_use":
                raise ProviderRequestError(f"{self.provider}: input_json_delta outside a tool_use block")
            target.json_parts.append(delta["partial_json"])
        # thinking_delta, signature_delta, citations: not part of the reply the engine keeps

    def _message_delta(self, event: dict[str, Any]) -> None:
        delta = _obj(event.get("delta"))
        if delta.get("stop_reason"):
            self.stop_reason = str(delta["stop_reason"])
        usage = _obj(event.get("usage"))
        if "output_tokens" in usage:
            self.output_tokens = token_count(usage.get("output_tokens"))  # cumulative, not an increment
        if usage.get("input_tokens"):
            self.input_tokens = token_count(usage.get("input_tokens"))

    def response(self) -> ModelResponse:
        self.ended()
        calls: list[ToolCall] = []
        for _, block in sorted(self.blocks.items()):
            if block.kind != "tool_use":
                continue
            if not block.id or not block.name:
                raise ProviderRequestError(f"{self.provider}: tool_use block without id or name")
            arguments, raw = parse_arguments("".join(block.json_parts)) if block.json_parts else (block.input, None)
            calls.append(
                ToolCall(id=clean_text(block.id), name=clean_text(block.name), arguments=arguments, raw_arguments=raw)
            )
        return self.reply(
            calls, input_tokens=self.input_tokens, output_tokens=self.output_tokens, finish_reason=self.stop_reason
        )


def parse_message(provider: str, body: dict[str, Any]) -> ModelResponse:
    """A whole (not streamed) messages reply."""
    try:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body["content"]:
            if block["type"] == "text":
                texts.append(clean_text(block["text"]))
            elif block["type"] == "tool_use":
                given = block.get("input")
                calls.append(
                    ToolCall(
                        id=clean_text(str(block["id"])),
                        name=clean_text(str(block["name"])),
                        arguments=clean_value(given) if isinstance(given, dict) else {},
                    )
                )
        used = body.get("usage") or {}
        if not isinstance(used, dict):
            used = {}
    except (KeyError, TypeError, AttributeError) as exc:
        raise ProviderRequestError(f"{provider}: malformed response: {exc!r}: {str(body)[:300]}") from exc
    return ModelResponse(
        message=Message(role="assistant", content="".join(texts), tool_calls=calls),
        input_tokens=token_count(used.get("input_tokens")),
        output_tokens=token_count(used.get("output_tokens")),
        finish_reason=body.get("stop_reason"),
    )


def output_tool(output: OutputContract) -> dict[str, Any]:
    """The tool whose arguments are the final answer: Anthropic has no response format, so structured results
    force a tool call. Its input schema must be an object; any other schema is wrapped as ``{"value": ...}``
    (its ``$defs`` moved to the wrapper's root, so that ``#/$defs/...`` references still resolve)."""
    schema = output.json_schema
    if schema.get("type") != "object":
        inner = {k: v for k, v in schema.items() if k != "$defs"}
        schema = {"type": "object", "properties": {"value": inner}, "required": ["value"]}
        if "$defs" in output.json_schema:
            schema["$defs"] = output.json_schema["$defs"]
    return {
        "name": OUTPUT_TOOL,
        "description": "Give your final answer: its arguments are the answer, in the required JSON Schema.",
        "input_schema": schema,
    }


def take_output(output: OutputContract, response: ModelResponse) -> ModelResponse:
    """The forced tool's call becomes the reply's text (the JSON answer), so the engine sees a final answer.
    Beside other tool calls it is dropped: those run first, and the model answers again after them."""
    calls = response.message.tool_calls
    answer = [c for c in calls if c.name == OUTPUT_TOOL]
    if not answer:
        return response
    others = [c for c in calls if c.name != OUTPUT_TOOL]
    if others:
        return response.model_copy(update={"message": response.message.model_copy(update={"tool_calls": others})})
    call = answer[0]
    value: Any = call.arguments
    if output.json_schema.get("type") != "object" and set(call.arguments) == {"value"}:
        value = call.arguments["value"]
    text = call.raw_arguments if call.raw_arguments is not None else json.dumps(value, ensure_ascii=False)
    return response.model_copy(
        update={"message": response.message.model_copy(update={"content": text, "tool_calls": []})}
    )


class AnthropicProvider(HttpProvider):
    """POST {base_url}/v1/messages, streamed unless ``stream=False``."""

    default_name = "anthropic"
    path = "/v1/messages"
    reply_type = _Reply

    def payload(self, request: ModelRequest) -> dict[str, Any]:
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
        forced = self._forced_output(request)
        if forced is not None:
            payload["tools"] = [*payload.get("tools", []), output_tool(forced)]
            # Without other tools the answer tool itself is forced; with them, some tool call is, so the model
            # still works with its tools and ends by calling the answer tool.
            payload["tool_choice"] = {"type": "tool", "name": OUTPUT_TOOL} if not request.tools else {"type": "any"}
        if self.stream:
            payload["stream"] = True
        return payload

    @staticmethod
    def _forced_output(request: ModelRequest) -> OutputContract | None:
        # A session tool of that very name keeps its meaning; the answer is then checked as text only.
        if request.output is None or any(t.name == OUTPUT_TOOL for t in request.tools):
            return None
        return request.output

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    def whole(self, body: dict[str, Any]) -> ModelResponse:
        return parse_message(self.name, body)

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelResponse:
        response = await super().complete(request, on_text)
        forced = self._forced_output(request)
        return take_output(forced, response) if forced is not None else response
