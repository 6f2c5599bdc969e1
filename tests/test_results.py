"""Saved-result readers on large text and JSON, on SQLite and PostgreSQL (store_url), without Temporal."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel

from agent_tools._activity_io import SessionRef, ToolCallInput
from agent_tools._catalog.spec import ToolSpec
from agent_tools.activities._context import BuiltinContext
from agent_tools.activities._services import Services
from agent_tools.activities._tool_runner import run_tool
from agent_tools.contracts._results import readers
from tests.support.memory import call, open_services, ref

TEXT = "\n".join(f"row {i}: " + ("lorem ipsum " * 8) + f"value={i * 7}" for i in range(5000))
DOC = {"total": 3000, "results": [{"name": f"item{i}", "n": i, "tags": ["a", "b"]} for i in range(3000)]}


@pytest_asyncio.fixture
async def services(store_url: str) -> AsyncIterator[Services]:
    async with open_services(store_url) as s:
        yield s


async def _save(services: Services, r: SessionRef, content: str, *, ref_id: str, run_id: str | None = None) -> str:
    is_json = True
    try:
        json.loads(content)
    except ValueError:
        is_json = False
    await services.transcripts.save_artifact(
        ref=ref_id,
        session_id=r.session_id,
        run_id=run_id or r.run_id,
        tool="big_tool",
        content=content,
        is_json=is_json,
    )
    return ref_id


class NoArgs(BaseModel):
    pass


def _uid(r: SessionRef, name: str) -> str:
    return f"res_{name}_{r.session_id[-8:]}"


async def test_read_pages_by_line(services: Services) -> None:
    r = ref()
    rid = await _save(services, r, TEXT, ref_id=_uid(r, "t"))
    first = await call(services, r, "read_tool_result", {"ref": rid})
    lines = first.content.splitlines()
    assert lines[0] == f"[ref={rid}: lines 0-199 of 5,000; next offset=200]"
    assert lines[1].startswith("row 0: ") and lines[-1].startswith("row 199: ") and len(lines) == 201
    tail = await call(services, r, "read_tool_result", {"ref": rid, "offset": 4990, "limit": 2000})
    assert tail.content.splitlines()[0] == f"[ref={rid}: lines 4990-4999 of 5,000; end of result]"
    past = await call(services, r, "read_tool_result", {"ref": rid, "offset": 9000})
    assert "past the end" in past.content
    too_many = await call(services, r, "read_tool_result", {"ref": rid, "limit": 2001})
    assert too_many.is_error and "limit" in too_many.content
    big = await call(services, r, "read_tool_result", {"ref": rid, "limit": 2000})
    # 2,000 lines of ~110 characters exceed the per-call budget: the page stops early and says where to go on.
    head = big.content.splitlines()[0]
    assert "next offset=" in head and len(big.content) <= readers.PAGE_CHAR_BUDGET + 200


async def test_one_huge_line_is_wrapped_so_every_part_is_reachable(services: Services) -> None:
    r = ref()
    blob = "".join(chr(97 + (i // readers.WRAP_CHARS) % 26) * 1 for i in range(100_000))
    rid = await _save(services, r, blob, ref_id=_uid(r, "w"))
    out = (await call(services, r, "read_tool_result", {"ref": rid, "offset": 49, "limit": 1})).content
    assert out.splitlines()[0] == f"[ref={rid}: lines 49-49 of 50; end of result]"
    assert out.splitlines()[1] == chr(97 + 49 % 26) * readers.WRAP_CHARS


async def test_search_offsets_point_into_read(services: Services) -> None:
    r = ref()
    rid = await _save(services, r, TEXT, ref_id=_uid(r, "s"))
    out = await call(services, r, "search_tool_result", {"ref": rid, "pattern": r"value=4319\b"})
    data = json.loads(out.content)
    assert data["total_matches"] == 1 and data["matches"][0]["offset"] == 617
    m = data["matches"][0]
    assert len(m["before"]) == 120 and m["match"] == "value=4319" and m["after"].startswith("\nrow 618")
    line = (await call(services, r, "read_tool_result", {"ref": rid, "offset": m["offset"], "limit": 1})).content
    assert line.splitlines()[1].endswith("value=4319")

    many = json.loads((await call(services, r, "search_tool_result", {"ref": rid, "pattern": "(?i)ROW \\d+:"})).content)
    assert len(many["matches"]) == 50 and many["total_matches"] == 5000 and not many["total_is_lower_bound"]
    capped = json.loads(
        (await call(services, r, "search_tool_result", {"ref": rid, "pattern": "^row", "max_matches": 500})).content
    )
    assert len(capped["matches"]) == 500 and capped["matches"][499]["offset"] == 499  # ^ anchors per line
    over = await call(services, r, "search_tool_result", {"ref": rid, "pattern": "row", "max_matches": 501})
    assert over.is_error


async def test_bad_and_runaway_patterns(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    r = ref()
    rid = await _save(services, r, TEXT, ref_id=_uid(r, "b"))
    bad = await call(services, r, "search_tool_result", {"ref": rid, "pattern": "value=(\\d+"})
    assert bad.is_error and "invalid regular expression" in bad.content and "missing )" in bad.content
    bomb_id = await _save(services, r, "x" * 40 + "\n" + "y" * 5000, ref_id=_uid(r, "bomb"))
    monkeypatch.setattr(readers, "REGEX_TIMEOUT_SECONDS", 0.3)
    slow = await call(services, r, "search_tool_result", {"ref": bomb_id, "pattern": r"^(([a-z])+.)+[A-Z]([a-z])+$"})
    assert slow.is_error and "was stopped" in slow.content


async def test_query_json_paths(services: Services) -> None:
    r = ref()
    rid = await _save(services, r, json.dumps(DOC, separators=(",", ":")), ref_id=_uid(r, "j"))

    async def q(path: str, **kw: Any) -> Any:
        return await call(services, r, "query_tool_result", {"ref": rid, "path": path, **kw})

    root = (await q(".")).content
    assert root.startswith(f"[ref={rid} path=.: object with keys: total, results,")
    assert "cut at 4,000" in root and ".results" in root.splitlines()[-1]
    assert len(root) < 4000 + 400
    assert (await q(".results[0].name")).content.splitlines()[1] == '"item0"'
    assert json.loads((await q(".results[-1]")).content.split("\n", 1)[1])["n"] == 2999
    sliced = json.loads((await q(".results[0:20]", max_chars=20000)).content.split("\n", 1)[1])
    assert [x["n"] for x in sliced] == list(range(20))
    names = json.loads((await q(".results[0:3][].name")).content.split("\n", 1)[1])
    assert names == ["item0", "item1", "item2"]
    assert (await q(".total")).content.endswith("\n3000")
    for path, message in [
        ("[0:20]", "selects nothing"),  # the document is an object: a slice finds nothing
        (".results[abc]", "cannot read the query"),
        (".missing", "selects nothing"),
        (".results[5000]", "selects nothing"),
        (".results[?n =~ 'x']", "cannot read the query"),
    ]:
        out = await q(path)
        assert out.is_error and message in out.content, (path, out.content)
    assert "object with keys: total, results" in (await q(".missing")).content
    assert (await q(".", max_chars=100)).is_error  # below the 200 minimum
    text_id = await _save(services, r, TEXT, ref_id=_uid(r, "nj"))
    not_json = await call(services, r, "query_tool_result", {"ref": text_id, "path": "."})
    assert not_json.is_error and "not JSON" in not_json.content


async def test_json_is_read_and_searched_pretty_printed(services: Services) -> None:
    r = ref()
    rid = await _save(services, r, json.dumps(DOC, separators=(",", ":")), ref_id=_uid(r, "jp"))
    hit = json.loads((await call(services, r, "search_tool_result", {"ref": rid, "pattern": '"item2999"'})).content)
    offset = hit["matches"][0]["offset"]
    line = (await call(services, r, "read_tool_result", {"ref": rid, "offset": offset, "limit": 1})).content
    assert line.splitlines()[1].strip() == '"name": "item2999",'


async def test_read_artifact_windows(services: Services) -> None:
    r = ref()
    rid = await _save(services, r, TEXT, ref_id=_uid(r, "a"))
    first = json.loads((await call(services, r, "read_artifact", {"ref": rid})).content)
    assert first["content"] == TEXT[:8000] and first["next_offset"] == 8000 and first["total_chars"] == len(TEXT)
    assert first["tool"] == "big_tool" and first["is_json"] is False
    last = json.loads((await call(services, r, "read_artifact", {"ref": rid, "offset": len(TEXT) - 10})).content)
    assert last["content"] == TEXT[-10:] and "next_offset" not in last  # null dropped (exclude_none)
    past = await call(services, r, "read_artifact", {"ref": rid, "offset": len(TEXT) + 1})
    assert past.is_error and "past the end" in past.content


async def test_refs_live_for_the_current_run_and_session_only(services: Services) -> None:
    r = ref(run_id="run-2")
    old = await _save(services, r, TEXT, ref_id=_uid(r, "old"), run_id="run-1")
    for tool, args in [
        ("read_tool_result", {}),
        ("search_tool_result", {"pattern": "x"}),
        ("query_tool_result", {}),
        ("read_artifact", {}),
    ]:
        out = await call(services, r, tool, {"ref": old, **args})
        assert out.is_error and "earlier run" in out.content and "big_tool" in out.content and "again" in out.content
    other_session = ref()
    mine = await _save(services, r, TEXT, ref_id=_uid(r, "mine"))
    out = await call(services, other_session.model_copy(update={"run_id": "run-2"}), "read_tool_result", {"ref": mine})
    assert out.is_error and "No saved tool result" in out.content
    unknown = await call(services, r, "read_tool_result", {"ref": "res_doesnotexist"})
    assert unknown.is_error and "No saved tool result" in unknown.content


async def test_spilled_result_round_trip_and_readers_never_spill(services: Services) -> None:
    r = ref(spill_threshold=500)

    async def big(args: Any, ctx: BuiltinContext) -> str:
        return TEXT

    spec = ToolSpec(name="big_tool", description="big", args_model=NoArgs, capability="user")
    out = await run_tool(services, spec, big, ToolCallInput(session=r, call_id="c1", name="big_tool"))
    assert out.artifact_ref is not None and out.content.startswith("[Tool result saved: ")
    # The model may paste the whole pointer as the ref: the reader takes the ref out of it.
    page = await call(services, r, "read_tool_result", {"ref": out.content, "limit": 50})
    assert not page.is_error and page.artifact_ref is None and len(page.content) > 500
    assert page.content.splitlines()[1] == TEXT.splitlines()[0]
    # A retried tool activity writes the same artifact (deterministic ref).
    again = await run_tool(services, spec, big, ToolCallInput(session=r, call_id="c1", name="big_tool"))
    assert again.artifact_ref == out.artifact_ref


async def test_ten_megabyte_json_reads_searches_and_queries(services: Services) -> None:
    r = ref()
    doc = {"items": [{"id": i, "name": f"name-{i}", "body": "q" * 110} for i in range(70_000)]}
    content = json.dumps(doc, separators=(",", ":"))
    assert len(content) > 10_000_000
    rid = await _save(services, r, content, ref_id=_uid(r, "ten"))
    page = (await call(services, r, "read_tool_result", {"ref": rid, "offset": 0, "limit": 5})).content
    assert page.splitlines()[0].startswith(f"[ref={rid}: lines 0-4 of 350,004;")
    hit = json.loads((await call(services, r, "search_tool_result", {"ref": rid, "pattern": r'"name-69999"'})).content)
    assert hit["total_matches"] == 1
    line = await call(services, r, "read_tool_result", {"ref": rid, "offset": hit["matches"][0]["offset"], "limit": 1})
    assert '"name": "name-69999"' in line.content
    # A pattern matching everywhere stops counting at the cap instead of scanning 10 MB of matches.
    every = json.loads(
        (await call(services, r, "search_tool_result", {"ref": rid, "pattern": "q", "max_matches": 500})).content
    )
    assert (
        len(every["matches"]) == 500 and every["total_is_lower_bound"] and every["total_matches"] == readers.COUNT_CAP
    )
    assert (await call(services, r, "query_tool_result", {"ref": rid, "path": ".items[69999].id"})).content.endswith(
        "\n69999"
    )
