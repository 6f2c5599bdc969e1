"""Planning activities: the goal judge, a model call on the small tier.

The judge reads the session's latest turn from the transcript store (only ids travel through history) and
answers ``{"met": bool, "reason": str}``. Its request carries ``meta.agent = "goal-judge"`` so that the
scripted model can be given judge replies of their own (``match: {agent: goal-judge}``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.providers.base import ModelRequest
from activities.services import Services, ServicesHolder
from activities.store.db import upsert
from activities.store.tables import usage
from agent_tools.errors import ConfigurationError, ProviderRequestError, ProviderRetryableError
from agent_tools.messages import Usage
from agent_tools.tools.planning import (
    ACTIVITY_JUDGE_GOAL,
    GoalVerdict,
    JudgeGoalInput,
    judge_messages,
    parse_verdict,
)

JUDGE_AGENT = "goal-judge"
JUDGE_TIER = "small"
JUDGE_MAX_TOKENS = 300


async def judge_goal(services: Services, inp: JudgeGoalInput) -> GoalVerdict:
    """One judge call: condition + latest turn in, verdict out (usage recorded like any model call)."""
    transcript = await services.transcripts.load(inp.session_id, upto=inp.position)
    messages = judge_messages(inp.condition, transcript, completed_turns=inp.completed_turns, max_turns=inp.max_turns)
    spec = services.settings.model_for_tier(JUDGE_TIER)
    try:
        provider, model_name = services.providers.resolve(spec)
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type="ConfigurationError", non_retryable=True) from exc
    attempt = activity.info().attempt if activity.in_activity() else 1
    request = ModelRequest(
        model=model_name,
        messages=messages,
        max_tokens=JUDGE_MAX_TOKENS,
        meta={
            "agent": JUDGE_AGENT,
            "session_id": inp.session_id,
            "goal_id": inp.goal_id,
            "attempt": attempt,
            # The judge's conversation is always fresh; its count of earlier verdicts stands in for the
            # scripted model's turn index so scripts can say "not met, not met, met".
            "assistant_count": inp.judgements,
        },
    )
    try:
        response = await provider.complete(request)
    except ProviderRetryableError as exc:
        raise ApplicationError(str(exc), type="ProviderRetryableError") from exc
    except ProviderRequestError as exc:
        raise ApplicationError(str(exc), type="ProviderRequestError", non_retryable=True) from exc
    from activities.engine import cost_of

    used = Usage(
        calls=1,
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
        cost_usd=cost_of(services, spec, response.input_tokens, response.output_tokens),
    )
    await _record_usage(services, inp, spec, used)
    verdict = parse_verdict(response.message.content)
    verdict.usage = used
    return verdict


async def _record_usage(services: Services, inp: JudgeGoalInput, model: str, used: Usage) -> None:
    """The judge's spend joins the session's usage rows (keyed per goal and turn, so a retry overwrites)."""
    row = {
        "call_key": f"{inp.session_id}:judge:{inp.goal_id}:{inp.completed_turns}",
        "session_id": inp.session_id,
        "root_id": inp.root_id,
        "model": model,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cost_usd": used.cost_usd,
        "created_at": datetime.now(UTC),
    }
    async with services.store.engine.begin() as conn:
        await upsert(
            conn,
            usage,
            [row],
            keys=["call_key"],
            update=["input_tokens", "output_tokens", "cost_usd", "model"],
        )


def build_activities(holder: ServicesHolder) -> list[Callable[..., Any]]:
    @activity.defn(name=ACTIVITY_JUDGE_GOAL)
    async def judge_goal_activity(inp: JudgeGoalInput) -> GoalVerdict:
        return await judge_goal(await holder.get(), inp)

    return [judge_goal_activity]
