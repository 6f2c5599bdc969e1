"""How much of a watched session's history is the progress stream: the demo session and a 20-step
session, each run by ``agent-tools run --yes`` (which follows the session live), then its history counted.

    python bench/timeline_share.py
    python bench/timeline_share.py --baseline ../old/.venv/bin/agent-tools   # the same, watched by another install

Counted: all history events; the stream's poll updates (accepted and completed events of
``__temporal_workflow_stream_poll``) and its publish signals (the live text the model step sends); and the
Temporal UI timeline's rows (activities, child workflows, timers, updates, signals). The worker is this
install's; ``--baseline`` changes only the watching client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._processes import CLI, dev_server_and_workers, start_worker

WORDS = "Lisbon is best on foot: start early in Alfama, ride tram 28 to Graca and end at a miradouro."


def twenty_steps(path: Path) -> str:
    steps = [
        {
            "say": f"Step {i}: {WORDS}",
            "tool_calls": [
                {"name": "todoWrite", "arguments": {"todos": [{"content": f"s{i}", "status": "completed"}]}}
            ],
        }
        for i in range(19)
    ]
    steps.append({"say": f"Done. {WORDS}"})
    path.write_text(json.dumps({"word_seconds": 0.03, "conversations": [{"turns": steps}]}))
    return f"scripted:{path}"


async def count(address: str, workflow_id: str) -> dict[str, int]:
    client = await Client.connect(address)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    polls = signals = rows = 0
    for e in history.events:
        if e.HasField("workflow_execution_update_accepted_event_attributes"):
            rows += 1
            name = e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            polls += 2 if "stream" in name else 0
        elif e.HasField("workflow_execution_signaled_event_attributes"):
            rows += 1
            signals += "stream" in e.workflow_execution_signaled_event_attributes.signal_name
        elif any(
            e.HasField(f)
            for f in (
                "activity_task_scheduled_event_attributes",
                "start_child_workflow_execution_initiated_event_attributes",
                "timer_started_event_attributes",
            )
        ):
            rows += 1
    return {"events": len(history.events), "poll_events": polls, "publish_signals": signals, "timeline_rows": rows}


def watched_run(cli: str, env: dict[str, str], prompt: str) -> str:
    out = subprocess.run([cli, "run", "--yes", prompt], env=env, capture_output=True, text=True, timeout=300)
    found = re.search(r"session (session-[0-9a-f-]{36})", out.stdout)
    assert found and out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return found.group(1)


def report(label: str, figures: dict[str, int]) -> None:
    stream = figures["poll_events"] + figures["publish_signals"]
    print(
        f"{label:<28} events {figures['events']:>4}   poll-update events {figures['poll_events']:>3}   "
        f"publish signals {figures['publish_signals']:>3}   stream share {stream / figures['events']:.0%}   "
        f"timeline rows {figures['timeline_rows']:>3}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=7499)
    parser.add_argument("--baseline", help="another install's agent-tools, as the watching client")
    args = parser.parse_args()
    address = f"127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "AGENT_TOOLS_TEMPORAL_ADDRESS": address,
            "AGENT_TOOLS_DATABASE_URL": f"sqlite:///{tmp}/s.db",
        }
        for key in ("AGENT_TOOLS_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            env.pop(key, None)
        with dev_server_and_workers(args.port) as workers:
            long_env = {**env, "AGENT_TOOLS_MODEL": twenty_steps(Path(tmp) / "twenty.json")}
            for worker_env in (env, long_env):
                queue = "demo" if worker_env is env else "twenty"
                worker_env["AGENT_TOOLS_TASK_QUEUE"] = queue
                workers.append(start_worker(worker_env))
            time.sleep(5)
            clients = [("this install", CLI)] + ([("baseline", args.baseline)] if args.baseline else [])
            for label, cli in clients:
                demo = watched_run(cli, env, "Plan a three-day trip to Lisbon")
                report(f"demo, watched by {label}", asyncio.run(count(address, demo)))
                long = watched_run(cli, long_env, "Twenty steps")
                report(f"20 steps, watched by {label}", asyncio.run(count(address, long)))


if __name__ == "__main__":
    main()
