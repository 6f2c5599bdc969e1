"""The names of a session's signals, updates and queries: the one spelling the workflow and its clients share.

These names are part of recorded histories and of every client already deployed: never rename one.
"""

__all__ = [
    "QUERY_APPROVAL_STATE",
    "QUERY_EVENT_STATE",
    "QUERY_EVENT_WAITS",
    "QUERY_GOALS",
    "QUERY_HANDOFF",
    "QUERY_HUMAN_STATE",
    "QUERY_LATEST_MESSAGE",
    "QUERY_LOOPS",
    "QUERY_PENDING_APPROVALS",
    "QUERY_PENDING_QUESTIONS",
    "QUERY_PLANNING_STATE",
    "QUERY_STATUS",
    "QUERY_SUBAGENTS",
    "QUERY_TODOS",
    "SIGNAL_ANSWER_QUESTIONS",
    "SIGNAL_BUDGET_REACHED",
    "SIGNAL_DECIDE_APPROVAL",
    "SIGNAL_EVENT_ARRIVED",
    "SIGNAL_SEND_MESSAGE",
    "SIGNAL_STOP",
    "UPDATE_ANSWER_QUESTIONS",
    "UPDATE_DECIDE_APPROVAL",
    "UPDATE_SEND_MESSAGE",
]

# Messages in (a signal and an update of one name: the update returns once the message is accepted).
SIGNAL_SEND_MESSAGE = "send_message"
UPDATE_SEND_MESSAGE = "send_message"
SIGNAL_STOP = "stop"
# A person's answers to askUser questions: the update refuses bad answers, the signal records them.
UPDATE_ANSWER_QUESTIONS = "answer_questions"
SIGNAL_ANSWER_QUESTIONS = "answer_questions_signal"
# A person's decision on a tool call that needs approval (same pair).
UPDATE_DECIDE_APPROVAL = "decide_approval"
SIGNAL_DECIDE_APPROVAL = "decide_approval_signal"
# From the session tree and the event ingress.
SIGNAL_BUDGET_REACHED = "budget_reached"
SIGNAL_EVENT_ARRIVED = "event_arrived"

QUERY_STATUS = "status"
QUERY_LATEST_MESSAGE = "latest_message"
QUERY_PENDING_QUESTIONS = "pending_questions"
QUERY_HUMAN_STATE = "human_state"
QUERY_PENDING_APPROVALS = "pending_approvals"
QUERY_APPROVAL_STATE = "approval_state"
QUERY_TODOS = "todos"
QUERY_GOALS = "goals"
QUERY_LOOPS = "loops"
QUERY_PLANNING_STATE = "planning_state"
QUERY_SUBAGENTS = "subagents"
QUERY_HANDOFF = "handoff"
QUERY_EVENT_WAITS = "event_waits"
QUERY_EVENT_STATE = "event_state"
