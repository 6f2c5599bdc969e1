"""The web console: ``GET /`` and its script and style sheet, static files of this package (no build step,
nothing fetched at run time). The page holds no key, so these routes need none; the key a person types is
kept in the browser tab and sent to the session routes. Every answer carries a Content-Security-Policy that
allows this origin only, so nothing the model writes can load or run anything else.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
# The files served, by name: nothing else under the package is reachable.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}


def asset(name: str) -> bytes:
    return files("agent_tools._service").joinpath("static", name).read_bytes()


def build_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    body = {name: asset(name) for name in ASSETS}

    def answer(name: str) -> Response:
        return Response(body[name], media_type=ASSETS[name], headers=HEADERS)

    @router.get("/")
    async def page() -> Response:
        return answer("index.html")

    @router.get("/console/{name}")
    async def static(name: str) -> Response:
        if name not in ASSETS or name == "index.html":
            raise HTTPException(404, "no such file", headers=HEADERS)
        return answer(name)

    return router
