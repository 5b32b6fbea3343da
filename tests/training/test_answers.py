"""Every answer format a prompt asks for reads the same way (no verification: cheap)."""

from __future__ import annotations

import json

import pytest

from nkiagent.training.answers import TOOL_ERROR, UNCHANGED, Applied, apply_answer, fenced_kernel, parse_answer, score_answer
from nkiagent.training.rewards import get_spec, spec_names

K = "kernels/vector_add.py"
KERNEL = "import nki\nTILE = 128\n\n@nki.jit\ndef k(a):\n    return a\n"
EDITED = KERNEL.replace("TILE = 128", "TILE = 512")


def _openai(name: str, args: object) -> dict[str, object]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": raw}}],
    }


def _hermes(name: str, args: dict[str, object]) -> str:
    return "Widen the tiles.\n<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


EDIT = {"path": K, "old": "TILE = 128\n", "new": "TILE = 512\n"}


@pytest.mark.parametrize(
    "answer",
    [
        _openai("edit_file", EDIT),
        _hermes("edit_file", EDIT),
        f"```edit {K}\n<<<<<<< OLD\nTILE = 128\n=======\nTILE = 512\n>>>>>>> NEW\n```",
        _openai("write_file", {"path": K, "content": EDITED}),
        _hermes("write_file", {"path": "./" + K, "content": EDITED}),
        f"```write {K}\n{EDITED}```",
        f"The kernel:\n```python\n{EDITED}```\nUse it like this:\n```python\nout = k(a)\n```",  # the usage block is not the kernel
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": f"```\n{EDITED}```"}],
    ],
)
def test_every_format_applies_to_the_kernel_in_force(answer: object) -> None:
    a = apply_answer(answer, KERNEL, K)
    assert (a.code, a.changed, a.errors) == (EDITED, True, [])


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (_openai("edit_file", {"path": K, "old": "TILE = 64\n", "new": "x"}), "`old` does not occur in kernels/vector_add.py"),
        (_openai("shell", {"cmd": "ls"}), "unknown tool 'shell'"),
        (_openai("write_file", "{not json"), "arguments of write_file are not valid JSON"),
        (_openai("write_file", "[1, 2]"), "arguments of write_file must be a JSON object, got list"),
        (_openai("write_file", {"path": K}), "bad arguments for write_file: missing or not text: content"),
        (_openai("write_file", {"path": K, "content": ["a"]}), "missing or not text: content"),
        (_openai("write_file", {"path": "../outside.py", "content": EDITED}), "../outside.py is outside the workspace"),
        (_openai("write_file", {"path": "/etc/passwd", "content": EDITED}), "/etc/passwd is outside the workspace"),
        (
            _openai("write_file", {"path": "kernels/other.py", "content": EDITED}),
            "only the kernel file kernels/vector_add.py can be changed",
        ),
        ("<tool_call>\n{oops\n</tool_call>", "a <tool_call> block is not valid JSON"),
        ({"role": "assistant", "tool_calls": "edit"}, "tool_calls must be a list"),
        ({"role": "assistant", "tool_calls": [5]}, "tool_calls[0] has no function name"),
    ],
)
def test_broken_calls_are_errors_never_exceptions(answer: object, error: str) -> None:
    a = apply_answer(answer, KERNEL, K)
    assert any(error in e for e in a.errors), a.errors


def test_reads_and_evaluations_leave_the_kernel_unchanged() -> None:
    for answer in (
        _openai("read_file", {"path": K}),
        _hermes("evaluate", {"path": K}),
        f"```tool evaluate\n{json.dumps({'path': K})}\n```",
        f"```python\n{KERNEL}```",
    ):
        a = apply_answer(answer, KERNEL, K)
        assert (a.changed, a.errors, a.acted) == (False, [], True), answer
    assert apply_answer(_openai("submit", {"path": K, "summary": "s"}), KERNEL, K).submitted


def test_fenced_kernel_prefers_the_jit_block_and_needs_code() -> None:
    assert fenced_kernel("````python\na = '```'\n````") == "a = '```'\n"  # a longer fence may hold a shorter one
    assert fenced_kernel("no code here") is None
    assert fenced_kernel("@nki.jit\ndef k(a):\n    return a") == "@nki.jit\ndef k(a):\n    return a"
    assert parse_answer(12) == ([], None)


PASS = {"verdict": "pass", "compiled": True, "speedup": 1.5}
CHEAT = {"verdict": "rejected", "compiled": True}


@pytest.mark.parametrize("name", spec_names())
def test_credit_rules_hold_in_every_spec(name: str) -> None:
    spec = get_spec(name)
    compile_fail = spec.score({"verdict": "fail", "compiled": False}).reward
    unchanged = score_answer(Applied(KERNEL, False, True), spec, None)
    assert (unchanged.outcome, unchanged.reward) == (UNCHANGED, 0.0)  # a re-evaluation earns nothing
    tool_error = score_answer(Applied(EDITED, True, True, ["unknown tool"]), spec, PASS)
    assert tool_error.outcome == TOOL_ERROR and tool_error.reward <= compile_fail  # a broken call never pays
    hidden_cheat = score_answer(Applied(EDITED, True, True, ["unknown tool"]), spec, CHEAT)
    assert hidden_cheat.outcome == "rejected" and hidden_cheat.reward < compile_fail  # a broken call never hides a cheat
    assert score_answer(Applied(EDITED, True, True), spec, CHEAT).reward < compile_fail
    assert score_answer(Applied(KERNEL, False, False), spec, None).reward == compile_fail  # no answer at all


def test_a_text_mode_answer_reads_the_same_from_its_message_and_its_verl_text() -> None:
    """A text-mode model's calls are in its content and in ``tool_calls`` (ids ``text_…``): each edit applies once."""
    from nkiagent.agent.models.textmode import parse
    from nkiagent.training.export import _hermes_text

    content = f"Widen.\n```edit {K}\n<<<<<<< OLD\nTILE = 128\n=======\nTILE = 512\n>>>>>>> NEW\n```"
    calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in parse(content)]
    message = {"role": "assistant", "content": content, "tool_calls": calls}
    for answer in (message, _hermes_text(message)):
        a = apply_answer(answer, KERNEL, K)
        assert (a.code, a.errors) == (EDITED, [])
