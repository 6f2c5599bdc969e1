"""The SSRF guard: a table of bypass attempts against the pure rules, then the fetcher on a real server:
every redirect hop checked, and the connection made to the address that was checked (DNS rebinding)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from agent_tools._errors import WebError
from agent_tools._settings import Settings
from agent_tools.contracts._web.models import WebFetchArgs
from agent_tools.contracts._web.ssrf import UrlRefused, address_problem, check_addresses, check_url, ensure_scheme
from tests.support.web import Reply, WebServer, close_web, make_certs, make_web

REFUSED = [
    # loopback in every spelling
    ("http://127.0.0.1/", "blocked_address"),
    ("http://2130706433/", "blocked_address"),
    ("http://0x7f000001/", "blocked_address"),
    ("http://0177.0.0.1/", "blocked_address"),
    ("http://0x7f.0.0.1/", "blocked_address"),
    ("http://127.1/", "blocked_address"),
    ("http://127.0.1/", "blocked_address"),
    ("http://127.0.0.1./", "blocked_address"),
    ("http://%31%32%37.0.0.1/", "blocked_address"),
    ("http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11/", "blocked_address"),  # full-width
    ("http://[::1]/", "blocked_address"),
    ("http://[0:0:0:0:0:0:0:1]/", "blocked_address"),
    # IPv6 wrappers of IPv4 loopback / private / metadata
    ("http://[::ffff:127.0.0.1]/", "blocked_address"),
    ("http://[::ffff:7f00:1]/", "blocked_address"),
    ("http://[::ffff:10.0.0.1]/", "blocked_address"),
    ("http://[::127.0.0.1]/", "blocked_address"),
    ("http://[64:ff9b::7f00:1]/", "blocked_address"),
    ("http://[64:ff9b::a9fe:a9fe]/", "blocked_address"),  # NAT64 of 169.254.169.254
    ("http://[64:ff9b:1::a00:1]/", "blocked_address"),  # local-use NAT64
    ("http://[2002:7f00:1::]/", "blocked_address"),  # 6to4 of 127.0.0.1
    ("http://[2002:c0a8:101::1]/", "blocked_address"),  # 6to4 of 192.168.1.1
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "blocked_address"),  # Teredo
    # this-network, private, shared, link-local, multicast, reserved, broadcast
    ("http://0.0.0.0/", "blocked_address"),
    ("http://0/", "blocked_address"),
    ("http://0.1.2.3/", "blocked_address"),
    ("http://10.0.0.1/", "blocked_address"),
    ("http://167772161/", "blocked_address"),  # 10.0.0.1 as one number
    ("http://172.16.5.4/", "blocked_address"),
    ("http://192.168.0.1/", "blocked_address"),
    ("http://0xc0.0xa8.0.1/", "blocked_address"),
    ("http://100.64.0.1/", "blocked_address"),
    ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
    ("http://[fe80::1]/", "blocked_address"),
    ("http://[fc00::1]/", "blocked_address"),
    ("http://[fd12:3456::1]/", "blocked_address"),
    ("http://[fec0::1]/", "blocked_address"),
    ("http://224.0.0.1/", "blocked_address"),
    ("http://[ff02::1]/", "blocked_address"),
    ("http://240.0.0.1/", "blocked_address"),
    ("http://255.255.255.255/", "blocked_address"),
    ("http://198.18.0.1/", "blocked_address"),
    ("http://192.0.0.8/", "blocked_address"),
    ("http://[::]/", "blocked_address"),
    ("http://017700000001/", "blocked_address"),  # the whole address in octal
    ("http://127.000.000.001/", "blocked_address"),
    ("http://0x7f.0x0.0x0.0x1/", "blocked_address"),
    ("HTTP://LOCALHOST.127.0.0.1.nip.io.127.0.0.1/", "bad_host"),  # numeric last label, not an address
    ("http://[fe80::1%25eth0]/", "blocked_address"),  # zone id
    ("http://[::ffff:169.254.169.254]/", "blocked_address"),
    ("http://[::ffff:a9fe:a9fe]/", "blocked_address"),
    # scheme, credentials, malformed
    ("ftp://example.com/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://example.com/", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("http://user:pass@example.com/", "credentials"),
    ("http://user@example.com/", "credentials"),
    ("http://example.com@127.0.0.1/", "credentials"),
    ("http://1.2.3.4.5/", "bad_host"),
    ("http://0x7g.1/", "bad_host"),
    ("http://exa mple.com/", "bad_host"),
    ("http:///path", "bad_host"),
    ("http://example.com\\@127.0.0.1/", "credentials"),
    ("http://" + "a" * 2050 + ".com/", "too_long"),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED)
def test_bypass_attempts_are_refused(url: str, reason: str) -> None:
    with pytest.raises(UrlRefused) as info:
        check_url(url)
    assert info.value.reason == reason, str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://example.com:8443/a?b=c",
        "http://8.8.8.8/",
        "http://134744072/",
        "http://[2606:4700:4700::1111]/",
        "http://[64:ff9b::808:808]/",
        "https://xn--bcher-kva.example/",
    ],
)
def test_public_targets_pass(url: str) -> None:
    checked = check_url(url)
    assert checked.scheme in ("http", "https")


def test_numeric_spellings_resolve_to_the_address_they_mean() -> None:
    assert check_url("http://134744072/").ip == ipaddress.ip_address("8.8.8.8")
    assert check_url("http://0x08080808/").ip == ipaddress.ip_address("8.8.8.8")
    assert check_url("http://010.010.010.010/").ip == ipaddress.ip_address("8.8.8.8")


def test_loopback_exception_is_opt_in_and_only_loopback() -> None:
    assert Settings(_env_file=None).web.allow_loopback is False
    for url in ("http://127.0.0.1:8080/", "http://[::1]/", "http://127.1/", "http://[::ffff:127.0.0.1]/"):
        with pytest.raises(UrlRefused):
            check_url(url)
        check_url(url, allow_loopback=True)
    for url in ("http://10.0.0.1/", "http://0.0.0.0/", "http://169.254.169.254/", "http://[fc00::1]/"):
        with pytest.raises(UrlRefused):
            check_url(url, allow_loopback=True)


def test_every_resolved_address_must_pass() -> None:
    assert str(check_addresses("h", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])) == "93.184.215.14"
    with pytest.raises(UrlRefused):
        check_addresses("h", ["93.184.215.14", "10.0.0.7"])
    with pytest.raises(UrlRefused):
        check_addresses("h", [])
    with pytest.raises(UrlRefused):
        check_addresses("h", ["fe80::1%eth0"])
    assert address_problem(ipaddress.ip_address("::ffff:8.8.8.8")) is None


def test_scheme_is_prepended_only_when_missing() -> None:
    assert ensure_scheme("example.com/a") == "https://example.com/a"
    assert ensure_scheme("http://x.org") == "http://x.org"
    assert ensure_scheme("//x.org/p") == "https://x.org/p"
    assert ensure_scheme("file:///etc/passwd") == "file:///etc/passwd"


async def test_default_settings_refuse_loopback_fetch(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/", Reply(body="<p>hello</p>"))
        web = await make_web(tmp_path, allow_loopback=False)
        try:
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=server.url("/")))
            assert info.value.code == "bad_request" and info.value.http_status == 400
            assert server.hits("/") == 0
        finally:
            await close_web(web)


@pytest.mark.parametrize(
    "target",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:192.168.0.1]/",
        "http://2130706433.0/",
        "ftp://example.com/",
    ],
)
async def test_redirect_hops_are_checked(tmp_path: Path, target: str) -> None:
    with WebServer() as server:
        server.route("/jump", Reply(status=302, headers={"Location": target}))
        web = await make_web(tmp_path)
        try:
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=server.url("/jump")))
            assert info.value.code in ("bad_request",), info.value.message
            assert "redirect" in info.value.message
        finally:
            await close_web(web)


async def test_connection_goes_to_the_checked_address(tmp_path: Path) -> None:
    """DNS rebinding: the name resolves once; a second answer (private) is never used."""
    calls: list[str] = []

    async def rebinding_resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.9.9.9"]

    with WebServer() as server:
        server.page("/article", "news")
        web = await make_web(tmp_path, resolver=rebinding_resolver)
        try:
            page = await web.web_fetch(WebFetchArgs(url=f"http://rebind.test:{server.port}/article"))
            assert "tram line" in page.content
            assert calls == ["rebind.test"]
            seen = next(r for r in server.requests if r.path == "/article")
            assert seen.headers["Host"] == f"rebind.test:{server.port}"
        finally:
            await close_web(web)


async def test_name_resolving_to_private_or_mixed_addresses_is_refused(tmp_path: Path) -> None:
    answers = {"private.test": ["10.1.2.3"], "mixed.test": ["127.0.0.1", "192.168.1.1"], "none.test": []}

    async def resolver(host: str, port: int) -> list[str]:
        return answers[host]

    web = await make_web(tmp_path, resolver=resolver)
    try:
        for host in ("private.test", "mixed.test"):
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=f"http://{host}/"))
            assert info.value.code == "bad_request", host
        with pytest.raises(WebError) as unresolvable:  # not refused: the upstream does not exist
            await web.web_fetch(WebFetchArgs(url="http://none.test/"))
        assert unresolvable.value.code == "upstream_error" and "did not resolve" in unresolvable.value.message
    finally:
        await close_web(web)


async def test_https_to_the_pinned_address_keeps_sni_and_certificate_checks(tmp_path: Path) -> None:
    import shutil
    import ssl

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    ca, cert, key = make_certs(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(ca))

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    with WebServer() as server:
        server.server.socket = server_ctx.wrap_socket(server.server.socket, server_side=True)
        server.page("/doc", "docs")
        web = await make_web(tmp_path, resolver=resolver, verify=client_ctx)
        try:
            page = await web.web_fetch(WebFetchArgs(url=f"https://secure.test:{server.port}/doc"))
            assert page.title == "Configuring retries" and "When a task raises an exception" in page.content
            assert server.requests[-1].headers["Host"] == f"secure.test:{server.port}"
            # same address, a name the certificate does not cover: verification must fail
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=f"https://other.test:{server.port}/doc"))
            assert info.value.code == "upstream_error"
        finally:
            await close_web(web)
