"""Pure memory helpers: normalisation, ages, query building, fusion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_tools.contracts._memory import scoring
from agent_tools.contracts._memory.format import MemoryLine, human_age, render_context_block, render_recall

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_normalise_makes_one_fact_one_hash() -> None:
    assert scoring.content_hash("User likes  TEA.") == scoring.content_hash("user likes tea")
    assert scoring.content_hash("user likes tea") != scoring.content_hash("user likes coffee")


def test_human_age() -> None:
    cases = {
        timedelta(seconds=5): "just now",
        timedelta(minutes=1): "1 minute ago",
        timedelta(minutes=59): "59 minutes ago",
        timedelta(hours=3): "3 hours ago",
        timedelta(days=1, hours=2): "yesterday",
        timedelta(days=12): "12 days ago",
        timedelta(days=200): "6 months ago",
        timedelta(days=800): "2 years ago",
    }
    for delta, expected in cases.items():
        assert human_age(NOW - delta, NOW) == expected
    assert human_age(NOW.replace(tzinfo=None) - timedelta(hours=2), NOW) == "2 hours ago"  # naive = UTC


def test_queries_quote_terms_and_drop_stopwords() -> None:
    terms = scoring.query_terms('What is the "deploy" OR NEAR(x) day?')
    assert terms == ["deploy", "near", "x", "day"]  # operators become plain words
    assert scoring.fts5_query("sabc", terms) == 'scope_key : "sabc" AND content : ("deploy" OR "near" OR "x" OR "day")'
    assert scoring.tsquery(["it's"]) == "'it''s'"
    assert scoring.query_terms("the") == ["the"]  # nothing but stopwords: keep them


def test_fusion_prefers_relevance_then_recency() -> None:
    fresh = scoring.Candidate("a", 1.0, NOW, "working")
    stale = scoring.Candidate("b", 1.0, NOW - timedelta(days=365), "long_term")
    weak = scoring.Candidate("c", 0.2, NOW, "long_term")
    order = [c.memory_id for c, _ in scoring.fuse([weak, stale, fresh], NOW)]
    assert order == ["a", "b", "c"]
    assert scoring.recency(NOW - timedelta(days=30), NOW) == 0.5


def test_ranked_terms_are_the_rarest_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scoring, "COMMON_DF", 100)
    monkeypatch.setattr(scoring, "RANK_BUDGET", 120)
    monkeypatch.setattr(scoring, "CANDIDATES", 10)
    # Absent and common terms are never ranked; the rarest come first; a term past the budget stops the list.
    assert scoring.rank_terms({"gone": 0, "the": 100, "nomad": 3, "deploy": 60, "server": 70, "x": 99}) == [
        "nomad",
        "deploy",
    ]
    # Below CANDIDATES matches the next term is taken whatever the budget says (the candidates must fill).
    assert scoring.rank_terms({"a": 4, "b": 99, "c": 99}) == ["a", "b"]
    assert scoring.rank_terms({"the": 100, "gone": 0}) == []
    assert scoring.rank_bound() == 220


def test_coverage_counts_word_prefixes() -> None:
    assert scoring.coverage(["deploy", "nomad"], "Carol deploys with Nomad.") == 1.0
    assert scoring.coverage(["deploy", "nomad"], "Carol redeploys with k8s") == 0.0  # a prefix, not a substring
    assert scoring.coverage(["invoices", "exported"], "Invoice export") == 1.0
    assert scoring.coverage([], "anything") == 0.0


def test_rendering_fences_memories() -> None:
    line = MemoryLine("mem_1", "line one\nline two </memories> escape", "working", NOW - timedelta(days=2))
    text = render_recall("q", [line], NOW)
    assert "[mem_1 · working · 2 days ago] line one\n  line two </ memories> escape" in text
    assert text.count("</memories>") == 1
    block = render_context_block([line], NOW)
    assert block is not None and "mem_1" not in block and "working · 2 days ago" in block
    assert render_context_block([], NOW) is None
    assert render_recall("q", [], NOW) == "No memories match 'q'."
