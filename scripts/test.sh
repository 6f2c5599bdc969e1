#!/usr/bin/env bash
# The tests in one command: set up a virtualenv with the test extras, lint, type-check, run the suite.
#   scripts/test.sh              everything (what .ci/run calls)
#   scripts/test.sh --fast       the fast lane, for every edit: the tests not marked slow (tests/conftest.py),
#                                store tests on SQLite only
# Other arguments go to pytest. PostgreSQL store tests skip when 127.0.0.1:5432 is not reachable, unless
# AGENT_TOOLS_REQUIRE_POSTGRES=1.
set -euo pipefail
cd "$(dirname "$0")/.."
lane=()
if [ "${1:-}" = "--fast" ]; then
  shift
  lane=(-m "not slow and not postgres")
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The fast lane skips the install while pyproject.toml is older than the last one.
if [ ${#lane[@]} -eq 0 ] || [ ! -e .venv/.installed ] || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[test]"
  touch .venv/.installed
fi
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest -n "${AGENT_TOOLS_TEST_WORKERS:-2}" --dist loadfile ${lane[@]+"${lane[@]}"} "$@"
