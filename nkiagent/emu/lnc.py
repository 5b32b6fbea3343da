"""Logical NeuronCores: the programs of one launch run concurrently, interleaved at synchronisation points.

An LNC=2 launch (``kernel[2](...)``) runs one program per physical NeuronCore at the same time,
and the two may talk: ``nisa.sendrecv`` swaps tiles between them and ``nisa.core_barrier`` holds
each until both arrive. Running the programs one after another cannot honour either (program 0
would wait for a tile program 1 has not yet sent), so a launch runs its programs under a
:class:`Scheduler`, the way AWS's simulator runs LNC=2 as two Python threads.

Exactly one program runs at any moment; the others wait for the baton, so the emulator's state
(one :class:`~nkiagent.emu.memory.KernelContext`) needs no locks and a run is deterministic. A
program keeps the baton until it finishes or reaches a synchronisation point that its peer has
not reached yet; then the baton goes to the next program that can make progress (round robin).
Programs run on the calling thread, in order, for as long as none waits: a launch without
``sendrecv``/``core_barrier`` runs exactly as a sequential loop would and starts no thread.
Only when a program has to wait does the next one start, on a :class:`ProgramThread` (the one
kind of thread the evaluation sandbox lets the emulator start, and never kernel code). When
every unfinished program waits on another, the launch is deadlocked and fails naming what each
program waits for and at which kernel line, instead of hanging.

A program's view of the shared context (its ``program_id``, loop stack, ``shared_hbm`` cursor,
control-flow registers) is saved when it hands the baton on and restored when it gets it back.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .errors import NkiRuntimeError, NkiUnsupportedError

__all__ = ["Message", "ProgramThread", "Scheduler"]

_PENDING, _RUNNING, _BLOCKED, _DONE = "pending", "running", "blocked", "done"
_MAIN = -1  #: the launch itself, coordinating once the programs it runs directly have finished

#: The per-program fields of the kernel context, saved and restored at every switch.
_PROGRAM_STATE = ("program_id", "shared_cursor", "control", "loops", "loops_now", "accumulating")


class _Aborted(BaseException):
    """Unwinds a waiting program when another one failed (BaseException: kernel code's ``except Exception`` must not stop it)."""


class Message:
    """One ``sendrecv`` tile in flight: a copy of the sender's ``src`` taken when it was sent."""

    __slots__ = ("dtype", "shape", "values", "where")

    def __init__(self, values: Any, shape: tuple[int, ...], dtype: Any, where: str) -> None:
        self.values = values
        self.shape = shape
        self.dtype = dtype
        self.where = where


class _Program:
    __slots__ = ("barriers", "index", "pid", "ready", "result", "resumer", "saved", "state", "thread", "waiting_for", "where")

    def __init__(self, index: int, pid: tuple[int, ...]) -> None:
        self.index = index
        self.pid = pid
        self.state = _PENDING
        #: its fields of the context while another program runs (a program that starts on the launch's
        #: thread keeps the launch's loop stack, which it leaves as it found it)
        self.saved: dict[str, Any] = {"program_id": pid, "shared_cursor": 0, "control": ()}
        self.resumer = _MAIN
        self.waiting_for = ""
        self.where = ""  #: the kernel line it waits at
        self.ready: Callable[[], bool] = lambda: True
        self.barriers = 0
        self.result: Any = None
        self.thread: ProgramThread | None = None


class ProgramThread(threading.Thread):
    """The thread a program runs on once another had to wait: it runs only while it holds the scheduler's baton.

    A type of its own so the evaluation sandbox can tell the emulator's threads from any other:
    its guard lets the harness start these, and nothing else (see :mod:`nkiagent.sandbox.guard`).
    """

    def __init__(self, sched: Scheduler, program: _Program) -> None:
        super().__init__(name=f"nki-lnc-{program.index}", daemon=True)
        self._sched = sched
        self._program = program

    def run(self) -> None:
        self._sched._thread_main(self._program)


class Scheduler:
    """Runs the programs of one launch, one at a time, switching only where a program must wait."""

    def __init__(self, ctx: Any, pids: Sequence[tuple[int, ...]], body: Callable[[tuple[int, ...]], Any]) -> None:
        self.ctx = ctx
        self.body = body
        self.programs = [_Program(i, pid) for i, pid in enumerate(pids)]
        self.cond = threading.Condition()
        self.turn = _MAIN
        self.active: _Program | None = None
        self.error: BaseException | None = None
        self.aborting = False
        #: sendrecv tiles in flight, by (sending rank, receiving rank), in program order
        self.channels: dict[tuple[int, int], deque[Message]] = {}

    # ------------------------------------------------------------------------------ running

    def run(self) -> Any:
        """Run every program to completion; the first program's return value is the launch's."""
        ctx = self.ctx
        outer = getattr(ctx, "lnc", None)
        ctx.lnc = self
        try:
            for p in self.programs:
                if p.state == _PENDING:
                    self._load(p)
                    p.state = _RUNNING
                    self.active = p
                    p.result = self.body(p.pid)
                    p.state = _DONE
                    self.active = None
            while True:
                waiting = [p for p in self.programs if p.state == _BLOCKED]
                if not waiting:
                    break
                ready = [p for p in waiting if p.ready()]
                if not ready:
                    raise self._deadlock(None)
                self._switch(None, ready[0])
        except BaseException:
            self._abort()
            raise
        finally:
            ctx.lnc = outer
        return self.programs[0].result

    def rank(self) -> int:
        """The running program's rank: its index in the launch grid."""
        assert self.active is not None
        return self.active.index

    def wait_until(self, op: str, where: str, what: str, ready: Callable[[], bool]) -> None:
        """Hold the running program at ``op`` (kernel line ``where``) until ``ready()``, letting the others run meanwhile."""
        me = self.active
        assert me is not None
        while not ready():
            me.state, me.waiting_for, me.where, me.ready = _BLOCKED, f"waits in {op} at {where} for {what}", where, ready
            nxt = self._next_runnable(me)
            if nxt is None:
                raise self._deadlock(me)
            self._switch(me, nxt)
        me.state, me.waiting_for = _RUNNING, ""

    # ------------------------------------------------------------------------------ messages

    def exchange(self, op: str, to_rank: int, from_rank: int, values: Any, shape: tuple[int, ...], dtype: Any, where: str) -> Message:
        """Send a tile to ``to_rank``, then take the next one ``from_rank`` sent this program, waiting for it if need be.

        Each (sender, receiver) pair is a FIFO, so the Nth tile one rank sends another is the Nth
        that one receives: ``sendrecv`` pairs by program order, as AWS documents.
        """
        me = self.rank()
        self.channels.setdefault((me, to_rank), deque()).append(Message(values, shape, dtype, where))
        queue = self.channels.setdefault((from_rank, me), deque())
        self.wait_until(op, where, f"the tile rank {from_rank} sends it", lambda: bool(queue))
        return queue.popleft()

    def barrier(self, op: str, cores: Sequence[int], where: str) -> None:
        """Count this program's arrival and wait until every rank of ``cores`` has arrived as often."""
        me = self.active
        assert me is not None
        me.barriers += 1
        n = me.barriers
        peers = [self.programs[c] for c in cores]
        self.wait_until(op, where, f"barrier #{n} of ranks {list(cores)}", lambda: all(p.barriers >= n for p in peers))

    # ------------------------------------------------------------------------------ switching

    def _next_runnable(self, me: _Program) -> _Program | None:
        n = len(self.programs)
        for k in range(1, n + 1):
            p = self.programs[(me.index + k) % n]
            if p is not me and (p.state == _PENDING or (p.state == _BLOCKED and p.ready())):
                return p
        return None

    def _save(self, p: _Program) -> None:
        for f in _PROGRAM_STATE:
            p.saved[f] = getattr(self.ctx, f)

    def _load(self, p: _Program) -> None:
        for f, v in p.saved.items():
            setattr(self.ctx, f, v)

    def _switch(self, me: _Program | None, to: _Program) -> None:
        """Hand the baton from ``me`` (``None``: the launch) to ``to`` and wait until it comes back."""
        from .ops import flush_matmul_group

        flush_matmul_group(self.ctx)  # a pending matmul group belongs to the program that issued it
        mine = _MAIN if me is None else me.index
        if me is not None:
            self._save(me)
        to.resumer = mine
        with self.cond:
            self.turn = to.index
            if to.state == _PENDING:
                to.state = _RUNNING
                self._start(to)
            self.cond.notify_all()
            while self.turn != mine:
                self.cond.wait()
        if self.aborting and me is not None:
            raise _Aborted
        if me is not None:
            self._load(me)
            self.active = me
        if self.error is not None:
            err, self.error = self.error, None
            raise err

    def _start(self, p: _Program) -> None:
        try:
            t = ProgramThread(self, p)
            t.start()
        except Exception as e:  # noqa: BLE001 — a process that refuses threads (a sandbox stricter than nkiagent's own)
            p.state = _PENDING
            self.turn = p.resumer
            raise NkiUnsupportedError(
                "err_not_emulated",
                f"program {list(p.pid)} must run concurrently with the waiting one, which needs a thread, and this process refuses threads ({e})",
            ) from None
        p.thread = t

    def _thread_main(self, p: _Program) -> None:
        with self.cond:
            while self.turn != p.index:
                self.cond.wait()
        try:
            p.saved.update(loops=[], loops_now=(), accumulating=False)  # it starts inside no loop of the waiting program
            self._load(p)
            self.active = p
            p.result = self.body(p.pid)
        except _Aborted:
            pass
        except BaseException as e:  # noqa: BLE001 — handed to the program that resumed this one, which raises it
            if not self.aborting:
                self.error = e
        finally:
            from .ops import flush_matmul_group

            if not self.aborting:
                flush_matmul_group(self.ctx)
            p.state = _DONE
            with self.cond:
                self.turn = self._alive_resumer(p)
                self.cond.notify_all()

    def _alive_resumer(self, p: _Program) -> int:
        r = p.resumer
        while r != _MAIN and self.programs[r].state == _DONE:
            r = self.programs[r].resumer
        return r

    def _abort(self) -> None:
        """Unwind every program still waiting (each on its own thread, one at a time)."""
        self.aborting = True
        for p in self.programs:
            if p.thread is not None and p.state != _DONE:
                p.resumer = _MAIN
                with self.cond:
                    self.turn = p.index
                    self.cond.notify_all()
                    while self.turn != _MAIN:
                        self.cond.wait()
        self.aborting = False

    def _deadlock(self, me: _Program | None) -> NkiRuntimeError:
        """The error of a launch whose unfinished programs all wait: each program, and what and where it waits."""
        lines = []
        for p in self.programs:
            state = p.waiting_for if p.state == _BLOCKED else "finished" if p.state == _DONE else p.state
            lines.append(f"program {list(p.pid)} (rank {p.index}) {state}")
        return NkiRuntimeError(
            "err_lnc_deadlock",
            "the cores of this LNC launch wait on each other and none can proceed: "
            + "; ".join(lines)
            + ". Every sendrecv and core_barrier needs its counterpart on the peer core, in the same order",
            # raised by the launch itself (no kernel frame on its stack): at the line the first waiting program waits at
            next(p.where for p in self.programs if p.state == _BLOCKED) if me is None else None,
        )
