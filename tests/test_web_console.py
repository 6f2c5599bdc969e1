"""The web console in headless Chromium (Debian's, driven by Playwright) against the service on a real
socket, a dev server and a worker: the key typed in, a session started and listed, its text seen while the
model still writes, its todo list, its question answered in the page, its end; the model's markup shown as
text."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests import ui_screens
from tests.support.fixture_types import Script, WorkerFor
from tests.support.session_api import ASK, FULL, auth, session_api

ROOT = Path(__file__).resolve().parents[1]

WORDS = " ".join(f"word{i}" for i in range(40))
SAID = "<b>not bold</b> " + WORDS
TODO = {"name": "todoWrite", "arguments": {"todos": [{"content": "Pick one", "status": "in_progress"}]}}


def _browser_or_skip() -> None:
    missing = ui_screens.available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)


async def test_a_session_followed_and_answered_in_the_browser(
    settings: Settings, script: Script, worker_for: WorkerFor, tmp_path: Path
) -> None:
    _browser_or_skip()
    from playwright.async_api import async_playwright, expect

    settings.model = script(
        [
            {"say": SAID, "word_seconds": 0.1, "tool_calls": [TODO, ASK]},
            {"say": "You chose: {{last_tool}}"},
        ]
    )
    async with worker_for() as client, session_api(settings, client) as http, async_playwright() as pw:
        browser = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium"), executable_path=ui_screens.CHROMIUM, args=ui_screens.CHROMIUM_FLAGS
        )
        try:
            page = await browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            await page.goto(str(http.base_url) + "/", wait_until="load")
            await page.fill("#key", FULL)
            await page.click("#key-form button")
            await expect(page.locator("#main")).to_be_visible()

            # Start it from the page: it opens on its own stream.
            await page.fill("#start-prompt", "Pick for me")
            await page.click("#start-form button")
            pane = page.locator("#session-pane")
            await expect(pane).to_be_visible(timeout=30_000)
            sid = str(await pane.get_attribute("data-session"))
            assert sid.startswith("session-"), sid
            await expect(page.locator(f'#sessions li[data-id="{sid}"]')).to_be_visible(timeout=30_000)

            # Text arrives while the model writes: part of the reply shown, the session still running.
            live = page.locator(".reply.live")
            await expect(live).to_contain_text("word3", timeout=60_000)
            shown = await live.inner_text()
            status = await client.session(sid).status()
            assert status.status == SessionStatus.running, status.status
            assert SAID.startswith(shown) and len(shown) < len(SAID), shown
            assert shown.startswith("<b>not bold</b>")  # the model's markup is text, not markup
            assert await page.locator("#timeline b").count() == 0
            await expect(page.locator("#status")).to_have_text("running")

            # The whole reply, the todo list, then the question: answered in the page.
            await expect(page.locator(".reply").first).to_have_text(SAID, timeout=60_000)
            await expect(page.locator("#todos")).to_contain_text("[~] Pick one", timeout=30_000)
            ask = page.locator("form.ask")
            await expect(ask.locator(".question")).to_have_text("Which one?", timeout=60_000)
            await expect(page.locator("#status")).to_have_text("waiting_for_user", timeout=30_000)
            await ask.get_by_label("Second").check()
            await ask.get_by_role("button", name="Answer").click()

            # The session goes on with the answer and ends; the page says so.
            await expect(page.locator("#stream")).to_have_text("ended", timeout=60_000)
            await expect(page.locator("#status")).to_have_text("completed", timeout=30_000)
            await expect(page.locator("#timeline")).to_contain_text("You chose:", timeout=10_000)
            await expect(page.locator("form.ask")).to_have_count(0)
            result = await client.session(sid).result()
            assert result.status == SessionStatus.completed and "Second" in str(result.final_message)
            assert "Second" in await page.locator("#timeline").inner_text()
            assert not problems, problems
        finally:
            await browser.close()


async def test_an_approval_a_message_and_stop_from_the_page(
    settings: Settings, script: Script, worker_for: WorkerFor, tmp_path: Path
) -> None:
    _browser_or_skip()
    from playwright.async_api import async_playwright, expect

    child = {"name": "subAgent", "arguments": {"title": "Child", "instruction": "say hi", "mode": "sync"}}
    settings.model = script(
        [
            {"match": {"title": "Child"}, "turns": [{"say": "child says hi"}]},
            {
                "turns": [
                    {"say": "listing", "tool_calls": [TODO]},
                    {"say": "listed"},
                    {"say": "heard {{last_user}}", "tool_calls": [child]},
                    {"say": "the child is done"},
                ]
            },
        ]
    )
    async with worker_for() as client, session_api(settings, client) as http, async_playwright() as pw:
        body = {"prompt": "todo", "keep_alive": True, "options": {"approval": {"require": ["todoWrite"]}}}
        started = await http.post("/sessions", json=body, headers=auth(FULL))
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        browser = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium"), executable_path=ui_screens.CHROMIUM, args=ui_screens.CHROMIUM_FLAGS
        )
        try:
            page = await browser.new_page()
            await page.goto(str(http.base_url) + "/", wait_until="load")
            await page.fill("#key", FULL)
            await page.click("#key-form button")
            await expect(page.locator("#main")).to_be_visible()
            await page.goto(f"{http.base_url}/#{sid}", wait_until="load")  # the key kept in the tab, the id in the hash
            approval = page.locator(".approval")
            await expect(approval).to_contain_text("todoWrite waits for approval", timeout=60_000)
            await expect(approval.locator("pre")).to_contain_text("Pick one")
            await approval.get_by_role("button", name="Approve").click()
            await expect(page.locator(".tool.ok")).to_contain_text("todoWrite", timeout=60_000)
            await expect(page.locator("#status")).to_have_text("idle", timeout=60_000)
            await expect(page.locator(".approval")).to_have_count(0)

            await page.fill("#message", "again & <i>again</i>")
            await page.click("#message-form button")
            await expect(page.locator("#timeline")).to_contain_text("heard again & <i>again</i>", timeout=60_000)
            assert await page.locator("#timeline i").count() == 0
            # The sub-agent it started: in the tree with its state, its words under its title.
            await expect(page.locator("#tree")).to_contain_text("Child · completed", timeout=60_000)
            await expect(page.locator("#timeline")).to_contain_text("[Child]child says hi")
            await expect(page.locator("#timeline")).to_contain_text("the child is done", timeout=60_000)
            await page.click("#stop")
            await expect(page.locator("#stream")).to_have_text("ended", timeout=60_000)
            await expect(page.locator("#status")).to_have_text("stopped", timeout=30_000)
        finally:
            await browser.close()
        session = client.session(sid)
        assert (await session.approval_state()).decided[0].decided_by == "tester"  # the key's name
        assert [e.content for e in await session.transcript() if e.role == "user"] == ["todo", "again & <i>again</i>"]


STREAMED = " ".join(f"word{i}" for i in range(60))


def _spawn_worker(env_vars: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(ROOT / "worker.py")], env={**os.environ, **env_vars}, cwd=ROOT)


async def test_the_page_carries_on_after_the_worker_dies_mid_stream_and_its_stream_drops(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script, tmp_path: Path
) -> None:
    """A worker process killed while the text streams and the page's connection dropped at that moment: the
    page reconnects with Last-Event-ID, a second worker retries the step, and the page shows the reply once."""
    _browser_or_skip()
    from playwright.async_api import async_playwright, expect

    settings.model = script([{"say": STREAMED, "word_seconds": 0.1}])
    target = temporal_env.client.service_client.config.target_host
    env_vars = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": target,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_MODEL": settings.model or "",
        "AGENT_TOOLS_AGENTS_FILE": "",
    }
    client = AgentToolsClient(await Client.connect(target, data_converter=pydantic_data_converter), settings)
    workers = [_spawn_worker(env_vars)]
    try:
        async with session_api(settings, client) as http, async_playwright() as pw:
            body = {"prompt": "write", "options": {"heartbeat_timeout_seconds": 2}}
            started = await http.post("/sessions", json=body, headers=auth(FULL))
            assert started.status_code == 201, started.text
            sid = started.json()["session_id"]
            browser = await pw.chromium.launch_persistent_context(
                str(tmp_path / "chromium"), executable_path=ui_screens.CHROMIUM, args=ui_screens.CHROMIUM_FLAGS
            )
            try:
                page = await browser.new_page()
                resumed: list[str] = []
                page.on(
                    "request",
                    lambda r: resumed.append(r.headers["last-event-id"]) if "last-event-id" in r.headers else None,
                )
                await page.goto(str(http.base_url) + "/", wait_until="load")
                await page.fill("#key", FULL)
                await page.click("#key-form button")
                listed = page.locator(f'#sessions li[data-id="{sid}"]')
                for _ in range(60):  # the list is the dev server's visibility store: it may lag the start
                    if await listed.count():
                        break
                    await page.click("#filter-form button")
                    await asyncio.sleep(0.5)
                await listed.click()
                await expect(page.locator(".reply.live")).to_contain_text("word12", timeout=60_000)

                workers[0].send_signal(signal.SIGKILL)  # mid-stream
                await asyncio.to_thread(workers[0].wait, 10)
                await page.evaluate("current.controller.abort()")  # and the browser's connection drops
                workers.append(_spawn_worker(env_vars))

                await expect(page.locator("#stream")).to_have_text("ended", timeout=90_000)
                await expect(page.locator("#status")).to_have_text("completed", timeout=30_000)
                await expect(page.locator(".reply")).to_have_count(1)
                await expect(page.locator(".reply")).to_have_text(STREAMED)  # once: the retry's discard honoured
                assert resumed, "the page never reconnected with Last-Event-ID"
            finally:
                await browser.close()
        result = await client.session(sid).result()
        assert result.status == SessionStatus.completed and result.final_message == STREAMED
        history = await client.session(sid).workflow.fetch_history()
        attempts = {
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        }
        assert 2 in attempts, attempts  # the step was retried: the kill landed mid-stream
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        await client.close()
