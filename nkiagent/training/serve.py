"""``nkiagent serve-reward``: score rollouts over HTTP, so a trainer on other machines can use the verifier.

``POST /score`` with ``{"items": [{"completion": TEXT | MESSAGE | [MESSAGES], "task": NAME, "target": "trn2",
"kernel": TEXT, "kernel_path": PATH}, …]}`` (``task``/``target`` may be given once at the top level; ``kernel``
is the kernel in force at the prompt, default the task's starting kernel) answers
``{"rewards": [float, …], "results": [{reward, outcome, components, verdict, reasons, speedup, …}], "reward_spec": ID}``.
``GET /health`` says which reward spec and options the server uses.

A trainer can point a cluster at it, so it is built to stay up:

* only builtin task *names* are taken over HTTP — a client-supplied path would be imported in
  this (unsandboxed) process; task files come only from the ``--task-dir`` the operator names,
  by file name;
* a body is capped at :data:`MAX_BODY` bytes, a completion at :data:`MAX_COMPLETION` characters
  and :data:`MAX_DEPTH` levels of nesting, and the gate's parse has a deadline
  (:data:`~nkiagent.verify.gate.PARSE_DEADLINE_S`);
* every verification goes through the scorer's one pool (at most ``--workers`` sandboxes for the
  whole process) and a kernel in flight for one request is awaited by the others;
* the listen backlog takes :data:`BACKLOG` waiting connections;
* a request the server cannot understand gets a 4xx with ``{"error": message}`` naming the item
  and the fix, an unexpected failure a 500 with its message, never a dead server.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from .env import Scorer

__all__ = ["BACKLOG", "MAX_BODY", "MAX_COMPLETION", "MAX_DEPTH", "MAX_ITEMS", "BadRequest", "RewardServer", "TaskResolver", "parse_request"]

MAX_BODY = 32 * 1024 * 1024
MAX_ITEMS = 4096
MAX_COMPLETION = 256 * 1024  #: characters of one completion (its JSON): kernels are a few kB
MAX_DEPTH = 16  #: nesting of one item: a list of messages with tool calls is 6 deep
BACKLOG = 256
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class BadRequest(ValueError):
    """A client error: the status to answer and the message to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TaskResolver:
    """Task names a client may use → what the scorer loads: builtin names, or files in the operator's ``task_dir``.

    Nothing a client sends is imported unless it names a ``.py`` file directly inside ``task_dir``.
    """

    def __init__(self, task_dir: str | Path | None = None) -> None:
        from ..tasks.loader import builtin_tasks

        self.builtin = set(builtin_tasks())
        self.task_dir = Path(task_dir).resolve() if task_dir is not None else None
        if self.task_dir is not None and not self.task_dir.is_dir():
            raise FileNotFoundError(f"--task-dir {task_dir} is not a folder")
        self._checked: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name in self.builtin:
            return name
        hint = (
            f"name a builtin task or a file in {self.task_dir} (without .py)"
            if self.task_dir is not None
            else "name a builtin task; the operator can serve task files with --task-dir DIR"
        )
        if not _NAME.match(name) or ".." in name:
            raise KeyError(f"task {name!r} is not a task name: task paths are not accepted over HTTP; {hint}")
        if self.task_dir is None:
            raise KeyError(f"unknown task {name!r}; {hint}")
        if name not in self._checked:
            path = self.task_dir / (name if name.endswith(".py") else f"{name}.py")
            if path.parent != self.task_dir or not path.is_file():
                raise KeyError(f"unknown task {name!r}; {hint}")
            from ..tasks import get_task

            get_task(str(path))  # the operator's file: imported once here, so a broken one is a 400 naming it
            self._checked[name] = str(path)
        return self._checked[name]


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counted without recursion and given up past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            stack += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            stack += [(x, d + 1) for x in v]
    return deepest


def _opt_text(it: dict[str, Any], key: str, i: int) -> str | None:
    v = it.get(key)
    if v is not None and not isinstance(v, str):
        raise BadRequest(400, f"items[{i}].{key} must be text (or left out), not {type(v).__name__}")
    if isinstance(v, str) and len(v) > MAX_COMPLETION:
        raise BadRequest(413, f"items[{i}].{key} is {len(v)} characters; at most {MAX_COMPLETION}")
    return v


def parse_request(body: bytes, resolve: Any) -> tuple[list[Any], list[str], list[str], list[str | None], list[str | None]]:
    """(completions, tasks, targets, kernels, kernel paths) of a ``/score`` body, or :class:`BadRequest` saying what is wrong.

    ``resolve(name)`` gives what the scorer loads for a task name, or raises ``KeyError`` (a :class:`TaskResolver`).
    """
    try:
        data = json.loads(body)
    except RecursionError:
        raise BadRequest(400, f"body is nested too deeply for JSON; an item is at most {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise BadRequest(400, f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(400, 'body must be a JSON object like {"items": [{"completion": "...", "task": "vector_add"}]}')
    items = data.get("items")
    if not isinstance(items, list) or not items:
        raise BadRequest(400, '"items" must be a non-empty list of {"completion", "task", "target"} objects')
    if len(items) > MAX_ITEMS:
        raise BadRequest(413, f"too many items: {len(items)} (at most {MAX_ITEMS} per request)")
    out: tuple[list[Any], list[str], list[str], list[str | None], list[str | None]] = ([], [], [], [], [])
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise BadRequest(400, f"items[{i}] must be an object")
        comp = it.get("completion")
        if not isinstance(comp, (str, dict, list)):
            raise BadRequest(400, f"items[{i}].completion must be text, a message or a list of messages")
        if _depth(comp, MAX_DEPTH) > MAX_DEPTH:
            raise BadRequest(
                400, f"items[{i}].completion is nested more than {MAX_DEPTH} levels deep; send text, a message or a list of messages"
            )
        size = len(comp) if isinstance(comp, str) else len(json.dumps(comp))
        if size > MAX_COMPLETION:
            raise BadRequest(413, f"items[{i}].completion is {size} characters; at most {MAX_COMPLETION} (a kernel is a few thousand)")
        task = it.get("task", data.get("task"))
        target = it.get("target", data.get("target", "trn2"))
        if not isinstance(task, str) or not task:
            raise BadRequest(400, f"items[{i}] names no task (give items[{i}].task or a top-level task)")
        if target not in ("trn1", "trn2", "trn3"):
            raise BadRequest(400, f"items[{i}].target must be trn1, trn2 or trn3, not {target!r}")
        try:
            loadable = resolve(task)
        except (KeyError, FileNotFoundError, ValueError, ImportError, SyntaxError) as exc:
            raise BadRequest(400, f"items[{i}]: {exc.args[0] if exc.args else exc}") from None
        comps, tasks, targets, kernels, paths = out
        comps.append(comp)
        tasks.append(loadable)
        targets.append(target)
        kernels.append(_opt_text(it, "kernel", i))
        paths.append(_opt_text(it, "kernel_path", i))
    return out


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = BACKLOG  # socketserver's default of 5 reset connections under a trainer's fan-out
    daemon_threads = True


class RewardServer:
    """A threaded HTTP server around one :class:`Scorer`; ``start()`` in the background or ``serve_forever()``."""

    def __init__(self, scorer: Scorer, host: str = "127.0.0.1", port: int = 0, task_dir: str | Path | None = None) -> None:
        self.scorer = scorer
        self.resolve = TaskResolver(task_dir)
        self.httpd = _HTTPServer((host, port), _handler(self))
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread: threading.Thread | None = None

    def health(self) -> dict[str, Any]:
        s = self.scorer
        return {
            "ok": True,
            "reward_spec": s.reward_spec.id,
            "description": s.reward_spec.description,
            "seeds": s.seeds,
            "hidden_shapes": s.hidden,
            "workers": s.workers,
            "verified": s.verified,
            "task_dir": str(self.resolve.task_dir) if self.resolve.task_dir else None,
        }

    def score(self, body: bytes) -> dict[str, Any]:
        completions, tasks, targets, kernels, paths = parse_request(body, self.resolve)
        scored = self.scorer.score(completions, tasks, targets, kernels, paths)
        return {
            "rewards": [s.reward.reward for s in scored],
            "results": [s.to_dict() for s in scored],
            "reward_spec": self.scorer.reward_spec.id,
        }

    def start(self) -> RewardServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.scorer.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(server: RewardServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 60  # a client that opens a connection and sends nothing does not hold a thread forever

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
                self.close_connection = True
                self._send(411, {"error": "a Content-Length header is required (chunked bodies are not accepted)"})
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
