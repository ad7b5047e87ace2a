"""The official `openai` package against `troupe serve`: completions, chat and
the Responses API, streamed and not, checked against references from outside Troupe: the
greedy text published with stories260K, Hugging Face transformers' logits
(tests/fixtures/stories260k_logits.json), and chat templates rendered by
Python's jinja2 the way transformers renders them."""
import json
import math
import pathlib

import pytest

openai = pytest.importorskip("openai")
jinja2 = pytest.importorskip("jinja2")

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATE = HERE / "chat_template.jinja"
MODEL = "stories260K"


@pytest.fixture(scope="module")
def chat_server(start_server):
    return start_server("--chat-template", TEMPLATE)


@pytest.fixture(scope="module")
def client(chat_server):
    return openai.OpenAI(base_url=chat_server.url("/v1"), api_key="unused", max_retries=0, timeout=60)


def render_with_jinja2(messages):
    """What transformers' apply_chat_template renders for this template."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(TEMPLATE.read_text()).render(
        messages=messages, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")


def test_models_list(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_completion_matches_the_published_greedy_text(client, reference_text):
    r = client.completions.create(model=MODEL, prompt="", max_tokens=200, temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].text == reference_text
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == 1  # BOS alone
    assert r.usage.completion_tokens == 200
    assert r.usage.total_tokens == 201


def test_streamed_completion_matches_too(client, reference_text):
    chunks = list(client.completions.create(model=MODEL, prompt="", max_tokens=200, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == reference_text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert len([c for c in chunks if c.choices]) > 10  # streamed, not one block
    assert chunks[-1].usage.completion_tokens == 200


def test_logprobs_match_transformers(client):
    fixture = json.loads((HERE.parent / "fixtures/stories260k_logits.json").read_text())
    for case in fixture["cases"]:
        r = client.completions.create(model=MODEL, prompt=case["prompt_ids"], max_tokens=len(case["greedy_ids"]),
                                      temperature=0, logprobs=5, extra_body={"ignore_eos": True})
        choice = r.choices[0]
        assert choice.text == case["greedy_text"]
        logits = case["last_logits"]
        mx = max(logits)
        lse = mx + math.log(sum(math.exp(x - mx) for x in logits))
        ref = sorted((x - lse for x in logits), reverse=True)
        assert abs(choice.logprobs.token_logprobs[0] - ref[0]) < 1e-4
        top = sorted(choice.logprobs.top_logprobs[0].values(), reverse=True)
        assert len(top) == 5
        for got, want in zip(top, ref[:5]):
            assert abs(got - want) < 1e-4


def test_stop_strings_cut_the_text(client, reference_text):
    r = client.completions.create(model=MODEL, prompt="", max_tokens=100, temperature=0, stop=["little", "xyz"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == reference_text[:reference_text.index("little")]


def test_seed_makes_sampling_repeatable(client):
    kw = dict(model=MODEL, prompt="Once upon a time", max_tokens=40, temperature=1.0)
    a = client.completions.create(seed=1234, **kw).choices[0].text
    b = client.completions.create(seed=1234, **kw).choices[0].text
    assert a == b
    n = client.completions.create(seed=1234, n=3, **kw)
    assert [c.index for c in n.choices] == [0, 1, 2]
    assert len({c.text for c in n.choices}) > 1  # each choice samples on its own


def test_chat_applies_the_template(client):
    messages = [{"role": "system", "content": "Tell a story."},
                {"role": "user", "content": "Who is Lily?"}]
    chat = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=40, temperature=0)
    assert chat.object == "chat.completion"
    assert chat.choices[0].message.role == "assistant"
    # The same prompt text through /v1/completions: the same greedy text and
    # prompt length, so the server rendered the template as jinja2 does.
    rendered = render_with_jinja2(messages)
    assert rendered.endswith("Question: Who is Lily?\nAnswer:")
    plain = client.completions.create(model=MODEL, prompt=rendered, max_tokens=40, temperature=0)
    assert chat.choices[0].message.content == plain.choices[0].text
    assert chat.usage.prompt_tokens == plain.usage.prompt_tokens
    assert chat.choices[0].finish_reason == plain.choices[0].finish_reason


def test_chat_stream(client):
    messages = [{"role": "user", "content": "Tell me about a dog."}]
    full = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=30, temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=30, temperature=0,
                                                 stream=True))
    assert chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == full.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=5,
                                       temperature=0, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == 5
    for entry in content:
        assert len(entry.top_logprobs) == 2
        # Greedy: the chosen token is the most likely one.
        assert abs(entry.logprob - entry.top_logprobs[0].logprob) < 1e-6
        assert bytes(entry.bytes).decode("utf-8", "replace") == entry.token


def test_errors_reach_the_client_typed(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="no-such-model", prompt="x")
    assert e.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", temperature=7)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=100000)
    assert e.value.body["param"] == "max_tokens"


def test_structured_output_parses_into_a_pydantic_model(client):
    """The openai package's own structured-output helper: it sends the
    strict schema pydantic writes ($defs, titles, required, additionalProperties
    false) and parses the reply into the model; jsonschema validates it too."""
    pydantic = pytest.importorskip("pydantic")
    jsonschema = pytest.importorskip("jsonschema")
    from typing import Literal, Optional

    class Pet(pydantic.BaseModel):
        kind: Literal["cat", "dog", "fish"]
        name: str = pydantic.Field(max_length=12)

    class Story(pydantic.BaseModel):
        hero: str = pydantic.Field(max_length=16)
        age: int = pydantic.Field(ge=2, le=11)
        pets: list[Pet] = pydantic.Field(max_length=2)
        sequel: Optional[bool]

    messages = [{"role": "user", "content": "Tell me about Lily and her pets."}]
    for temperature in (0, 1):
        r = client.beta.chat.completions.parse(model=MODEL, messages=messages, max_tokens=1500,
                                               temperature=temperature, seed=5, response_format=Story)
        choice = r.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        story = choice.message.parsed
        assert isinstance(story, Story)
        assert 2 <= story.age <= 11 and len(story.pets) <= 2
        jsonschema.validate(json.loads(choice.message.content), Story.model_json_schema())

    # A schema Troupe cannot enforce is refused, naming the field.
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=10,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "p", "schema": {"type": "string", "pattern": "^a"}}})
    assert e.value.body["param"] == "response_format"
    assert "pattern" in e.value.body["message"]


def test_tool_calls_parse_into_pydantic_models(client):
    """Function calling through the openai package's helpers: tools written
    by pydantic_function_tool (strict schemas), a named tool_choice parsed
    into the pydantic model, and tool_choice "required" streamed and
    accumulated by the stream helper; jsonschema validates every call.
    stories260K never calls a tool by itself: "auto" is covered by the
    parser's tests (tests/grammar/tool_calls_test.cpp)."""
    pydantic = pytest.importorskip("pydantic")
    jsonschema = pytest.importorskip("jsonschema")
    from typing import Literal

    class GetWeather(pydantic.BaseModel):
        city: str = pydantic.Field(max_length=12)
        unit: Literal["c", "f"]

    class GetTime(pydantic.BaseModel):
        zone: int = pydantic.Field(ge=-12, le=14)

    models = {"GetWeather": GetWeather, "GetTime": GetTime}
    tools = [openai.pydantic_function_tool(GetWeather), openai.pydantic_function_tool(GetTime)]
    messages = [{"role": "user", "content": "What is the weather in Oslo?"}]

    def check(call):
        assert call.type == "function" and call.id.startswith("call_")
        model = models[call.function.name]
        jsonschema.validate(json.loads(call.function.arguments), model.model_json_schema())
        if call.function.parsed_arguments is not None:
            assert isinstance(call.function.parsed_arguments, model)

    r = client.beta.chat.completions.parse(
        model=MODEL, messages=messages, max_tokens=400, temperature=0, tools=tools,
        tool_choice={"type": "function", "function": {"name": "GetWeather"}})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.function.name == "GetWeather"
    assert isinstance(call.function.parsed_arguments, GetWeather)
    check(call)

    with client.beta.chat.completions.stream(
            model=MODEL, messages=messages, max_tokens=400, temperature=1, seed=3, tools=tools,
            tool_choice="required", parallel_tool_calls=False) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    # (With parallel calls allowed, a story model, sampled, keeps adding
    # calls until max_tokens: nothing in it knows when to stop.)
    assert choice.finish_reason == "tool_calls", choice
    assert len(choice.message.tool_calls) == 1
    for call in choice.message.tool_calls:
        check(call)

    # The loop's second request: the assistant turn that called (content
    # null) and the tool's answer go back; the model answers in text.
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": choice.message.tool_calls[0].id, "content": "Sunny, 18 C"}]
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=20, temperature=0, tools=tools)
    assert r.choices[0].finish_reason in ("stop", "length")

    # A tool_choice naming no tool is refused, naming the field.
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10, tools=tools,
                                       tool_choice={"type": "function", "function": {"name": "Nope"}})
    assert e.value.body["param"] == "tool_choice.function.name"


def test_responses_api_answers_as_the_chat_route(client):
    # OpenAI's Responses API over the same conversation: the chat route's
    # greedy text, as a Response the client parses (output_text, usage).
    chat = client.chat.completions.create(model=MODEL, max_tokens=40, temperature=0, messages=[
        {"role": "system", "content": "Tell a story."}, {"role": "user", "content": "Once upon a time"}])
    r = client.responses.create(model=MODEL, instructions="Tell a story.", input="Once upon a time",
                                max_output_tokens=40, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == chat.choices[0].message.content and len(r.output_text) > 20
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.input_tokens == chat.usage.prompt_tokens and r.usage.output_tokens == 40
    # Streamed to its end (a stop string, through extra_body: the Responses
    # API has none): the SDK's helper takes the completed Response.
    ask = dict(model=MODEL, instructions="Tell a story.", input="Once upon a time", max_output_tokens=100,
               temperature=0, extra_body={"stop": ["."]})
    whole = client.responses.create(**ask)
    assert whole.status == "completed" and whole.output_text
    assert chat.choices[0].message.content.startswith(whole.output_text)
    with client.responses.stream(**ask) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert len(deltas) > 3 and "".join(deltas) == whole.output_text
    assert final.output_text == whole.output_text and final.usage.output_tokens == whole.usage.output_tokens
    # A stateless server: a follow-up carries its conversation.
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL, input="And then?", previous_response_id=r.id)
    assert "previous_response_id" in str(e.value)


def test_responses_api_function_calls(client):
    # A named tool_choice on the Responses API: a function_call item whose
    # arguments hold to the schema; its output goes back as an input item.
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
              "required": ["city"], "additionalProperties": False}
    tools = [{"type": "function", "name": "get_weather", "parameters": schema, "strict": True}]
    ask = dict(model=MODEL, input="What is the weather in Oslo?", tools=tools, temperature=0,
               max_output_tokens=200, tool_choice={"type": "function", "name": "get_weather"})
    r = client.responses.create(**ask)
    [call] = [o for o in r.output if o.type == "function_call"]
    assert call.name == "get_weather" and call.call_id.startswith("call_")
    jsonschema.validate(json.loads(call.arguments), schema)
    with client.responses.stream(**ask) as stream:
        final = stream.get_final_response()
    [streamed] = [o for o in final.output if o.type == "function_call"]
    assert streamed.arguments == call.arguments
    follow = client.responses.create(
        model=MODEL, tools=tools, temperature=0, max_output_tokens=10,
        input=[{"role": "user", "content": "What is the weather in Oslo?"},
               {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}])
    assert follow.output[0].type == "message"
