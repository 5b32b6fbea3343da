"""The model layer: litellm's real HTTP path against a local OpenAI-compatible server, the text fallback, scripted replay."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nkiagent.agent.models import LiteLLMModel, ModelError, ScriptedModel, get_model, prewarm, wire
from nkiagent.agent.models.textmode import parse, to_text_messages
from nkiagent.agent.types import Model

from .fake_openai import FakeOpenAI, Reply

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": n,
            "description": f"the {n} tool",
            "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in ps}},
        },
    }
    for n, ps in [
        ("edit_file", ("path", "old", "new")),
        ("write_file", ("path", "content")),
        ("evaluate", ("path",)),
        ("submit", ("path", "summary")),
    ]
]
# litellm's own import and response objects warn about pydantic internals; not ours to fix
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm"),
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
]

ASK = [{"role": "system", "content": "You write NKI kernels."}, {"role": "user", "content": "make it faster"}]


_TRANSPORT = {"now": "auto"}


@pytest.fixture(params=["litellm", "wire"])
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The fake server, reached through litellm, or through the standard-library path OpenAI-compatible servers use.

    Every HTTP test runs both ways: retries, errors and parsing must not depend on which one sent.
    """
    monkeypatch.setitem(_TRANSPORT, "now", request.param)
    with FakeOpenAI(lifetime_s=60) as srv:
        yield srv


def _model(srv: FakeOpenAI, **opts: object) -> LiteLLMModel:
    opts = {"timeout_s": 10.0, "num_retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.05, "transport": _TRANSPORT["now"], **opts}
    return LiteLLMModel("openai/test-model", api_base=srv.url, api_key="sk-test", **opts)  # type: ignore[arg-type]


# -- litellm over HTTP --------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
def test_plain_text_with_usage_and_zero_cost(server: FakeOpenAI, stream: bool) -> None:
    server.push(Reply(content="Tiles of 512 columns are better.", prompt_tokens=123, completion_tokens=45))
    tokens: list[str] = []
    turn = _model(server, stream=stream).complete(ASK, [], tokens.append)
    assert turn.content == "Tiles of 512 columns are better."
    assert turn.tool_calls == [] and turn.finish_reason == "stop"
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.usage.cost_usd) == (123, 45, 0.0)
    assert "".join(tokens) == (turn.content if stream else "")
    (req,) = server.requests
    assert req["body"]["model"] == "test-model" and req["body"]["messages"] == ASK and bool(req["body"].get("stream")) == stream
    assert req["headers"]["authorization"] == "Bearer sk-test" and "tools" not in req["body"]


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_parsed_and_unknown_names_passed_through(server: FakeOpenAI, stream: bool) -> None:
    edit = {"path": "kernels/k.py", "old": "TILE = 128\n", "new": "TILE = 512\n"}
    server.push(Reply(content="Widening the tile.", tool_calls=[("edit_file", json.dumps(edit)), ("frobnicate", '{"level": 3}')]))
    turn = _model(server, stream=stream).complete(ASK, TOOLS)
    assert [(c.name, c.arguments, c.error) for c in turn.tool_calls] == [("edit_file", edit, ""), ("frobnicate", {"level": 3}, "")]
    assert [c.id for c in turn.tool_calls] == ["call_0", "call_1"] and turn.finish_reason == "tool_calls"
    assert server.requests[0]["body"]["tools"] == TOOLS
    assert turn.to_message()["tool_calls"][0]["function"] == {"name": "edit_file", "arguments": json.dumps(edit)}


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_tool_arguments_become_errors(server: FakeOpenAI, stream: bool) -> None:
    server.push(Reply(tool_calls=[("edit_file", '{"path": "k.py", "old": '), ("evaluate", "[1, 2]"), ("evaluate", '{"path": "k.py"}')]))
    bad, not_object, good = _model(server, stream=stream).complete(ASK, TOOLS).tool_calls
    assert "not valid JSON" in bad.error and bad.arguments == {} and bad.raw_arguments == '{"path": "k.py", "old": '
    assert "JSON object" in not_object.error
    assert good.error == "" and good.arguments == {"path": "k.py"}


def test_malformed_arguments_in_history_are_sent_as_valid_json(server: FakeOpenAI) -> None:
    server.push(Reply(tool_calls=[("evaluate", '{"path": ')]), Reply(content="ok"))
    model = _model(server)
    turn = model.complete(ASK, TOOLS)
    answer = {"role": "tool", "tool_call_id": turn.tool_calls[0].id, "content": f"error: {turn.tool_calls[0].error}"}
    model.complete([*ASK, turn.to_message(), answer], TOOLS)
    assert server.requests[1]["body"]["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert turn.to_message()["tool_calls"][0]["function"]["arguments"] == '{"path": '  # what the model sent stays recorded


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_failure_is_retried(server: FakeOpenAI, status: int) -> None:
    server.push(Reply(status=status, error="slow down"), Reply(content="ok"))
    assert _model(server).complete(ASK, []).content == "ok"
    assert len(server.requests) == 2 and server.requests[0]["body"] == server.requests[1]["body"]


def test_persistent_server_error_gives_up_after_the_retries(server: FakeOpenAI) -> None:
    server.push(*[Reply(status=500, error="backend exploded")] * 5)
    with pytest.raises(ModelError) as info:
        _model(server, num_retries=2).complete(ASK, [])
    assert len(server.requests) == 3 and info.value.attempts == 3 and info.value.status_code == 500
    assert "openai/test-model (openai)" in str(info.value) and "server error" in str(info.value) and "backend exploded" in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
def test_timeout_is_retried_then_reported(server: FakeOpenAI, stream: bool) -> None:
    server.push(*[Reply(content="too late", delay_s=5)] * 2)
    t0 = time.monotonic()
    with pytest.raises(ModelError) as info:
        _model(server, stream=stream, timeout_s=0.4, num_retries=1).complete(ASK, [])
    assert len(server.requests) == 2 and "timeout" in str(info.value)
    assert time.monotonic() - t0 < 4


@pytest.mark.parametrize(("status", "words"), [(401, "authentication"), (403, "permission denied"), (404, "not found"), (400, "rejected")])
def test_client_errors_are_not_retried(server: FakeOpenAI, status: int, words: str) -> None:
    server.push(*[Reply(status=status, error="Incorrect API key provided")] * 3)
    with pytest.raises(ModelError) as info:
        _model(server).complete(ASK, [])
    assert len(server.requests) == 1 and info.value.status_code == status
    assert words in str(info.value) and "(openai)" in str(info.value) and "Incorrect API key provided" in str(info.value)


def test_context_window_is_not_retried(server: FakeOpenAI) -> None:
    server.push(
        *[Reply(status=400, error="This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")]
        * 3
    )
    with pytest.raises(ModelError, match="context window"):
        _model(server).complete(ASK, TOOLS)
    assert len(server.requests) == 1


def test_text_mode_sends_no_tools_and_parses_blocks(server: FakeOpenAI) -> None:
    server.push(
        Reply(
            content="Widen it.\n```edit kernels/k.py\n<<<<<<< OLD\nTILE = 128\n=======\nTILE = 512\n>>>>>>> NEW\n```\n"
            '```tool evaluate\n{"path": "kernels/k.py"}\n```'
        )
    )
    turn = _model(server, tool_mode="text").complete(ASK, TOOLS)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("edit_file", {"path": "kernels/k.py", "old": "TILE = 128\n", "new": "TILE = 512\n"}),
        ("evaluate", {"path": "kernels/k.py"}),
    ]
    body = server.requests[0]["body"]
    assert "tools" not in body and body["messages"][0]["content"].startswith("You write NKI kernels.")
    assert "```edit PATH" in body["messages"][0]["content"] and "- evaluate(path): the evaluate tool" in body["messages"][0]["content"]


def test_server_rejecting_tools_switches_to_text_for_good(server: FakeOpenAI) -> None:
    rejection = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    server.push(Reply(status=400, error=rejection), Reply(content="```submit kernels/k.py\nfaster\n```"), Reply(content="thinking"))
    model = _model(server)
    turn = model.complete(ASK, TOOLS)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("submit", {"path": "kernels/k.py", "summary": "faster"})]
    assert model.text_mode and "tools" in server.requests[0]["body"] and "tools" not in server.requests[1]["body"]
    model.complete([*ASK, turn.to_message()], TOOLS)
    assert len(server.requests) == 3 and "tools" not in server.requests[2]["body"]


# -- the text fallback format ---------------------------------------------------------------------------
def test_parse_blocks() -> None:
    content = (
        "Two changes, then the whole file, then done.\n"
        "```edit k.py\n<<<<<<< OLD\na = 1\n=======\na = 2\n>>>>>>> NEW\n<<<<<<< SEARCH\nb = 1\n=======\n>>>>>>> REPLACE\n```\n"
        "````write k.py\ndoc = '''\n```python\nx\n```\n'''\n````\n"
        "```python\nnot a tool\n```\n"
        "```submit k.py\n  done  \n```"
    )
    calls = parse(content, "t_")
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("t_0", "edit_file", {"path": "k.py", "old": "a = 1\n", "new": "a = 2\n"}),
        ("t_1", "edit_file", {"path": "k.py", "old": "b = 1\n", "new": ""}),
        ("t_2", "write_file", {"path": "k.py", "content": "doc = '''\n```python\nx\n```\n'''\n"}),
        ("t_3", "submit", {"path": "k.py", "summary": "done"}),
    ]
    assert all(c.error == "" for c in calls)


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ("```edit\n<<<<<<< OLD\na\n=======\nb\n>>>>>>> NEW\n```", "needs the file path"),
        ("```edit k.py\na = 2\n```", "no <<<<<<< OLD"),
        ("```tool evaluate\n{path: k.py}\n```", "not valid JSON"),
        ("```tool\n{}\n```", "needs the tool name"),
    ],
)
def test_parse_unreadable_blocks_become_errors(block: str, error: str) -> None:
    (call,) = parse(block)
    assert error in call.error


def test_history_with_native_calls_is_rendered_as_blocks() -> None:
    native = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "write_file", "arguments": json.dumps({"path": "k.py", "content": "x = '```'\n"})},
            }
        ],
    }
    texted = {
        "role": "assistant",
        "content": "```submit k.py\nok\n```",
        "tool_calls": [
            {
                "id": "text_2_0",
                "type": "function",
                "function": {"name": "submit", "arguments": json.dumps({"path": "k.py", "summary": "ok"})},
            }
        ],
    }
    msgs = to_text_messages([*ASK, native, {"role": "tool", "tool_call_id": "c1", "content": "proposed"}, texted], TOOLS)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert [(c.name, c.arguments) for c in parse(msgs[2]["content"])] == [("write_file", {"path": "k.py", "content": "x = '```'\n"})]
    assert msgs[3]["content"] == "Result of write_file:\nproposed"
    assert msgs[4]["content"] == "```submit k.py\nok\n```"  # already written as a block: not rendered twice
    assert ASK[0]["content"] == "You write NKI kernels."  # the caller's messages are not modified


# -- scripted replay, the factory, startup ------------------------------------------------------------
def test_scripted_replays_by_conversation_position(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(
        '{"content": "first", "tool_calls": [{"name": "evaluate", "arguments": {"path": "k.py"}}]}\n\n'
        '{"content": "second", "tool_calls": [{"name": "submit", "arguments": "{\\"path\\": "}]}\n'
    )
    model = get_model(f"scripted:{script}")
    assert isinstance(model, ScriptedModel) and isinstance(model, Model)
    tokens: list[str] = []
    first = model.complete(ASK, TOOLS, tokens.append)
    assert (first.content, first.tool_calls[0].arguments, first.usage.cost_usd, tokens) == ("first", {"path": "k.py"}, 0.0, ["first"])
    assert model.complete(ASK, TOOLS).content == "first"  # same conversation, same answer
    second = model.complete([*ASK, first.to_message()], TOOLS)
    assert second.content == "second" and "not valid JSON" in second.tool_calls[0].error
    with pytest.raises(ModelError, match="has 2 turns"):
        model.complete([*ASK, first.to_message(), second.to_message()], TOOLS)


def test_scripted_bad_files(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"content": "ok"}\n{"tool_calls": [{"arguments": {}}]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        ScriptedModel(f"scripted:{tmp_path / 'bad.jsonl'}")
    with pytest.raises(FileNotFoundError, match="vector_add"):
        ScriptedModel("scripted:no-such-script")


def test_shipped_script_loads_by_name() -> None:
    model = get_model("scripted:vector_add")
    assert model.complete(ASK, TOOLS).tool_calls[0].name == "read_file"


def test_get_model_resolves_each_kind() -> None:
    llm = get_model("hosted_vllm/qwen", api_base="http://127.0.0.1:9/v1", temperature=0.2)
    assert isinstance(llm, LiteLLMModel) and (llm.name, llm.api_base, llm.temperature) == ("hosted_vllm/qwen", "http://127.0.0.1:9/v1", 0.2)
    assert type(get_model("builtin/tuner")).__name__ == "TunerModel"
    with pytest.raises(ValueError, match="builtin/tuner"):
        get_model("builtin/nope")
    with pytest.raises(ModelError, match="provider/name"):
        get_model("nosuchprovider/model").complete(ASK, [])
    with pytest.raises(ValueError, match="no options"):
        get_model("scripted:vector_add", api_base="http://x")


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    model = LiteLLMModel("openai/x", backoff_s=1.0, backoff_max_s=4.0)
    assert 0.5 <= model._delay(1, RuntimeError()) <= 1.0 and 1.0 <= model._delay(2, RuntimeError()) <= 2.0
    assert 2.0 <= model._delay(9, RuntimeError()) <= 4.0


def test_importing_the_models_does_not_import_litellm_but_prewarm_does() -> None:
    code = "import sys, nkiagent.agent.models as m; assert 'litellm' not in sys.modules; print(m.get_model('openai/x').name)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30).stdout.strip() == "openai/x"
    thread = prewarm()
    assert prewarm() is thread
    thread.join(timeout=30)
    assert "litellm" in sys.modules


def test_first_request_does_not_wait_for_litellm() -> None:
    """A fresh process answers its first turn from an OpenAI-protocol server before litellm is imported."""
    code = (
        "import sys\nfrom nkiagent.agent.models import get_model\n"
        "turn = get_model('hosted_vllm/m', api_base=sys.argv[1]).complete([{'role': 'user', 'content': 'hi'}], " + repr(TOOLS) + ")\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "print(turn.content, [(c.name, c.arguments) for c in turn.tool_calls])\n"
    )
    with FakeOpenAI(lifetime_s=60) as srv:
        srv.push(Reply(content="hello", tool_calls=[("evaluate", '{"path": "k.py"}')]))
        out = subprocess.run([sys.executable, "-c", code, srv.url], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello [('evaluate', {'path': 'k.py'})]"
    assert srv.requests[0]["body"]["model"] == "m" and srv.requests[0]["body"]["tools"] == TOOLS


def test_turns_sent_before_litellm_loaded_are_priced_on_the_next_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A priced model behind a proxy: the first turn goes out over the wire, its cost is counted with the second."""
    loaded = {"now": False}
    monkeypatch.setattr(wire, "litellm_loaded", lambda: loaded["now"])
    with FakeOpenAI(lifetime_s=60) as srv:
        srv.push(
            Reply(content="one", prompt_tokens=1000, completion_tokens=100), Reply(content="two", prompt_tokens=2000, completion_tokens=200)
        )
        model = LiteLLMModel("openai/gpt-4o-mini", api_base=srv.url, api_key="sk-test", stream=False)
        first = model.complete(ASK, [])
        loaded["now"] = True
        second = model.complete(ASK, [])
    import litellm

    price = lambda p, c: sum(litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=p, completion_tokens=c))
    assert first.usage.cost_usd == 0.0 and price(1000, 100) > 0
    assert second.usage.cost_usd == pytest.approx(price(1000, 100) + price(2000, 200))


def test_litellm_without_any_key_is_a_configuration_error_not_a_server_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's OpenAI client refuses to send without a key and reports it as HTTP 500; it is the key, not the server (issue 23)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI(lifetime_s=60) as srv:
        model = LiteLLMModel("openai/m", api_base=srv.url, transport="litellm", num_retries=3, backoff_s=5.0)
        with pytest.raises(ModelError) as caught:
            model.complete(ASK, [])
        assert srv.requests == []
    err = caught.value
    assert err.config and err.attempts == 1 and "server error" not in str(err)
    assert str(err).startswith(
        "openai/m (openai): authentication failed: check the API key (the provider's environment variable, "
        "or the one --api-key-env names): "
    )
