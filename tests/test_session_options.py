"""Session options: a typed model with the wire form of the plain dict it replaced."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_tools._boundaries import request_problems
from agent_tools._session import SessionConfig, SessionOptions, SessionRequest


def test_only_set_options_are_serialized_and_unknown_ones_are_kept() -> None:
    opts = SessionOptions.model_validate({"continue_as_new_after_turns": 2, "team": "blue"})
    assert opts.continue_as_new_after_turns == 2
    assert opts.model_dump() == {"continue_as_new_after_turns": 2, "team": "blue"}
    payload = pydantic_data_converter.payload_converter.to_payloads([SessionRequest(options=opts)])[0]
    assert json.loads(payload.data)["options"] == {"continue_as_new_after_turns": 2, "team": "blue"}


def test_a_recorded_config_with_plain_dict_options_still_decodes() -> None:
    recorded = {
        "session_id": "s",
        "agent": "a",
        "organisation": "o",
        "project": "p",
        "user": "u",
        "title": "t",
        "model": "m",
        "tools": [],
        "max_steps": 3,
        "root_id": "s",
        "options": {"search_attributes": True, "memory": False, "ask_user_timeout_seconds": 30, "old_key": 1},
    }
    config = SessionConfig.model_validate(recorded)
    assert config.options.memory is False and config.options.ask_user_timeout_seconds == 30
    assert config.policy.model_step.start_to_close_seconds == 300  # no policy recorded: the defaults


def test_request_options_win_over_the_agents_and_children_inherit_delegation_limits() -> None:
    agent = SessionOptions(ask_user_timeout_seconds=60, delegation_fanout_cap=2)
    merged = agent.merged({"ask_user_timeout_seconds": 5})
    assert (merged.ask_user_timeout_seconds, merged.delegation_fanout_cap) == (5, 2)
    assert merged.delegation_only().model_dump() == {"delegation_fanout_cap": 2}


@pytest.mark.parametrize(
    "bad",
    [
        {"continue_as_new_after_turns": 0},
        {"continue_as_new_after_turns": 10**40},
        {"ask_user_timeout_seconds": -1},
        {"ask_user_default": "x" * 10_000},
    ],
)
def test_out_of_range_options_are_refused_where_they_enter(bad: dict[str, object]) -> None:
    # Schema limits, checked where a request enters (client and session start): a recorded history with
    # other values must still decode.
    request = SessionRequest(options=SessionOptions.model_validate(bad))
    problems = request_problems(request)
    assert problems is not None and problems.startswith("options.")


def test_wrong_option_types_fail_validation() -> None:
    with pytest.raises(ValidationError):
        SessionOptions.model_validate({"delegation_fanout_cap": "lots"})
