"""The guarded HTTP client: every hop checked by the SSRF rules, and the connection made to the address
that was checked.

Why the connection goes to the checked IP: resolving the name again at connect time (what a plain
``httpx.get(url)`` does) lets a DNS server answer "public" to the check and "127.0.0.1" to the connection
(DNS rebinding). Here the name is resolved once, every address is checked, and the request is sent to
``scheme://<ip>:<port>/path`` with the original ``Host`` header and TLS server name (SNI), so virtual
hosting and certificate verification still use the real name.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import urljoin

import httpx

from agent_tools._errors import AgentToolsError
from agent_tools.contracts._web.ssrf import CheckedUrl, UrlRefused, check_addresses, check_url
from agent_tools.contracts._web.urls import same_site

Resolver = Callable[[str, int], Awaitable[list[str]]]

REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for ``host`` (A and AAAA)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return []
    seen: dict[str, None] = {}
    for info in infos:
        seen[str(info[4][0])] = None
    return list(seen)


class FetchError(AgentToolsError):
    """A fetch that produced no usable response.

    ``code``: ``bad_request`` (URL refused by the rules), ``upstream_error`` (connection, timeout, too many
    redirects), ``too_large``, ``unsupported_content_type``.
    """

    def __init__(
        self, code: str, message: str, *, url: str, status: int | None = None, content_type: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.url = url
        self.status = status
        self.content_type = content_type


@dataclass(frozen=True)
class FetchLimits:
    timeout_s: float = 10.0
    max_bytes: int = 3 * 1024 * 1024
    max_redirects: int = 3
    follow_other_hosts: bool = True
    # Content types to read; None reads anything. Checked before the body is downloaded.
    accept: Callable[[str], bool] | None = None
    # Over max_bytes: False keeps the first max_bytes (marked truncated), True fails with too_large.
    fail_over_size: bool = False


@dataclass
class RawResponse:
    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    content_type: str
    body: bytes
    truncated: bool = False
    redirect_to: str | None = None  # a redirect that was not followed (other host)
    hops: list[str] = field(default_factory=list)
    took_ms: int = 0

    def text(self) -> str:
        return decode_body(self.body, self.headers.get("content-type", ""))


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", re.I)


def decode_body(body: bytes, content_type: str) -> str:
    """Decode with the header's charset, else a ``<meta charset>``, else UTF-8 (then cp1252)."""
    candidates: list[str] = []
    m = re.search(r"charset=([\w.:-]+)", content_type, re.I)
    if m:
        candidates.append(m.group(1).strip("\"'"))
    m2 = _META_CHARSET.search(body[:4096])
    if m2:
        candidates.append(m2.group(1).decode("ascii", "ignore"))
    candidates += ["utf-8"]
    for enc in candidates:
        try:
            return body.decode(enc).lstrip("\ufeff")  # a byte-order mark is not content
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("cp1252", errors="replace")


class GuardedFetcher:
    """GET/HEAD under the SSRF guard, with byte, time and redirect limits; redirects handled by hand."""

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        resolver: Resolver | None = None,
        user_agent: str = "Mozilla/5.0 (compatible; agent-tools-fetch/0.1)",
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.allow_loopback = allow_loopback
        self.resolver = resolver or system_resolver
        self.user_agent = user_agent
        # No cookie jar sharing between callers: one user's session cookies must never reach another's fetch.
        jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,  # proxies from the environment would do their own DNS, defeating the pinning
            timeout=httpx.Timeout(30.0, connect=10.0),
            cookies=jar,
            # verify goes to the transport: a client given its own transport ignores its verify argument.
            # No keep-alive: the pool is keyed by the pinned IP, so a kept TLS connection verified for one
            # name would otherwise carry a request for another name served from the same address.
            transport=httpx.AsyncHTTPTransport(
                retries=0, verify=verify, limits=httpx.Limits(max_keepalive_connections=0)
            ),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def check(self, url: str) -> tuple[CheckedUrl, str]:
        """Static checks, one resolution, every address checked. Returns the URL and the IP to connect to."""
        checked = check_url(url, allow_loopback=self.allow_loopback)
        if checked.ip is not None:
            return checked, str(checked.ip)
        addresses = await self.resolver(checked.host, checked.port)
        ip = check_addresses(checked.host, addresses, allow_loopback=self.allow_loopback)
        return checked, str(ip)

    async def fetch(
        self, url: str, limits: FetchLimits, *, method: str = "GET", headers: dict[str, str] | None = None
    ) -> RawResponse:
        started = time.monotonic()
        try:
            async with asyncio.timeout(limits.timeout_s):
                raw = await self._fetch(url, limits, method=method, headers=headers or {})
        except TimeoutError as exc:
            raise FetchError("upstream_error", f"timed out after {limits.timeout_s:g} s", url=url) from exc
        raw.took_ms = int((time.monotonic() - started) * 1000)
        return raw

    async def _fetch(self, url: str, limits: FetchLimits, *, method: str, headers: dict[str, str]) -> RawResponse:
        hops: list[str] = []
        current = url
        for _hop in range(limits.max_redirects + 1):
            try:
                checked, ip = await self.check(current)
            except UrlRefused as exc:
                where = "" if current == url else f" (redirect from {hops[-1]})"
                # A name that does not resolve is the upstream's problem, not a refused request.
                code = "upstream_error" if exc.reason == "unresolvable" else "bad_request"
                raise FetchError(code, f"{exc}{where}", url=current) from exc
            hops.append(current)
            response = await self._send(checked, ip, method, headers, limits.timeout_s)
            try:
                if response.status_code in REDIRECT_CODES and response.headers.get("location"):
                    target = urljoin(current, response.headers["location"].strip())
                    if not limits.follow_other_hosts and not same_site(current, target):
                        return RawResponse(
                            url=url,
                            final_url=current,
                            status=response.status_code,
                            headers=dict(response.headers),
                            content_type="",
                            body=b"",
                            redirect_to=target,
                            hops=hops,
                        )
                    current = target
                    continue
                return await self._read(url, current, response, limits, hops)
            finally:
                await response.aclose()
        raise FetchError("upstream_error", f"more than {limits.max_redirects} redirects", url=url, status=None)

    async def _send(
        self, checked: CheckedUrl, ip: str, method: str, headers: dict[str, str], timeout_s: float
    ) -> httpx.Response:
        host_literal = f"[{ip}]" if ":" in ip else ip
        target = f"{checked.scheme}://{host_literal}:{checked.port}{checked.path_query}"
        request_headers = {
            "User-Agent": self.user_agent,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.5",
            "Accept-Language": "en;q=0.9,*;q=0.5",
            **{k: v for k, v in headers.items() if k.lower() not in ("host", "cookie", "authorization")},
            "Host": checked.host_header,
        }
        extensions = {"sni_hostname": checked.host} if checked.scheme == "https" and checked.ip is None else {}
        # Each profile's own time limit, per read as well as overall (RTC's webFetch allows 60 s, codai's
        # web_fetch 10 s): the client's default read timeout would otherwise cut a slow RTC page at 30 s.
        timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        request = self._client.build_request(
            method, target, headers=request_headers, extensions=extensions, timeout=timeout
        )
        try:
            return await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise FetchError(
                "upstream_error",
                f"could not fetch {checked.url}: {exc.__class__.__name__}: {exc}",
                url=checked.url,
            ) from exc

    async def _read(
        self, url: str, final_url: str, response: httpx.Response, limits: FetchLimits, hops: list[str]
    ) -> RawResponse:
        content_type = response.headers.get("content-type", "")
        if limits.accept is not None and 200 <= response.status_code < 300 and not limits.accept(content_type):
            raise FetchError(
                "unsupported_content_type",
                f"content type {media_type(content_type) or '(none)'} is not accepted",
                url=final_url,
                status=response.status_code,
                content_type=media_type(content_type),
            )
        declared = response.headers.get("content-length")
        if limits.fail_over_size and declared and declared.isdigit() and int(declared) > limits.max_bytes:
            raise FetchError(
                "too_large",
                f"body of {declared} bytes is over the {limits.max_bytes} byte limit",
                url=final_url,
                status=response.status_code,
            )
        chunks: list[bytes] = []
        size = 0
        truncated = False
        try:
            async for chunk in response.aiter_bytes():
                if size + len(chunk) > limits.max_bytes:
                    chunks.append(chunk[: limits.max_bytes - size])
                    size = limits.max_bytes
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
        except httpx.HTTPError as exc:
            raise FetchError(
                "upstream_error",
                f"reading the body failed: {exc}",
                url=final_url,
                status=response.status_code,
            ) from exc
        if truncated and limits.fail_over_size:
            raise FetchError(
                "too_large",
                f"body is over the {limits.max_bytes} byte limit",
                url=final_url,
                status=response.status_code,
            )
        return RawResponse(
            url=url,
            final_url=final_url,
            status=response.status_code,
            headers=dict(response.headers),
            content_type=media_type(content_type),
            body=b"".join(chunks),
            truncated=truncated,
            hops=hops,
        )
