"""Memory retrieval arithmetic: normalised content, dedup keys, full-text queries, rank fusion. Pure.

Retrieval is two stages. The database ranks by full-text relevance (FTS5 ``bm25`` on SQLite, ``ts_rank_cd``
on PostgreSQL) and returns the best :data:`CANDIDATES`; :func:`fuse` then reorders them by relevance,
recency and tier, so a fresh fact beats an equally relevant stale one.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime

CANDIDATES = 50
# A term held by this many memories of the scope is "common": too frequent to rank on (near-zero IDF, and
# ranking all its matches is what makes a search slow); it still counts through coverage.
COMMON_DF = 2000
# When every term is common, the candidates are the most recent matches, this many.
COMMON_POOL = 300
RECENCY_HALF_LIFE_DAYS = 30.0
# Weights of the fused score: relevance dominates, coverage of all the query's words (common ones included)
# comes next, recency breaks near-ties, long-term facts get a nudge.
W_TEXT = 0.6
W_COVERAGE = 0.15
W_RECENCY = 0.2
W_TIER = 0.05

_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")
# Words that make every memory match; left out of the OR query so that they do not drown the rank.
STOPWORDS = frozenset(
    "a an and are as at be but by do does for from has have he her his how i if in into is it its me my no "
    "not of on or our she so that the their them then there these they this to was we were what when where "
    "which who why will with you your".split()
)
MAX_QUERY_TERMS = 24


def normalise(content: str) -> str:
    """The form two saves of the same fact share: NFKC, casefolded, single spaces, no trailing dot."""
    text = unicodedata.normalize("NFKC", content).casefold()
    text = _SPACE.sub(" ", text).strip()
    return text.rstrip(" .!;")


def content_hash(content: str) -> str:
    return hashlib.sha256(normalise(content).encode()).hexdigest()


def scope_key(organisation: str, project: str, user: str, agent: str) -> str:
    """One token naming the scope (indexed next to the text, so full-text search stays inside the scope)."""
    raw = "\x1f".join((organisation, project, user, agent))
    return "s" + hashlib.sha256(raw.encode()).hexdigest()[:30]


def query_terms(query: str) -> list[str]:
    """Distinct words of the query, stopwords dropped unless nothing else is left."""
    words = [w.casefold() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))[:MAX_QUERY_TERMS]


def fts5_query(scope: str, terms: list[str]) -> str:
    """FTS5 MATCH expression: the scope token AND any of the terms (each quoted, so no operator injection)."""
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return f'scope_key : "{scope}" AND content : ({quoted})'


def tsquery(terms: list[str]) -> str:
    """PostgreSQL ``to_tsquery`` text: any of the terms. Terms are ``\\w+`` words, quoted as lexemes."""
    return " | ".join("'" + t.replace("'", "''") + "'" for t in terms)


def recency(updated: datetime, now: datetime) -> float:
    """1.0 for a fact saved just now, 0.5 after one half-life, towards 0 after that."""
    age_days = max(0.0, (now - updated).total_seconds() / 86_400)
    return math.pow(0.5, age_days / RECENCY_HALF_LIFE_DAYS)


def coverage(terms: list[str], content: str) -> float:
    """Share of the query terms found in the text (prefix of the word, so 'deploy' covers 'deploys')."""
    if not terms:
        return 0.0
    words = {w.casefold() for w in _WORD.findall(content)}
    hit = sum(1 for t in terms if any(w.startswith(t[: max(3, len(t) - 2)]) for w in words))
    return hit / len(terms)


@dataclass(frozen=True)
class Candidate:
    memory_id: str
    text_score: float  # higher is better (the store converts bm25's "lower is better")
    updated_at: datetime
    tier: str
    coverage: float = 0.0


def fuse(candidates: list[Candidate], now: datetime) -> list[tuple[Candidate, float]]:
    """Candidates ordered by the fused score, best first. Text scores are normalised within the set."""
    if not candidates:
        return []
    top = max(c.text_score for c in candidates)
    scored = []
    for c in candidates:
        text = c.text_score / top if top > 0 else 0.0
        tier = 1.0 if c.tier == "long_term" else 0.0
        score = W_TEXT * text + W_COVERAGE * c.coverage + W_RECENCY * recency(c.updated_at, now) + W_TIER * tier
        scored.append((c, score))
    scored.sort(key=lambda pair: (-pair[1], pair[0].memory_id))
    return scored
