"""The service's bearer-token reading, shared by the event ingress and the web tools API."""

from __future__ import annotations

import pytest

from agent_tools._service.auth import bearer_token


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc ", "abc"),  # the scheme is case-insensitive; surrounding space is not part of the token
        ("BEARER  a.b-c", "a.b-c"),
        (None, None),
        ("", None),
        ("Bearer ", None),  # an empty token is no token
        ("Basic dXNlcjpwdw==", None),
        ("Bearerabc", None),
        ("abc", None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
