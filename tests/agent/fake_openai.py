"""A local OpenAI-compatible chat server for tests: scripted replies, streaming or not, failures on demand.

It serves ``POST /v1/chat/completions`` on 127.0.0.1 from a queue of :class:`Reply`\\ s, records
every request, and answers ``"stream": true`` with SSE chunks the way OpenAI does (content deltas,
tool-call deltas with arguments in pieces, a usage chunk when ``stream_options.include_usage``).
It stops when its ``with`` block ends, or by itself after ``lifetime_s`` whatever happens.

``FakeOpenAI(api_key="sk-good")`` answers 401 (OpenAI's words) to any other bearer key, and to none.
:class:`FakeOpenAIProcess` runs the same server as a separate process (``python -m
tests.agent.fake_openai``), scripted over a small control route, so a client under test shares
nothing with it but the socket.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["FakeOpenAI", "FakeOpenAIProcess", "Reply"]


@dataclass
class Reply:
    """One scripted answer: a 200 with ``content`` and ``tool_calls`` ((name, raw JSON arguments) pairs), or an error ``status``."""

    content: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    status: int = 200
    error: str = "scripted failure"
    delay_s: float = 0.0  #: wait before answering (longer than the client's timeout to test timeouts)
    chunk_delay_s: float = 0.0  #: wait between streamed chunks (a slow answer, to act while it streams)
    retry_after_s: float = 0.0  #: sent as Retry-After with an error status (a long one leaves time to cancel the wait)
    prompt_tokens: int = 11
    completion_tokens: int = 7


class FakeOpenAI:
    """``with FakeOpenAI() as srv: srv.push(Reply(...)); ... srv.requests``; ``srv.url`` is the ``api_base``."""

    def __init__(self, lifetime_s: float = 60.0, api_key: str | None = None, port: int = 0) -> None:
        self.api_key = api_key  #: the only bearer key accepted (None: any key, or none)
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self._stopped = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._watchdog = threading.Timer(lifetime_s, self.stop)
        self._watchdog.daemon = True

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> Self:
        self._thread.start()
        self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._stopped.is_set():
            self._stopped.set()  # wakes handlers sleeping in a delay
            self._watchdog.cancel()
            self._server.shutdown()
            self._server.server_close()


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:  # the control route of FakeOpenAIProcess
            if self.path == "/_control/requests":
                self._json(200, {"requests": fake.requests})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/_control/push":
                fake.push(*(Reply(**{**r, "tool_calls": [tuple(c) for c in r["tool_calls"]]}) for r in body["replies"]))
                self._json(200, {"queued": len(fake.replies)})
                return
            if self.path == "/_control/reset":
                fake.replies.clear()
                fake.requests.clear()
                fake.api_key = body.get("api_key")
                self._json(200, {})
                return
            fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
            if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                reply = Reply(
                    status=401,
                    error=f"Incorrect API key provided: {sent[:3]}***. You can find your API key at your server's config."
                    if sent
                    else "You didn't provide an API key.",
                )
            elif self.path.rstrip("/") != "/v1/chat/completions":
                reply = Reply(status=404, error=f"no route {self.path}")
            else:
                reply = fake.replies.popleft() if fake.replies else Reply(status=500, error="fake server: no scripted reply left")
            if reply.delay_s and fake._stopped.wait(reply.delay_s):
                return
            try:
                if reply.status != 200:
                    self._json(
                        reply.status,
                        {"error": {"message": reply.error, "type": "scripted", "code": reply.status}},
                        {"Retry-After": f"{reply.retry_after_s:g}"} if reply.retry_after_s else {},
                    )
                elif body.get("stream"):
                    self._sse(reply, body)
                else:
                    self._json(200, _completion(reply, body.get("model", "")))
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

        def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, reply: Reply, body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
            for chunk in _chunks(reply, body.get("model", ""), bool((body.get("stream_options") or {}).get("include_usage"))):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                if reply.chunk_delay_s and fake._stopped.wait(reply.chunk_delay_s):
                    return
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": _usage(reply),
    }


def _chunks(reply: Reply, model: str, include_usage: bool) -> list[dict[str, Any]]:
    """The SSE chunks OpenAI would send: role, content in 5-character pieces, each tool call's name then its arguments in pieces."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": reply.content[i : i + 5]}) for i in range(0, len(reply.content), 5)]
    for i, (name, args) in enumerate(reply.tool_calls):
        out.append(
            chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}]})
        )
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j : j + 7]}}]}) for j in range(0, len(args), 7)]
    out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if include_usage:
        out.append(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": _usage(reply),
            }
        )
    return out


class FakeOpenAIProcess:
    """:class:`FakeOpenAI` in its own process: ``with FakeOpenAIProcess() as srv: srv.push(...); srv.requests``.

    ``reset(api_key=…)`` empties it between tests (one process can serve a module); the process ends
    with the ``with`` block, or by itself after ``lifetime_s``.
    """

    def __init__(self, lifetime_s: float = 120.0) -> None:
        root = Path(__file__).resolve().parents[2]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.agent.fake_openai", "--lifetime-s", str(lifetime_s)], cwd=root, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdout is not None
        self.url = self._proc.stdout.readline().strip()  # the child prints its api_base once it listens
        if not self.url.startswith("http://"):
            self._proc.kill()
            raise RuntimeError(f"the fake server process did not start (said {self.url!r})")
        self._control = self.url.removesuffix("/v1") + "/_control"

    def _call(self, route: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{self._control}/{route}", data=data), timeout=10) as resp:
            return dict(json.loads(resp.read()))

    def push(self, *replies: Reply) -> None:
        self._call("push", {"replies": [asdict(r) for r in replies]})

    def reset(self, api_key: str | None = None) -> None:
        self._call("reset", {"api_key": api_key})

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self._call("requests")["requests"])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


def _serve() -> None:
    parser = argparse.ArgumentParser(description="a fake OpenAI-compatible server on 127.0.0.1 (tests)")
    parser.add_argument("--lifetime-s", type=float, default=120.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", help="the only bearer key accepted")
    args = parser.parse_args()
    srv = FakeOpenAI(lifetime_s=args.lifetime_s, api_key=args.api_key, port=args.port)
    with srv:
        print(srv.url, flush=True)
        srv._stopped.wait()


if __name__ == "__main__":
    _serve()
