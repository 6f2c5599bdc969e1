"""A raw start under a finished session's id (Temporal's default reuse policy, as `temporal workflow start`
uses): the second run never writes over the first run's transcript; it fails once, with the reason."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy

from agent_tools._session import WORKFLOW_NAME, SessionInput, SessionRequest
from agent_tools._settings import Settings
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import task_failures


async def test_a_raw_start_on_a_finished_sessions_id_keeps_the_first_transcript(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings, store_url: str
) -> None:
    settings.database_url = store_url
    settings.model = script([{"say": "answer to {{last_user}}"}])
    async with worker_for(settings=settings) as client:
        first = await client.start_session("the first prompt")
        assert (await asyncio.wait_for(first.result(), 30)).final_message == "answer to the first prompt"
        before = [(e.role, e.content) for e in await first.transcript()]
        again = await client.temporal.start_workflow(
            WORKFLOW_NAME,
            SessionInput(request=SessionRequest(prompt="the second prompt")),
            id=first.id,
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(again.result(), 30)
        cause = failed.value.cause
        assert "holds the transcript of an earlier run" in f"{cause} {getattr(cause, 'cause', '')}"
        assert [(e.role, e.content) for e in await first.transcript()] == before
        assert await task_failures(client.temporal, first.id) == []
