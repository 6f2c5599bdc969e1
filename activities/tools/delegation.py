"""Activity faces of delegation: ``delegate_to_model`` (codai), one completion on another allowed model.

Every other delegation face starts a child session and lives in :mod:`workflows.delegation`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import activity

from activities.delegation import allowed_models, resolve_model
from activities.engine import cost_of
from activities.providers.base import ModelRequest
from activities.services import Services
from activities.store.db import upsert
from activities.store.tables import usage as usage_table
from activities.tools.base import ToolContext, ToolFailure, ToolImpl
from agent_tools.activity_io import ToolCallOutput
from agent_tools.errors import ConfigurationError, ProviderRequestError
from agent_tools.messages import Message, Usage
from agent_tools.tools.delegation import DelegateToModelArgs, DelegateToModelResult


async def delegate_to_model(args: DelegateToModelArgs, ctx: ToolContext) -> ToolCallOutput:
    """One completion, no tools, on a model the deployment allows (a tier name or a configured spec).

    Provider rate limits and server errors propagate and Temporal retries the activity; a refused request
    comes back to the model as an error result.
    """
    services = ctx.services
    spec = resolve_model(services.settings, args.model, ctx.session.model)
    if spec is None:
        known = sorted(allowed_models(services.settings, ctx.session.model))
        raise ToolFailure(f"Model {args.model!r} is not one you may call; allowed: {known}")
    try:
        provider, model_name = services.providers.resolve(spec)
    except ConfigurationError as exc:
        raise ToolFailure(f"Model {args.model!r} is not usable: {exc}") from exc
    messages = [Message(role="system", content=args.system)] if args.system else []
    messages.append(Message(role="user", content=args.prompt))
    request = ModelRequest(
        model=model_name,
        messages=messages,
        max_tokens=args.max_tokens or services.settings.default_max_tokens,
        meta={
            "agent": ctx.session.agent,
            "session_id": ctx.session.session_id,
            "title": "delegate_to_model",
            "role": "delegate",
            "assistant_count": 0,
        },
    )
    try:
        response = await provider.complete(request)
    except ProviderRequestError as exc:
        raise ToolFailure(f"delegate_to_model: {exc}") from exc
    used = Usage(
        calls=1,
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
        cost_usd=cost_of(services, spec, response.input_tokens, response.output_tokens),
    )
    await _record_usage(services, ctx, spec, used)
    result = DelegateToModelResult(model=spec, content=response.message.content, usage=used)
    # ``usage`` on the output: the session adds it to its tree usage (spend visible on the session).
    return ToolCallOutput(content=result.model_dump_json(), usage=used)


async def _record_usage(services: Services, ctx: ToolContext, spec: str, used: Usage) -> None:
    """One usage row per completion, like the session's own model calls (spend per session and per tree)."""
    row = {
        # Activity ids are unique within a run and stable across retries: a retry overwrites, never doubles.
        "call_key": f"{ctx.session.session_id}:{ctx.session.run_id}:{_activity_id(ctx)}:delegate",
        "session_id": ctx.session.session_id,
        "root_id": ctx.session.root_id,
        "model": spec,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cost_usd": used.cost_usd,
        "created_at": datetime.now(UTC),
    }
    async with services.store.engine.begin() as conn:
        await upsert(conn, usage_table, [row], keys=["call_key"])


def _activity_id(ctx: ToolContext) -> str:
    return activity.info().activity_id if activity.in_activity() else ctx.call_id


IMPLEMENTATIONS: dict[str, ToolImpl] = {"delegate_to_model": delegate_to_model}
