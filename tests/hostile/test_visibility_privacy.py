"""Under a payload codec the prompt reaches no plain-text field: every payload is encoded, and the
``SessionTitle`` search attribute (which Temporal never encodes) is the agent's name or a title the caller
gave, not the prompt. Without a codec the title is the prompt's start, as before."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import DataConverter, PayloadCodec

from agent_tools import _search_attributes as sa
from agent_tools._client import AgentToolsClient
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._session import WORKFLOW_NAME, SessionInput, SessionRequest
from agent_tools._settings import Settings
from agent_tools._worker import build_worker
from tests.support.fixture_types import WorkerFor
from tests.support.polling import eventually

SECRET = "zebra-orchid-7731"


class ReversingCodec(PayloadCodec):
    """Enough of an encryption codec for the test: no payload keeps its bytes readable."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": b"binary/reversed"}, data=base64.b64encode(p.SerializeToString())[::-1])
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != b"binary/reversed":
                out.append(p)
                continue
            decoded = Payload()
            decoded.ParseFromString(base64.b64decode(p.data[::-1]))
            out.append(decoded)
        return out


@asynccontextmanager
async def _encrypted_worker(temporal_env: Any, settings: Settings) -> AsyncIterator[AgentToolsClient]:
    """A worker, and a client on the same Temporal client, whose data converter has the codec."""
    plugin = AgentToolsPlugin(settings)
    codec = dataclasses.replace(DataConverter.default, payload_codec=ReversingCodec())
    temporal = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        plugins=[plugin],
        data_converter=codec,
    )
    async with build_worker(temporal, plugin):
        yield AgentToolsClient(temporal, settings)


async def _title(client: AgentToolsClient, session_id: str) -> str | None:
    described = await client.temporal.get_workflow_handle(session_id).describe()
    return described.typed_search_attributes.get(sa.SESSION_TITLE)


@pytest.mark.parametrize("explicit_title", [None, "Quarterly numbers"])
async def test_under_a_codec_the_prompt_is_nowhere_in_plain_text(
    explicit_title: str | None, temporal_env: Any, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "you said {{last_user}}"}])
    async with _encrypted_worker(temporal_env, settings) as client:
        try:
            handle = await client.start_session(f"my secret is {SECRET}", title=explicit_title)
            assert (await asyncio.wait_for(handle.result(), 30)).final_message == f"you said my secret is {SECRET}"
            # Visibility: the title is the caller's, or the agent's name; never the prompt.
            assert await _title(client, handle.id) == (explicit_title or "assistant")
            # The raw history, as the server holds it: not a byte of the prompt unencoded.
            history = await client.temporal.get_workflow_handle(handle.id).fetch_history()
            raw = b"".join(event.SerializeToString() for event in history.events)
            assert SECRET.encode() not in raw
            assert base64.b64encode(SECRET.encode()) not in raw
        finally:
            await client.close()


async def test_under_a_codec_a_raw_start_and_a_child_keep_the_prompt_out_of_their_titles(
    temporal_env: Any, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    sub = {"name": "subAgent", "arguments": {"title": f"About {SECRET}", "instruction": "help", "mode": "sync"}}
    settings.model = script([{"say": "", "tool_calls": [sub]}, {"say": "child done"}, {"say": "after {{last_tool}}"}])
    async with _encrypted_worker(temporal_env, settings) as client:
        temporal = client.temporal
        try:
            # A raw start sets no options: the worker, which has the codec, keeps the prompt out.
            handle = await temporal.start_workflow(
                WORKFLOW_NAME,
                SessionInput(request=SessionRequest(prompt=f"my secret is {SECRET}", tools=["subAgent"])),
                id=f"raw-private-{uuid.uuid4().hex[:8]}",
                task_queue=settings.task_queue,
            )
            await asyncio.wait_for(handle.result(), 60)
            assert await _title(client, handle.id) == "assistant"

            async def listed() -> list[str]:
                return [wf.id async for wf in temporal.list_workflows(f"SessionParentId = '{handle.id}'")]

            children = await eventually(listed, until=lambda ids: len(ids) == 1, timeout=20, what="the child listed")
            assert await _title(client, children[0]) == "assistant"
            for workflow_id in (handle.id, children[0]):
                history = await temporal.get_workflow_handle(workflow_id).fetch_history()
                raw = b"".join(event.SerializeToString() for event in history.events)
                assert SECRET.encode() not in raw, workflow_id
        finally:
            await client.close()


async def test_without_a_codec_the_title_is_the_prompt_start(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "ok"}])
    async with worker_for() as client:
        handle = await client.start_session("plain words for the title")
        await asyncio.wait_for(handle.result(), 30)
        assert await _title(client, handle.id) == "plain words for the title"
