"""Tool profiles: the faces each platform's users know, plus everything at once.

A profile is only a list of names; the engines behind the names are shared. An agent picks a profile and
may add or exclude tools (see :class:`agent_tools._agents.AgentDefinition`).
"""

from __future__ import annotations

RTC: list[str] = [
    "subAgent", "listSubAgent", "getSubAgentMessage", "stopSubAgent", "sendMessageToSubAgent",
    "askUser", "todoWrite",
    "createGoal", "completeGoal", "cancelGoal",
    "createLoop", "cancelLoop", "completeLoop", "listLoops", "pauseLoop", "resumeLoop",
    "webSearch", "webFetch",
    "saveMemory", "updateMemory", "deleteMemory", "listMemories", "searchMemory",
]  # fmt: skip

# FYAI's built-ins that every agent gets without assigning them (the "Automatic" chip; each under its
# condition, see ToolCatalog.offer). The others are "assign it as a function" tools: an agent of the fyai
# profile gets them only when its own ``tools`` list names them.
FYAI: list[str] = [
    "remember", "recall",
    "read_tool_result", "search_tool_result", "query_tool_result",
]  # fmt: skip

FYAI_ASSIGNED: list[str] = [
    "search_conversation_history", "wait_for_event", "hand_off_to_agent", "invoke_sub_agent",
]  # fmt: skip

CODAI: list[str] = [
    "http_fetch", "json_query", "exec_python", "read_artifact",
    "memory_recall", "memory_remember", "use_skill",
    "web_search", "web_fetch", "delegate_to_model", "spawn_agent",
]  # fmt: skip

PROFILES: dict[str, list[str]] = {
    "rtc": RTC,
    "fyai": FYAI,
    "codai": CODAI,
    # Everything at once, assigned-only tools included: the built-in agent's profile.
    "all": list(dict.fromkeys(RTC + FYAI + FYAI_ASSIGNED + CODAI)),
    "none": [],
}
