"""Contract of search_conversation_history (FYAI): search the current session's stored transcript.

It reads the SQL transcript, not the workflow history, and never asks for approval.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent_tools._catalog.spec import ToolSpec

SNIPPET_CHARS = 300


class SearchConversationHistoryArgs(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="The text to look for")
    role: Literal["user", "assistant", "system"] | None = Field(
        default=None, description="Only search messages from user, assistant or system"
    )
    limit: int = Field(default=20, ge=1, le=100, description="Maximum results")


class HistoryHit(BaseModel):
    position: int = Field(description="Position of the message in the conversation (0 = first)")
    role: str
    created_at: str
    snippet: str = Field(description="The text around the first match (up to 300 characters)")


class SearchConversationHistoryResult(BaseModel):
    query: str
    role: str | None
    matches: list[HistoryHit]
    note: str | None = None


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="search_conversation_history",
        read_only=True,
        description=(
            "Search earlier messages in this conversation (for example an earlier decision). Matches the "
            "exact text first, then messages containing all of its words; newest first."
        ),
        args_model=SearchConversationHistoryArgs,
        result_model=SearchConversationHistoryResult,
        capability="history",
        # 100 snippets of 300 characters at most: bounded, and a pointer to a search would help nobody.
        spill_exempt=True,
        summary_arg="query",
    ),
]
