#!/usr/bin/env bash
# The main job in one command: set up a virtualenv, install, and run the demo session on the embedded
# Temporal dev server with SQLite (scripted model unless OPENAI_API_KEY / ANTHROPIC_API_KEY /
# AGENT_TOOLS_MODEL is set). Extra arguments go to `agent-tools demo` (e.g. --ask, --keep-open).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e .
exec .venv/bin/agent-tools demo "$@"
