"""CPU of one model step and one tool call in process, engine against the bare loop, without Temporal.

    python bench/step_cost.py                # 10-turn sessions, 30 of each, alternating
    python bench/step_cost.py --sessions 60 --turns 20 --replays 400

overhead.py measures whole sessions through a Temporal server, and on this shared machine its per-round
ratios swing by a quarter. This bench times only the activity bodies (``time.process_time``, many calls, one
process, engine and bare alternating session by session), and the workflow side by replaying one recorded
session of each many times: both are steady to a few percent, and show what the engine adds per step and
per session apart from the noise of the server and the machine.

Engine: ``llm_step`` (transcript prefix from the worker cache, Memory Context, context building, the
scripted model, the step's transaction on a SQLite file) and the tool runner (validation, the user tool,
the spill check). Bare: the bare loop's activities, which pass the whole message list to the model. Each
input and result also goes through the JSON round trip the data converter gives it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


M = TypeVar("M", bound=BaseModel)


def wire(value: M) -> M:
    """What the pydantic data converter does to an activity's input or result: JSON out and back."""
    return type(value).model_validate_json(value.model_dump_json())


async def measure(sessions: int, turns: int) -> dict[str, list[float]]:
    from agent_tools._activity_io import LlmStepInput, SessionRef, ToolCallInput
    from agent_tools._catalog.registry import ToolCatalog
    from agent_tools._messages import Message, message_fingerprint
    from agent_tools._session import PrepareInput, SessionRequest
    from agent_tools._settings import Settings
    from agent_tools._user_tools import make_user_tool
    from agent_tools.activities._engine import llm_step, prepare_session
    from agent_tools.activities._registry import builtin_context_hooks
    from agent_tools.activities._services import Services
    from agent_tools.activities._tool_runner import _user_impl, run_tool
    from bench.bare_loop import BareLlmInput, BareToolInput, bare_llm, bare_lookup, lookup
    from bench.bare_messages import Message as BareMessage
    from bench.overhead import write_script

    tmp = Path(tempfile.mkdtemp(prefix="step-cost-"))
    script = write_script(tmp / "script.json", turns)
    model = f"scripted:{script}"
    tool = make_user_tool(lookup)
    catalog = ToolCatalog.builtin()
    catalog.register(tool.spec)
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp}/store.sqlite", agents_file=None)
    services = await Services.open(settings, catalog=catalog, context_hooks=builtin_context_hooks())
    impl = _user_impl(tool)
    figures: dict[str, list[float]] = {k: [] for k in ("engine_step", "bare_step", "engine_tool", "bare_tool")}

    async def engine_session(n: int) -> None:
        request = SessionRequest(prompt="research", model=model, tools=["lookup"], max_steps=turns + 1)
        prepared = await prepare_session(services, PrepareInput(session_id=f"s{n}", request=request))
        ref = SessionRef.of(prepared.config, run_id="r")
        position, last = prepared.transcript_len, None
        new = [Message(role="user", content="research")]
        while True:
            inp = LlmStepInput(session=ref, position=position, new_messages=new, tools=["lookup"], model=model,
                               last_answer=last)  # fmt: skip
            t0 = time.process_time()
            out = wire(await llm_step(services, wire(inp)))
            figures["engine_step"].append(time.process_time() - t0)
            position, last = out.position, message_fingerprint(out.message)
            if not out.message.tool_calls:
                return
            new = []
            for call in out.message.tool_calls:
                t0 = time.process_time()
                call_in = ToolCallInput(session=ref, call_id=call.id, name=call.name, arguments=call.arguments)
                res = wire(await run_tool(services, tool.spec, impl, wire(call_in)))
                figures["engine_tool"].append(time.process_time() - t0)
                new.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=res.content))

    async def bare_session() -> None:
        messages = [
            BareMessage(role="system", content="You are a capable assistant."),
            BareMessage(role="user", content="research"),
        ]
        while True:
            t0 = time.process_time()
            reply = wire(await bare_llm(wire(BareLlmInput(script=script, messages=messages))))
            figures["bare_step"].append(time.process_time() - t0)
            messages.append(reply)
            if not reply.tool_calls:
                return
            for call in reply.tool_calls:
                t0 = time.process_time()
                out = await bare_lookup(wire(BareToolInput(topic=str(call.arguments.get("topic", "")))))
                figures["bare_tool"].append(time.process_time() - t0)
                messages.append(BareMessage(role="tool", tool_call_id=call.id, name=call.name, content=out))

    try:
        await engine_session(-1)  # warm up: imports, schema, first connections
        await bare_session()
        for key in figures:
            figures[key].clear()
        for n in range(sessions):
            await engine_session(n)
            await bare_session()
    finally:
        await services.close()
    return figures


async def replay_cost(turns: int, replays: int) -> tuple[float, float]:
    """Median CPU ms of replaying one recorded session, engine and bare, through one Replayer each.

    Replay runs all of a workflow's code (sandbox, activations, payload conversion, commands) and none of
    the server or the activities: it is the workflow side of the cost, steady from run to run.
    """
    from temporalio.client import Client, WorkflowHistory
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer, Worker

    from agent_tools._devserver import start_dev_server
    from agent_tools._session import SessionInput, SessionRequest
    from bench.bare_loop import BareAgentLoop, BareInput
    from bench.overhead import bare_runner, bare_worker, compile_bytecode, engine_plugin, write_script

    compile_bytecode()

    tmp = Path(tempfile.mkdtemp(prefix="replay-cost-"))
    script = write_script(tmp / "script.json", turns)
    env = await start_dev_server(ui=False, log_level="error")
    try:
        address = env.client.service_client.config.target_host
        plugin = engine_plugin(address, "engine", f"sqlite+aiosqlite:///{tmp}/store.sqlite")
        client = await Client.connect(address, plugins=[plugin])
        bare_client = await Client.connect(address, data_converter=pydantic_data_converter)
        async with Worker(client, task_queue="engine"), bare_worker(bare_client, "bare"):
            request = SessionRequest(prompt="research", model=f"scripted:{script}", tools=["lookup"],
                                     max_steps=turns + 1)  # fmt: skip
            await client.execute_workflow("AgentSession", SessionInput(request=request), id="engine",
                                          task_queue="engine")  # fmt: skip
            await bare_client.execute_workflow("BareAgentLoop", BareInput(prompt="research", script=script,
                                               max_steps=turns + 1), id="bare", task_queue="bare")  # fmt: skip
            engine_history = await client.get_workflow_handle("engine").fetch_history()
            bare_history = await bare_client.get_workflow_handle("bare").fetch_history()
    finally:
        await env.shutdown()
    replayers = {
        "engine": (Replayer(workflows=[], plugins=[plugin]), engine_history),
        "bare": (
            Replayer(workflows=[BareAgentLoop], data_converter=pydantic_data_converter, workflow_runner=bare_runner()),
            bare_history,
        ),
    }

    async def copies(history: WorkflowHistory, n: int) -> Any:
        for i in range(n):
            yield WorkflowHistory(workflow_id=f"{history.workflow_id}-{i}", events=history.events)

    times: dict[str, list[float]] = {"engine": [], "bare": []}
    batch = 10
    for _ in range(max(1, replays // batch)):
        for name, (replayer, history) in replayers.items():
            t0 = time.process_time()
            async with replayer.workflow_replay_iterator(copies(history, batch)) as results:
                async for result in results:
                    if result.replay_failure is not None:
                        raise result.replay_failure
            times[name].append((time.process_time() - t0) / batch)
    return statistics.median(times["engine"]) * 1000, statistics.median(times["bare"]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--replays", type=int, default=200, help="replays of each recorded session")
    args = parser.parse_args()
    if args.sessions < 1 or args.turns < 1 or args.replays < 1:
        parser.error("--sessions, --turns and --replays must be at least 1")
    f = asyncio.run(measure(args.sessions, args.turns))
    per_session = {k: 1000 * sum(v) / args.sessions for k, v in f.items()}
    print(f"{args.sessions} sessions of {args.turns} turns; CPU in ms (median per call, mean per session)")
    print(f"  {'':<22}{'engine':>10}{'bare':>10}{'extra':>10}{'ratio':>9}")

    def row(label: str, e: float, b: float) -> None:
        print(f"  {label:<22}{e:>10.3f}{b:>10.3f}{e - b:>10.3f}{e / b if b else float('nan'):>8.2f}x")

    for kind in ("step", "tool"):
        row(f"activity: {kind} (call)", statistics.median(f[f"engine_{kind}"]) * 1000,
            statistics.median(f[f"bare_{kind}"]) * 1000)  # fmt: skip
    activities_e = per_session["engine_step"] + per_session["engine_tool"]
    activities_b = per_session["bare_step"] + per_session["bare_tool"]
    row("activities (session)", activities_e, activities_b)
    workflow_e, workflow_b = asyncio.run(replay_cost(args.turns, args.replays))
    row("workflow (replay)", workflow_e, workflow_b)
    row("both (session)", activities_e + workflow_e, activities_b + workflow_b)


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    run_and_exit(main)
