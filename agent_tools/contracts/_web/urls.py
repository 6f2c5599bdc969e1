"""URL helpers shared by search and fetch: normalisation for cache keys and de-duplication, unwrapping
search engines' redirect links, and the include/exclude domain rules. Pure."""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

# Query parameters that only track the click; dropping them makes the same page one result.
_TRACKING = re.compile(r"^(utm_[a-z]+|fbclid|gclid|dclid|msclkid|mc_cid|mc_eid|yclid|_hsenc|_hsmi|ref_src)$", re.I)


def normalize_url(url: str) -> str:
    """Canonical form for comparison: lower-case scheme and host, no default port, no fragment, no
    tracking parameters, no trailing slash on a non-root path. The page is the same; the string is not."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    port = parts.port if parts.port and not _default_port(scheme, parts.port) else None
    netloc = f"[{host}]" if ":" in host else host
    if port:
        netloc += f":{port}"
    path = parts.path or "/"
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/")
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _TRACKING.match(k)])
    return urlunsplit((scheme, netloc, path, query, ""))


def _default_port(scheme: str, port: int) -> bool:
    return (scheme == "http" and port == 80) or (scheme == "https" and port == 443)


def host_of(url: str) -> str:
    """Lower-case host of a URL ('' when it has none)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def same_site(a: str, b: str) -> bool:
    """Same host, ignoring a leading ``www.`` (example.com and www.example.com serve one site)."""
    ha, hb = host_of(a), host_of(b)
    return ha.removeprefix("www.") == hb.removeprefix("www.")


def unwrap_redirect(url: str) -> str:
    """The destination of a search engine's click-tracking link, or the URL itself.

    DuckDuckGo: ``//duckduckgo.com/l/?uddg=<percent-encoded>``; Bing: ``bing.com/ck/a?...&u=a1<base64url>``;
    Google: ``/url?q=<url>``.
    """
    if url.startswith("//"):
        url = "https:" + url
    elif url.startswith("/l/?"):
        url = "https://duckduckgo.com" + url  # DuckDuckGo's HTML endpoint also links relative
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    host = (parts.hostname or "").lower()
    params = parse_qs(parts.query)
    if (host == "duckduckgo.com" or host.endswith(".duckduckgo.com")) and parts.path.startswith("/l/"):
        raw = parts.query.partition("uddg=")[2]
        if "://" in raw.split("&", 1)[0] or raw.startswith(("http://", "https://")):
            # Already percent-decoded (ddgs unquotes the whole link): the target's own "&" are in it, and
            # only DuckDuckGo's trailing "&rut=..." is not part of it.
            return re.sub(r"&rut=[^&]*$", "", raw)
        if params.get("uddg"):
            return unquote(params["uddg"][0]) if "%" in params["uddg"][0] else params["uddg"][0]
    if host.endswith("bing.com") and parts.path.startswith("/ck/") and params.get("u"):
        encoded = params["u"][0]
        if encoded.startswith("a1"):
            encoded = encoded[2:]
        try:
            padded = encoded + "=" * (-len(encoded) % 4)
            decoded = base64.urlsafe_b64decode(padded).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return url
        if decoded.startswith(("http://", "https://")):
            return decoded
        return url
    if host.endswith("google.com") and parts.path == "/url" and params.get("q"):
        return params["q"][0]
    return url


def domain_rule_matches(url: str, rule: str) -> bool:
    """Does ``url`` fall under ``rule`` (``example.com``, ``docs.example.com`` or ``github.com/vercel``)?

    Subdomains are included (``example.com`` matches ``api.example.com``); a path prefix matches on whole
    segments (``github.com/vercel`` matches ``github.com/vercel/next.js``, not ``github.com/vercel-labs``).
    """
    rule = rule.strip().lower()
    rule = re.sub(r"^[a-z]+://", "", rule).rstrip("/")
    rule_host, _, rule_path = rule.partition("/")
    rule_host = rule_host.removeprefix("www.")
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower().removeprefix("www.")
    if not rule_host or not (host == rule_host or host.endswith("." + rule_host)):
        return False
    if not rule_path:
        return True
    path = parts.path.lower().strip("/")
    return path == rule_path or path.startswith(rule_path + "/")


def passes_domain_filters(url: str, include: list[str] | None, exclude: list[str] | None) -> bool:
    if include and not any(domain_rule_matches(url, r) for r in include):
        return False
    return not (exclude and any(domain_rule_matches(url, r) for r in exclude))


def rule_host(rule: str) -> str:
    """The host part of a domain rule, for a ``site:`` operator."""
    return re.sub(r"^[a-z]+://", "", rule.strip().lower()).split("/", 1)[0].removeprefix("www.")
