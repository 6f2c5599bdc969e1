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
    "ApprovalPolicy": "agent_tools.contracts.approvals",
    "PendingApproval": "agent_tools.contracts.approvals",
    "ApprovalDecision": "agent_tools.contracts.approvals",
    "ApprovalAccepted": "agent_tools.contracts.approvals",
    "ApprovalState": "agent_tools.contracts.approvals",
    # Questions to a person (askUser)
    "PendingQuestion": "agent_tools.contracts.human",
    "AskOption": "agent_tools.contracts.human",
    "AnswerAccepted": "agent_tools.contracts.human",
    "HumanState": "agent_tools.contracts.human",
    # Structured results
    "OutputContract": "agent_tools.contracts.output",
    "schema_refusal": "agent_tools.contracts.output",
    # MCP servers
    "McpConfig": "agent_tools.contracts.mcp.config",
    "McpServerConfig": "agent_tools.contracts.mcp.config",
    # Web tools (ToolsClient, ResearchClient and the HTTP service)
    "WebSearchArgs": "agent_tools.contracts.web.models",
    "WebFetchArgs": "agent_tools.contracts.web.models",
    "SearchResponse": "agent_tools.contracts.web.models",
    "FetchResponse": "agent_tools.contracts.web.models",
    "ResearchRequest": "agent_tools.contracts.web.models",
    "ResearchJob": "agent_tools.contracts.web.models",
}

if TYPE_CHECKING:
    from agent_tools.contracts.approvals import (
        ApprovalAccepted,
        ApprovalDecision,
        ApprovalPolicy,
        ApprovalState,
        PendingApproval,
    )
    from agent_tools.contracts.human import AnswerAccepted, AskOption, HumanState, PendingQuestion
    from agent_tools.contracts.mcp.config import McpConfig, McpServerConfig
    from agent_tools.contracts.output import OutputContract, schema_refusal
    from agent_tools.contracts.web.models import (
        FetchResponse,
        ResearchJob,
        ResearchRequest,
        SearchResponse,
        WebFetchArgs,
        WebSearchArgs,
    )


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
