"""The hostile suite's reading of a workflow task failure: only the server's and the SDK core's own retried
failures pass as benign; any failure of the session's code is a finding."""

from __future__ import annotations

from temporalio.api.enums.v1 import WorkflowTaskFailedCause

from tests.support.hostile import benign_task_failure

NDE = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
# As a clean-clone CI run recorded it, after the dev server failed to put a task on the sticky queue.
CORE_MISREAD = (
    "[TMPRL1100] Nondeterminism error: During event handling, this event had an initial command ID but we could "
    "not find a matching command for it: HistoryEvent { event_id: 5, event_time: Some(Timestamp { seconds: "
    "1796425094, nanos: 416213594 }), event_type: WorkflowTaskTimedOut, version: 0, task_id: 1052964, "
    "attributes: Some(WorkflowTaskTimedOutEventAttributes(WorkflowTaskTimedOutEventAttributes { "
    "scheduled_event_id: 4, started_event_id: 0, timeout_type: ScheduleToStart })) }"
)


def test_the_cores_misread_of_a_sticky_timeout_and_a_refused_completion_are_benign() -> None:
    assert benign_task_failure(NDE, CORE_MISREAD)
    assert benign_task_failure(WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND, "")


def test_the_sessions_own_failures_are_findings() -> None:
    # Workflow code that schedules other commands than its history holds.
    assert not benign_task_failure(
        NDE,
        "[TMPRL1100] Nondeterminism error: Activity machine does not handle this event: HistoryEvent(id: 5, TimerStarted)",
    )
    assert not benign_task_failure(
        NDE,
        "[TMPRL1100] Nondeterminism error: During event handling, this event had an initial command ID but we could "
        "not find a matching command for it: HistoryEvent { event_id: 9, event_type: TimerStarted }",
    )
    # An exception in workflow code, whatever its message says.
    failed = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE
    assert not benign_task_failure(failed, "KeyError: 'x'")
    assert not benign_task_failure(failed, CORE_MISREAD)
