"""The plugin inside a host app laid out like samples-python, installed from the wheel (not editable).

The app (``tests/fixtures/host_app``) has its own ``workflows.py``, ``activities.py`` and ``worker.py``, an
encryption payload codec and a sandbox with its own restrictions. It adds ``AgentToolsPlugin`` and runs an
agent session (a user tool and a sub-agent) next to its own workflow, each on its own task queue.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._version import package_version
from agent_tools.testing import write_script
from tests.support.wheel import ROOT, build_dists, copy_sources, venv_with

APP = Path(__file__).parent / "fixtures" / "host_app"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The distribution's sdist and wheel, built from this checkout as a release is."""
    source = copy_sources(ROOT, tmp_path_factory.mktemp("source") / "src")
    return build_dists(source, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def wheel(dists: tuple[Path, Path]) -> Path:
    return dists[1]


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed, not editable."""
    return venv_with(wheel, tmp_path_factory.mktemp("venv"))


def test_wheel_installs_one_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
        info = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        declared = zf.read(info).decode().split()
    assert top_level == {"agent_tools"}
    assert declared == ["agent_tools"]
    # The migrations' template ships with the package that runs them.
    assert "agent_tools/_store/migrations/script.py.mako" in names


def test_wheel_metadata_is_complete(dists: tuple[Path, Path]) -> None:
    """What an index shows of the release: version, licence, classifiers, extras, the typed marker; twine
    accepts both distributions."""
    sdist, wheel = dists
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
    headers = [line.split(": ", 1) for line in meta.split("\n\n", 1)[0].splitlines() if ": " in line]
    fields: dict[str, list[str]] = {}
    for key, value in headers:
        fields.setdefault(key, []).append(value)
    assert fields["Version"] == [package_version()]
    assert fields["License-Expression"] == ["MIT"]
    assert fields["License-File"] == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert {"Typing :: Typed", "Development Status :: 5 - Production/Stable"} <= set(fields["Classifier"])
    assert {"postgres", "tracing"} <= set(fields["Provides-Extra"])
    assert fields["Requires-Python"] == [">=3.11"]
    assert "agent_tools/py.typed" in names
    assert meta.split("\n\n", 1)[1].startswith("# "), "the README is the long description"
    with tarfile.open(sdist) as tf:
        members = tf.getnames()
    root = sdist.name.removesuffix(".tar.gz")
    assert {f"{root}/PKG-INFO", f"{root}/pyproject.toml", f"{root}/LICENSE", f"{root}/agent_tools/py.typed"} <= set(
        members
    )
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_installed_package_is_the_wheel(venv: Path, tmp_path: Path) -> None:
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import agent_tools, activities; print(agent_tools.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    # No top-level `activities` came with the wheel, and agent_tools is the installed copy.
    assert "No module named 'activities'" in probe.stderr
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import agent_tools; print(agent_tools.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(venv) in probe.stdout


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    shutil.copytree(APP, app)
    return app


@pytest.fixture
def app_worker(venv: Path, app_dir: Path, temporal_env: WorkflowEnvironment) -> Iterator[dict[str, Any]]:
    model = write_script(
        app_dir / "script.json",
        [  # type: ignore[arg-type]  # write_script's union of two list types defeats inference
            {
                "match": {"prompt_contains": "convert and delegate"},
                "turns": [
                    {
                        "say": "",
                        "tool_calls": [
                            {"name": "exchange_rate", "arguments": {"base": "USD"}},
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Rate note", "instruction": "write a note", "mode": "sync"},
                            },
                        ],
                    },
                    {"say": "Done: {{tool_results:exchange_rate}}"},
                ],
            },
            {"match": {"prompt_contains": "write a note"}, "turns": [{"say": "note written"}]},
        ],
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "OPENAI_", "ANTHROPIC_"))},
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{app_dir}/store.sqlite",
        "AGENT_TOOLS_MODEL": model,
        "AGENT_MODEL": model,
        "REPORT_FILE": str(app_dir / "workers.json"),
        "PYTHONPATH": "",
    }
    python = str(venv / "bin" / "python")
    log = (app_dir / "worker.log").open("w")
    proc = subprocess.Popen([python, "worker.py"], cwd=app_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "workers ready" not in (app_dir / "worker.log").read_text():
            assert proc.poll() is None, (app_dir / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the app's workers did not start"
            time.sleep(0.2)
        yield {"env": env, "python": python, "workers": json.loads((app_dir / "workers.json").read_text())}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_plugin_composes_with_the_host_app(app_worker: dict[str, Any], app_dir: Path) -> None:
    workers = app_worker["workers"]
    # The app's worker on its own queue got none of our workflows or activities.
    assert workers["app"]["workflows"] == ["GreetingWorkflow"]
    assert workers["app"]["activities"] == 1
    # The agent worker got them, and its sandbox kept the app's passthrough module next to ours.
    assert {"AgentSession", "EventRouter", "DeepResearch"} <= set(workers["agent"]["workflows"])
    assert workers["agent"]["activities"] > 20
    assert "codec" in workers["agent"]["passthrough"]
    assert "agent_tools" in workers["agent"]["passthrough"]

    proc = subprocess.run(
        [app_worker["python"], "starter.py"],
        cwd=app_dir,
        env=app_worker["env"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + (app_dir / "worker.log").read_text()[-4000:]
    report = json.loads(proc.stdout)
    assert report["greeting"] == "Hello, secret-name!"
    assert report["session"] == {"status": "completed", "final": "Done: 1 USD = 0.92 EUR"}
    assert len(report["children"]) == 1
    assert {"tool_started", "tool_finished", "subagent_started", "subagent_done"} <= set(report["progress"])
    histories = report["histories"]
    assert set(histories) == {"greeting-1", "agent-session-1", *report["children"]}
    for workflow_id, h in histories.items():
        assert h["plain"] == [], f"{workflow_id}: payloads that did not go through the codec: {h['plain']}"
        assert h["payloads"] > 3, workflow_id
    session = histories["agent-session-1"]["event_kinds"]
    # Progress reached the watching client by query: watching it wrote nothing to the history.
    assert "workflow_execution_update_accepted_event_attributes" not in session
    assert "activity_task_completed_event_attributes" in session
    assert "start_child_workflow_execution_initiated_event_attributes" in session
    # The app's own input went through the codec: the name appears nowhere in the raw history.
    assert histories["greeting-1"]["secret_seen"] is False
