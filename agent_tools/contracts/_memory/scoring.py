"""Memory retrieval arithmetic: normalised content, dedup keys, full-text queries, rank fusion. Pure.

Retrieval is two stages. The database ranks by full-text relevance (FTS5 ``bm25`` on SQLite, ``ts_rank_cd``
on PostgreSQL) over a bounded set of matches (:func:`rank_terms`) and returns the best :data:`CANDIDATES`;
:func:`fuse` then reorders those candidates only by relevance, recency and tier, so a fresh fact beats an
equally relevant stale one.
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
# 1,000 rather than 2,000: each count reads up to this many rows (PostgreSQL checks the scope on the heap
# row), so the cap is most of a search's cost when a query holds common words; at 100,000 memories a word in
# 1,000 of them has an IDF of ~4.6, informative but well served by coverage.
COMMON_DF = 1000
# The ranked query takes the rarest terms whose matches add up to at most this many rows: the database ranks
# a bounded candidate set (ranking costs a row read and a rank computation per match). A term is added past
# the budget only while the chosen ones match fewer than CANDIDATES memories, so RANK_BOUND is the most rows
# a ranked query can touch (PostgreSQL's inner LIMIT).
RANK_BUDGET = 1500
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


def rank_terms(frequencies: dict[str, int]) -> list[str]:
    """The terms to rank on: rarest first, while their matches add up to at most :data:`RANK_BUDGET`.

    Terms held by no memory are dropped; terms at :data:`COMMON_DF` or beyond are never ranked (they count
    through :func:`coverage`). While the chosen terms match fewer than :data:`CANDIDATES` memories the next
    term is taken whatever its count, so a query whose rare words find little still fills its candidates;
    past that, a term that would exceed the budget (and every less rare one) is left to coverage: a memory
    holding only such words shares them with hundreds of others and would rank below the chosen matches.
    """
    rare = sorted((df, t) for t, df in frequencies.items() if 0 < df < COMMON_DF)
    chosen: list[str] = []
    total = 0
    for df, term in rare:
        if total >= CANDIDATES and total + df > RANK_BUDGET:
            break
        chosen.append(term)
        total += df
    return chosen


def rank_bound() -> int:
    """The most matches a ranked query can have (see :func:`rank_terms`): its hard LIMIT."""
    return RANK_BUDGET + COMMON_DF


def recency(updated: datetime, now: datetime) -> float:
    """1.0 for a fact saved just now, 0.5 after one half-life, towards 0 after that."""
    age_days = max(0.0, (now - updated).total_seconds() / 86_400)
    return math.pow(0.5, age_days / RECENCY_HALF_LIFE_DAYS)


def coverage(terms: list[str], content: str) -> float:
    """Share of the query terms found in the text (prefix of the word, so 'deploy' covers 'deploys')."""
    if not terms:
        return 0.0
    # " prefix" in " w1 w2 ...": a word starting with the prefix, found by one C-level substring search
    # (the fusion runs this for up to COMMON_POOL candidates per search).
    words = " " + " ".join(_WORD.findall(content.casefold()))
    hit = sum(1 for t in terms if " " + t[: max(3, len(t) - 2)] in words)
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


# ---- semantic recall ---------------------------------------------------------------------------------------

# Reciprocal rank fusion's constant (Cormack et al. 2009): a document's score is the sum of 1 / (RRF_K + rank)
# over the rankings it appears in; 60 damps the difference between the first few places of either ranking.
RRF_K = 60
# The part of a query that is embedded (a query is short; this bounds what goes to the endpoint).
MAX_EMBED_QUERY_CHARS = 2000


def rrf(rankings: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Ids ordered by reciprocal rank fusion of ``rankings`` (each best first), best first; ties by id."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            scores[memory_id] = scores.get(memory_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def encode_vector(values: list[float], max_dimensions: int) -> bytes:
    """An embedding as the store keeps it: unit length, float32 little-endian.

    The values come from an outside endpoint, so they are checked here, where they enter: a list
    of 1 to ``max_dimensions`` finite numbers, not all zero. Raises ``ValueError`` otherwise.
    """
    import numpy as np

    if not isinstance(values, list) or not 0 < len(values) <= max_dimensions:
        raise ValueError(f"an embedding must be a list of 1 to {max_dimensions} numbers")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise ValueError("an embedding holds numbers only")
    vector = np.asarray(values, dtype=np.float64)
    norm = float(np.linalg.norm(vector)) if np.all(np.isfinite(vector)) else math.nan
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError("an embedding must be finite and not all zero")
    return (vector / norm).astype("<f4").tobytes()
