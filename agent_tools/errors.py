"""Errors of Durable Agent Tools.

Hierarchy::

    AgentToolsError
    ├── ConfigurationError        bad settings, unknown agent, unknown model spec
    │   └── StoreNotReady             the store has no schema (or an older one): run a worker or migrate
    ├── ToolArgumentsError        the model's arguments do not fit a tool's schema
    ├── ProviderError             a model provider failed
    │   ├── ProviderRetryableError    429 / 5xx / timeouts: Temporal retries the activity
    │   └── ProviderRequestError      other 4xx, malformed responses: fails at once
    ├── ToolFailure               raised by a tool: the model gets an error result (not retried)
    ├── SessionError              a client request a session cannot take
    └── AnswerInputClosed         the terminal closed before a question was answered
"""

from __future__ import annotations

from typing import Any


class AgentToolsError(Exception):
    """Base of every error this package raises."""


class ConfigurationError(AgentToolsError):
    """Settings, agent definitions or model specs are wrong."""


class StoreNotReady(ConfigurationError):
    """A client opened a store that no worker has created or migrated yet; the message says what to run."""


class ToolArgumentsError(AgentToolsError):
    """The model called a tool with arguments that do not validate."""


class ProviderError(AgentToolsError):
    """A model provider call failed."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ProviderRetryableError(ProviderError):
    """Rate limits, server errors and timeouts: worth retrying."""


class ProviderRequestError(ProviderError):
    """The provider refused the request or answered nonsense: retrying cannot help."""


class ToolFailure(AgentToolsError):
    """Raised by a tool to give the model an error result (not an activity failure, not retried)."""

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data


class SessionError(AgentToolsError):
    """A session refused a client request."""


class AnswerInputClosed(AgentToolsError):
    """Standard input ended (closed, a pipe, Ctrl-D) while the CLI was asking a session's question.

    The session keeps waiting for the answer; the message says how to give it.
    """
