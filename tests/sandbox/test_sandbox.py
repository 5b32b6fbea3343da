"""The sandbox keeps the parent healthy whatever the kernel does, and reports why it failed.

These drive :func:`run_worker` directly (below the static gate, which would refuse most of
these files outright) so that the process-level defences are tested on their own.
"""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from nkiagent.sandbox.launch import Limits, run_worker
from nkiagent.tasks import get_task

TASK = get_task("vector_add")
RUN = [{"id": 0, "dims": {"N": 128, "D": 64}, "seed": 0, "dist": "normal", "trace": False}]


def _kernel(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "kernel.py"
    path.write_text(textwrap.dedent(body))
    return path


def _run(tmp_path: Path, body: str, **limits) -> object:
    return run_worker(_kernel(tmp_path, body), TASK.source_path, RUN, target="trn2", limits=Limits(**limits) if limits else Limits())


#: The os module, reached the way code past the gate could reach it (typing imports sys).
OS = "typing.sys.modules['os']"

HONEST = """
import nki, nki.isa as nisa, nki.language as nl
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, a.dtype); tb = nl.ndarray(b.shape, b.dtype)
    nisa.dma_copy(dst=ta, src=a); nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out, src=ta)
    return out
"""


def test_honest_kernel_runs_and_answers_with_outputs(tmp_path: Path) -> None:
    out = _run(tmp_path, HONEST)
    assert out.status == "ok" and out.answer["compiled"]
    rec = out.answer["runs"][0]
    assert rec["inputs_unchanged"] is True and rec["outputs"][0]["shape"] == [128, 64]


LEGACY_TIMED = """
import neuronxcc.nki as nki, neuronxcc.nki.language as nl
@nki.benchmark(warmup=2, iters=3)
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a) + nl.load(b))
    return out
"""


def test_the_worker_gives_legacy_kernels_the_face_with_benchmark(tmp_path: Path) -> None:
    """The worker installs the front-ends through the shim: ``nki.benchmark`` exists there (the emulator alone refuses it)."""
    out = run_worker(_kernel(tmp_path, LEGACY_TIMED), TASK.source_path, RUN, target="trn2", api="0.1")
    assert out.status == "ok" and out.answer["compiled"]
    rec = out.answer["runs"][0]
    assert "error" not in rec, rec.get("error")
    assert rec["outputs"][0]["shape"] == [128, 64]


def test_hanging_kernel_is_killed_at_the_wall_clock_limit(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    out = _run(tmp_path, "while True:\n    pass\n", wall_s=3.0)
    assert out.status == "timeout" and "wall-clock limit of 3 s" in out.detail
    assert time.perf_counter() - t0 < 15


def test_unbounded_allocation_hits_the_memory_limit(tmp_path: Path) -> None:
    out = _run(tmp_path, HONEST + "\nhog = []\nwhile True:\n    hog.append(bytearray(50_000_000))\n", mem_bytes=1_500_000_000)
    # the module-level loop runs at exec time: MemoryError is reported as a run error, or the worker dies
    if out.status == "ok":
        assert out.answer["runs"][0]["error"]["kind"] == "memory"
    else:
        assert out.status == "crashed"


def test_segfault_is_reported_as_a_crash(tmp_path: Path) -> None:
    """A worker that dies of a signal (kernel code can no longer crash it from inside: faulthandler is refused)."""
    import signal

    out, _ = _while_running(tmp_path, lambda proc: proc.send_signal(signal.SIGSEGV), then_kill=False)
    assert out.status == "crashed" and "SIGSEGV" in out.detail


def test_printing_without_end_hits_the_output_limit(tmp_path: Path) -> None:
    out = _run(tmp_path, "line = 'x' * 65536\nwhile True:\n    print(line)\n", fsize_bytes=8 * 2**20)
    assert out.status == "ok"  # the worker survives: the write fails with EFBIG and is reported
    err = out.answer["runs"][0]["error"]
    assert err["kind"] == "output" and "output limit exceeded" in err["message"]


@pytest.mark.parametrize(
    "body, event",
    [
        ("import socket\n", "importing 'socket'"),
        ("import subprocess\n", "importing 'subprocess'"),
        ("import os\n", "importing 'os'"),
        ("import sys\n", "importing 'sys'"),
        ("import nkiagent.emu.memory\n", "importing 'nkiagent.emu.memory'"),
        ("from numpy import testing\n", "importing 'numpy'"),
        # modules reached through an allowed module's attributes (the gate's job): the actions are still refused
        (f"{OS}.system('true')\n", "os.system"),
        ("open('/tmp/nkiagent-escape.txt', 'w').write('x')\n", "writing '/tmp/nkiagent-escape.txt'"),
        ("open('/etc/hostname').read()\n", "reading '/etc/hostname'"),
        (f"{OS}.listdir('/')\n", "os.listdir"),
        ("typing.sys.modules['threading'].Thread(target=print).start()\n", "starting threads"),
        ("typing.sys._getframe(0)\n", "sys._getframe"),
        ("eval('1 + 1')\n", "compiling or running code built at run time"),
        ("functools.reduce(eval, ['1'], None) if False else exec(compile('x = 1', 'k', 'exec'))\n", "compiling or running code"),
    ],
)
def test_audit_hook_refuses_escapes(tmp_path: Path, body: str, event: str) -> None:
    out = _run(tmp_path, "import typing, functools\n" + body + HONEST)
    err = out.answer["runs"][0]["error"]
    assert err["kind"] == "sandbox" and event in err["message"]
    assert not os.path.exists("/tmp/nkiagent-escape.txt")


def test_environment_is_scrubbed_of_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    body = "import typing\n" + HONEST.replace("return out", f"assert 'OPENAI_API_KEY' not in {OS}.environ\n    return out")
    out = _run(tmp_path, body)
    assert "error" not in out.answer["runs"][0], out.answer["runs"][0].get("error")


def test_answer_without_the_nonce_is_not_trusted(tmp_path: Path) -> None:
    """A kernel that forges an answer on the result pipe cannot know the nonce."""
    body = (
        f'import typing\nos = {OS}\nos.write(int(typing.sys.argv[1]), b\'{{"compiled": true, "runs": [], "nonce": "guess"}}\')\n'
        "os._exit(0)\n"
    )
    out = _run(tmp_path, body)
    assert out.answer is None and out.status in ("bad-answer", "crashed")


def _while_running(tmp_path: Path, look: Any, then_kill: bool = True) -> tuple[Any, Any]:
    """Run a looping kernel, call ``look(worker_process)`` on its worker a second into the run, then kill the worker
    (unless ``look`` ends it itself).

    The worker is the process working in an evaluation's scratch directory (forked from the launcher or started fresh).
    Returns the run's outcome and what ``look`` returned.
    """
    import threading

    import psutil

    seen: dict[str, Any] = {}

    def watch() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for child in psutil.Process().children(recursive=True):
                try:
                    if os.path.basename(child.cwd()).startswith("nkiagent-eval-"):
                        time.sleep(1.0)
                        seen["result"] = look(child)
                        if then_kill:
                            child.kill()
                        return
                except psutil.Error:
                    continue
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    out = _run(tmp_path, "while True:\n    pass\n", wall_s=30.0)
    watcher.join()
    return out, seen.get("result")


def test_a_forked_worker_holds_no_socket_and_leads_its_own_session(tmp_path: Path) -> None:
    """Forked from the launcher, a worker keeps none of the launcher's descriptors (it could ask for more forks)."""

    def look(proc: object) -> tuple[list[str], bool]:
        links = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")]  # type: ignore[attr-defined]
        return links, os.getsid(proc.pid) == proc.pid  # type: ignore[attr-defined]

    _, (links, own_session) = _while_running(tmp_path, look)
    assert own_session
    assert not [link for link in links if link.startswith("socket:")], links
    assert len(links) == 5, links  # stdin (/dev/null), stdout and stderr (its log), the answer and the trace pipes


def test_fresh_workers_when_the_launcher_is_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKIAGENT_ZYGOTE", "0")
    _, cmdline = _while_running(tmp_path, lambda proc: " ".join(proc.cmdline()))
    assert "nkiagent.sandbox.worker" in str(cmdline)
    monkeypatch.setenv("NKIAGENT_ZYGOTE", "maybe")
    with pytest.raises(ValueError, match=r"NKIAGENT_ZYGOTE='maybe': use 1 \(fork workers from a pre-loaded launcher\) or 0"):
        _run(tmp_path, HONEST)


def test_a_dead_launcher_fails_one_run_and_is_started_again(tmp_path: Path) -> None:
    from nkiagent.sandbox import zygote

    assert _run(tmp_path, HONEST).status == "ok"
    launcher = zygote._LAUNCHER._proc
    assert launcher is not None
    os.killpg(launcher.pid, 9)  # its children would die with it; the next run starts a new one
    launcher.wait(10)
    out = _run(tmp_path, HONEST)
    assert out.status == "ok" and zygote._LAUNCHER._proc is not None and zygote._LAUNCHER._proc.pid != launcher.pid


def test_the_launcher_leaves_with_the_process_that_started_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    import psutil

    kernel = _kernel(tmp_path, HONEST)
    script = (
        "import os, sys\nfrom nkiagent.tasks import get_task\nfrom nkiagent.sandbox.launch import run_worker\n"
        "from nkiagent.sandbox import zygote\n"
        f"out = run_worker({str(kernel)!r}, get_task('vector_add').source_path, {RUN!r}, target='trn2')\n"
        "print(out.status, zygote._LAUNCHER._proc.pid, flush=True)\nos._exit(0)\n"  # no clean-up at exit
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    status, pid = done.stdout.split()
    assert status == "ok"
    deadline = time.monotonic() + 20
    while psutil.pid_exists(int(pid)) and psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE


def test_warming_starts_the_launcher_once_and_the_next_worker_is_forked_from_it(tmp_path: Path) -> None:
    from nkiagent.sandbox import zygote
    from nkiagent.sandbox.launch import warm_launcher

    zygote._LAUNCHER.stop()
    warm_launcher()
    launcher = zygote._LAUNCHER._proc
    assert launcher is not None and launcher.poll() is None  # started, not waited for
    warm_launcher()  # already running with this environment: the same process
    assert zygote._LAUNCHER._proc is launcher
    _, pid = _while_running(tmp_path, lambda proc: proc.ppid())
    assert pid == launcher.pid  # the worker is the warmed launcher's child


def test_inputs_drawn_per_case_group_equal_those_drawn_per_case_bit_for_bit() -> None:
    """The input cache draws a shape and seed's distributions together (sharing their normals): each must equal its own drawing."""
    import numpy as np

    from nkiagent.sandbox.arrays import make_case_inputs, make_inputs
    from nkiagent.tasks import builtin_tasks
    from nkiagent.verify.inputs import cases

    checked = set()
    for task in builtin_tasks().values():
        dims = {k: min(v, 256) for k, v in task.dims.items()}  # the drawing does not depend on the size; keep it quick
        dists = [c.distribution for c in cases(task) if not c.hidden and c.seed == 1]
        drawn = make_case_inputs(task, dims, 1, dists)
        for dist in dists:
            want = make_inputs(task, dims, 1, dist)
            got = drawn[dist]
            assert [(a.dtype, a.shape) for a in got] == [(a.dtype, a.shape) for a in want], (task.name, dist)
            assert all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(got, want)), (task.name, dist)
            checked.add(dist)
    assert checked >= {"normal", "heavy_tailed", "large", "offset", "constant_rows"}


LNC_EXCHANGE = """
import nki, nki.isa as nisa, nki.language as nl
@nki.jit
def _swap(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    rows = a.shape[0] // 2
    mine = nl.ndarray((rows, a.shape[1]), a.dtype, buffer=nl.sbuf)
    theirs = nl.ndarray((rows, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[nl.ds(me * rows, rows), :])
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nisa.dma_copy(dst=out[nl.ds(me * rows, rows), :], src=theirs)
    return out
def kernel(a, b):
    return _swap[2](a, b)
"""


def test_an_lnc2_exchange_runs_in_the_sandbox_on_the_emulators_own_thread(tmp_path: Path) -> None:
    """Core 0 waits in sendrecv, so core 1 runs on a program thread: the guard lets the emulator start it."""
    out = _run(tmp_path, LNC_EXCHANGE)
    rec = out.answer["runs"][0]
    assert "error" not in rec, rec.get("error")
    assert rec["outputs"][0]["shape"] == [128, 64]


def test_kernel_code_cannot_start_the_emulators_program_thread_either(tmp_path: Path) -> None:
    """The guard lets a ProgramThread start only when the harness starts it: the kernel reaching the class gets nothing."""
    body = (
        "import typing\n"
        "lnc = typing.sys.modules['nkiagent.emu.lnc']\n"
        "class Fake:\n"
        "    def _thread_main(self, p):\n"
        "        print('escaped')\n"
        "class Program:\n"
        "    index = 0\n"
        "lnc.ProgramThread(Fake(), Program()).start()\n"
    )
    out = _run(tmp_path, body + HONEST)
    err = out.answer["runs"][0]["error"]
    assert err["kind"] == "sandbox" and "starting threads is not allowed in kernel code" in err["message"]
