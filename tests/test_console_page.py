"""The web console's files: served at ``/`` and ``/console/`` without a key, each with a CSP of this origin
only; nothing in them loads from elsewhere or writes markup; the wheel ships them (package data)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import httpx

from agent_tools._service import console
from agent_tools._service.app import create_app
from agent_tools._settings import Settings
from agent_tools.contracts._service import ServiceKey, ServiceSettings

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "agent_tools" / "_service" / "static"


async def _get(path: str) -> httpx.Response:
    keys = [ServiceKey.model_validate({"key": "key-console-0123456789abcdef"})]
    app = create_app(Settings(service=ServiceSettings(api_keys=keys)))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.get(path)


async def test_the_page_and_its_files_are_served_without_a_key_under_a_self_only_csp() -> None:
    expected = {"/": "text/html", "/console/console.js": "text/javascript", "/console/console.css": "text/css"}
    for path, media in expected.items():
        resp = await _get(path)
        assert resp.status_code == 200, (path, resp.text)
        assert resp.headers["content-type"].startswith(media), path
        csp = resp.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "*" not in csp
        assert resp.headers["x-content-type-options"] == "nosniff"
    page = (await _get("/")).text
    assert 'src="/console/console.js"' in page and 'href="/console/console.css"' in page
    # Only the named files: no other file of the package, no path out of the folder.
    for path in ("/console/index.html", "/console/nothing.js", "/console/..%2Fconsole.py", "/console/__init__.py"):
        resp = await _get(path)
        assert resp.status_code == 404, path
    assert (await _get("/sessions")).status_code == 401  # the routes behind the page still need a key


def test_the_files_load_nothing_from_elsewhere_and_write_no_markup() -> None:
    for path in STATIC.iterdir():
        text = path.read_text().replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, never fetched
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), path  # no CDN, no remote file
        assert "<style" not in text and " style=" not in text and "onclick=" not in text, path  # CSP: no inline
    script = (STATIC / "console.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    assert "<script>" not in (STATIC / "index.html").read_text()
    assert set(console.ASSETS) == {p.name for p in STATIC.iterdir()}


def test_the_wheel_ships_the_console_files() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["agent_tools"]
    for path in STATIC.iterdir():
        inside = path.relative_to(ROOT / "agent_tools").as_posix()
        assert any(fnmatch.fnmatchcase(inside, p) for p in patterns), inside
    for name in console.ASSETS:  # and the installed package reads them as its own resources
        assert console.asset(name) == (STATIC / name).read_bytes()
