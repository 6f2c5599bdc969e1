"""The scripted provider: deterministic model turns from a script file, for tests and the offline demo."""

from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path

from agent_tools._errors import ConfigurationError, ProviderRequestError, ProviderRetryableError
from agent_tools._script import Script, ScriptedTurn, words
from agent_tools.activities._providers.base import ModelRequest, ModelResponse, TextSink, estimated_response


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

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelResponse:
        script = _load(self.path, Path(self.path).stat().st_mtime)  # noqa: ASYNC240 - a stat, cheaper than a thread hop
        turn, message = script.next_turn(request.messages, request.meta)
        if turn is not None and turn.delay_seconds:
            await asyncio.sleep(turn.delay_seconds)
        failure = self._failure(turn, request)
        # A failure with ``after_words`` streams that many words first: a step that breaks off mid-stream.
        fail_after = int(turn.fail.get("after_words", 0)) if failure is not None and turn and turn.fail else 0
        pace = (turn.word_seconds if turn is not None and turn.word_seconds is not None else script.word_seconds) or 0.0
        pieces = words(message.content)
        for i, piece in enumerate(pieces):
            if failure is not None and i >= fail_after:
                break
            if pace and i:
                await asyncio.sleep(pace)
            if on_text is not None:
                # Word by word, as a real model streams: tests and the offline demo show live text.
                on_text(piece)
        if failure is not None:
            raise failure
        return estimated_response(request, message)

    @staticmethod
    def _failure(turn: ScriptedTurn | None, request: ModelRequest) -> Exception | None:
        if turn is None or not turn.fail:
            return None
        # A failing turn fails only on the first attempts it names, so retries can be observed.
        if int(request.meta.get("attempt", 1)) > int(turn.fail.get("attempts", 1)):
            return None
        status = int(turn.fail.get("status", 500))
        text = str(turn.fail.get("message", f"scripted failure {status}"))
        if status == 429 or status >= 500:
            return ProviderRetryableError(text, status=status, retry_after=turn.fail.get("retry_after"))
        return ProviderRequestError(text, status=status)
