"""The benches' bare reference imports nothing of ours (else it would carry part of our import and memory
cost, hiding it from the ratios), and its scripted model plays a script as the engine's does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import asyncio, json, sys, tempfile
from pathlib import Path
import bench.bare_loop, bench.bare_messages, bench.bare_waiter, bench.overhead
from bench.bare_loop import BareLlmInput, bare_llm
from bench.bare_messages import Message
with tempfile.TemporaryDirectory() as tmp:
    script = Path(tmp) / "s.json"
    script.write_text(json.dumps({"conversations": [{"turns": [{"say": "x", "tool_calls": [{"name": "lookup"}]}]}]}))
    asyncio.run(bare_llm(BareLlmInput(script=str(script), messages=[Message(role="user", content="hi")])))
bench.overhead.bare_runner()
print(json.dumps(sorted(m for m in sys.modules if m == "agent_tools" or m.startswith("agent_tools."))))
"""


def ours_loaded(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_the_bare_reference_imports_nothing_of_ours() -> None:
    assert ours_loaded(PROBE) == []


def test_the_probe_sees_an_import_of_ours() -> None:
    assert "agent_tools._messages" in ours_loaded("import agent_tools._messages\n" + PROBE)


def shape(m: Any) -> tuple[Any, ...]:
    return m.role, m.content, [(c.id, c.name, c.arguments) for c in m.tool_calls]


def test_the_bare_model_plays_a_script_as_the_engine_does(tmp_path: Path) -> None:
    from agent_tools._messages import Message
    from agent_tools._script import Script
    from bench.bare_messages import Message as BareMessage
    from bench.bare_messages import scripted_reply
    from bench.overhead import write_script

    path = write_script(tmp_path / "s.json", 3)
    script = Script.load(path)
    engine: list[Message] = [Message(role="user", content="research")]
    bare: list[BareMessage] = [BareMessage(role="user", content="research")]
    for _ in range(5):  # three tool steps, the answer, then past the script's end
        _, ours = script.next_turn(engine, {})
        theirs = scripted_reply(path, bare)
        assert shape(theirs) == shape(ours)
        engine += [ours, Message(role="tool", content="r")]
        bare += [theirs, BareMessage(role="tool", content="r")]
    assert theirs.content == "(script finished)"
