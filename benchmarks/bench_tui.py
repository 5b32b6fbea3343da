"""Terminal UI benchmarks (run by hand): time to first frame, and key latency while a model streams.

    python benchmarks/bench_tui.py [--runs 5] [--seconds 5]

1. **First frame** (target ≤ 1 s): ``nkiagent`` is started in a 120×40 pseudo-terminal, idle and
   with ``--task vector_add --model openai/…`` (the session starts on a worker thread); the clock
   runs from ``Popen`` to the first bytes of the welcome line / the first turn header on the pty.
   Interpreter start-up is included, as a person sees it.
2. **Lazy imports**: the app is mounted headless in a fresh interpreter and the heavy modules
   present at its first frame are listed (litellm and torch must not be among them).
3. **Key latency while streaming** (target ≤ 50 ms): a thread streams 100 tokens/s into the
   conversation (as the agent thread does, through thread-safe messages) while keys switch tabs
   every 100 ms; the delay is from sending a key to its action running.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from fcntl import ioctl
from pathlib import Path

HEAVY = ("litellm", "torch", "langgraph", "git", "numpy", "nkiagent.verify", "nkiagent.perf")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_frame(args: list[str], marker: bytes, timeout: float = 30.0) -> tuple[float, float]:
    """(wall, CPU) seconds from launching ``nkiagent args`` on a 120×40 pty until ``marker`` is drawn.

    CPU time is reported beside wall time because on a loaded machine the wall clock mostly
    measures the wait for a core.
    """
    master, slave = pty.openpty()
    ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", LITELLM_LOCAL_MODEL_COST_MAP="True", OPENAI_API_KEY="sk-bench")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nkiagent.cli", *args], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                if marker in seen:
                    return time.perf_counter() - t0, _cpu_s(proc.pid)
        raise RuntimeError(f"no {marker!r} after {timeout} s")
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


_IMPORTS_AT_FIRST_FRAME = """
import asyncio, json, sys
from pathlib import Path
from nkiagent.tui.app import Launch, NkiAgentApp
async def main():
    app = NkiAgentApp(Launch(workspace=Path({ws!r})))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
asyncio.run(main())
"""


def imports_at_first_frame(ws: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS_AT_FIRST_FRAME.format(ws=str(ws), heavy=HEAVY)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


async def key_latency(seconds: float, tokens_per_s: float = 100.0) -> tuple[list[float], int]:
    """Key-to-action delays (s) while tokens stream at ``tokens_per_s``; also how many tokens were drawn."""
    from textual.events import Key

    from nkiagent.tui.app import Launch, NkiAgentApp

    handled: list[float] = []

    class Timed(NkiAgentApp):
        def action_tab(self, name: str) -> None:
            handled.append(time.perf_counter())
            super().action_tab(name)

    app = Timed(Launch(workspace=Path(tempfile.mkdtemp())))
    delays: list[float] = []
    stop = threading.Event()
    sent = 0

    def stream() -> None:
        """Post tokens on a fixed schedule (catching up after a late wake-up), so the rate stays 100/s on a busy machine."""
        nonlocal sent
        words = [
            "The",
            "DMA",
            "queues",
            "are",
            "the",
            "bottleneck,",
            "so",
            "**wider",
            "tiles**",
            "move",
            "more",
            "bytes",
            "per",
            "transfer.",
            "",
        ]
        start = time.perf_counter()
        while not stop.is_set():
            due = int((time.perf_counter() - start) * tokens_per_s)
            while sent < due:
                app.bridge.on_token(words[sent % len(words)] + ("\n\n" if sent % 40 == 39 else " "))  # the agent thread's path
                sent += 1
            time.sleep(0.5 / tokens_per_s)

    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        streamer = threading.Thread(target=stream, daemon=True)
        streamer.start()
        end = time.perf_counter() + seconds
        keys = ["f3", "f4", "f2"]
        k = 0
        while time.perf_counter() < end:
            before = len(handled)
            t0 = time.perf_counter()
            app.post_message(Key(keys[k % 3], None))  # what the driver posts for a key (Pilot.press would also wait for idle)
            while len(handled) == before:
                await asyncio.sleep(0.001)
            delays.append(handled[-1] - t0)
            k += 1
            await asyncio.sleep(0.1)
        stop.set()
        streamer.join()
    return delays, sent


def _row(name: str, values: list[float], target: str) -> str:
    v = sorted(values)
    p95 = v[min(len(v) - 1, round(0.95 * (len(v) - 1)))]
    return f"| {name} | {len(v)} | {1000 * statistics.median(v):.0f} | {1000 * p95:.0f} | {1000 * v[-1]:.0f} | {target} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="nkiagent-bench-tui-"))
    idle = [first_frame(["--workspace", str(ws)], b"Welcome") for _ in range(a.runs)]
    session = [
        first_frame(
            ["--workspace", str(ws), "--task", "vector_add", "--model", "openai/bench", "--api-base", "http://127.0.0.1:9/v1"],
            b"message the model",
        )
        for _ in range(a.runs)
    ]
    heavy = imports_at_first_frame(ws)
    delays, tokens = asyncio.run(key_latency(a.seconds))
    print("| measurement | n | median ms | p95 ms | max ms | target |")
    print("|---|---|---|---|---|---|")
    print(_row("first frame, idle (`nkiagent`): wall", [w for w, _ in idle], "≤ 1000"))
    print(_row("first frame, idle: CPU of the process", [c for _, c in idle], ""))
    print(_row("first frame, starting a session (`--task --model`): wall", [w for w, _ in session], "≤ 1000"))
    print(_row("first frame, starting a session: CPU of the process", [c for _, c in session], ""))
    print(_row(f"key → action while streaming ({tokens / a.seconds:.0f} tok/s, {tokens} tokens)", delays, "≤ 50"))
    print(f"\nheavy modules loaded at the first frame: {', '.join(heavy) or 'none'} (litellm and torch must not be)")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
