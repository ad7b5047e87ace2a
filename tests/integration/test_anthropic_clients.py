"""The official `anthropic` package against `troupe serve` on stories260K:
messages, streamed and not, against the OpenAI route's answer to the same
conversation (itself checked against Hugging Face and the published text);
a trailing assistant turn continued; count_tokens against usage; the key
as x-api-key; and the errors a client meets, as the client raises them."""
import json
import pathlib
import urllib.request

import pytest

anthropic = pytest.importorskip("anthropic")

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATE = HERE / "chat_template.jinja"
MODEL = "stories260K"
KEY = "test-key-123"
# Anthropic's current API has no sampling fields; Troupe reads them when given
# (older clients, extra_body).
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def server(start_server):
    return start_server("--chat-template", TEMPLATE, "--api-key", KEY)


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url(""), api_key=KEY, max_retries=0, timeout=60)


def openai_chat(server, messages, max_tokens, extra=None):
    body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": max_tokens, **(extra or {})}
    req = urllib.request.Request(server.url("/v1/chat/completions"), json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


CONVERSATION = [{"role": "user", "content": "Once upon a time"}]


def test_message_answers_as_the_openai_route(client, server):
    want = openai_chat(server, [{"role": "system", "content": "Tell a story."}] + CONVERSATION, 40)
    m = client.messages.create(model=MODEL, max_tokens=40, extra_body=GREEDY, system="Tell a story.",
                               messages=CONVERSATION)
    assert m.role == "assistant" and m.type == "message" and m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == want["choices"][0]["message"]["content"]
    assert len(m.content[0].text) > 20
    assert m.stop_reason == "max_tokens"
    assert m.usage.input_tokens == want["usage"]["prompt_tokens"]
    assert m.usage.output_tokens == 40
    count = client.messages.count_tokens(model=MODEL, system="Tell a story.", messages=CONVERSATION)
    assert count.input_tokens == m.usage.input_tokens


def test_stream_gives_the_same_message(client):
    whole = client.messages.create(model=MODEL, max_tokens=40, extra_body=GREEDY, messages=CONVERSATION)
    with client.messages.stream(model=MODEL, max_tokens=40, extra_body=GREEDY, messages=CONVERSATION) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 5  # streamed, not one block
    assert "".join(pieces) == whole.content[0].text
    assert final.content[0].text == whole.content[0].text
    assert final.stop_reason == "max_tokens"
    assert final.usage.input_tokens == whole.usage.input_tokens and final.usage.output_tokens == 40


def test_a_trailing_assistant_turn_is_continued(client, server):
    prefill = CONVERSATION + [{"role": "assistant", "content": "there was a little"}]
    m = client.messages.create(model=MODEL, max_tokens=20, extra_body=GREEDY, messages=prefill)
    want = openai_chat(server, prefill, 20, {"continue_final_message": True, "add_generation_prompt": False})
    assert m.content[0].text == want["choices"][0]["message"]["content"]
    assert m.content[0].text != client.messages.create(model=MODEL, max_tokens=20, extra_body=GREEDY,
                                                       messages=CONVERSATION).content[0].text


def test_output_config_holds_the_reply_to_a_schema(client):
    # Structured outputs: the grammar holds a story model to the schema.
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    m = client.messages.create(model=MODEL, max_tokens=100, extra_body=GREEDY, messages=CONVERSATION,
                               output_config={"format": {"type": "json_schema", "schema": schema}})
    jsonschema.validate(json.loads(m.content[0].text), schema)


@pytest.fixture(scope="module")
def thinking_client(start_server):
    # A template that opens a <think> block for the model: stories260K never
    # closes it, so its whole answer is thinking unless a budget closes it.
    server = start_server("--chat-template", HERE / "thinking_template.jinja", "--api-key", KEY)
    return anthropic.Anthropic(base_url=server.url(""), api_key=KEY, max_retries=0, timeout=60)


def test_the_thinking_budget_closes_the_block(thinking_client):
    def ask(budget):
        return thinking_client.messages.create(model=MODEL, max_tokens=40, extra_body=GREEDY, messages=CONVERSATION,
                                               thinking={"type": "enabled", "budget_tokens": budget})

    free, budgeted = ask(1000), ask(5)
    assert [b.type for b in free.content] == ["thinking"]
    assert [b.type for b in budgeted.content] == ["thinking", "text"]
    # The same greedy thinking, cut after 5 tokens; the answer follows it.
    assert 0 < len(budgeted.content[0].thinking) < len(free.content[0].thinking)
    assert free.content[0].thinking.startswith(budgeted.content[0].thinking.strip())
    assert len(budgeted.content[1].text) > 10
    assert budgeted.usage.output_tokens == free.usage.output_tokens == 40
    # Streamed, the same blocks.
    with thinking_client.messages.stream(model=MODEL, max_tokens=40, extra_body=GREEDY, messages=CONVERSATION,
                                         thinking={"type": "enabled", "budget_tokens": 5}) as stream:
        streamed = stream.get_final_message()
    assert [(b.type, getattr(b, "thinking", None), getattr(b, "text", None)) for b in streamed.content] == \
        [(b.type, getattr(b, "thinking", None), getattr(b, "text", None)) for b in budgeted.content]


def test_errors_as_the_client_raises_them(client, server):
    with pytest.raises(anthropic.NotFoundError) as e:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=8, messages=CONVERSATION)
    assert "this server serves 'stories260K'" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=MODEL, max_tokens=8, messages=[
            {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                       "data": "iVBORw0KGgo="}}]}])
    assert "reads text only" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=MODEL, max_tokens=8, messages=CONVERSATION,
                               thinking={"type": "enabled", "budget_tokens": 1024})
    assert "does not think" in e.value.message
    wrong = anthropic.Anthropic(base_url=server.url(""), api_key="wrong", max_retries=0, timeout=60)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(model=MODEL, max_tokens=8, messages=CONVERSATION)
    # The server still answers.
    assert client.messages.create(model=MODEL, max_tokens=4, messages=CONVERSATION).usage.output_tokens == 4


def test_a_forced_tool_use_and_the_loop_back(client):
    # stories260K never calls a tool by itself: a named tool_choice holds
    # its output to the tool's schema (the grammar), and the SDK parses the
    # tool_use block; the result goes back as a tool_result and the model
    # answers in text.
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "unit": {"enum": ["c", "f"]}},
              "required": ["city", "unit"], "additionalProperties": False}
    tools = [{"name": "get_weather", "description": "The weather in a city", "input_schema": schema}]
    messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
    m = client.messages.create(model=MODEL, max_tokens=200, extra_body=GREEDY, tools=tools, messages=messages,
                               tool_choice={"type": "tool", "name": "get_weather"})
    assert m.stop_reason == "tool_use"
    [use] = [b for b in m.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.id
    jsonschema.validate(use.input, schema)
    with client.messages.stream(model=MODEL, max_tokens=200, extra_body=GREEDY, tools=tools, messages=messages,
                                tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        final = stream.get_final_message()
    [streamed] = [b for b in final.content if b.type == "tool_use"]
    assert streamed.input == use.input and final.stop_reason == "tool_use"
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny"}]}]
    answer = client.messages.create(model=MODEL, max_tokens=10, extra_body=GREEDY, tools=tools, messages=messages)
    assert answer.stop_reason in ("end_turn", "max_tokens") and answer.content[0].type == "text"
