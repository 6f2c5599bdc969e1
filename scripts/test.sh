#!/usr/bin/env bash
# The tests in one command: set up a virtualenv with the test extras, lint, type-check, run the suite.
# PostgreSQL store tests skip when 127.0.0.1:5432 is not reachable, unless AGENT_TOOLS_REQUIRE_POSTGRES=1.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest -n "${AGENT_TOOLS_TEST_WORKERS:-2}" --dist loadfile "$@"
