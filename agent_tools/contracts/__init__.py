"""The data a caller passes to sessions and tools and reads back.

The names in ``__all__`` are public: approvals, questions, structured results, MCP servers and the web
tools' requests and answers. The package itself is the pure layer: one module (or package) per capability
with the pydantic argument and result models of its tools, a ``TOOLS`` list of
:class:`agent_tools._catalog.ToolSpec` and the state the session keeps for it. No I/O and no temporalio:
the workflow layer imports these modules. Everything not in ``__all__`` is implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_tools._lazy import lazy_names

__all__ = [
    "AnswerAccepted",
    "ApprovalAccepted",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalState",
    "AskOption",
    "FetchResponse",
    "HumanState",
    "McpConfig",
    "McpServerConfig",
    "OutputContract",
    "PendingApproval",
    "PendingQuestion",
    "ResearchJob",
    "ResearchRequest",
    "SearchResponse",
    "WebFetchArgs",
    "WebSearchArgs",
    "schema_refusal",
]

_LAZY = {
    # Tool approvals
    "ApprovalPolicy": "agent_tools.contracts._approvals",
    "PendingApproval": "agent_tools.contracts._approvals",
    "ApprovalDecision": "agent_tools.contracts._approvals",
    "ApprovalAccepted": "agent_tools.contracts._approvals",
    "ApprovalState": "agent_tools.contracts._approvals",
    # Questions to a person (askUser)
    "PendingQuestion": "agent_tools.contracts._human",
    "AskOption": "agent_tools.contracts._human",
    "AnswerAccepted": "agent_tools.contracts._human",
    "HumanState": "agent_tools.contracts._human",
    # Structured results
    "OutputContract": "agent_tools.contracts._output",
    "schema_refusal": "agent_tools.contracts._output",
    # MCP servers
    "McpConfig": "agent_tools.contracts._mcp.config",
    "McpServerConfig": "agent_tools.contracts._mcp.config",
    # Web tools (ToolsClient, ResearchClient and the HTTP service)
    "WebSearchArgs": "agent_tools.contracts._web.models",
    "WebFetchArgs": "agent_tools.contracts._web.models",
    "SearchResponse": "agent_tools.contracts._web.models",
    "FetchResponse": "agent_tools.contracts._web.models",
    "ResearchRequest": "agent_tools.contracts._web.models",
    "ResearchJob": "agent_tools.contracts._web.models",
}

if TYPE_CHECKING:
    from agent_tools.contracts._approvals import (
        ApprovalAccepted,
        ApprovalDecision,
        ApprovalPolicy,
        ApprovalState,
        PendingApproval,
    )
    from agent_tools.contracts._human import AnswerAccepted, AskOption, HumanState, PendingQuestion
    from agent_tools.contracts._mcp.config import McpConfig, McpServerConfig
    from agent_tools.contracts._output import OutputContract, schema_refusal
    from agent_tools.contracts._web.models import (
        FetchResponse,
        ResearchJob,
        ResearchRequest,
        SearchResponse,
        WebFetchArgs,
        WebSearchArgs,
    )


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
