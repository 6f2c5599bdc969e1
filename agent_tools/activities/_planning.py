"""Planning activities: the goal judge, a model call on the small tier.

The judge reads the session's latest turn from the transcript store (only ids travel through history) and
answers ``{"met": bool, "reason": str}``. Its request carries ``meta.agent = "goal-judge"`` so that the
scripted model can be given judge replies of their own (``match: {agent: goal-judge}``).
"""

from __future__ import annotations

from temporalio import activity

from agent_tools._errors import ConfigurationError, ProviderRequestError
from agent_tools.activities._model_calls import UsageAccount, complete, non_retryable
from agent_tools.activities._services import ActivityClass, Services
from agent_tools.contracts._planning import (
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
    attempt = activity.info().attempt if activity.in_activity() else 1
    try:
        response, used = await complete(
            services,
            spec,
            messages,
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
            # The judge's spend joins the session's usage rows (keyed per goal and turn: a retry overwrites).
            account=UsageAccount(
                f"{inp.session_id}:judge:{inp.goal_id}:{inp.completed_turns}", inp.session_id, inp.root_id
            ),
            budget=inp.budget,
        )
    except (ProviderRequestError, ConfigurationError) as exc:
        raise non_retryable(exc) from exc
    verdict = parse_verdict(response.message.content)
    verdict.usage = used
    return verdict


class PlanningActivities(ActivityClass):
    """The goal judge."""

    @activity.defn(name=ACTIVITY_JUDGE_GOAL)
    async def judge_goal(self, inp: JudgeGoalInput) -> GoalVerdict:
        return await judge_goal(await self._services.get(), inp)
