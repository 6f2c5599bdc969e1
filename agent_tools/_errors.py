"""Errors of Durable Agent Tools: every exception this package raises is an :class:`AgentToolsError`.

Hierarchy::

    AgentToolsError
    ├── ConfigurationError          bad settings, unknown agent, unknown model spec
    │   └── StoreNotReady           the store has no schema (or an older one): run a worker or migrate
    ├── ProviderError               a model provider failed
    │   ├── ProviderRetryableError      429 / 5xx / timeouts: Temporal retries the activity
    │   └── ProviderRequestError        other 4xx, malformed responses: fails at once
    ├── InvalidInput (ValueError)   input refused where it enters; the message says what to change
    │   ├── UrlRefused                  the SSRF guard refused a URL          (contracts._web.ssrf)
    │   ├── JsonQueryError              a JSON query (json_query, query_tool_result)   (contracts._query)
    │   ├── PatternError                a search_tool_result pattern          (contracts._results.readers)
    │   ├── SignatureError              a webhook signature or timestamp      (contracts._events.signatures)
    │   ├── SkillError                  a skill file that does not parse      (contracts._skills)
    │   └── AnswerRejected              answers that fit no pending question  (contracts._human)
    ├── ToolFailure                 raised by a tool: the model gets an error result (not retried)
    ├── WebError                    a web face's refusal or failure, with the contract's code and status
    ├── WebToolError                the same, as the client raises it       (_web_client)
    ├── FetchError                  a page that could not be fetched        (_web.fetcher)
    ├── EngineError                 one search engine failed                (_web.engines)
    ├── McpUnavailable              an MCP server cannot be reached         (activities._mcp.client)
    ├── PatternTimeout (TimeoutError)  a pattern ran past its time budget   (contracts._results.readers)
    ├── SessionError                a client request a session cannot take
    └── AnswerInputClosed           the terminal closed before a question was answered

Module-local errors live with their code and derive from these bases. Temporal sees them as
``ApplicationError`` types named after the class (:func:`error_type`), so a rename cannot silently turn a
non-retryable error into a retried one.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "NON_RETRYABLE_MODEL_ERRORS",
    "NON_RETRYABLE_TOOL_ERRORS",
    "AgentToolsError",
    "AnswerInputClosed",
    "ConfigurationError",
    "InvalidInput",
    "ProviderError",
    "ProviderRequestError",
    "ProviderRetryableError",
    "SessionError",
    "StoreNotReady",
    "ToolFailure",
    "WebError",
    "error_type",
]


class AgentToolsError(Exception):
    """Base of every error this package raises."""


class ConfigurationError(AgentToolsError):
    """Settings, agent definitions or model specs are wrong."""


class StoreNotReady(ConfigurationError):
    """A client opened a store that no worker has created or migrated yet, or that it cannot reach; the
    message says which, and what to run."""


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


class InvalidInput(AgentToolsError, ValueError):
    """Input refused at a boundary (a model's arguments, a client's request, an HTTP body).

    A ``ValueError`` too, so that pydantic validators may raise it and report it as a validation error.
    """


class ToolFailure(AgentToolsError):
    """Raised by a tool to give the model an error result (not an activity failure, not retried)."""

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data


class WebError(AgentToolsError):
    """A web face's failure: ``code`` and ``http_status`` as the contract names them, plus ``details``."""

    def __init__(self, code: str, message: str, *, http_status: int, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status
        self.details = details or {}


class SessionError(AgentToolsError):
    """A session refused a client request."""


class AnswerInputClosed(AgentToolsError):
    """Standard input ended (closed, a pipe, Ctrl-D) while the CLI was asking a session's question.

    The session keeps waiting for the answer; the message says how to give it.
    """


def error_type(cls: type[BaseException]) -> str:
    """The ``ApplicationError`` type Temporal records for ``cls`` (retry policies list these)."""
    return cls.__name__


# Errors no retry can fix, as retry policies name them.
NON_RETRYABLE_MODEL_ERRORS: tuple[str, ...] = (error_type(ProviderRequestError), error_type(ConfigurationError))
NON_RETRYABLE_TOOL_ERRORS: tuple[str, ...] = (error_type(ConfigurationError),)
