"""Activity faces of delegation: ``delegate_to_model`` (codai), one completion on another allowed model.

Every other delegation face starts a child session and lives in :mod:`agent_tools.workflows.delegation`.
"""

from __future__ import annotations

from temporalio import activity

from agent_tools.activities.delegation import allowed_models, resolve_model
from agent_tools.activities.model_calls import UsageAccount, complete
from agent_tools.activities.tools.base import BuiltinContext, ToolImpl
from agent_tools.activity_io import ToolCallOutput
from agent_tools.errors import ConfigurationError, ProviderRequestError, ToolFailure
from agent_tools.messages import Message
from agent_tools.tools.delegation import DelegateToModelArgs, DelegateToModelResult


async def delegate_to_model(args: DelegateToModelArgs, ctx: BuiltinContext) -> ToolCallOutput:
    """One completion, no tools, on a model the deployment allows (a tier name or a configured spec).

    Provider rate limits and server errors propagate and Temporal retries the activity; a refused request
    comes back to the model as an error result.
    """
    services = ctx.services
    spec = resolve_model(services.settings, args.model, ctx.session.model)
    if spec is None:
        known = sorted(allowed_models(services.settings, ctx.session.model))
        raise ToolFailure(f"Model {args.model!r} is not one you may call; allowed: {known}")
    messages = [Message(role="system", content=args.system)] if args.system else []
    messages.append(Message(role="user", content=args.prompt))
    try:
        response, used = await complete(
            services,
            spec,
            messages,
            max_tokens=args.max_tokens or services.settings.default_max_tokens,
            meta={
                "agent": ctx.session.agent,
                "session_id": ctx.session.session_id,
                "title": "delegate_to_model",
                "role": "delegate",
                "assistant_count": 0,
            },
            # One usage row per completion, like the session's own calls; activity ids are stable across
            # retries, so a retry overwrites its row.
            account=UsageAccount(
                f"{ctx.session.session_id}:{ctx.session.run_id}:{_activity_id(ctx)}:delegate",
                ctx.session.session_id,
                ctx.session.root_id,
            ),
        )
    except ConfigurationError as exc:
        raise ToolFailure(f"Model {args.model!r} is not usable: {exc}") from exc
    except ProviderRequestError as exc:
        raise ToolFailure(f"delegate_to_model: {exc}") from exc
    result = DelegateToModelResult(model=spec, content=response.message.content, usage=used)
    # ``usage`` on the output: the session adds it to its tree usage (spend visible on the session).
    return ToolCallOutput(content=result.model_dump_json(), usage=used)


def _activity_id(ctx: BuiltinContext) -> str:
    return activity.info().activity_id if activity.in_activity() else ctx.call_id


IMPLEMENTATIONS: dict[str, ToolImpl] = {"delegate_to_model": delegate_to_model}
