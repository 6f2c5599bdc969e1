"""SSRF rules: which URLs and addresses a server-side fetch may reach. Pure: no DNS, no sockets.

The fetcher (:mod:`agent_tools._web.fetcher`) resolves a host once, passes every address through
:func:`check_addresses`, then connects to the address that passed; it never resolves the name a second
time, so a DNS answer that changes between the check and the connection (DNS rebinding) cannot reach an
internal address.

What is refused:

* schemes other than ``http``/``https``; credentials in the URL; over-long URLs; empty or malformed hosts;
* hosts whose address is not global: loopback, private, shared (CGNAT), link-local (cloud metadata),
  ``0.0.0.0/8``, multicast, reserved, documentation and benchmarking ranges, unique-local and site-local
  IPv6;
* the same addresses hidden in other spellings: numeric IPv4 forms the C resolver accepts (``2130706433``,
  ``0x7f000001``, ``0177.0.0.1``, ``127.1``), full-width digits (IDNA folds them), IPv4-mapped
  (``::ffff:127.0.0.1``), IPv4-compatible (``::127.0.0.1``), NAT64 (``64:ff9b::7f00:1``), 6to4
  (``2002:7f00:1::``) and Teredo forms.

Loopback is refused unless the caller opts in (``allow_loopback``: tests and local deployments).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from agent_tools._errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048

_NAT64_WKP = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPAT = ipaddress.ip_network("::/96")
_TEREDO = ipaddress.ip_network("2001::/32")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")
# Ranges Python's is_global still calls global but that no public web server lives in.
_EXTRA_BLOCKED: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
    ipaddress.ip_network("192.0.0.0/24"),  # IETF protocol assignments
    ipaddress.ip_network("198.18.0.0/15"),  # benchmarking
    ipaddress.ip_network("100.64.0.0/10"),  # shared address space (carrier-grade NAT)
)
_HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_PART = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


class UrlRefused(InvalidInput):
    """The URL may not be fetched. ``reason`` is a short code, the message says why for people."""

    def __init__(self, message: str, *, reason: str = "refused") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class CheckedUrl:
    """A URL that passed the static checks (the address check comes after resolution)."""

    url: str
    scheme: str
    host: str  # ASCII (IDNA) host, lower case, no brackets
    port: int
    path_query: str  # path plus ``?query``; never empty
    ip: IPAddress | None  # set when the host is an address literal (in any spelling)

    @property
    def host_header(self) -> str:
        """``Host`` header value: the name (bracketed when IPv6) plus the port when not the default."""
        name = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return name if self.port == default else f"{name}:{self.port}"


def parse_ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """IPv4 in every spelling ``inet_aton`` accepts (1-4 parts, decimal/octal/hex), else None.

    Browsers and the C library read ``127.1`` and ``0x7f.1`` as addresses; an attacker uses them to slip a
    loopback address past a check that only knows dotted-decimal.
    """
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts = parts[:-1]  # trailing dot
    if not 1 <= len(parts) <= 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        return None
    values: list[int] = []
    for p in parts:
        if p.startswith("0x"):
            values.append(int(p[2:] or "0", 16))
        elif len(p) > 1 and p.startswith("0"):
            if not all(c in "01234567" for c in p):
                return None
            values.append(int(p, 8))
        else:
            values.append(int(p))
    # The last part fills all the remaining bytes: a.b.c.d, a.b.(16 bits), a.(24 bits), (32 bits).
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def _looks_numeric(host: str) -> bool:
    """True when the last label is all digits/hex: resolvers treat such names as addresses, never DNS."""
    last = host.rstrip(".").rsplit(".", 1)[-1]
    return bool(last) and bool(_NUMERIC_PART.match(last))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64_WKP or ip in _IPV4_COMPAT:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIXTOFOUR:
        return ip.sixtofour
    if ip in _TEREDO and ip.teredo is not None:
        return ip.teredo[1]
    return None


def address_problem(ip: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why this address must not be reached, or None when it is a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "scoped IPv6 address"
        if ip.is_loopback:  # ::1 also sits in the IPv4-compatible range; name it for what it is
            return None if allow_loopback else "loopback address"
        if ip.is_unspecified:
            return "unspecified address"
        inner = embedded_ipv4(ip)
        if inner is not None:
            problem = address_problem(inner, allow_loopback=allow_loopback)
            if problem:
                return f"{problem} (embedded in {ip})"
            if ip in _IPV4_COMPAT or ip in _TEREDO:
                return "deprecated IPv4-compatible or Teredo address"
            return None
        if ip in _NAT64_LOCAL:
            return "local-use NAT64 address"
    return _range_problem(ip, allow_loopback=allow_loopback)


def _range_problem(ip: IPAddress, *, allow_loopback: bool) -> str | None:
    """The special-purpose range ``ip`` falls in, for either version, or None for a global address."""
    if ip.is_loopback:
        return None if allow_loopback else "loopback address"
    if ip.is_unspecified or (isinstance(ip, ipaddress.IPv4Address) and int(ip) >> 24 == 0):
        return "unspecified / this-network address (0.0.0.0/8)"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local address"
    if any(ip in net for net in _EXTRA_BLOCKED if net.version == ip.version):
        return "special-purpose address"
    if ip.is_private:
        return "private address"
    if ip.is_reserved:
        return "reserved address"
    if not ip.is_global:
        return "non-global address"
    return None


def check_address(ip: IPAddress, *, allow_loopback: bool = False) -> None:
    """Raise :class:`UrlRefused` unless ``ip`` is a public address (or loopback when allowed)."""
    problem = address_problem(ip, allow_loopback=allow_loopback)
    if problem:
        raise UrlRefused(f"refused: {ip} is a {problem}", reason="blocked_address")


def check_addresses(host: str, addresses: list[str], *, allow_loopback: bool = False) -> IPAddress:
    """Check every resolved address of ``host``; return the one to connect to.

    All must pass: a name that resolves to one public and one private address is refused, because the
    connection could land on either.
    """
    if not addresses:
        raise UrlRefused(f"refused: {host} did not resolve", reason="unresolvable")
    parsed: list[IPAddress] = []
    for text in addresses:
        ip = ipaddress.ip_address(text.split("%", 1)[0]) if "%" not in text else None
        if ip is None:
            raise UrlRefused(f"refused: {host} resolved to a scoped address {text}", reason="blocked_address")
        problem = address_problem(ip, allow_loopback=allow_loopback)
        if problem:
            raise UrlRefused(f"refused: {host} resolves to {ip}, a {problem}", reason="blocked_address")
        parsed.append(ip)
    # Prefer IPv4: it is what most test and production networks route.
    return next((ip for ip in parsed if ip.version == 4), parsed[0])


def ensure_scheme(url: str) -> str:
    """Prepend ``https://`` when the URL has no scheme (the codai contract's rule)."""
    url = url.strip()
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", url):
        return url
    if url.startswith("//"):
        return "https:" + url
    # "localhost:8080/x" parses as scheme "localhost"; only a real scheme is left alone.
    if re.match(r"^(mailto|javascript|data|file|ftp|gopher|dict|ldap|tel):", url, re.I):
        return url
    return "https://" + url


def check_url(url: str, *, max_length: int = MAX_URL_LENGTH, allow_loopback: bool = False) -> CheckedUrl:
    """Static checks: scheme, credentials, length, host syntax, and address literals in any spelling.

    Raises:
        UrlRefused: with ``reason`` one of ``too_long``, ``scheme``, ``credentials``, ``bad_host``,
            ``blocked_address``.
    """
    if len(url) > max_length:
        raise UrlRefused(f"refused: URL is longer than {max_length} characters", reason="too_long")
    if any(c in url for c in "\r\n\t\x00") or url != url.strip():
        raise UrlRefused("refused: URL contains whitespace or control characters", reason="bad_host")
    try:
        parts = urlsplit(url)
        port_value = parts.port
    except ValueError as exc:
        raise UrlRefused(f"refused: malformed URL ({exc})", reason="bad_host") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UrlRefused(
            f"refused: only http and https URLs can be fetched, not {scheme or 'no scheme'}", reason="scheme"
        )
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise UrlRefused("refused: URLs with credentials are not fetched", reason="credentials")
    if "\\" in parts.netloc:
        raise UrlRefused("refused: backslash in the host", reason="bad_host")
    raw_host = unquote(parts.hostname or "")
    if not raw_host:
        raise UrlRefused("refused: URL has no host", reason="bad_host")
    port = port_value or (443 if scheme == "https" else 80)
    ip, host = _url_host(parts.netloc, raw_host)
    if ip is not None:
        check_address(ip, allow_loopback=allow_loopback)
    path_query = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return CheckedUrl(url=url, scheme=scheme, host=host, port=port, path_query=path_query, ip=ip)


def _url_host(netloc: str, raw_host: str) -> tuple[IPAddress | None, str]:
    """The address a URL's host spells (any IPv4 spelling folded to dotted quads) and its canonical name.

    Raises:
        UrlRefused: ``bad_host`` for a bad IPv6 literal, a numeric name that is no address, or a bad label.
    """
    if netloc.split("@")[-1].startswith("["):
        try:
            ip6 = ipaddress.IPv6Address(raw_host)
        except ValueError as exc:
            raise UrlRefused(f"refused: bad IPv6 literal {raw_host!r}", reason="bad_host") from exc
        return ip6, raw_host.lower()
    try:
        # IDNA folds full-width digits and dots (U+FF11, U+FF0E, ...) to ASCII before anything reads them.
        host = raw_host.encode("idna").decode("ascii").lower() if not raw_host.isascii() else raw_host.lower()
    except UnicodeError as exc:
        raise UrlRefused(f"refused: host {raw_host!r} is not a valid name", reason="bad_host") from exc
    if host.endswith("."):
        host = host[:-1]
    ip = parse_ipv4_loose(host)
    if ip is not None:
        return ip, str(ip)
    if _looks_numeric(host):
        raise UrlRefused(f"refused: host {raw_host!r} is neither a name nor an address", reason="bad_host")
    if not host or not all(_HOST_LABEL.match(label) for label in host.split(".")):
        raise UrlRefused(f"refused: host {raw_host!r} is not a valid name", reason="bad_host")
    return None, host
