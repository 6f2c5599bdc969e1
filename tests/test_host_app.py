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
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools.testing import write_script

ROOT = Path(__file__).resolve().parents[1]
APP = Path(__file__).parent / "fixtures" / "host_app"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution's wheel, built from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    # From a copy of the sources: setuptools keeps a build/ folder in the tree it builds, and files it
    # left there by an earlier build (of an older layout) would end up in the wheel.
    source = tmp_path_factory.mktemp("source") / "src"
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", "tests")
    )
    # No build isolation: setuptools is in the test environment, and nothing may download here.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("durable_agent_tools-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed, not editable.

    Its dependencies come from the test environment's site-packages through a ``.pth`` path line (pip would
    otherwise download them all again); a path line does not run that directory's own ``.pth`` files, so
    the test environment's editable install of this checkout stays invisible.
    """
    home = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return home


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


def test_wheel_metadata_is_complete(wheel: Path) -> None:
    """What an index shows of the release: licence, classifiers, extras, the typed marker; twine accepts it."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
    headers = [line.split(": ", 1) for line in meta.split("\n\n", 1)[0].splitlines() if ": " in line]
    fields: dict[str, list[str]] = {}
    for key, value in headers:
        fields.setdefault(key, []).append(value)
    assert fields["License-Expression"] == ["MIT"]
    assert fields["License-File"] == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Typing :: Typed" in fields["Classifier"]
    assert {"postgres", "tracing"} <= set(fields["Provides-Extra"])
    assert fields["Requires-Python"] == [">=3.11"]
    assert "agent_tools/py.typed" in names
    assert meta.split("\n\n", 1)[1].startswith("# "), "the README is the long description"
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel)], capture_output=True, text=True
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
