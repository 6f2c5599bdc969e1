"""Shared test kit for the web tests (no tests here): a real threaded HTTP server on 127.0.0.1 whose
routes a test sets, and helpers to build the web engine over a temporary store."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fixture_types import Script

if TYPE_CHECKING:
    from agent_tools._web.service import WebService

PAGES = Path(__file__).parents[1] / "fixtures" / "pages"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/html; charset=utf-8"
    delay_s: float = 0.0


Route = Callable[[Request], Reply] | Reply


class WebServer:
    """``server.route("/path", Reply(...))`` or a function of the request; records every request."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[Request] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                req = Request(self.command, parts.path, parse_qs(parts.query), dict(self.headers.items()), body)
                outer.requests.append(req)
                route = outer.routes.get(parts.path)
                reply = Reply(404, "not found") if route is None else route(req) if callable(route) else route
                if reply.delay_s:
                    import time

                    time.sleep(reply.delay_s)
                data = reply.body.encode() if isinstance(reply.body, str) else reply.body
                self.send_response(reply.status)
                headers = {
                    "Content-Type": reply.content_type,
                    "Content-Length": str(len(data)),
                    **reply.headers,
                }
                for k, v in headers.items():
                    if v:
                        self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    try:
                        self.wfile.write(data)
                    except (BrokenPipeError, ConnectionResetError):
                        pass

            do_GET = _handle
            do_POST = _handle
            do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # shutdown() waits for the serve loop's next poll: poll often, or every test pays up to 0.5 s.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str, reply: Route) -> None:
        self.routes[path] = reply

    def page(self, path: str, name: str) -> None:
        self.routes[path] = Reply(body=(PAGES / f"{name}.html").read_text())

    def hits(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    def __enter__(self) -> WebServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def json_reply(data: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(status=status, body=json.dumps(data), content_type="application/json", headers=headers)


def searxng_results(base: str, n: int, *, prefix: str = "r", dated: bool = True) -> dict[str, Any]:
    return {
        "query": "q",
        "number_of_results": n,
        "results": [
            {
                "url": f"{base}/{prefix}{i}",
                "title": f"<b>Result</b> {prefix}{i}",
                "content": f"Snippet {i} &amp; more",
                "engine": "google",
                "publishedDate": f"2026-01-{i + 1:02d}T10:00:00" if dated else None,
            }
            for i in range(n)
        ],
        "unresponsive_engines": [],
    }


async def make_web(
    tmp_path: Path, *, allow_loopback: bool = True, store_url: str | None = None, **kwargs: Any
) -> WebService:
    """A WebService over a fresh store; ``kwargs`` go to WebConfig (engines, URLs) or the service
    (``resolver``, ``clock``, ``profiles``)."""
    from agent_tools._store.db import Store
    from agent_tools._web.service import WebService
    from agent_tools.contracts._web.config import WebConfig

    service_keys = {"resolver", "clock", "profiles", "verify"}
    config_kwargs = {k: v for k, v in kwargs.items() if k not in service_keys}
    config_kwargs.setdefault("search_engines", [])
    config_kwargs["allow_loopback"] = allow_loopback
    store = Store(store_url or f"sqlite+aiosqlite:///{tmp_path}/web.sqlite")
    await store.create_schema()
    web = WebService(
        WebConfig(**config_kwargs),
        store,
        **{k: v for k, v in kwargs.items() if k in service_keys},
    )
    web._test_store = store  # type: ignore[attr-defined]
    return web


async def close_web(web: WebService) -> None:
    await web.aclose()
    await web._test_store.close()  # type: ignore[attr-defined]


def make_certs(tmp: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for secure.test, made with the openssl command."""
    import subprocess

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
    )
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=secure.test")
    (tmp / "ext.cnf").write_text("subjectAltName=DNS:secure.test\n")
    run(
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    )
    return tmp / "ca.pem", tmp / "srv.pem", tmp / "srv.key"


ALL = ["searxng", "duckduckgo", "bing", "tavily", "brave"]


def engines_config(server: WebServer, order: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "search_engines": order or ALL,
        "searxng_url": server.url("/searx"),
        "duckduckgo_url": server.url("/ddg/html/"),
        "bing_url": server.url("/bing/search"),
        "tavily_url": server.url("/tavily/search"),
        "tavily_api_key": "tvly-test",
        "brave_url": server.url("/brave/search"),
        "brave_api_key": "brave-test",
        "engine_timeout_s": 2.0,
        **extra,
    }


BING_CAPTCHA = "<html><body><div id='b_captcha'>Please solve the challenge below to continue</div></body></html>"


def research_script(script: Script, writer_say: str | list[str]) -> str:
    writes = writer_say if isinstance(writer_say, list) else [writer_say]
    return str(
        script(
            [
                {
                    "match": {"role": "research_planner"},
                    "turns": [{"say": '["tram line cost", "tram line stops", "tram line cost"]'}],
                },
                {"match": {"role": "research_writer"}, "turns": [{"say": w} for w in writes]},
            ]
        )
    )


def serve_research(srv: WebServer) -> None:
    srv.page("/news", "news")
    srv.page("/table", "table")
    srv.page("/blog", "blog")

    def searx(req: Any) -> Any:
        q = req.query["q"][0]
        rows = {
            "tram line cost": [("news", "Tram approved"), ("blog", "SQLite notes")],
            "tram line stops": [("news", "Tram approved again"), ("table", "EV ranges"), ("gone", "Gone")],
        }.get(q, [])
        return json_reply({"results": [{"url": srv.url(f"/{p}"), "title": t, "content": "c"} for p, t in rows]})

    srv.route("/searx/search", searx)
