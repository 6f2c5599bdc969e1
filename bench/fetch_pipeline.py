"""Fetch-pipeline bench: extraction quality and cost against trafilatura alone, and pages per second
through the whole pipeline.

1. Quality: the word-shingle F1, precision and recall of article-extraction benchmarks
   (bench/extraction_score.py) on the fixture set tests/fixtures/extraction (42 real-world-shaped pages)
   and the older tests/fixtures/pages, ours next to trafilatura alone.
2. Cost: our extraction (parse, preparation, metadata, trafilatura, repairs) against trafilatura alone
   (``trafilatura.extract`` on the same HTML string with the same options), both on every page, run
   side by side and interleaved: each round times every page with both, alternating which goes first, so
   that a noisy neighbour on the machine slows both. The ratio is printed per round with its median and
   spread.
3. Throughput: the whole pipeline (SSRF guard, HTTP GET on 127.0.0.1, content-type gate, extraction,
   Markdown, SQLite cache write), concurrently.

    python bench/fetch_pipeline.py [--rounds 7] [--benchmark DIR] [--pipeline-rounds 10] [--concurrency 8]

``--benchmark DIR`` adds a local copy of a public benchmark (ground-truth.json + html/, see
bench/extraction_score.py) to 1 and 2.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_tools._store.db import Store  # noqa: E402
from agent_tools._web.extractor import extract_html  # noqa: E402
from agent_tools._web.service import WebService  # noqa: E402
from agent_tools.contracts._web.config import WebConfig  # noqa: E402
from bench.extraction_score import (  # noqa: E402
    TRAFILATURA_OPTIONS,
    Case,
    benchmark_cases,
    evaluate,
    fixture_cases,
    ours,
    trafilatura_alone,
)

PAGES = ROOT / "tests" / "fixtures" / "pages"
EXTRACTION = ROOT / "tests" / "fixtures" / "extraction"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def quality(label: str, cases: list[Case]) -> None:
    mine, _ = evaluate(cases, ours)
    theirs, _ = evaluate(cases, trafilatura_alone)
    print(f"{label} ({len(cases)} pages)")
    print(f"  {'':<18} {'F1':>6} {'precision':>10} {'recall':>7}")
    for name, s in (("ours", mine), ("trafilatura alone", theirs)):
        print(f"  {name:<18} {s.f1:>6.3f} {s.precision:>10.3f} {s.recall:>7.3f}")


def cost(label: str, cases: list[Case], rounds: int) -> None:
    import trafilatura

    def run_ours(c: Case) -> None:
        extract_html(c.html, c.url)

    def run_theirs(c: Case) -> None:
        trafilatura.extract(c.html, url=c.url, **TRAFILATURA_OPTIONS)

    for c in cases[:3]:  # warm-up: imports, caches
        run_ours(c)
        run_theirs(c)
    ratios: list[float] = []
    totals = [0.0, 0.0]
    for r in range(rounds):
        spent = [0.0, 0.0]
        for i, c in enumerate(cases):
            order = [(0, run_ours), (1, run_theirs)]
            if (i + r) % 2:
                order.reverse()
            for slot, fn in order:
                started = time.perf_counter()
                fn(c)
                spent[slot] += time.perf_counter() - started
        ratios.append(spent[0] / spent[1])
        totals = [totals[0] + spent[0], totals[1] + spent[1]]
        print(f"  round {r + 1}: ours {spent[0]:.2f} s, trafilatura {spent[1]:.2f} s, ratio {ratios[-1]:.3f}")
    n = rounds * len(cases)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    print(
        f"{label}: ours {1000 * totals[0] / n:.1f} ms/page, trafilatura alone {1000 * totals[1] / n:.1f} ms/page; "
        f"ratio median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}, "
        f"quartiles {q[0]:.3f}-{q[2]:.3f}, {rounds} interleaved rounds)"
    )


async def throughput(rounds: int, concurrency: int) -> tuple[int, float]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(EXTRACTION)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    names = [p.name for p in sorted(EXTRACTION.glob("*.html"))]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite+aiosqlite:///{tmp}/bench.sqlite")
        await store.create_schema()
        web = WebService(WebConfig(search_engines=[], allow_loopback=True), store)
        urls = [f"http://127.0.0.1:{port}/{name}?round={i}" for i in range(rounds) for name in names]
        sem = asyncio.Semaphore(concurrency)

        async def one(url: str) -> None:
            async with sem:
                await web.page(url)  # distinct query string per round: every call is a cache miss

        started = time.perf_counter()
        await asyncio.gather(*(one(u) for u in urls))
        elapsed = time.perf_counter() - started
        await web.aclose()
        await store.close()
    server.shutdown()
    return len(urls), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--benchmark", type=Path, help="a local benchmark copy (ground-truth.json, html/)")
    parser.add_argument("--pipeline-rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    sets = [("extraction fixtures", list(fixture_cases(EXTRACTION))), ("older fixtures", list(fixture_cases(PAGES)))]
    if args.benchmark:
        sets.append((f"benchmark {args.benchmark}", list(benchmark_cases(args.benchmark))))
    print("== quality (word-shingle F1, as article-extraction benchmarks score)")
    for label, cases in sets:
        quality(label, cases)
    print("\n== cost against trafilatura alone (same pages, same options, interleaved)")
    for label, cases in sets:
        if label != "older fixtures":
            cost(label, cases, args.rounds)
    n, elapsed = asyncio.run(throughput(args.pipeline_rounds, args.concurrency))
    print(
        f"\n== pipeline: {n} pages in {elapsed:.2f} s = {n / elapsed:.1f} pages/s "
        f"(concurrency {args.concurrency}, HTTP on 127.0.0.1 and SQLite cache writes included)"
    )


if __name__ == "__main__":
    main()
