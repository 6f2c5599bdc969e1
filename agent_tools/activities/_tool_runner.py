"""Turns every activity tool (built-in or the user's) into a named activity: validate, run, spill.

Activity type ``tool:<name>``: the Temporal UI lists each call by its tool, with the summary the workflow
sets (``webSearch: "query"``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_tools import _metrics as metrics
from agent_tools._activity_io import ToolCallInput, ToolCallOutput, tool_activity_name
from agent_tools._boundaries import cap_text, clean_text
from agent_tools._catalog.spec import ToolSpec
from agent_tools._errors import ToolFailure
from agent_tools._spill import describe_data_images, json_structure_hint, should_spill, spill_pointer
from agent_tools._user_tools import EXTRA_ARGUMENTS, ToolContext, UserTool
from agent_tools.activities._approvals import run_approved
from agent_tools.activities._context import BuiltinContext, ToolImpl, ToolReturn
from agent_tools.activities._heartbeat import with_heartbeat
from agent_tools.activities._services import ActivityClass, Services, ServicesHolder

# Readers a pointer names when the caller does not know the agent's (``readers=None``).
DEFAULT_READERS: tuple[str, ...] = ("read_tool_result", "search_tool_result", "query_tool_result")


_IMAGE_MAGIC = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
    b"RIFF": "image/webp",
}


def describe_bytes(data: bytes) -> str:
    """Bytes as the model reads them: their text when they are UTF-8, else a one-line description.

    FYAI: "Images and binary results are never saved" as artifacts, and a Python ``b'...'`` repr is neither
    text nor data; the description is short, so it is never saved either.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    kind = next((mime for magic, mime in _IMAGE_MAGIC.items() if data.startswith(magic)), None)
    what = f"image ({kind})" if kind else "binary data"
    return f"[{what}, {len(data):,} bytes: not shown to the model]"


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return describe_bytes(bytes(value))
    return str(value)


def render(result: ToolReturn) -> ToolCallOutput:
    if isinstance(result, ToolCallOutput):
        return result
    if isinstance(result, str):
        return ToolCallOutput(content=result)
    if isinstance(result, bytes | bytearray | memoryview):
        return ToolCallOutput(content=describe_bytes(bytes(result)))
    if isinstance(result, BaseModel):
        return ToolCallOutput(content=result.model_dump_json(exclude_none=True))
    return ToolCallOutput(content=json.dumps(result, ensure_ascii=False, default=_json_default))


async def save_if_large(
    services: Services,
    out: ToolCallOutput,
    *,
    session_id: str,
    run_id: str,
    call_id: str,
    tool: str,
    threshold: int,
    readers: tuple[str, ...] | None = None,
    exempt: bool = False,
    turn: int | None = None,
) -> ToolCallOutput:
    """Save an oversized result as an artifact; the model's copy becomes the pointer. Every activity that
    produces tool results goes through here. Images in data URLs are described first: never saved."""
    described = describe_data_images(out.content)
    if described != out.content:
        out = out.model_copy(update={"content": described})
    if out.is_error or not should_spill(out.content, threshold, exempt=exempt):
        return out
    # Deterministic ref: a retried activity writes the same artifact row instead of a second one. The turn
    # rides in the ref (``_t<turn>``) so that a reader can tell a result of an earlier turn without a column.
    ref = "res_" + uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{run_id}/{call_id}").hex[:16]
    if turn is not None:
        ref += f"_t{turn}"
    hint = json_structure_hint(out.content)
    await services.transcripts.save_artifact(
        ref=ref, session_id=session_id, run_id=run_id, tool=tool, content=out.content, is_json=hint is not None
    )
    metrics.spilled(tool)
    # An agent without readers (switched off for its organisation) is told the result cannot be opened.
    pointer = spill_pointer(
        ref=ref, content=out.content, json_hint=hint, readers=DEFAULT_READERS if readers is None else readers
    )
    return out.model_copy(update={"content": pointer, "artifact_ref": ref})


async def spill_if_large(
    services: Services, inp: ToolCallInput, spec: ToolSpec | None, out: ToolCallOutput
) -> ToolCallOutput:
    return await save_if_large(
        services,
        out,
        session_id=inp.session.session_id,
        run_id=inp.session.run_id,
        call_id=inp.call_id,
        tool=inp.name,
        threshold=inp.session.spill_threshold,
        readers=tuple(inp.session.readers),
        exempt=spec.spill_exempt if spec else False,
        turn=inp.session.turn,
    )


async def run_tool(services: Services, spec: ToolSpec | None, impl: ToolImpl, inp: ToolCallInput) -> ToolCallOutput:
    """Validate, run and render one call. Tool-level failures come back to the model, not as exceptions."""
    args: Any
    if spec is not None:
        try:
            args = spec.validate_arguments(inp.arguments)
        except ValidationError as exc:
            return ToolCallOutput(content=spec.invalid_arguments(inp.name, exc), is_error=True)
    else:
        args = inp.arguments
    ctx = BuiltinContext(services=services, session=inp.session, call_id=inp.call_id, tool=inp.name)
    try:
        out = render(await with_heartbeat(impl(args, ctx)))
    except ToolFailure as exc:
        return ToolCallOutput(content=bounded_result(str(exc)), is_error=True, data=exc.data)
    except SQLAlchemyError as exc:
        # The model gets the kind of failure, never the SQL (statements name other sessions' ids and data).
        # A lost connection is worth a retry; a refused value is not.
        transient = isinstance(exc, (OperationalError, InterfaceError, SATimeoutError))
        raise ApplicationError(
            f"{inp.name}: the store could not complete the call ({type(exc).__name__})",
            type="StoreError",
            non_retryable=not transient,
        ) from None
    # Saved whole when large (the artifact has every character); what stays inline is bounded.
    out = await spill_if_large(services, inp, spec, out.model_copy(update={"content": clean_text(out.content)}))
    return out.model_copy(update={"content": bounded_result(out.content)})


MAX_TOOL_RESULT_CHARS = 200_000
"""A tool result as it may travel in the history: larger ones are saved as artifacts (above the spill
threshold) or, for tools exempt from saving, cut here."""


def bounded_result(content: str) -> str:
    return cap_text(clean_text(content), MAX_TOOL_RESULT_CHARS, what="the result")


def public_context(ctx: BuiltinContext) -> ToolContext:
    """The narrow context a user's tool sees: who calls, and the worker's HTTP client; not its stores."""
    session = ctx.session
    attempt = activity.info().attempt if activity.in_activity() else 1
    logger = logging.LoggerAdapter(
        logging.getLogger(f"agent_tools.contracts.{ctx.tool}"),
        {"session_id": session.session_id, "call_id": ctx.call_id},
    )
    return ToolContext(
        session_id=session.session_id,
        run_id=session.run_id,
        call_id=ctx.call_id,
        tool=ctx.tool,
        agent=session.agent,
        organisation=session.organisation,
        project=session.project,
        user=session.user,
        attempt=attempt,
        http=ctx.services.http,
        logger=logger,
    )


def _user_impl(user_tool: UserTool) -> ToolImpl:
    async def impl(args: BaseModel, ctx: BuiltinContext) -> ToolReturn:
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if args.model_extra:
            # Only argument models that allow more than their fields have extras (an MCP tool whose schema
            # takes additional properties); the user's own tools forbid them.
            kwargs[EXTRA_ARGUMENTS] = dict(args.model_extra)
        if user_tool.wants_context:
            kwargs["context"] = ctx if user_tool.builtin_context else public_context(ctx)
        result: ToolReturn = await user_tool.function(**kwargs)
        return result

    return impl


class ToolActivities(ActivityClass):
    """One activity per tool that runs as an activity (``tool:<name>``): validate, run, spill."""

    def __init__(
        self,
        services: ServicesHolder,
        implementations: dict[str, ToolImpl],
        user_tools: Sequence[UserTool] = (),
    ) -> None:
        super().__init__(services)
        # A user's tool named like a built-in one registers a second activity of that name: the worker refuses.
        self._implementations = [
            *implementations.items(),
            *((ut.spec.name, _user_impl(ut)) for ut in user_tools),
        ]

    def activities(self) -> list[Callable[..., Any]]:
        return [self._activity(name, impl) for name, impl in self._implementations]

    async def _call(self, name: str, impl: ToolImpl, inp: ToolCallInput) -> ToolCallOutput:
        services = await self._services.get()
        spec = services.catalog.get(name)
        if inp.approval_id is not None:
            # At most once: the grant is claimed before the tool runs (agent_tools/activities/_approvals.py).
            return await run_approved(services, inp, lambda: run_tool(services, spec, impl, inp))
        return await run_tool(services, spec, impl, inp)

    def _activity(self, name: str, impl: ToolImpl) -> Callable[..., Any]:
        async def run(inp: ToolCallInput) -> ToolCallOutput:
            # The whole call beats (the tool's own work, and saving a large result as an artifact), so a
            # busy store never makes a live worker look dead within the few-second heartbeat timeout.
            return await with_heartbeat(self._call(name, impl, inp))

        run.__name__ = f"tool_{name}"
        return activity.defn(name=tool_activity_name(name))(run)
