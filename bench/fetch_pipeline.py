"""Fetch-pipeline bench: pages per second through the whole pipeline (SSRF guard, HTTP GET on 127.0.0.1,
content-type gate, extraction, Markdown, SQL cache write) and extraction word-F1 on the fixture set
(tests/fixtures/pages: news, docs, blog, forum, table-heavy, code-heavy, each with hand-made ground truth)
against a whole-page markdownify baseline.

    python bench/fetch_pipeline.py [--rounds 20] [--concurrency 8]
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

from agent_tools.activities.store.db import Store  # noqa: E402
from agent_tools.activities.web.extractor import extract_html, whole_page_markdown  # noqa: E402
from agent_tools.activities.web.service import WebService  # noqa: E402
from agent_tools.contracts.web.config import WebConfig  # noqa: E402
from agent_tools.contracts.web.text import markdown_to_text, word_f1  # noqa: E402

PAGES = ROOT / "tests" / "fixtures" / "pages"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def quality() -> list[tuple[str, float, float, float, float]]:
    rows = []
    for html_path in sorted(PAGES.glob("*.html")):
        html = html_path.read_text()
        truth = html_path.with_suffix(".txt").read_text()
        ours = extract_html(html, f"https://bench.example/{html_path.stem}")
        p, r, f1 = word_f1(markdown_to_text(ours.markdown), truth)
        _, _, base = word_f1(markdown_to_text(whole_page_markdown(html)), truth)
        rows.append((html_path.stem, p, r, f1, base))
    return rows


async def throughput(rounds: int, concurrency: int) -> tuple[int, float]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(PAGES)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    names = [p.name for p in sorted(PAGES.glob("*.html"))]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite+aiosqlite:///{tmp}/bench.sqlite")
        await store.create_schema()
        web = WebService(WebConfig(web_search_engines=[]), store, allow_loopback=True)
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
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    rows = quality()
    print(f"{'page':<8} {'precision':>9} {'recall':>7} {'F1':>6} {'whole-page F1':>14}")
    for name, p, r, f1, base in rows:
        print(f"{name:<8} {p:>9.3f} {r:>7.3f} {f1:>6.3f} {base:>14.3f}")
    print(
        f"{'mean':<8} {'':>9} {'':>7} {statistics.mean(r[3] for r in rows):>6.3f} "
        f"{statistics.mean(r[4] for r in rows):>14.3f}"
    )
    n, elapsed = asyncio.run(throughput(args.rounds, args.concurrency))
    print(
        f"\npipeline: {n} pages in {elapsed:.2f} s = {n / elapsed:.1f} pages/s "
        f"(concurrency {args.concurrency}, SQLite cache writes included)"
    )


if __name__ == "__main__":
    main()
