"""Whether any configured search engine can be reached from this worker.

RTC registers webSearch "only when the server has the web_search module configured". The zero-setup
engines (DuckDuckGo, Bing) need no URL or key, so they always count as configured; on a worker that cannot
reach them the tools would only answer ``search_unavailable``. The probe asks every configured engine's
endpoint once, with a short timeout: any HTTP answer (even an error status) means the engine is reachable,
a refused connection, a failed name lookup or a timeout means it is not. It runs when the worker starts
and again every ``probe_interval_s``; ``prepare_session`` reads the last verdict, and the tools it leaves
out are recorded in the session's config (an activity result), so a replay never probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from agent_tools._web.engines import SearchEngine, build_engine
from agent_tools.contracts._web.config import WebConfig

log = logging.getLogger(__name__)

SEARCH_FACES = ("webSearch", "web_search", "web_fetch", "webFetch")
"""The faces a probe's verdict decides (webFetch only where search engines are configured)."""


@dataclass(frozen=True)
class Reachability:
    """One probe's verdict: the engines that answered, and why each other one did not."""

    reachable: tuple[str, ...] = ()
    unreachable: dict[str, str] = field(default_factory=dict)
    checked_at: float = 0.0

    @property
    def any(self) -> bool:
        return bool(self.reachable)

    def why_not(self) -> str:
        """The reasons, one per engine (``searxng: connection refused; duckduckgo: ...``)."""
        return "; ".join(f"{name}: {reason}" for name, reason in self.unreachable.items()) or "no engine configured"


def configured_engines(config: WebConfig) -> list[SearchEngine]:
    """Every engine of both groups that has what it needs (URL, key), each once."""
    seen: set[str] = set()
    engines: list[SearchEngine] = []
    for name in [*config.search_engines, *config.fallback_engines]:
        engine = build_engine(name, config)
        if engine is not None and engine.name not in seen:
            seen.add(engine.name)
            engines.append(engine)
    return engines


async def _answers(client: httpx.AsyncClient, engine: SearchEngine, timeout_s: float) -> str | None:
    """None when the engine's endpoint sends any HTTP answer within ``timeout_s``, else why not."""
    try:
        async with asyncio.timeout(timeout_s):
            # The status line is enough: the body is never read.
            async with client.stream("GET", engine.url, timeout=timeout_s, follow_redirects=False):
                return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except httpx.ConnectError as exc:
        return f"connection failed ({_short(exc)})"
    except httpx.HTTPError as exc:
        return f"{exc.__class__.__name__} ({_short(exc)})"


def _short(exc: Exception) -> str:
    return (str(exc) or exc.__class__.__name__).splitlines()[0][:200]


class SearchProbe:
    """The worker's view of its search engines, refreshed at most every ``probe_interval_s``."""

    def __init__(
        self, config: WebConfig, client: httpx.AsyncClient, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.engines = configured_engines(config)
        self._last: Reachability | None = None
        self._lock = asyncio.Lock()

    @property
    def configured(self) -> bool:
        return bool(self.engines)

    @property
    def last(self) -> Reachability | None:
        return self._last

    async def probe(self) -> Reachability:
        """Ask every engine now (in parallel); log when the verdict changes whether search is offered."""
        async with self._lock:
            return await self._probe()

    async def current(self) -> Reachability:
        """The last verdict, probing first when there is none or it is older than the interval (a probe
        already running is waited for, not repeated)."""
        async with self._lock:
            last = self._last
            if last is None or self.clock() - last.checked_at >= self.config.probe_interval_s:
                return await self._probe()
            return last

    async def _probe(self) -> Reachability:
        answers = await asyncio.gather(*(_answers(self.client, e, self.config.probe_timeout_s) for e in self.engines))
        found = Reachability(
            reachable=tuple(e.name for e, why in zip(self.engines, answers, strict=True) if why is None),
            unreachable={e.name: why for e, why in zip(self.engines, answers, strict=True) if why is not None},
            checked_at=self.clock(),
        )
        before, self._last = self._last, found
        if before is None or before.any != found.any:
            self._say(found)
        return found

    async def run(self) -> None:
        """Probe now and then every interval, until cancelled (the worker's lifetime)."""
        while True:
            with contextlib.suppress(Exception):  # a probe never ends the loop: the next one tries again
                await self.probe()
            await asyncio.sleep(self.config.probe_interval_s)

    def _say(self, found: Reachability) -> None:
        if not self.engines:
            return
        if found.any:
            log.info("web search is offered: reachable engines %s", ", ".join(found.reachable))
        else:
            log.warning(
                "%s are not offered by this worker: no configured search engine is reachable (%s); "
                "probing again every %g s",
                ", ".join(SEARCH_FACES),
                found.why_not(),
                self.config.probe_interval_s,
            )
