"""``nkiagent serve-reward``: score rollouts over HTTP, so a trainer on other machines can use the verifier.

``POST /score`` with ``{"items": [{"completion": TEXT | MESSAGE | [MESSAGES], "task": NAME, "target": "trn2"}, …]}``
(``task``/``target`` may be given once at the top level for every item) answers
``{"rewards": [float, …], "results": [{reward, outcome, components, verdict, reasons, speedup, …}], "reward_spec": ID}``.
``GET /health`` says which reward spec and options the server uses. The batch is verified
over the local pool (:class:`~nkiagent.traces.env.Scorer`); a request the server cannot
understand gets a 4xx with ``{"error": message}``, and an unexpected failure a 500 with its
message, never a dead server.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .env import Scorer

__all__ = ["BadRequest", "RewardServer", "parse_request"]

MAX_BODY = 64 * 1024 * 1024
MAX_ITEMS = 4096


class BadRequest(ValueError):
    """A client error: the status to answer and the message to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_request(body: bytes, known_task: Any) -> tuple[list[Any], list[str], list[str]]:
    """(completions, tasks, targets) of a ``/score`` body, or :class:`BadRequest` saying what is wrong.

    ``known_task(name)`` raises ``KeyError``/``FileNotFoundError`` for a task the server cannot load.
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest(400, f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(400, 'body must be a JSON object like {"items": [{"completion": "...", "task": "vector_add"}]}')
    items = data.get("items")
    if not isinstance(items, list) or not items:
        raise BadRequest(400, '"items" must be a non-empty list of {"completion", "task", "target"} objects')
    if len(items) > MAX_ITEMS:
        raise BadRequest(413, f"too many items: {len(items)} (at most {MAX_ITEMS} per request)")
    completions, tasks, targets = [], [], []
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise BadRequest(400, f"items[{i}] must be an object")
        comp = it.get("completion")
        if not isinstance(comp, (str, dict, list)):
            raise BadRequest(400, f"items[{i}].completion must be text, a message or a list of messages")
        task = it.get("task", data.get("task"))
        target = it.get("target", data.get("target", "trn2"))
        if not isinstance(task, str) or not task:
            raise BadRequest(400, f"items[{i}] names no task (give items[{i}].task or a top-level task)")
        if target not in ("trn1", "trn2", "trn3"):
            raise BadRequest(400, f"items[{i}].target must be trn1, trn2 or trn3, not {target!r}")
        try:
            known_task(task)
        except (KeyError, FileNotFoundError, ValueError, ImportError) as exc:
            raise BadRequest(400, f"items[{i}]: {exc.args[0] if exc.args else exc}") from None
        completions.append(comp)
        tasks.append(task)
        targets.append(target)
    return completions, tasks, targets


class RewardServer:
    """A threaded HTTP server around one :class:`Scorer`; ``start()`` in the background or ``serve_forever()``."""

    def __init__(self, scorer: Scorer, host: str = "127.0.0.1", port: int = 0) -> None:
        from ..tasks import get_task

        self.scorer = scorer
        self._get_task = get_task
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread: threading.Thread | None = None

    def health(self) -> dict[str, Any]:
        s = self.scorer
        return {"ok": True, "reward_spec": s.reward_spec.id, "description": s.reward_spec.description, "seeds": s.seeds,
                "hidden_shapes": s.hidden, "workers": s.workers}

    def score(self, body: bytes) -> dict[str, Any]:
        completions, tasks, targets = parse_request(body, self._get_task)
        scored = self.scorer.score(completions, tasks, targets)
        return {"rewards": [s.reward.reward for s in scored], "results": [s.to_dict() for s in scored], "reward_spec": self.scorer.reward_spec.id}

    def start(self) -> RewardServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> RewardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(server: RewardServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # requests are not worth a line each
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/health":
                self._send(200, server.health())
            else:
                self._send(404, {"error": f"no route GET {self.path}; use GET /health or POST /score"})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/score":
                self._send(404, {"error": f"no route POST {self.path}; use POST /score"})
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self._send(411, {"error": "a Content-Length header is required"})
                return
            if int(length) > MAX_BODY:
                self.close_connection = True
                self._send(413, {"error": f"body too large: {length} bytes (at most {MAX_BODY})"})
                return
            body = self.rfile.read(int(length))
            try:
                self._send(200, server.score(body))
            except BadRequest as exc:
                self._send(exc.status, {"error": str(exc)})
            except Exception as exc:  # noqa: BLE001 — one bad batch must not take the server down
                self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

        def do_PUT(self) -> None:
            self._send(405, {"error": "use POST /score or GET /health"})

        do_DELETE = do_PATCH = do_PUT

    return Handler
