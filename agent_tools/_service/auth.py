"""The service's one reading of ``Authorization: Bearer <token>`` (event ingress and the web tools API)."""

from __future__ import annotations

_SCHEME = "bearer "


def bearer_token(authorization: str | None) -> str | None:
    """The token of a bearer Authorization header (scheme matched case-insensitively, RFC 7235), or None
    when the header is missing, names another scheme, or carries an empty token."""
    if not authorization or authorization[: len(_SCHEME)].lower() != _SCHEME:
        return None
    return authorization[len(_SCHEME) :].strip() or None
