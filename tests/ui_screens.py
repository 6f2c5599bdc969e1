"""Screenshots of the Temporal UI showing a session: the workflow list, the session's page and its
timeline, taken by headless Chromium (Debian's, driven by Playwright's Python package; no browser is
downloaded).

    python -m tests.ui_screens docs/screenshots      # writes list.png, session.png, timeline.png

tests/test_ui_screenshots.py runs the same and checks the names in the pages' text.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from agent_tools._devserver import start_dev_server
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from agent_tools._worker import build_worker
from agent_tools.testing import write_script

CHROMIUM = "/usr/bin/chromium"
# Without these the closed network here refuses many of Chromium's own connections, and a shared profile
# would leak state between runs.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

PROMPT = "Plan a three-day trip to Lisbon and watch the ticket prices"
SCRIPT: list[dict[str, Any]] = [
    {"match": {"title": "Food research"}, "turns": [{"say": "Pasteis de nata at Manteigaria; sardines in Alfama."}]},
    {
        "turns": [
            {
                "say": "Planning the trip.",
                "tool_calls": [
                    {"name": "todoWrite", "arguments": {"todos": [
                        {"content": "Research food", "status": "in_progress"},
                        {"content": "Watch ticket prices", "status": "pending"}]}},
                    {"name": "createLoop", "arguments": {"prompt": "Check the ticket prices", "interval_seconds": 3600}},
                    # 5 s, not 1: the wait's timer starts after its subscribe activity, and on a loaded machine
                    # that took over a second, so the deadline had passed and no timer showed in the timeline.
                    {"name": "wait_for_event", "arguments": {"kind": "github.check_suite", "timeout_seconds": 5}},
                    {"name": "subAgent", "arguments": {"title": "Food research", "instruction": "Best food in Lisbon.", "mode": "sync"}},
                ],
            },
            {
                "say": "One question first.",
                "tool_calls": [{"name": "askUser", "arguments": {"questions": [{
                    "question": "Which month?", "header": "Month",
                    "options": [{"label": "May", "description": "Mild"}, {"label": "July", "description": "Hot"}]}]}}],
            },
            {"say": "Here is the plan: Alfama on day 1, Belem on day 2, Sintra on day 3. I will watch the prices."},
        ]
    },
]  # fmt: skip


COLUMNS = json.dumps(
    {
        "default": [
            {"label": label}
            for label in ("Status", "SessionTitle", "AgentName", "SessionState", "Depth", "Workflow ID", "Start")
        ]
    }
)


@dataclass
class Shots:
    """Where each screenshot is, and the text of the page it shows."""

    files: dict[str, Path]
    texts: dict[str, str]
    session_id: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _session(work: Path, port: int, ui_port: int) -> tuple[Any, str, Any]:
    """A dev server with its UI and a session that has streamed, called tools, waited on timers and is now
    idle with an active loop; returns the environment, the session id and a stopper."""
    env = await start_dev_server(ui=True, port=port, ui_port=ui_port)
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{work}/store.sqlite",
        task_queue=f"ui-{uuid.uuid4().hex[:8]}",
        agents_file=None,
        model=write_script(work / "script.json", SCRIPT),
        temporal_ui_url=f"http://127.0.0.1:{ui_port}",
    )
    plugin = AgentToolsPlugin(settings)
    client = await Client.connect(env.client.service_client.config.target_host, plugins=[plugin])
    worker = build_worker(client, plugin)
    await worker.__aenter__()
    from agent_tools._client import AgentToolsClient

    agents = AgentToolsClient(client, settings)
    handle = await agents.start_session(
        PROMPT, options={"ask_user_timeout_seconds": 1, "ask_user_default": "first"}, title="Lisbon trip"
    )
    for _ in range(300):
        status = await handle.status()
        if status.turns >= 1 and status.status.value == "idle":
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the session never went idle: {status}")

    async def stop() -> None:
        await handle.stop()
        await handle.result()
        await worker.__aexit__(None, None, None)
        await agents.close()
        await env.shutdown()

    return env, handle.id, stop


async def capture(out_dir: Path) -> Shots:
    from playwright.async_api import async_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    ui_port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _env, session_id, stop = await _session(work, _free_port(), ui_port)
        base = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows"
        files: dict[str, Path] = {}
        texts: dict[str, str] = {}
        try:
            async with async_playwright() as pw:
                # A fresh profile per run (Playwright's persistent context owns --user-data-dir).
                browser = await pw.chromium.launch_persistent_context(
                    str(work / "chromium"),
                    executable_path=CHROMIUM,
                    args=CHROMIUM_FLAGS,
                    headless=True,
                    viewport={"width": 1600, "height": 1000},
                )
                # The list's columns, as an operator sets them once with "Configure Columns" (the UI keeps them
                # in local storage): this UI version has no column for the static summary, so the list names
                # sessions by their search attributes.
                await browser.add_init_script(f"localStorage.setItem('namespace-workflow-table-columns', {COLUMNS!r})")
                page = await browser.new_page()

                await page.goto(f"{base}?query=WorkflowType%3D%22AgentSession%22", wait_until="load")
                await page.get_by_text("Lisbon trip").first.wait_for(timeout=30_000)
                files["list"] = out_dir / "list.png"
                await page.screenshot(path=str(files["list"]))
                texts["list"] = await _all_text(page)

                # The session's page opens on its timeline: model steps, tool calls, sub-agents and timers,
                # each under its summary.
                await page.goto(f"{base}/{session_id}", wait_until="load")
                await page.get_by_text("model step 1").first.wait_for(timeout=30_000)
                await page.get_by_text("askUser timeout").first.wait_for(timeout=30_000)
                await page.get_by_text("Hide idle time").first.evaluate("e => e.scrollIntoView({block: 'start'})")
                await page.mouse.wheel(0, -60)
                files["timeline"] = out_dir / "timeline.png"
                await page.screenshot(path=str(files["timeline"]))
                texts["timeline"] = await _all_text(page)

                # Its User Metadata tab: the static summary and details, and the current details.
                await (
                    page.get_by_role("link", name="User Metadata").or_(page.get_by_text("User Metadata")).first.click()
                )
                for _ in range(100):  # the details are markdown rendered in frames of their own
                    texts["session"] = await _all_text(page)
                    if "Workflow tools (latest)" in texts["session"]:
                        break
                    await page.wait_for_timeout(300)
                files["session"] = out_dir / "session.png"
                await page.screenshot(path=str(files["session"]), full_page=True)
                await browser.close()
        finally:
            await stop()
    return Shots(files=files, texts=texts, session_id=session_id)


async def _all_text(page: Any) -> str:
    parts = []
    for frame in page.frames:
        try:
            parts.append(await frame.inner_text("body"))
        except Exception:  # a frame that went away meanwhile
            continue
    return "\n".join(parts)


def available() -> str | None:
    """Why screenshots cannot be taken here, or None."""
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (Debian's chromium package; .ci/run installs it)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (the test extras install it)"
    return None


if __name__ == "__main__":  # pragma: no cover
    shots = asyncio.run(capture(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
    for name, path in shots.files.items():
        print(name, path)
