"""Errors of Durable Agent Tools.

Hierarchy::

    AgentToolsError
    ├── ConfigurationError        bad settings, unknown agent, unknown model spec
    ├── ToolArgumentsError        the model's arguments do not fit a tool's schema
    ├── ProviderError             a model provider failed
    │   ├── ProviderRetryableError    429 / 5xx / timeouts: Temporal retries the activity
    │   └── ProviderRequestError      other 4xx, malformed responses: fails at once
    ├── SessionError              a client request a session cannot take
    └── AnswerInputClosed         the terminal closed before a question was answered
"""

from __future__ import annotations


class AgentToolsError(Exception):
    """Base of every error this package raises."""


class ConfigurationError(AgentToolsError):
    """Settings, agent definitions or model specs are wrong."""


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


class SessionError(AgentToolsError):
    """A session refused a client request."""


class AnswerInputClosed(AgentToolsError):
    """Standard input ended (closed, a pipe, Ctrl-D) while the CLI was asking a session's question.

    The session keeps waiting for the answer; the message says how to give it.
    """
