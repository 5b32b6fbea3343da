"""A pre-loaded launcher that forks one evaluation worker per request, instead of starting Python each time.

Why: a fresh worker spends ~0.7 CPU-seconds starting Python and importing NumPy, ml_dtypes and
the emulator before it runs a single instruction — more than a level-1 kernel's runs cost, and
on two cores it halves the verifications per second. The launcher (a *zygote*, as Android and
Chromium call theirs) does those imports once, in a process of its own with the scrubbed
environment, and never runs kernel code itself. Each request forks a child that becomes the
worker: its own session (so the parent can kill its process group), only the request's pipes
open, the request's scratch directory as cwd, ``HOME`` and ``TMPDIR``, and then exactly what a
freshly started worker does (:func:`nkiagent.sandbox.worker.answer`): limits, guard, runs. A
fork is a copy: nothing a kernel does in its child reaches the launcher or the next child.

Wire (one ``AF_UNIX`` datagram socket pair; datagrams keep their boundaries and carry file
descriptors): the parent sends ``{"request": …, "env": …}`` with four descriptors (a reply
socket, the result pipe, the trace-stream pipe, the stdout file); the launcher answers on the
reply socket ``{"pid": N}`` once forked and ``{"exit": CODE}`` (``Popen.returncode``'s
convention) once reaped. The launcher exits, killing its children, when its stdin — a pipe
the parent holds — closes, so it never outlives the process that started it.

``NKIAGENT_ZYGOTE=0`` starts every worker as a fresh interpreter instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["ForkedWorker", "enabled", "spawn", "warm"]

_MAX_MESSAGE = 1 << 20  #: a request's JSON (paths, shapes, seeds) is a few KiB


def enabled() -> bool:
    """Whether emulator workers are forked from the launcher (``NKIAGENT_ZYGOTE=0`` turns it off)."""
    value = os.environ.get("NKIAGENT_ZYGOTE", "1").strip().lower()
    if value not in ("0", "1", "false", "true", "no", "yes", "off", "on", ""):
        raise ValueError(f"NKIAGENT_ZYGOTE={value!r}: use 1 (fork workers from a pre-loaded launcher) or 0 (start each worker fresh)")
    return value not in ("0", "false", "no", "off") and hasattr(os, "fork")


class ForkedWorker:
    """The parent's handle on a forked worker, shaped like the parts of :class:`subprocess.Popen` the sandbox uses."""

    def __init__(self, reply: socket.socket, pid: int) -> None:
        self._reply = reply
        self.pid = pid
        self.returncode: int | None = None

    def _read(self, timeout: float | None) -> bool:
        if self.returncode is not None:
            return True
        ready, _, _ = select.select([self._reply], [], [], timeout)
        if not ready:
            return False
        data = self._reply.recv(4096)
        # no message: the launcher itself died (its children die with it), so the worker is gone too
        self.returncode = int(json.loads(data)["exit"]) if data else -signal.SIGKILL
        self._reply.close()
        return True

    def poll(self) -> int | None:
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._read(timeout):
            raise subprocess.TimeoutExpired("nkiagent worker", timeout or 0)
        assert self.returncode is not None
        return self.returncode


class _Launcher:
    """The running launcher process of this parent, started on first use and again if it died or its environment changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._key: tuple[str, ...] = ()
        self._home: str | None = None

    def _start(self, env: dict[str, str]) -> socket.socket:
        home = self._home = tempfile.mkdtemp(prefix="nkiagent-zygote-")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        log = open(Path(home) / "zygote.log", "wb")  # noqa: SIM115 — the launcher writes it for its whole life
        self._proc = subprocess.Popen(
            [sys.executable, "-s", "-m", "nkiagent.sandbox.zygote", str(theirs.fileno())],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            env={**env, "HOME": home, "TMPDIR": home}, cwd=home, pass_fds=(theirs.fileno(),), start_new_session=True,
        )  # fmt: skip
        log.close()
        theirs.close()
        self._sock = ours
        return ours

    def _running(self, env: dict[str, str]) -> socket.socket:
        """The launcher for ``env`` (started now if it is not running or ran with another environment); hold the lock."""
        key = (sys.executable, *sorted(f"{k}={v}" for k, v in env.items() if k not in ("HOME", "TMPDIR")))
        if self._proc is None or self._proc.poll() is not None or key != self._key or self._sock is None:
            self.stop()
            self._start(env)
            self._key = key
        assert self._sock is not None
        return self._sock

    def warm(self, env: dict[str, str]) -> None:
        with self._lock:
            self._running(env)

    def send(self, message: bytes, fds: list[int], env: dict[str, str]) -> None:
        with self._lock:
            socket.send_fds(self._running(env), [message], fds)

    def stop(self) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()  # the launcher's cue to kill its children and leave
        if self._sock is not None:
            self._sock.close()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
        self._proc, self._sock, self._home = None, None, None


_LAUNCHER = _Launcher()
atexit.register(_LAUNCHER.stop)


def warm(env: dict[str, str]) -> None:
    """Start the launcher for ``env`` now, without waiting for it, so its imports overlap the caller's own work.

    Why: the launcher spends most of a second importing before it can fork the first worker; a
    verification starts it as it begins (before its gate and its inputs), a session as it opens.
    Nothing happens when it already runs with this environment.
    """
    _LAUNCHER.warm(env)


def spawn(
    request: dict[str, Any],
    env: dict[str, str],
    scratch: Path,
    result_fd: int,
    stream_fd: int,
    stdout_fd: int,
    *,
    start_timeout: float = 120.0,
) -> ForkedWorker:
    """Fork a worker for ``request``; the caller keeps (and closes) its own copies of the descriptors.

    Raises ``OSError`` when the launcher cannot take the request (then start a fresh worker instead).
    """
    message = json.dumps({"request": request, "env": env, "scratch": str(scratch)}).encode()
    if len(message) > _MAX_MESSAGE:
        raise OSError(f"a request of {len(message)} bytes is too large for the launcher")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        _LAUNCHER.send(message, [theirs.fileno(), result_fd, stream_fd, stdout_fd], env)
    finally:
        theirs.close()
    ready, _, _ = select.select([ours], [], [], start_timeout)  # the launcher may still be importing
    data = ours.recv(4096) if ready else b""
    if not data:
        ours.close()
        raise OSError("the worker launcher did not answer" if not ready else "the worker launcher exited")
    return ForkedWorker(ours, int(json.loads(data)["pid"]))


# --- the launcher process -------------------------------------------------------------------


def _preload() -> None:
    """What every worker imports before its guard goes in, done once here (see :func:`worker.answer`)."""
    from . import worker

    worker.preload()


def _child(msg: dict[str, Any], fds: list[int], launcher_sockets: list[socket.socket]) -> None:
    """In the forked child: become a fresh worker for this one request, then exit."""
    _reply, result_fd, stream_fd, stdout_fd = fds
    try:
        for s in launcher_sockets:
            s.detach()  # their descriptors are closed below; no object may close a reused number later
        os.setsid()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(stdout_fd, 2)
        keep = sorted({result_fd, stream_fd})
        os.closerange(3, keep[0])  # nothing of the launcher's stays open in a worker
        os.closerange(keep[0] + 1, keep[-1])
        os.closerange(keep[-1] + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir(msg["scratch"])
        os.environ.clear()
        os.environ.update(msg["env"])
        sys.argv = ["nkiagent.sandbox.worker", str(result_fd), str(stream_fd)]  # as a fresh worker's
        from . import worker

        worker.answer(msg["request"], result_fd, stream_fd)
        code = 0
    except BaseException:  # noqa: BLE001 — the parent learns of it from the missing answer and this status
        code = 70
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _serve(sock_fd: int) -> None:
    sock = socket.socket(fileno=sock_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wake-up pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ctrl+c is the parent's to handle
    _preload()
    children: dict[int, socket.socket] = {}
    control = sys.stdin.fileno()
    try:
        while True:
            ready, _, _ = select.select([sock, control, wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 4096)
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                reply = children.pop(pid, None)
                if reply is not None:
                    _tell(reply, {"exit": os.waitstatus_to_exitcode(status)})
                    reply.close()
            if control in ready and not os.read(control, 4096):
                return  # the parent is gone or done
            if sock in ready:
                data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 4)
                if len(fds) != 4:
                    for fd in fds:
                        os.close(fd)
                    continue
                msg = json.loads(data)
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    _child(msg, fds, [sock, *children.values()])
                reply = socket.socket(fileno=fds[0])
                for fd in fds[1:]:
                    os.close(fd)
                children[pid] = reply
                _tell(reply, {"pid": pid})
    finally:
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _tell(reply: socket.socket, message: dict[str, Any]) -> None:
    try:
        reply.send(json.dumps(message).encode())
    except OSError:
        pass  # the parent stopped listening (it gave up on this worker)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
