"""Event sources: ingress settings and webhook signature rules (pure helpers of the events capability)."""

from agent_tools.events.settings import EventSettings, EventSource
from agent_tools.events.signatures import (
    SignatureError,
    sign_github,
    sign_standard_webhook,
    verify_github,
    verify_standard_webhook,
)

__all__ = [
    "EventSettings",
    "EventSource",
    "SignatureError",
    "sign_github",
    "sign_standard_webhook",
    "verify_github",
    "verify_standard_webhook",
]
