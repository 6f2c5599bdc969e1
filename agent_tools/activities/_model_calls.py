"""One way to call a model from any activity: resolve the spec, complete with heartbeats, map provider
failures to Temporal's retry semantics, price the call and record its usage row.

The session's own steps, the goal judge, delegate_to_model, webFetch's extraction and deep research all
call models through here, so every model call retries, costs and counts the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.exceptions import ApplicationError

from agent_tools import _metrics as metrics
from agent_tools import _tracing as tracing
from agent_tools._boundaries import normalize_model_message
from agent_tools._budget import BudgetExceeded, TreeBudget, exceeded
from agent_tools._errors import ConfigurationError, ProviderRequestError, ProviderRetryableError, error_type
from agent_tools._messages import Message, Usage
from agent_tools.activities._heartbeat import with_heartbeat
from agent_tools.activities._providers.base import ModelRequest, ModelResponse, TextSink, ToolSchema
from agent_tools.activities._providers.sse import HttpProvider
from agent_tools.activities._services import Services
from agent_tools.contracts._output import OutputContract


@dataclass(frozen=True)
class UsageAccount:
    """Where a call's spend is recorded: one usage row per key (a retried call overwrites its row)."""

    call_key: str
    session_id: str
    root_id: str


def cost_of(services: Services, model_spec: str, input_tokens: int, output_tokens: int) -> float:
    price = services.settings.prices.get(model_spec)
    if price is None:
        return 0.0
    return round(input_tokens * price.input_per_mtok / 1e6 + output_tokens * price.output_per_mtok / 1e6, 8)


def non_retryable(exc: ProviderRequestError | ConfigurationError) -> ApplicationError:
    """A refused request or an unusable model: retrying cannot help, the message says why."""
    return ApplicationError(str(exc), type=error_type(type(exc)), non_retryable=True)


async def check_budget(services: Services, budget: TreeBudget | None) -> Usage | None:
    """The tree's spend so far, or None without a budget.

    Raises:
        BudgetExceeded: a ceiling is reached; the call must not be made.
    """
    if budget is None:
        return None
    spent = await services.transcripts.usage_total(root_id=budget.root_id)
    refusal = exceeded(budget.cost_usd, budget.tokens, spent)
    if refusal is not None:
        raise BudgetExceeded(f"model call refused: {refusal}")
    return spent


async def complete(
    services: Services,
    spec: str,
    messages: list[Message],
    *,
    tools: Sequence[ToolSchema] = (),
    max_tokens: int | None = None,
    meta: dict[str, Any] | None = None,
    account: UsageAccount | None = None,
    on_text: TextSink | None = None,
    output: OutputContract | None = None,
    budget: TreeBudget | None = None,
) -> tuple[ModelResponse, Usage]:
    """Call the model ``spec``; returns its response and the priced usage.

    ``on_text`` gets each piece of the reply's text while the provider streams it; ``output`` asks the
    provider for a final answer that matches its schema where the provider can (structured results);
    with ``budget`` the call is refused (:class:`~agent_tools._budget.BudgetExceeded`) once the session
    tree's spend has reached a ceiling.

    Raises:
        ApplicationError: retryable, for 429/5xx/timeouts, with ``next_retry_delay`` from Retry-After.
        ProviderRequestError: the provider refused the request (4xx, malformed answer), or the budget did
            (``BudgetExceeded``); the caller decides
            whether that fails the activity (:func:`non_retryable`) or becomes a tool error.
        ConfigurationError: the spec names no usable provider.
    """
    await check_budget(services, budget)
    provider, model_name = services.providers.resolve(spec)
    request = ModelRequest(
        model=model_name, messages=messages, tools=list(tools), max_tokens=max_tokens, meta=meta or {}, output=output
    )
    # GenAI semantic conventions: one CLIENT "chat" span per call, the usage and cost on it once known.
    with tracing.span(
        f"chat {model_name}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": spec.partition(":")[0],
            "gen_ai.request.model": model_name,
            "gen_ai.request.max_tokens": max_tokens,
            **tracing.server_of(provider.base_url if isinstance(provider, HttpProvider) else None),
        },
        kind="client",
    ):
        try:
            response = await with_heartbeat(provider.complete(request, on_text))
        except ProviderRetryableError as exc:
            metrics.model_call_failed(spec, "retryable")
            delay = timedelta(seconds=exc.retry_after) if exc.retry_after is not None else None
            raise ApplicationError(str(exc), type=error_type(ProviderRetryableError), next_retry_delay=delay) from exc
        except ProviderRequestError:
            metrics.model_call_failed(spec, "refused")
            raise
        except RecursionError as exc:
            # JSON nested past the decoder's limit: the same answer comes back on a retry.
            metrics.model_call_failed(spec, "refused")
            raise ProviderRequestError(f"{spec}: the response is nested too deeply to read") from exc
        # The boundary for model output: what the workflow receives is decodable and within the payload limits.
        response = response.model_copy(update={"message": normalize_model_message(response.message)})
        used = Usage(
            calls=1,
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            cost_usd=cost_of(services, spec, response.input_tokens, response.output_tokens),
        )
        metrics.model_call(spec, used.input_tokens, used.output_tokens, used.cost_usd)
        tracing.set_attributes(
            {
                "gen_ai.response.model": model_name,
                "gen_ai.usage.input_tokens": used.input_tokens,
                "gen_ai.usage.output_tokens": used.output_tokens,
                "gen_ai.response.finish_reasons": [response.finish_reason] if response.finish_reason else [],
                "agent_tools.cost_usd": used.cost_usd,
            }
        )
    if account is not None:
        await services.transcripts.record_usage(
            call_key=account.call_key, session_id=account.session_id, root_id=account.root_id, model=spec, used=used
        )
    return response, used
