"""Webhook signatures. Pure (no I/O): verify and sign for tests, the CLI and the bench.

GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>``. GitHub signs no timestamp, so a
replay is caught by the delivery id (``X-GitHub-Delivery``) instead.

Standard Webhooks (https://www.standardwebhooks.com): ``webhook-signature: v1,<base64 HMAC-SHA256(key,
"<webhook-id>.<webhook-timestamp>.<body>")>`` (several space-separated signatures allowed during key
rotation); the key is the base64 part of a ``whsec_`` secret, or the secret's UTF-8 bytes otherwise. The
timestamp must be within the tolerance window of the receiver's clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from agent_tools._errors import InvalidInput


class SignatureError(InvalidInput):
    """A signature, or the timestamp it covers, does not verify."""


def sign_github(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_github(secret: str, body: bytes, header: str | None) -> None:
    if not header:
        raise SignatureError("missing X-Hub-Signature-256 header")
    if not header.startswith("sha256="):
        raise SignatureError("X-Hub-Signature-256 must start with sha256=")
    if not hmac.compare_digest(sign_github(secret, body), header.strip()):
        raise SignatureError("X-Hub-Signature-256 does not match the body")


def _key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            pass
    return secret.encode()


def sign_standard_webhook(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify_standard_webhook(
    secret: str,
    body: bytes,
    *,
    msg_id: str | None,
    timestamp: str | None,
    signature: str | None,
    now: float,
    tolerance_seconds: int,
) -> int:
    """Check the headers; returns the timestamp. Raises :class:`SignatureError` with the reason."""
    if not msg_id or not timestamp or not signature:
        raise SignatureError("missing webhook-id, webhook-timestamp or webhook-signature header")
    try:
        ts = int(timestamp)
    except ValueError:
        raise SignatureError("webhook-timestamp must be integer seconds since the epoch") from None
    if abs(now - ts) > tolerance_seconds:
        raise SignatureError(
            f"webhook-timestamp is outside the {tolerance_seconds} s window (a replayed or delayed delivery)"
        )
    expected = sign_standard_webhook(secret, msg_id, ts, body)
    for candidate in signature.split():
        if candidate.startswith("v1,") and hmac.compare_digest(candidate, expected):
            return ts
    raise SignatureError("webhook-signature does not match the body")
