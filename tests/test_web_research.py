"""deep_research end to end on the real Temporal dev server: scripted planner and writer, SearXNG and
pages served on 127.0.0.1, started and polled through the client API."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agent_tools._settings import Settings
from agent_tools.contracts._web.config import WebConfig
from agent_tools.contracts._web.models import ResearchCandidate, ResearchSearchOutput
from agent_tools.workflows._registry import all_workflows
from agent_tools.workflows._research import pick_sources
from tests.support.fixture_types import Script, WorkerFor
from tests.support.web import WebServer, research_script, serve_research


@pytest.fixture
def web_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[WebServer]:
    with WebServer() as srv:
        serve_research(srv)
        settings.web = WebConfig(search_engines=["searxng"], searxng_url=srv.url("/searx"), allow_loopback=True)
        yield srv


async def test_report_cites_sources(
    settings: Settings, script: Script, worker_for: WorkerFor, web_env: WebServer
) -> None:
    settings.model = research_script(script, "The council approved a 14-kilometre line with 19 stops [S1].")
    async with worker_for() as client:
        job = await client.research.create(
            {"question": "What did the council decide about the tram?", "max_sources": 3, "time_budget_s": 60}
        )
        assert job.status == "running" and job.id.startswith("research-")
        done = await client.research.wait(job.id, timeout_s=30)
        again = await client.research.retrieve(job.id)
        history = await client.temporal.get_workflow_handle(job.id).fetch_history()
        store = await client.transcripts()
    assert done.status == "completed", done.error
    assert done.searches == ["tram line cost", "tram line stops"]  # planner duplicates dropped
    # round-robin by rank, de-duplicated, capped at max_sources; /gone (404) is dropped at reading
    assert [s.url for s in done.sources] == [
        web_env.url("/news"),
        web_env.url("/blog"),
        web_env.url("/table"),
    ]
    assert [s.n for s in done.sources] == [1, 2, 3]
    assert done.sources[0].title.startswith("City council approves") and done.sources[0].published_at
    assert done.report is not None and done.report.startswith("The council approved a 14-kilometre line")
    assert f"Sources:\n[S1] {done.sources[0].title} — {web_env.url('/news')}" in done.report
    assert again.report == done.report
    # The job's own model calls (planner, writer) are on the job and in the store's usage rows under its id.
    assert done.usage.calls == 2 and done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    assert await store.usage_total(session_id=job.id) == done.usage
    assert web_env.hits("/news") == 1  # the writer read the page from the cache
    # the recorded history replays on the current workflow code (determinism)
    replayer = Replayer(workflows=all_workflows(), data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)


async def test_output_schema_answer_is_validated(
    settings: Settings, script: Script, worker_for: WorkerFor, web_env: WebServer
) -> None:
    schema = {
        "type": "object",
        "required": ["stops", "cost_meur"],
        "properties": {"stops": {"type": "integer"}, "cost_meur": {"type": "number"}},
    }
    settings.model = research_script(script, ['{"stops": "nineteen"}', '```json\n{"stops": 19, "cost_meur": 610}\n```'])
    async with worker_for() as client:
        job = await client.research.run({"question": "tram facts", "max_sources": 3, "output_schema": schema})
    assert job.status == "completed", job.error
    assert job.answer == {"stops": 19, "cost_meur": 610} and job.report is None
    import jsonschema  # type: ignore[import-untyped]

    jsonschema.validate(job.answer, schema)
    assert job.usage.calls == 3  # planner, the writer's rejected answer, its corrected one


async def test_schema_mismatch_fails_the_job_and_bad_schema_is_refused(
    settings: Settings, script: Script, worker_for: WorkerFor, web_env: WebServer
) -> None:
    schema = {"type": "object", "required": ["stops"]}
    settings.model = research_script(script, ["not json", '{"other": 1}'])
    async with worker_for() as client:
        job = await client.research.run({"question": "tram facts", "max_sources": 3, "output_schema": schema})
        with pytest.raises(ValueError, match="not a valid JSON Schema"):
            await client.research.create({"question": "x", "output_schema": {"type": "no-such-type"}})
    assert job.status == "failed" and job.error and "output_schema" in job.error
    assert job.usage.calls == 3  # the planner and both failed writer attempts still count


async def test_no_sources_fails_cleanly(
    settings: Settings, script: Script, worker_for: WorkerFor, web_env: WebServer
) -> None:
    settings.model = str(
        script(
            [
                {"match": {"role": "research_planner"}, "turns": [{"say": "nothing useful here"}]},
            ]
        )
    )
    async with worker_for() as client:
        job = await client.research.run({"question": "unfindable topic", "max_sources": 3})
    assert job.status == "failed" and job.error and "no sources" in job.error


def test_request_limits() -> None:
    from pydantic import ValidationError

    from agent_tools.contracts._web.models import ResearchRequest

    for bad in (
        {"question": "x" * 2001},
        {"question": "q", "time_budget_s": 19},
        {"question": "q", "max_sources": 31},
        {"question": "q", "time_budget_s": 301},
        {"question": "q", "max_sources": 2},
        {"question": "q", "published_after": "2026-1-1"},
    ):
        with pytest.raises(ValidationError):
            ResearchRequest.model_validate(bad)
    ok = ResearchRequest(question="q")
    assert (ok.time_budget_s, ok.max_sources) == (90, 12)


def test_pick_sources_round_robin() -> None:
    def out(q: str, urls: list[str]) -> ResearchSearchOutput:
        return ResearchSearchOutput(query=q, candidates=[ResearchCandidate(url=u, title=u) for u in urls])

    picked = pick_sources([out("a", ["https://x/1", "https://x/2"]), out("b", ["https://x/1/", "https://y/3"])], 3)
    assert [c.url for c in picked] == ["https://x/1", "https://x/2", "https://y/3"]
    assert json.dumps([c.url for c in pick_sources([], 3)]) == "[]"


async def test_client_tools_search_and_fetch(settings: Settings, worker_for: WorkerFor, web_env: WebServer) -> None:
    from agent_tools._web_client import WebToolError

    async with worker_for() as client:
        res = await client.tools.search({"query": "tram line stops", "max_results": 2})
        page = await client.tools.fetch({"url": web_env.url("/news"), "focus": "passengers a day", "max_chars": 600})
        with pytest.raises(WebToolError) as refused:
            await client.tools.fetch({"url": "http://169.254.169.254/latest/meta-data/"})
    assert [r.url for r in res.results] == [web_env.url("/news"), web_env.url("/table")]
    assert res.sources_tried == ["searxng"] and res.coverage == 1
    assert "42,000 passengers a day" in page.content and page.chars <= 600
    assert refused.value.code == "bad_request" and refused.value.status == 400


def _cited_report(report: str) -> str:
    body, sep, _ = report.rpartition("\n\nSources:\n")
    assert sep, report
    return body


async def test_every_claim_cites_a_source_that_exists(
    settings: Settings, script: Script, worker_for: WorkerFor, web_env: WebServer
) -> None:
    """The writer's first report cites a source that was never read and leaves a paragraph uncited; the
    job sends it back once, and the report it returns cites only [S1]..[Sn] of its own sources."""
    import re

    from agent_tools.activities._research import citation_problems

    bad = (
        "The council approved a 14-kilometre tram line with 19 stops [S1].\n\n"
        "Construction will cost 610 million euros, most of it from a state loan [S7].\n\n"
        "Three bus routes will be shortened or merged once the trams are running."
    )
    good = (
        "The council approved a 14-kilometre tram line with 19 stops [S1].\n\n"
        "Construction will cost 610 million euros, most of it from a state loan [S1].\n\n"
        "What else the sources say:\n\n"
        "- Three bus routes will be shortened or merged once the trams run [S1].\n"
        "- The writer of the second source runs SQLite in production, unrelated to trams [S2]."
    )
    settings.model = research_script(script, [bad, good])
    async with worker_for() as client:
        job = await client.research.run({"question": "What did the council decide about the tram?", "max_sources": 3})
    assert job.status == "completed", job.error
    assert job.report is not None
    body = _cited_report(job.report)
    assert body == good and job.usage.calls == 3  # planner, the rejected report, the corrected one
    numbers = {s.n for s in job.sources}
    cited = {int(n) for n in re.findall(r"\[S(\d+)\]", body)}
    assert cited and cited <= numbers
    for block in body.split("\n\n"):
        for line in block.split("\n"):
            if len(line.split()) >= 6 and not line.endswith(":"):
                assert re.search(r"\[S\d+\]", line), line
    assert citation_problems(body, len(job.sources)) == []
    assert citation_problems(bad, len(job.sources)) == [
        "it cites [S7], but the sources are [S1]..[S3]",
        "1 paragraph(s) or list item(s) cite no source (first: 'Three bus routes will be shortened or merged "
        "once the trams are running.')",
    ]


async def test_a_report_that_never_cites_fails_the_job(
    settings: Settings, script: Script, worker_for: WorkerFor, web_env: WebServer
) -> None:
    uncited = "The council approved a tram line with many stops and a big budget."
    settings.model = research_script(script, [uncited, uncited])
    async with worker_for() as client:
        job = await client.research.run({"question": "tram?", "max_sources": 3})
    assert job.status == "failed" and job.error and "did not cite its sources" in job.error
    assert job.report is None and job.usage.calls == 3


@pytest.mark.parametrize(
    ("report", "problems"),
    [
        ("Claim one is stated here with a source [S1].", []),
        ("Two sources back this claim up nicely here [S1, S2].", []),
        ("## Summary\n\nShort line.\n\nIntro to the list follows here:\n\n- a claim with six words cited [S2]", []),
        ("A claim citing source zero, which cannot exist [S0].", ["it cites [S0], but the sources are [S1]..[S2]"]),
        (
            "A claim citing a huge source number here [S99999999999999999999].",
            ["it cites [S99999999999999999999], but the sources are [S1]..[S2]"],
        ),
        ("", []),
        ("\x00 \ud800 " * 5000, []),
    ],
)
def test_citation_problems(report: str, problems: list[str]) -> None:
    from agent_tools.activities._research import citation_problems

    assert citation_problems(report, 2) == problems
