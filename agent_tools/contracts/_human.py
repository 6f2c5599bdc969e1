"""Human-in-the-loop contracts: askUser (RTC), the answers people send back, and their validation.

Everything here is pure (no Temporal, no I/O): the session workflow, the update validator, the signal
handler, the client and the CLI all share the same rules, so an answer the CLI accepts is one the
workflow accepts, and a rejection reads the same everywhere.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent_tools._boundaries import LABEL_CHARS, NOTE_CHARS, limit
from agent_tools._catalog.spec import ToolSpec
from agent_tools._errors import InvalidInput

# The user can always answer in their own words; this label stands for that choice.
OTHER_LABEL = "Other"
MAX_QUESTIONS = 4
MAX_HEADER_CHARS = 12
MAX_LABEL_WORDS = 5
# History the session keeps (it is carried by continue-as-new, so it is bounded).
MAX_ANSWERED_KEPT = 50
MAX_REJECTED_KEPT = 20
REJECTED_PREVIEW_BYTES = 200
MAX_OPTIONS = 4
MAX_QUESTION_CHARS = 1_000
MAX_LABEL_CHARS = 100
MAX_PREVIEW_CHARS = 10_000
MAX_OTHER_CHARS = 10_000
"""The free text of an "Other" answer (docs/limits.md)."""

AnswerVia = Literal["update", "signal", "timeout"]


# ---- the tool's arguments ------------------------------------------------------------------------------


class AskOption(BaseModel):
    """One choice offered for a question."""

    label: str = Field(description="Option display text (1-5 words)", **limit(chars=MAX_LABEL_CHARS))
    description: str = Field(
        min_length=1, description="What this option means or what happens if chosen", **limit(chars=NOTE_CHARS)
    )
    preview: str | None = Field(
        default=None,
        description="Preview shown when the option is focused (single-select questions only)",
        **limit(chars=MAX_PREVIEW_CHARS),
    )

    @field_validator("label")
    @classmethod
    def _label_words(cls, value: str) -> str:
        value = value.strip()
        words = value.split()
        if not 1 <= len(words) <= MAX_LABEL_WORDS:
            raise ValueError(f"label must be 1-{MAX_LABEL_WORDS} words, got {len(words)}: {value!r}")
        if value.casefold() == OTHER_LABEL.casefold():
            raise ValueError(f"{OTHER_LABEL!r} is always offered to the user; do not list it as an option")
        return value


class AskQuestion(BaseModel):
    """One multiple-choice question."""

    model_config = ConfigDict(populate_by_name=True)

    question: str = Field(
        description="The complete question text, ending with a question mark", **limit(chars=MAX_QUESTION_CHARS)
    )
    header: str = Field(
        description=f"Short label (max {MAX_HEADER_CHARS} characters) shown as a chip",
        **limit(chars=MAX_HEADER_CHARS),
    )
    options: list[AskOption] = Field(min_length=2, max_length=4, description="2-4 options")
    multiSelect: bool = Field(default=False, description="Allow selecting several options")

    @field_validator("question")
    @classmethod
    def _ends_with_question_mark(cls, value: str) -> str:
        value = value.strip()
        if not value.endswith("?"):
            raise ValueError(f"question must end with a question mark: {value!r}")
        return value

    @field_validator("header")
    @classmethod
    def _short_header(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("header must not be empty")
        if len(value) > MAX_HEADER_CHARS:
            raise ValueError(f"header must be at most {MAX_HEADER_CHARS} characters, got {len(value)}: {value!r}")
        return value

    @model_validator(mode="after")
    def _options_consistent(self) -> AskQuestion:
        labels = [o.label.casefold() for o in self.options]
        if len(set(labels)) != len(labels):
            raise ValueError(f"option labels must be distinct: {[o.label for o in self.options]}")
        if self.multiSelect and any(o.preview for o in self.options):
            raise ValueError("preview is only allowed on single-select questions")
        return self

    def option_labels(self) -> list[str]:
        return [o.label for o in self.options]


class AskUserArgs(BaseModel):
    """askUser: 1-4 questions; the turn waits until every one is answered."""

    questions: list[AskQuestion] = Field(min_length=1, max_length=MAX_QUESTIONS, description="1-4 question objects")

    @model_validator(mode="after")
    def _distinct_questions(self) -> AskUserArgs:
        texts = [q.question for q in self.questions]
        if len(set(texts)) != len(texts):
            raise ValueError("questions must be distinct (answers are addressed by question text)")
        return self


# ---- answers ------------------------------------------------------------------------------------------


class QuestionAnswer(BaseModel):
    """The answer to one question: chosen labels, and/or the free text of "Other"."""

    question: str = Field(
        description="The question text (or its header when that is unambiguous)", **limit(chars=MAX_QUESTION_CHARS)
    )
    selected: list[Annotated[str, Field(**limit(chars=MAX_LABEL_CHARS))]] = Field(
        default_factory=list, description="Chosen option labels", **limit(items=MAX_OPTIONS)
    )
    other: str | None = Field(
        default=None, description="Free-form answer (the 'Other' choice)", **limit(chars=MAX_OTHER_CHARS)
    )


class AnswerQuestions(BaseModel):
    """Input of the ``answer_questions`` update and the ``answer_questions_signal`` signal."""

    answers: list[QuestionAnswer] = Field(min_length=1, **limit(items=MAX_QUESTIONS))
    answered_by: str | None = Field(default=None, **limit(chars=LABEL_CHARS))


class AnswerAccepted(BaseModel):
    """Result of the ``answer_questions`` update."""

    accepted: list[str]
    remaining: int


class RecordedAnswer(BaseModel):
    """An accepted answer, structured, as the session keeps it."""

    question: str
    header: str = ""
    selected: list[str] = Field(default_factory=list)
    other: str | None = None
    via: AnswerVia = "update"
    answered_by: str | None = None
    answered_at: str | None = None
    defaulted: bool = False


class PendingAsk(BaseModel):
    """One askUser call waiting for its answers."""

    ask_id: str
    questions: list[AskQuestion]
    asked_at: str
    deadline: str | None = None
    answers: dict[str, RecordedAnswer] = Field(default_factory=dict)

    def unanswered(self) -> list[AskQuestion]:
        return [q for q in self.questions if q.question not in self.answers]

    def complete(self) -> bool:
        return not self.unanswered()


class AnsweredAsk(BaseModel):
    ask_id: str
    asked_at: str
    finished_at: str
    answers: list[RecordedAnswer]
    timed_out: bool = False


class RejectedAnswer(BaseModel):
    """A signalled answer that did not fit (signals cannot be refused, so it is recorded instead).

    Recorded small: the reason, the payload's first bytes and its size (the state is carried by
    continue-as-new and answered by queries, so a rejected 400 KB payload must not be kept whole).
    """

    at: str
    via: AnswerVia = "signal"
    reason: str
    # Empty since 1.0.0 (the preview and size stand for the payload); kept so carried states still decode.
    payload: dict[str, Any] = Field(default_factory=dict)
    preview: str | None = None
    size: int | None = None


class PendingQuestion(BaseModel):
    """One unanswered question, as the ``pending_questions`` query shows it."""

    ask_id: str
    question: str
    header: str
    options: list[AskOption]
    multiSelect: bool = False
    asked_at: str
    deadline: str | None = None


class HumanState(BaseModel):
    """Pending questions and recorded answers (part of SessionState, carried by continue-as-new)."""

    pending: list[PendingAsk] = Field(default_factory=list)
    answered: list[AnsweredAsk] = Field(default_factory=list)
    rejected: list[RejectedAnswer] = Field(default_factory=list)

    def pending_questions(self) -> list[PendingQuestion]:
        """The unanswered questions of every pending ask, one entry each."""
        return [
            PendingQuestion(
                ask_id=ask.ask_id,
                question=q.question,
                header=q.header,
                options=q.options,
                multiSelect=q.multiSelect,
                asked_at=ask.asked_at,
                deadline=ask.deadline,
            )
            for ask in self.pending
            for q in ask.unanswered()
        ]


class AnswerRejected(InvalidInput):
    """An answer that does not fit the pending questions; the message says why."""


def _find_question(pending: list[PendingAsk], key: str) -> tuple[PendingAsk, AskQuestion] | None:
    key = key.strip()
    for ask in pending:
        for q in ask.questions:
            if q.question == key:
                return ask, q
    # Headers are short chips people can type; accept one when it names exactly one pending question.
    by_header = [(a, q) for a in pending for q in a.questions if q.header.casefold() == key.casefold()]
    if len(by_header) == 1:
        return by_header[0]
    return None


def resolve_answers(pending: list[PendingAsk], request: AnswerQuestions) -> list[tuple[PendingAsk, RecordedAnswer]]:
    """Check answers against the pending questions; return them normalised (canonical labels, trimmed).

    Raises:
        AnswerRejected: unknown or already answered question, label not among the options, several labels on
            a single-select question, empty "Other" text, no answer at all, or the same question twice.
    """
    if not pending:
        raise AnswerRejected("no questions are pending")
    out: list[tuple[PendingAsk, RecordedAnswer]] = []
    seen: set[str] = set()
    for answer in request.answers:
        found = _find_question(pending, answer.question)
        if found is None:
            known = "; ".join(repr(q.question) for q in (q for a in pending for q in a.unanswered()))
            raise AnswerRejected(f"unknown question {answer.question!r}; pending questions: {known}")
        ask, q = found
        if q.question in ask.answers:
            raise AnswerRejected(f"question {q.question!r} is already answered")
        if q.question in seen:
            raise AnswerRejected(f"question {q.question!r} is answered twice in one request")
        seen.add(q.question)
        canonical = {label.casefold(): label for label in q.option_labels()}
        labels: list[str] = []
        other = answer.other
        for raw in answer.selected:
            label = raw.strip()
            if label.casefold() == OTHER_LABEL.casefold():
                # Choosing "Other" means the free text carries the answer.
                if other is None:
                    other = ""
                continue
            if label.casefold() not in canonical:
                raise AnswerRejected(
                    f"{raw!r} is not an option of {q.question!r}; "
                    f"options: {q.option_labels()} or {OTHER_LABEL!r} with text"
                )
            if canonical[label.casefold()] not in labels:
                labels.append(canonical[label.casefold()])
        if other is not None:
            other = other.strip()
            if not other:
                raise AnswerRejected(f"the {OTHER_LABEL!r} answer to {q.question!r} needs a non-empty text")
        count = len(labels) + (1 if other is not None else 0)
        if count == 0:
            raise AnswerRejected(f"no option chosen and no {OTHER_LABEL!r} text for {q.question!r}")
        if not q.multiSelect and count > 1:
            chosen = [*labels, *([f"{OTHER_LABEL}: {other}"] if other is not None else [])]
            raise AnswerRejected(f"{q.question!r} is single-select; choose one answer, got {chosen}")
        out.append(
            (
                ask,
                RecordedAnswer(
                    question=q.question,
                    header=q.header,
                    selected=labels,
                    other=other,
                    answered_by=request.answered_by,
                ),
            )
        )
    return out


def default_answer(question: AskQuestion, policy: str | None) -> RecordedAnswer | None:
    """The answer a timeout gives under the agent's policy: ``first`` option, a named label, or none."""
    if not policy:
        return None
    if policy == "first":
        label = question.options[0].label
    else:
        matches = [o.label for o in question.options if o.label.casefold() == policy.casefold()]
        if not matches:
            return None
        label = matches[0]
    return RecordedAnswer(
        question=question.question, header=question.header, selected=[label], via="timeout", defaulted=True
    )


def _join(items: list[str]) -> str:
    quoted = [f'"{item}"' for item in items]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def answer_value(answer: RecordedAnswer) -> str:
    """How one answer reads to the model: ``"date-fns"``, ``"a" and "b"``, ``Other: "free text"``."""
    parts = [_join(answer.selected)] if answer.selected else []
    if answer.other is not None:
        parts.append(f'{OTHER_LABEL}: "{answer.other}"')
    return ", ".join(parts) if parts else "(no answer)"


def format_answers(
    questions: list[AskQuestion], answers: dict[str, RecordedAnswer], *, timeout_seconds: float | None = None
) -> str:
    """The askUser tool result: exactly the contract's sentence when every question has an answer.

    ``User has answered your questions: "Q"="A", "Q2"="B". You can now continue with the user's answers
    in mind.``
    """
    answered = [q for q in questions if q.question in answers]
    missing = [q for q in questions if q.question not in answers]
    real = [
        f'"{q.question}"={answer_value(answers[q.question])}' for q in answered if not answers[q.question].defaulted
    ]
    defaulted = [answers[q.question] for q in answered if answers[q.question].defaulted]
    if not missing and not defaulted:
        return (
            f"User has answered your questions: {', '.join(real)}. "
            "You can now continue with the user's answers in mind."
        )
    wait = f" within {timeout_seconds:g} seconds" if timeout_seconds else ""
    lines: list[str] = []
    if real:
        lines.append(f"User has answered some of your questions: {', '.join(real)}.")
    if defaulted:
        chosen = ", ".join(f'"{a.question}"={answer_value(a)}' for a in defaulted)
        lines.append(f"User did not answer{wait}; the default answers were used: {chosen}.")
    if missing:
        names = ", ".join(f'"{q.question}"' for q in missing)
        lines.append(f"User did not answer{wait}: {names} (no answer).")
    lines.append("Continue with your best judgement and state the assumptions you make.")
    return " ".join(lines)


def parse_answer_payload(data: Any) -> AnswerQuestions:
    """Answers from friendly JSON (CLI ``--json``, scripts) or the model's own shape.

    Accepted forms::

        {"answers": [{"question": "...", "selected": ["a"], "other": null}]}
        {"Which library?": "date-fns", "Which extras?": ["a", "b"], "Why?": {"other": "free text"}}

    Raises:
        AnswerRejected: the payload has none of these shapes.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise AnswerRejected(f"answers are not valid JSON: {exc}") from exc
    if isinstance(data, AnswerQuestions):
        return data
    if not isinstance(data, dict) or not data:
        raise AnswerRejected("answers must be a non-empty JSON object")
    if "answers" in data and isinstance(data["answers"], list):
        try:
            return AnswerQuestions.model_validate(data)
        except ValidationError as exc:
            raise AnswerRejected(f"malformed answers: {exc.errors()[0]['msg']}") from exc
    items: list[QuestionAnswer] = []
    for question, value in data.items():
        if isinstance(value, str):
            items.append(QuestionAnswer(question=question, selected=[value]))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            items.append(QuestionAnswer(question=question, selected=list(value)))
        elif isinstance(value, dict):
            try:
                items.append(QuestionAnswer.model_validate({"question": question, **value}))
            except ValidationError as exc:
                raise AnswerRejected(f"malformed answer for {question!r}: {exc.errors()[0]['msg']}") from exc
        else:
            raise AnswerRejected(f"answer for {question!r} must be a label, a list of labels or {{'other': text}}")
    return AnswerQuestions(answers=items)


def render_pending(state: HumanState) -> str:
    """Markdown of the pending questions for the Temporal UI's current details."""
    lines: list[str] = []
    for q in state.pending_questions():
        kind = "several answers" if q.multiSelect else "one answer"
        lines.append(f"- **[{q.header}]** {q.question} _({kind})_")
        for i, o in enumerate(q.options, 1):
            lines.append(f"  {i}. {o.label}: {o.description}")
        lines.append(f"  {len(q.options) + 1}. {OTHER_LABEL} (free text)")
    return "\n".join(lines)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="askUser",
        description=(
            "Ask the user 1-4 multiple-choice questions and wait for the answers: to gather preferences, "
            "clarify ambiguity or get a decision. Each question ends with '?', has a header of at most 12 "
            "characters and 2-4 options (label of 1-5 words plus a description; preview only for "
            "single-select). The user can always answer 'Other' with their own text, so do not list it."
        ),
        args_model=AskUserArgs,
        capability="human",
        runs_in="workflow",
        interrupts=True,
        spill_exempt=True,
    ),
]
