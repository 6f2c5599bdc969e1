"""The API reference builds from the docstrings (tests/test_public_api.py checks the names it documents)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_builds_strictly(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("AgentToolsPlugin", "ToolContext", "SessionOptions", "AgentDefinition", "ExecutionPolicy"):
        assert name in page, name
    # The extension points' fields are documented, not just named.
    assert "what sessions and delegation tools name" in page
    assert "stable across retries" in page
