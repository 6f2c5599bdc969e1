"""The scripted provider: deterministic model turns from a script file, for tests and the offline demo."""

from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path

from agent_tools.activities.providers.base import ModelRequest, ModelResponse
from agent_tools.errors import ConfigurationError, ProviderRequestError, ProviderRetryableError
from agent_tools.testing import Script


@lru_cache(maxsize=64)
def _load(path: str, mtime: float) -> Script:
    return Script.load(path)


class ScriptedProvider:
    name = "scripted"

    def __init__(self, path: str) -> None:
        p = Path(path)
        if not p.exists():
            raise ConfigurationError(f"scripted model: no script at {path}")
        self.path = str(p)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        script = _load(self.path, Path(self.path).stat().st_mtime)  # noqa: ASYNC240 - a stat, cheaper than a thread hop
        turn, message = script.next_turn(request.messages, request.meta)
        if turn is not None and turn.delay_seconds:
            await asyncio.sleep(turn.delay_seconds)
        if turn is not None and turn.fail:
            status = int(turn.fail.get("status", 500))
            text = str(turn.fail.get("message", f"scripted failure {status}"))
            # A failing turn fails only on the first attempts it names, so retries can be observed.
            if int(request.meta.get("attempt", 1)) <= int(turn.fail.get("attempts", 1)):
                if status == 429 or status >= 500:
                    raise ProviderRetryableError(text, status=status, retry_after=turn.fail.get("retry_after"))
                raise ProviderRequestError(text, status=status)
        chars_in = sum(len(m.content) for m in request.messages)
        # Rough token estimate (4 chars per token) so usage and cost paths are exercised offline.
        return ModelResponse(
            message=message,
            input_tokens=chars_in // 4 + 1,
            output_tokens=len(message.content) // 4 + 1,
            finish_reason="tool_calls" if message.tool_calls else "stop",
        )
