"""Reading a Prometheus text page (the worker's /metrics) into samples. No tests here."""

from __future__ import annotations

import re

import httpx

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of the page: its name, labels and value (comment lines left out)."""
    samples = []
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found and not line.startswith("#"):
            name, labels, value = found.groups()
            samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
    return samples


def total(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include ``labels`` (0 when there is none yet)."""
    return sum(v for n, got, v in samples if n == name and all(got.get(k) == w for k, w in labels.items()))


async def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    async with httpx.AsyncClient() as http:
        answer = await http.get(url)
        answer.raise_for_status()
        assert answer.headers["content-type"].startswith("text/plain"), answer.headers
        return parse(answer.text)
