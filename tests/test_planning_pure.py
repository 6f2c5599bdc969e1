"""Pure rules of askUser, todos, goals and loops: argument validation, answer checks, result text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from agent_tools._catalog.registry import builtin_specs
from agent_tools._messages import Message, ToolCall
from agent_tools.contracts._human import (
    AnswerQuestions,
    AnswerRejected,
    AskUserArgs,
    HumanState,
    PendingAsk,
    QuestionAnswer,
    default_answer,
    format_answers,
    parse_answer_payload,
    render_pending,
    resolve_answers,
)
from agent_tools.contracts._planning import (
    MAX_LOOP_TURNS,
    MIN_LOOP_INTERVAL_SECONDS,
    CreateGoalArgs,
    CreateLoopArgs,
    Goal,
    PlanningState,
    TodoWriteArgs,
    judge_messages,
    loop_expiry,
    loop_interval_refusal,
    next_after,
    parse_verdict,
)


def option(label: str, **extra: Any) -> dict[str, Any]:
    return {"label": label, "description": f"about {label}", **extra}


def question(text: str = "Which one?", header: str = "Pick", multi: bool = False, n: int = 2) -> dict[str, Any]:
    return {
        "question": text,
        "header": header,
        "options": [option(f"opt {i}") for i in range(n)],
        "multiSelect": multi,
    }


def ask(*questions: dict[str, Any]) -> PendingAsk:
    args = AskUserArgs.model_validate({"questions": list(questions)})
    return PendingAsk(ask_id="call_0", questions=args.questions, asked_at="2026-01-01T00:00:00+00:00")


# ---- askUser arguments ---------------------------------------------------------------------------------


def test_valid_ask_user_arguments() -> None:
    args = AskUserArgs.model_validate({"questions": [question(), question("And this?", "Other Q", multi=True, n=4)]})
    assert args.questions[1].multiSelect and len(args.questions[1].options) == 4


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ([], "at least 1"),
        ([question(f"Q{i}?") for i in range(5)], "at most 4"),
        ([question("No mark")], "question mark"),
        ([question(header="Thirteen char")], "at most 12 characters"),
        ([question(n=1)], "at least 2"),
        ([question(n=5)], "at most 4"),
        ([{**question(), "options": [option("one two three four five six"), option("b")]}], "1-5 words"),
        ([{**question(), "options": [option("a"), option("A")]}], "distinct"),
        ([{**question(), "options": [option("a"), option("Other")]}], "always offered"),
        ([{**question(multi=True), "options": [option("a", preview="x"), option("b")]}], "single-select"),
        ([question(), question()], "distinct"),
    ],
)
def test_invalid_ask_user_arguments(questions: list[Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        AskUserArgs.model_validate({"questions": questions})
    assert message in str(info.value)


def test_preview_is_allowed_on_single_select() -> None:
    args = AskUserArgs.model_validate(
        {"questions": [{**question(), "options": [option("a", preview="line 1\nline 2"), option("b")]}]}
    )
    assert args.questions[0].options[0].preview == "line 1\nline 2"


# ---- answers -------------------------------------------------------------------------------------------


def test_answers_are_normalised_to_canonical_labels() -> None:
    pending = [ask(question("Which one?"), question("Which many?", "Many", multi=True, n=3))]
    resolved = resolve_answers(
        pending,
        AnswerQuestions(
            answers=[
                QuestionAnswer(question="Which one?", selected=["OPT 1"]),
                QuestionAnswer(question="Many", selected=["opt 0", "opt 2", "opt 0", "Other"], other=" mine "),
            ]
        ),
    )
    assert [(a.question, a.selected, a.other) for _, a in resolved] == [
        ("Which one?", ["opt 1"], None),
        ("Which many?", ["opt 0", "opt 2"], "mine"),
    ]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (QuestionAnswer(question="Who?", selected=["opt 0"]), "unknown question 'Who?'"),
        (QuestionAnswer(question="Which one?", selected=["nope"]), "'nope' is not an option"),
        (QuestionAnswer(question="Which one?", selected=["opt 0", "opt 1"]), "single-select"),
        (QuestionAnswer(question="Which one?", selected=["opt 0"], other="x"), "single-select"),
        (QuestionAnswer(question="Which one?", other="  "), "non-empty text"),
        (QuestionAnswer(question="Which one?", selected=["Other"]), "non-empty text"),
        (QuestionAnswer(question="Which one?"), "no option chosen"),
    ],
)
def test_bad_answers_are_rejected_with_a_reason(answer: QuestionAnswer, message: str) -> None:
    with pytest.raises(AnswerRejected) as info:
        resolve_answers([ask(question())], AnswerQuestions(answers=[answer]))
    assert message in str(info.value)


def test_answering_twice_or_with_nothing_pending_is_rejected() -> None:
    pending = ask(question())
    first = resolve_answers(
        [pending], AnswerQuestions(answers=[QuestionAnswer(question="Which one?", selected=["opt 0"])])
    )
    pending.answers[first[0][1].question] = first[0][1]
    with pytest.raises(AnswerRejected, match="already answered"):
        resolve_answers([pending], AnswerQuestions(answers=[QuestionAnswer(question="Which one?", selected=["opt 1"])]))
    with pytest.raises(AnswerRejected, match="no questions are pending"):
        resolve_answers([], AnswerQuestions(answers=[QuestionAnswer(question="Which one?", selected=["opt 1"])]))
    twice = [QuestionAnswer(question="Which one?", selected=["opt 0"])] * 2
    with pytest.raises(AnswerRejected, match="twice"):
        resolve_answers([ask(question())], AnswerQuestions(answers=twice))


def test_result_text_is_the_contract_sentence() -> None:
    pending = ask(
        {"question": "Which date formatting library should we use?", "header": "Date Library",
         "options": [option("date-fns"), option("dayjs")]},
    )  # fmt: skip
    [(_, a)] = resolve_answers([pending], parse_answer_payload({"Date Library": "date-fns"}))
    text = format_answers(pending.questions, {a.question: a})
    assert text == (
        'User has answered your questions: "Which date formatting library should we use?"="date-fns". '
        "You can now continue with the user's answers in mind."
    )


def test_result_text_for_multi_select_other_and_timeouts() -> None:
    pending = ask(question("Which one?"), question("Which many?", "Many", multi=True, n=3))
    resolved = resolve_answers(
        [pending],
        parse_answer_payload({"Which one?": {"other": "my own"}, "Many": ["opt 0", "opt 1", "opt 2"]}),
    )
    got = {a.question: a for _, a in resolved}
    assert format_answers(pending.questions, got) == (
        'User has answered your questions: "Which one?"=Other: "my own", '
        '"Which many?"="opt 0", "opt 1" and "opt 2". '
        "You can now continue with the user's answers in mind."
    )
    defaulted = default_answer(pending.questions[0], "first")
    assert defaulted is not None and defaulted.selected == ["opt 0"]
    assert default_answer(pending.questions[0], "OPT 1") is not None
    assert default_answer(pending.questions[0], "missing label") is None
    assert default_answer(pending.questions[0], None) is None
    text = format_answers(pending.questions, {"Which one?": defaulted}, timeout_seconds=60)
    assert 'default answers were used: "Which one?"="opt 0"' in text
    assert 'User did not answer within 60 seconds: "Which many?" (no answer).' in text


def test_parse_answer_payload_shapes() -> None:
    model = parse_answer_payload('{"answers": [{"question": "Q?", "selected": ["a"]}]}')
    assert model.answers[0].selected == ["a"]
    friendly = parse_answer_payload({"Q?": "a", "R?": ["b", "c"], "S?": {"other": "t"}})
    assert [(a.question, a.selected, a.other) for a in friendly.answers] == [
        ("Q?", ["a"], None), ("R?", ["b", "c"], None), ("S?", [], "t")
    ]  # fmt: skip
    bad_payloads: list[Any] = ["not json", [], {}, {"Q?": 3}]
    for bad in bad_payloads:
        with pytest.raises(AnswerRejected):
            parse_answer_payload(bad)


def test_pending_questions_view_and_details() -> None:
    state = HumanState(pending=[ask(question(), question("Second?", "Two", multi=True))])
    assert [q.question for q in state.pending_questions()] == ["Which one?", "Second?"]
    details = render_pending(state)
    assert "**[Pick]** Which one? _(one answer)_" in details and "3. Other (free text)" in details


# ---- todos, goals, loops -------------------------------------------------------------------------------


def test_todo_rules() -> None:
    TodoWriteArgs.model_validate({"todos": []})
    # RTC sets no limit on in_progress items.
    assert len(TodoWriteArgs.model_validate({"todos": [{"content": "a", "status": "in_progress"}] * 2}).todos) == 2
    with pytest.raises(ValidationError):
        TodoWriteArgs.model_validate({"todos": [{"content": "a", "status": "cancelled"}]})


def test_goal_and_loop_bounds() -> None:
    assert CreateGoalArgs(condition="x").max_turns == 50
    with pytest.raises(ValidationError):
        CreateGoalArgs(condition="x", max_turns=0)
    with pytest.raises(ValidationError):
        CreateGoalArgs(condition="x", max_turns=201)
    assert CreateLoopArgs(prompt="p", interval_seconds=3600).max_turns == 10
    # RTC sets no minimum: the schema asks only for a positive interval; the cost floor is the session's.
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        CreateLoopArgs(prompt="p", interval_seconds=MIN_LOOP_INTERVAL_SECONDS - 1)
    assert CreateLoopArgs(prompt="p", interval_seconds=5).interval_seconds == 5
    assert loop_interval_refusal(5, 5) is None
    assert "at least 5" in (loop_interval_refusal(4, 5) or "")
    with pytest.raises(ValidationError):
        CreateLoopArgs(prompt="p", interval_seconds=3600, max_turns=MAX_LOOP_TURNS + 1)


def test_missed_ticks_coalesce_and_keep_the_phase() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    assert next_after(t0, t0 - timedelta(seconds=1), 60) == t0
    assert next_after(t0, t0, 60) == t0 + timedelta(seconds=60)
    # Five intervals late (a worker outage): one tick now, the next on the original phase.
    assert next_after(t0, t0 + timedelta(seconds=301), 60) == t0 + timedelta(seconds=360)
    assert loop_expiry(t0, 3600, 10) == t0 + timedelta(hours=20)


def test_verdict_parsing() -> None:
    assert parse_verdict('{"met": true, "reason": "done"}').met
    v = parse_verdict('Sure! ```json\n{"met": false, "reason": "2 left"}\n```')
    assert (v.met, v.reason) == (False, "2 left")
    bad = parse_verdict("I think so")
    assert not bad.met and "not a verdict" in bad.reason
    assert not parse_verdict('{"met": "yes"}').met


def test_judge_prompt_reads_the_latest_turn() -> None:
    transcript = [
        Message(role="system", content="sys"),
        Message(role="user", content="old request"),
        Message(role="assistant", content="old answer"),
        Message(role="user", content="[Goal continuation goal-1] keep going"),
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCall(id="1", name="todoWrite", arguments={"todos": []})],
        ),
        Message(role="tool", content="Todo list updated"),
        Message(role="assistant", content="wrote file 3"),
    ]
    system, user = judge_messages("three files", transcript, completed_turns=3, max_turns=5)
    assert '"met"' in system.content
    assert "Goal condition: three files" in user.content and "Turns used: 3 of 5" in user.content
    assert "wrote file 3" in user.content and "[calls todoWrite" in user.content
    assert "old answer" not in user.content


def test_finished_goals_are_pruned_but_the_active_one_stays() -> None:
    now = "2026-01-01T00:00:00+00:00"
    goals = [
        Goal(
            goal_id=f"goal-{i}",
            condition="c",
            max_turns=5,
            status="completed",
            created_at=now,
            updated_at=now,
        )
        for i in range(30)
    ]
    goals.append(Goal(goal_id="goal-30", condition="c", max_turns=5, created_at=now, updated_at=now))
    state = PlanningState(goals=goals)
    state.prune()
    assert len(state.goals) == 21 and state.goals[0].goal_id == "goal-10"
    assert state.active_goal() is not None and state.active_goal().goal_id == "goal-30"  # type: ignore[union-attr]


def test_every_planning_and_human_tool_is_workflow_native() -> None:
    names = {"askUser", "todoWrite", "createGoal", "completeGoal", "cancelGoal", "createLoop", "cancelLoop",
             "completeLoop", "listLoops", "pauseLoop", "resumeLoop"}  # fmt: skip
    specs = {s.name: s for s in builtin_specs() if s.name in names}
    assert set(specs) == names
    assert all(s.runs_in == "workflow" for s in specs.values())
    assert specs["askUser"].interrupts
