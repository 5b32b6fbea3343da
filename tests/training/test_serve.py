"""The reward server scores a batch over HTTP with the verifier; the RL environment and reward functions agree with it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nkiagent.tasks.loader import BUILTIN_DIR
from nkiagent.training.env import KernelEnv, Scorer, compute_score, reward_fn
from nkiagent.training.serve import RewardServer, TaskResolver

from .conftest import baseline_kernel, cheat_kernel, honest_kernel, wrong_kernel


def _fence(code: str) -> str:
    return f"Here is the kernel:\n```python\n{code}```\nIt should be fast."


def _post(url: str, body: bytes | dict[str, Any], method: str = "POST") -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def server() -> Iterator[RewardServer]:
    with RewardServer(Scorer("gated-speedup", seeds=1, hidden=False, workers=2)) as srv:
        yield srv


def test_a_batch_of_32_completions_gets_the_right_rewards(server: RewardServer) -> None:
    kinds: list[tuple[str, Any, float | None]] = [
        ("baseline", _fence(baseline_kernel()), 1.3),  # speedup exactly 1 over itself: 0.3 + 1
        (
            "fast",
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {
                            "name": "write_file",
                            "arguments": json.dumps({"path": "kernels/vector_add.py", "content": honest_kernel()}),
                        },
                    }
                ],
            },
            None,
        ),
        ("wrong", [{"role": "user", "content": "go"}, {"role": "assistant", "content": _fence(wrong_kernel())}], 0.0),
        ("cheat", _fence(cheat_kernel()), -1.0),
        ("syntax", "```python\ndef kernel(:\n```", -0.5),
        ("prose", "I would tile it differently.", -0.5),
    ]
    batch = [kinds[i % len(kinds)] for i in range(32)]
    status, out = _post(server.url + "/score", {"task": "vector_add", "items": [{"completion": c} for _, c, _ in batch]})
    assert status == 200 and len(out["rewards"]) == 32 and out["reward_spec"] == "gated-speedup@1"
    for (name, _, expected), reward, res in zip(batch, out["rewards"], out["results"]):
        assert reward == res["reward"]
        if name == "fast":
            assert res["verdict"] == "pass" and res["speedup"] > 1.2 and reward == pytest.approx(0.3 + res["speedup"])
        else:
            assert reward == expected, (name, res)
        assert (
            res["outcome"]
            == {
                "baseline": "pass",
                "fast": "pass",
                "wrong": "wrong",
                "cheat": "rejected",
                "syntax": "compile_fail",
                "prose": "compile_fail",
            }[name]
        )
    cheat = out["results"][3]
    assert cheat["verdict"] == "rejected" and any("forbidden-import" in r for r in cheat["reasons"])
    assert out["results"][0]["timing_source"] == "emulator-estimate"
    assert len(server.scorer._cache) == 5  # five distinct kernels verified once each, whatever the batch size


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{not json", 400, "body is not valid JSON"),
        ({"items": []}, 400, '"items" must be a non-empty list'),
        ({"items": [{"completion": "x", "task": "no_such_task"}]}, 400, "items[0]: unknown task 'no_such_task'"),
        ({"items": [{"completion": 5, "task": "vector_add"}]}, 400, "items[0].completion must be text, a message or a list of messages"),
        ({"items": [{"completion": "x"}]}, 400, "items[0] names no task"),
        ({"items": [{"completion": "x", "task": "vector_add", "target": "trn9"}]}, 400, "items[0].target must be trn1, trn2 or trn3"),
        ([1, 2], 400, "body must be a JSON object"),
    ],
)
def test_malformed_requests_get_a_4xx_with_a_message(server: RewardServer, body: Any, status: int, message: str) -> None:
    got, out = _post(server.url + "/score", body if isinstance(body, bytes) else json.dumps(body).encode())
    assert got == status and message in out["error"]


def test_wrong_routes_and_methods_and_the_server_stays_up(server: RewardServer) -> None:
    assert _post(server.url + "/nope", {})[0] == 404
    assert _post(server.url + "/score", {}, method="PUT")[0] == 405
    with urllib.request.urlopen(server.url + "/health", timeout=10) as resp:
        health = json.loads(resp.read())
    assert health["ok"] is True and health["reward_spec"] == "gated-speedup@1" and health["seeds"] == 1


def test_kernel_env_steps_through_the_real_tools_and_verifier() -> None:
    with KernelEnv("vector_add", max_turns=3, seeds=1, hidden=False, reward="gated-speedup") as env:
        obs = env.reset()
        assert [m["role"] for m in obs["messages"]] == ["system", "user"] and "vector_add" in obs["messages"][1]["content"]
        assert {t["function"]["name"] for t in obs["tools"]} >= {"write_file", "evaluate", "submit"}
        o, r, done, info = env.step(_fence(honest_kernel()))
        sp = info["evaluation"]["speedup"]
        assert info["outcome"] == "pass" and r == pytest.approx(0.3 + sp) and not done and "verdict: pass" in o["messages"][0]["content"]
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "r1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": "kernels/vector_add.py"})},
                }
            ],
        }
        o, r, done, info = env.step(call)
        assert r == 0.0 and info["outcome"] == "unchanged" and "TILE_COLS = 1024" in o["messages"][0]["content"]
        cheat = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "w1",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": "kernels/vector_add.py", "content": cheat_kernel()}),
                    },
                }
            ],
        }
        o, r, done, info = env.step(cheat)
        assert r == -1.0 and info["outcome"] == "rejected" and done  # third step: max_turns reached
        with pytest.raises(RuntimeError, match="the episode is over"):
            env.step("```python\nx = 1\n```")


def test_trl_reward_fn_and_verl_compute_score() -> None:
    rewards = reward_fn(["p", "p"], [_fence(baseline_kernel()), "no kernel"], task=["vector_add", "vector_add"])
    assert rewards == [1.3, -0.5]
    out = compute_score("nkiagent/vector_add", _fence(baseline_kernel()), json.dumps({"task": "vector_add", "target": "trn2"}))
    assert out == {"score": 1.3, "outcome": "pass", "verdict": "pass", "speedup": 1.0}


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_scorer_over_the_search_executors(executor: str) -> None:
    """The reward server's evaluations spread over the local pool or a Ray cluster (here a local one), same rewards."""
    from nkiagent.commands.export import search_evaluator

    if executor == "ray":
        import ray  # the `ray` extra; CI installs it (.ci/run)

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        scorer = Scorer("tiered", seeds=1, hidden=False, evaluate_many=search_evaluator(executor, seeds=1, hidden=False, workers=2))
        got = scorer.score([_fence(baseline_kernel()), _fence(cheat_kernel())], ["vector_add"] * 2, ["trn2"] * 2)
    finally:
        if executor == "ray":
            ray.shutdown()
    assert [s.reward.reward for s in got] == [0.2, -1.0]  # tiered: a pass at exactly 1x earns 0.2; a cheat −1
    assert got[0].evaluation is not None and got[0].evaluation["speedup"] == 1.0


def _health(server: RewardServer) -> dict[str, Any]:
    with urllib.request.urlopen(server.url + "/health", timeout=10) as resp:
        return dict(json.loads(resp.read()))


def test_a_task_path_from_a_client_is_never_imported(server: RewardServer, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran in the server')\n")
    for task in (str(evil), "evil.py", "../evil", "evil"):
        status, out = _post(server.url + "/score", {"items": [{"completion": "x", "task": task}]})
        assert status == 400 and "name a builtin task" in out["error"], (task, out)
    assert not marker.exists()
    # the operator's --task-dir serves its files by name, and only those
    (tmp_path / "my_add.py").write_text((BUILTIN_DIR / "vector_add.py").read_text())
    resolve = TaskResolver(tmp_path)
    assert resolve("my_add") == str(tmp_path / "my_add.py") and resolve("vector_add") == "vector_add"
    with pytest.raises(KeyError, match="task paths are not accepted over HTTP"):
        resolve(str(tmp_path / "my_add.py"))
    assert not marker.exists()


def test_oversize_and_deeply_nested_bodies_get_a_4xx_fast(server: RewardServer) -> None:
    t0 = time.monotonic()
    big = "@nki.jit\ndef kernel(a):\n    return a\n" + "# comment\n" * 300_000  # 3 MB: the gate's parse once took minutes
    status, out = _post(server.url + "/score", {"task": "vector_add", "items": [{"completion": big}]})
    assert status == 413 and "items[0].completion is 3000037 characters; at most 262144" in out["error"]
    status, out = _post(server.url + "/score", b'{"items": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert status == 400 and "nested too deeply" in out["error"]
    nested: Any = "x"
    for _ in range(40):
        nested = [nested]
    status, out = _post(server.url + "/score", {"task": "vector_add", "items": [{"completion": nested}]})
    assert status == 400 and "items[0].completion is nested more than 16 levels deep" in out["error"]
    assert time.monotonic() - t0 < 10 and _health(server)["ok"]


@pytest.mark.parametrize(
    "completion",
    [
        {"tool_calls": 5},
        {"role": "assistant", "content": 5},
        [{"role": 5}],
        [],
        {"tool_calls": [{"function": {"name": "write_file", "arguments": "[1]"}}]},
        {"tool_calls": [{"function": {"name": "edit_file", "arguments": {"path": "kernels/vector_add.py", "old": ["x"], "new": 1}}}]},
    ],
)
def test_malformed_model_output_scores_as_a_failure_never_a_500(server: RewardServer, completion: Any) -> None:
    status, out = _post(server.url + "/score", {"task": "vector_add", "items": [{"completion": completion}]})
    assert status == 200 and out["rewards"] == [-0.5] and out["results"][0]["outcome"] in ("compile_fail", "tool_error")


def test_fifty_concurrent_clients_one_kernel_one_sandbox() -> None:
    """50 clients at once: every one answered (the backlog holds them), and the kernel they share is verified once."""
    from concurrent.futures import ThreadPoolExecutor

    code = _fence(baseline_kernel() + "\n# concurrency probe\n")
    with RewardServer(Scorer("gated-speedup", seeds=1, hidden=False, workers=2)) as srv:
        with ThreadPoolExecutor(max_workers=50) as pool:
            got = list(pool.map(lambda _: _post(srv.url + "/score", {"task": "vector_add", "items": [{"completion": code}]}), range(50)))
        assert [status for status, _ in got] == [200] * 50
        assert {out["rewards"][0] for _, out in got} == {1.3}
        assert srv.scorer.verified == 1 and _health(srv)["verified"] == 1


def test_serve_reward_command_stops_on_sigterm_mid_request() -> None:
    import signal
    import subprocess
    import sys
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-m", "nkiagent.cli", "serve-reward", "--port", "0", "--no-hidden", "--reward", "sol"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("scoring with sol@1 at http://127.0.0.1:")
        url = line.split(" at ")[1].split("/score")[0]
        status, out = _post(url + "/score", {"items": [{"completion": "no code", "task": "vector_add"}]})
        assert status == 200 and out["rewards"] == [-0.5]

        def verify_one() -> None:
            try:
                _post(url + "/score", {"task": "vector_add", "items": [{"completion": _fence(baseline_kernel())}]})
            except OSError:  # the server stopped mid-request: what this test does
                pass

        busy = threading.Thread(target=verify_one, daemon=True)
        busy.start()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout.read().strip() == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
