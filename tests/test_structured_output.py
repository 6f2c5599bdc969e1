"""Structured results: the final answer must match a JSON Schema; an invalid one goes back to the
model with the validation error a bounded number of times; the result carries the parsed object; OpenAI gets
``response_format``, Anthropic a forced tool. Pure rules, providers against a real HTTP server, and sessions
on the real dev server with the scripted model."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from agent_tools._activity_io import LlmStepOutput
from agent_tools._errors import SessionError
from agent_tools._messages import Message, Usage
from agent_tools._session import SessionStatus
from agent_tools._settings import ProviderEndpoint, Settings
from agent_tools.activities._providers.anthropic import AnthropicProvider
from agent_tools.activities._providers.base import ModelRequest, ToolSchema
from agent_tools.activities._providers.openai_compat import OpenAIProvider
from agent_tools.contracts._output import (
    OUTPUT_TOOL,
    OutputState,
    StructuredAnswer,
    check_answer,
    contract_of,
    next_output_step,
    schema_refusal,
)
from tests.support.fake_llm import FakeLLMServer, anthropic_reply, anthropic_stream, fake_llm_server, openai_reply
from tests.support.fixture_types import WorkerFor
from tests.support.sessions import current_details


class City(BaseModel):
    name: str
    population: int


class Trip(BaseModel):
    days: int
    cities: list[City]


TRIP_JSON = '{"days": 3, "cities": [{"name": "Lisbon", "population": 545000}]}'
CONVERSATION = [Message(role="system", content="be brief"), Message(role="user", content="plan")]


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with fake_llm_server() as server:
        yield server


# ---- pure rules ---------------------------------------------------------------------------------------------


def test_a_pydantic_schema_is_accepted_and_named_after_its_title() -> None:
    schema = Trip.model_json_schema()
    assert schema_refusal(schema) is None
    contract = contract_of(schema, None)
    assert contract.name == "Trip" and contract.retries == 2
    assert contract_of({"title": "a trip / plan!", "type": "object"}, 0).name == "a_trip_plan"


@pytest.mark.parametrize(
    ("schema", "needle"),
    [
        ([1, 2], "must be a JSON object, got list"),
        ({"type": "banana"}, "not a valid JSON Schema"),
        ({"type": "string", "pattern": "(unclosed"}, "not a valid JSON Schema"),
        ({"properties": {"a": {"$ref": "https://example.com/s.json"}}}, "may only refer inside itself"),
        ({"enum": ["x" * 1000] * 40}, "at most 32,000"),
        (json.loads('{"items":' * 40 + "{}" + "}" * 40), "nested deeper than 32"),
        ({"$schema": "https://example.com/unknown-draft", "type": "object"}, "a $schema this worker does not know"),
        ({"type": "object", "required": "name"}, "not a valid JSON Schema at required"),
    ],
)
def test_schemas_that_cannot_be_an_output_schema_are_refused(schema: Any, needle: str) -> None:
    refusal = schema_refusal(schema)
    assert refusal is not None and needle in refusal
    assert schema_refusal({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}) is None


def test_answers_are_parsed_and_checked_with_a_reason_the_model_can_act_on() -> None:
    contract = contract_of(Trip.model_json_schema(), None)
    assert check_answer(contract, TRIP_JSON).value == json.loads(TRIP_JSON)
    assert check_answer(contract, f"```json\n{TRIP_JSON}\n```").problem is None  # a fenced block is read
    assert check_answer(contract, "Here is the plan: three days").problem == (
        "the answer is not JSON (Expecting value: line 1 column 1 (char 0))"
    )
    bad = check_answer(contract, '{"days": "three", "cities": []}')
    assert bad.value is None and bad.problem == "at days: 'three' is not of type 'integer'"
    missing = check_answer(contract, '{"days": 3, "cities": [{"name": "Porto"}]}')
    assert missing.problem == "at cities/0: 'population' is a required property"
    assert check_answer(contract, "").problem == "the answer is empty"
    assert check_answer(contract, "[" * 100 + "]" * 100).problem == "the answer is nested deeper than 32 levels"
    assert check_answer(contract, "[" * 100_000).problem is not None  # past the decoder's recursion limit


def test_a_backtracking_pattern_is_checked_in_bounded_time() -> None:
    contract = contract_of({"type": "string", "pattern": "^(a+)+$"}, None)
    # This thread's CPU, not the wall clock: under a loaded machine the wall time of a bounded match grew
    # past 2 s (seen with four benches at load 20), while an unbounded one would never end at all.
    started = time.thread_time()
    verdict = check_answer(contract, json.dumps("a" * 5000 + "!"))
    assert time.thread_time() - started < 2.0
    # Refused either way: regex settles this one quickly on a quiet machine; on a loaded one its wall-clock
    # budget can run out first.
    assert verdict.problem is not None
    assert "does not match" in verdict.problem or "took too long to match" in verdict.problem, verdict.problem


def test_an_unresolvable_reference_inside_the_schema_is_a_problem_not_a_crash() -> None:
    contract = contract_of({"properties": {"a": {"$ref": "#/$defs/missing"}}}, None)
    verdict = check_answer(contract, '{"a": 1}')
    assert verdict.problem is not None and verdict.problem.startswith("the schema could not be applied")


def _step(answer: StructuredAnswer | None) -> LlmStepOutput:
    return LlmStepOutput(message=Message(role="assistant", content="x"), position=3, usage=Usage(), output=answer)


def test_retries_are_bounded_per_turn_and_counted_afresh_in_the_next() -> None:
    contract = contract_of({"type": "integer"}, 2)
    state = OutputState()
    bad = _step(StructuredAnswer(problem="'x' is not of type 'integer'"))
    first = next_output_step(contract, state, bad, turn=1)
    assert first.feedback is not None and "'x' is not of type 'integer'" in first.feedback.content
    assert "(1 more attempt after this one.)" in first.feedback.content
    assert next_output_step(contract, state, bad, turn=1).feedback is not None
    last = next_output_step(contract, state, bad, turn=1)
    assert last.feedback is None and last.error == (
        "the final answer does not match the output schema after 3 attempts: 'x' is not of type 'integer'"
    )
    assert not state.valid
    # The next turn starts with its own retries.
    assert next_output_step(contract, state, bad, turn=2).feedback is not None
    ok = next_output_step(contract, state, _step(StructuredAnswer(value=7)), turn=2)
    assert ok.feedback is None and ok.error is None and state.valid and state.value == 7
    # No contract: nothing to do; an unchecked answer (an older worker) is asked for again.
    assert next_output_step(None, OutputState(), bad, turn=1).feedback is None
    assert next_output_step(contract, OutputState(), _step(None), turn=1).feedback is not None


# ---- providers: the request carries the schema ------------------------------------------------------------


async def test_openai_request_carries_response_format_json_schema(llm: FakeLLMServer) -> None:
    contract = contract_of(Trip.model_json_schema(), None)
    llm.queue(openai_reply(TRIP_JSON))
    async with httpx.AsyncClient() as http:
        provider = OpenAIProvider(http, base_url=llm.base_url, api_key="k", stream=False)
        resp = await provider.complete(ModelRequest(model="m", messages=CONVERSATION, output=contract))
    body = llm.requests[0]["body"]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Trip", "schema": Trip.model_json_schema(), "strict": False},
    }
    assert resp.message.content == TRIP_JSON
    llm.queue(openai_reply("free text"))
    async with httpx.AsyncClient() as http:
        await OpenAIProvider(http, base_url=llm.base_url, api_key="k").complete(
            ModelRequest(model="m", messages=CONVERSATION)
        )
    assert "response_format" not in llm.requests[1]["body"]


async def test_anthropic_is_made_to_call_the_answer_tool_and_its_input_becomes_the_answer(
    llm: FakeLLMServer,
) -> None:
    contract = contract_of(Trip.model_json_schema(), None)
    answer = json.loads(TRIP_JSON)
    llm.queue(anthropic_reply(None, [("tu1", OUTPUT_TOOL, answer)]))
    async with httpx.AsyncClient() as http:
        provider = AnthropicProvider(http, base_url=llm.base_url, api_key="k", stream=False)
        resp = await provider.complete(ModelRequest(model="m", messages=CONVERSATION, output=contract))
    body = llm.requests[0]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}
    assert body["tools"] == [
        {"name": OUTPUT_TOOL, "description": body["tools"][0]["description"], "input_schema": Trip.model_json_schema()}
    ]
    assert resp.message.tool_calls == [] and json.loads(resp.message.content) == answer

    # With the session's own tools: some tool call is forced, and a real tool call beside the answer tool runs
    # first (the answer call is dropped; the model answers again after the tool's result). Streamed this time.
    tools = [ToolSchema(name="lookup", description="Look up", parameters={"type": "object"})]
    llm.queue(anthropic_stream([], [("tu2", "lookup", '{"q": "x"}'), ("tu3", OUTPUT_TOOL, TRIP_JSON)]))
    async with httpx.AsyncClient() as http:
        provider = AnthropicProvider(http, base_url=llm.base_url, api_key="k")
        resp = await provider.complete(ModelRequest(model="m", messages=CONVERSATION, tools=tools, output=contract))
    body = llm.requests[1]["body"]
    assert body["tool_choice"] == {"type": "any"} and [t["name"] for t in body["tools"]] == ["lookup", OUTPUT_TOOL]
    assert [c.name for c in resp.message.tool_calls] == ["lookup"]


async def test_anthropic_wraps_a_schema_that_is_not_an_object(llm: FakeLLMServer) -> None:
    schema = {"type": "array", "items": {"$ref": "#/$defs/n"}, "$defs": {"n": {"type": "integer"}}}
    llm.queue(anthropic_reply(None, [("tu1", OUTPUT_TOOL, {"value": [1, 2]})]))
    async with httpx.AsyncClient() as http:
        provider = AnthropicProvider(http, base_url=llm.base_url, api_key="k", stream=False)
        resp = await provider.complete(ModelRequest(model="m", messages=CONVERSATION, output=contract_of(schema, 1)))
    sent = llm.requests[0]["body"]["tools"][0]["input_schema"]
    assert sent == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "required": ["value"],
        "$defs": {"n": {"type": "integer"}},
    }
    assert resp.message.content == "[1, 2]"


# ---- sessions on the dev server ---------------------------------------------------------------------------


async def test_an_invalid_answer_gets_the_error_and_the_retry_is_the_result(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "Three days in Lisbon!"}, {"say": '{"days": 3}'}, {"say": TRIP_JSON}])
    async with worker_for() as client:
        handle = await client.start_session("plan a trip", output_schema=Trip)
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.completed and result.error is None
        assert result.output == json.loads(TRIP_JSON) and result.final_message == TRIP_JSON
        trip = await handle.output()
        assert isinstance(trip, Trip) and trip.cities[0].name == "Lisbon"
        # A handle by id knows no model: the JSON value, or the model asked for.
        assert await client.session(handle.id).output() == json.loads(TRIP_JSON)
        assert await client.session(handle.id).output(Trip) == trip
        assert result.usage.calls == 3
        assert "**Structured result** `Trip`: a valid answer" in await current_details(handle)
        feedback = [e.content for e in await handle.transcript() if e.role == "user"][1:]
        assert feedback[0].startswith(
            "Your final answer does not match the required JSON Schema: the answer is not JSON"
        )
        assert feedback[1].startswith(
            "Your final answer does not match the required JSON Schema: 'cities' is a required property"
        )


async def test_retries_run_out_and_the_session_fails_with_the_reason(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "no"}, {"say": "still no"}])
    async with worker_for() as client:
        handle = await client.start_session("plan", output_schema={"type": "object"}, output_retries=1)
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.failed and result.output is None
        assert result.error == (
            "the final answer does not match the output schema after 2 attempts: "
            "the answer is not JSON (Expecting value: line 1 column 1 (char 0))"
        )
        assert result.usage.calls == 2
        assert (
            "**Structured result** `output`: not valid (1 of 1 retries used): the answer is not JSON"
            in await current_details(handle)
        )
        with pytest.raises(SessionError, match="has no structured result"):
            await handle.output()
        # Zero retries: the first invalid answer ends the turn.
        settings.model = script([{"say": "nope"}])
        none = await client.run("plan", output_schema={"type": "integer"}, output_retries=0, model=settings.model)
        assert none.status == SessionStatus.failed and none.usage.calls == 1


async def test_a_chat_keeps_its_schema_across_continue_as_new(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "1"}, {"say": "two"}, {"say": "2"}])
    async with worker_for() as client:
        handle = await client.start_session(
            "count", output_schema={"type": "integer"}, keep_alive=True, options={"continue_as_new_after_turns": 1}
        )
        for _ in range(200):
            if (await handle.status()).turns == 1 and (await handle.status()).status == SessionStatus.idle:
                break
            await asyncio.sleep(0.05)
        first_run = (await handle.workflow.describe()).run_id
        await handle.send("again")
        for _ in range(200):
            if (await handle.latest_message()).content == "2":
                break
            await asyncio.sleep(0.05)
        assert (await handle.latest_message()).content == "2"  # "two" was sent back: the new run has the schema
        assert (await handle.workflow.describe()).run_id != first_run
        await handle.stop("done")
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.output == 2 and result.status == SessionStatus.stopped


async def test_a_session_on_openai_sends_the_schema_with_every_step(
    llm: FakeLLMServer, worker_for: WorkerFor, settings: Settings
) -> None:
    llm.queue(
        openai_reply("", [("c1", "todoWrite", {"todos": [{"content": "x", "status": "pending"}]})]),
        openai_reply(TRIP_JSON),
    )
    settings.providers = {"local": ProviderEndpoint(kind="openai", base_url=llm.base_url, api_key="k")}
    settings.model = "local:gpt-x"
    async with worker_for() as client:
        handle = await client.start_session("plan", output_schema=Trip, tools=["todoWrite"])
        trip = await asyncio.wait_for(handle.output(), 60)
    assert trip == Trip.model_validate_json(TRIP_JSON)
    assert len(llm.requests) == 2
    for request in llm.requests:
        assert request["body"]["response_format"]["json_schema"]["schema"] == Trip.model_json_schema()


async def test_the_cli_takes_a_schema_file_and_prints_the_parsed_result(
    temporal_env: WorkflowEnvironment,
    worker_for: WorkerFor,
    script: Callable[[list[Any]], str],
    settings: Settings,
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app
    from tests.support.terminal import cli_env

    schema = tmp_path / "trip.json"
    schema.write_text(json.dumps(Trip.model_json_schema()))
    settings.model = script([{"say": "prose"}, {"say": TRIP_JSON}])
    env = cli_env(temporal_env, settings)
    async with worker_for():
        out = await asyncio.to_thread(CliRunner().invoke, app, ["run", "plan", "--schema", str(schema)], env=env)
    assert out.exit_code == 0, out.output
    assert json.dumps(json.loads(TRIP_JSON), indent=2) in out.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"type": "banana"}')
    refused = CliRunner().invoke(app, ["run", "plan", "--schema", str(broken)], env=env)
    assert refused.exit_code == 2 and "not a valid JSON Schema" in refused.output
