"""Extraction quality as article-extraction benchmarks score it, on our fixture set or on a benchmark copy.

The metric is the word-shingle F1 of the public article-extraction benchmarks: the text is split into
``\\w+`` tokens, every run of four consecutive tokens is a shingle, and a page's true positives, false
positives and false negatives are the multiset overlap of its predicted and expected shingles, normalised
by their sum so that long pages weigh no more than short ones. Precision and recall are averaged over the
pages, and F1 is computed from the two averages.

    python bench/extraction_score.py                      # tests/fixtures/extraction
    python bench/extraction_score.py --benchmark DIR      # DIR/ground-truth.json + DIR/html/<id>.html

``--benchmark`` reads a local copy of a benchmark in the scrapinghub article-extraction-benchmark layout
(nothing of it is in this repository): ``ground-truth.json`` maps ids to ``{"articleBody", "url"}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent_tools._web.extractor import extract_html  # noqa: E402
from agent_tools.contracts._web.text import markdown_to_text  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "extraction"
_TOKEN = re.compile(r"\w+", re.UNICODE)

# The options our pipeline hands trafilatura, so that the comparison is about what we add.
TRAFILATURA_OPTIONS = {
    "output_format": "markdown",
    "include_tables": True,
    "include_links": True,
    "include_formatting": True,
    "include_images": False,
    "include_comments": False,
    "deduplicate": False,
    "fast": False,
}


def shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    tokens = _TOKEN.findall(text or "")
    return Counter(tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i : i + n])


def page_counts(truth: str, predicted: str) -> tuple[float, float, float]:
    """(tp, fp, fn) over shingles, normalised to sum to 1."""
    t, p = shingles(truth), shingles(predicted)
    tp = sum((t & p).values())
    fp = sum((p - t).values())
    fn = sum((t - p).values())
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def _precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    return 0.0 if tp == fp == 0 else tp / (tp + fp)


def _recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    return 0.0 if tp == fn == 0 else tp / (tp + fn)


@dataclass(frozen=True)
class Score:
    f1: float
    precision: float
    recall: float


def score(counts: list[tuple[float, float, float]]) -> Score:
    precision = statistics.mean([_precision(*c) for c in counts if c[0] + c[1] > 0] or [0.0])
    recall = statistics.mean([_recall(*c) for c in counts if c[0] + c[2] > 0] or [0.0])
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(f1, precision, recall)


@dataclass(frozen=True)
class Case:
    name: str
    html: str
    url: str
    truth: str


def fixture_cases(directory: Path = FIXTURES) -> Iterator[Case]:
    for path in sorted(directory.glob("*.html")):
        yield Case(
            path.stem, path.read_text(), f"https://fixtures.example/{path.stem}", path.with_suffix(".txt").read_text()
        )


def benchmark_cases(directory: Path) -> Iterator[Case]:
    truth = json.loads((directory / "ground-truth.json").read_text())
    for key, item in sorted(truth.items()):
        page = directory / "html" / f"{key}.html"
        # The benchmark's repository ships its pages gzipped; an unpacked copy works too.
        raw = page.read_bytes() if page.exists() else gzip.decompress(page.with_suffix(".html.gz").read_bytes())
        yield Case(
            key, raw.decode("utf-8", "replace"), item.get("url") or "https://benchmark.example/", item["articleBody"]
        )


def ours(case: Case) -> str:
    return markdown_to_text(extract_html(case.html, case.url).markdown)


def trafilatura_alone(case: Case) -> str:
    import trafilatura

    return markdown_to_text(trafilatura.extract(case.html, url=case.url, **TRAFILATURA_OPTIONS) or "")


def evaluate(cases: list[Case], extractor: Callable[[Case], str]) -> tuple[Score, list[tuple[float, float, float]]]:
    counts = [page_counts(c.truth, extractor(c)) for c in cases]
    return score(counts), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", type=Path, help="a local benchmark copy (ground-truth.json, html/)")
    parser.add_argument("--pages", action="store_true", help="print every page's F1")
    args = parser.parse_args()
    cases = list(benchmark_cases(args.benchmark) if args.benchmark else fixture_cases())
    ours_score, ours_counts = evaluate(cases, ours)
    base_score, base_counts = evaluate(cases, trafilatura_alone)
    if args.pages:
        print(f"{'page':<44} {'ours F1':>8} {'trafilatura F1':>15}")
        for case, a, b in zip(cases, ours_counts, base_counts, strict=True):
            print(f"{case.name[:44]:<44} {score([a]).f1:>8.3f} {score([b]).f1:>15.3f}")
        print()
    print(f"{len(cases)} pages ({args.benchmark or FIXTURES.relative_to(ROOT)})")
    print(f"{'':<18} {'F1':>6} {'precision':>10} {'recall':>7}")
    for label, s in (("ours", ours_score), ("trafilatura alone", base_score)):
        print(f"{label:<18} {s.f1:>6.3f} {s.precision:>10.3f} {s.recall:>7.3f}")


if __name__ == "__main__":
    main()
