"""The search engines' reachability probe (``agent_tools._web.probe``): an engine on 127.0.0.1 that answers
(whatever its status) is reachable, a closed port is not, and the verdict is renewed every interval."""

from __future__ import annotations

import socket

import httpx

from agent_tools._web.probe import SearchProbe, configured_engines
from agent_tools.contracts._web.config import WebConfig
from tests.support.polling import eventually
from tests.support.web import Reply, WebServer


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_the_zero_setup_engines_count_as_configured() -> None:
    """DuckDuckGo and Bing need no URL or key: a default deployment has engines to probe."""
    assert [e.name for e in configured_engines(WebConfig())] == ["duckduckgo", "bing"]
    assert configured_engines(WebConfig(search_engines=[], fallback_engines=["bing", "bing"]))[0].name == "bing"


async def test_any_http_answer_is_reachable_and_a_closed_port_is_not() -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    with WebServer() as server:
        server.route("/bing/search", Reply(503, "busy"))  # an answer, even an error, is an engine that answers
        config = WebConfig(
            search_engines=["searxng", "bing", "tavily"],
            searxng_url=dead,
            bing_url=server.url("/bing/search"),
            tavily_url=f"{dead}/search",
            tavily_api_key="k",
            probe_timeout_s=2.0,
        )
        async with httpx.AsyncClient() as client:
            found = await SearchProbe(config, client).probe()
    assert found.reachable == ("bing",) and found.any
    assert set(found.unreachable) == {"searxng", "tavily"}
    assert found.unreachable["searxng"].startswith("connection failed")


async def test_a_silent_engine_times_out_within_the_bound() -> None:
    with WebServer() as server:
        server.route("/searx/", Reply(200, "late", delay_s=1.5))
        config = WebConfig(search_engines=["searxng"], searxng_url=server.url("/searx"), probe_timeout_s=0.3)
        async with httpx.AsyncClient() as client:
            found = await SearchProbe(config, client).probe()
    assert not found.any and found.unreachable == {"searxng": "no answer within 0.3 s"}


async def test_the_verdict_is_renewed_every_interval() -> None:
    """Cached within the interval (no request), probed again after it; the worker's loop does the same."""
    now = [0.0]
    with WebServer() as server:
        config = WebConfig(search_engines=["searxng"], searxng_url=server.url("/searx"), probe_interval_s=60)
        async with httpx.AsyncClient() as client:
            probe = SearchProbe(config, client, clock=lambda: now[0])
            assert (await probe.current()).any
            now[0] = 59.0
            assert (await probe.current()).any and server.hits("/searx/") == 1
            server.__exit__()
            assert (await probe.current()).any  # still within the interval: the last verdict
            now[0] = 60.0
            assert not (await probe.current()).any  # renewed: the engine is gone


async def test_the_worker_loop_probes_again_until_the_engine_is_back() -> None:
    import asyncio

    with WebServer() as server:
        port = server.port
        server.__exit__()
        config = WebConfig(search_engines=["searxng"], searxng_url=f"http://127.0.0.1:{port}", probe_interval_s=0.05)
        async with httpx.AsyncClient() as client:
            probe = SearchProbe(config, client)
            task = asyncio.create_task(probe.run())
            try:
                await eventually(lambda: _verdict(probe), until=lambda v: v is False, timeout=10, what="down")
                with _server_on(port):
                    await eventually(lambda: _verdict(probe), until=lambda v: v is True, timeout=10, what="back")
            finally:
                task.cancel()


async def _verdict(probe: SearchProbe) -> bool | None:
    return None if probe.last is None else probe.last.any


class _server_on:
    """A plain HTTP server on a given port (the engine coming back where it was)."""

    def __init__(self, port: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
