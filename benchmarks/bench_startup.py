"""Startup latency of the agent (run by hand): issue 5's two startup targets.

    python benchmarks/bench_startup.py [--repeats 5]

1. ``nkiagent run --help``: wall time of the whole process (target ≤ 0.5 s).
2. ``nkiagent run`` against a local OpenAI-compatible server (the test suite's fake server,
   on 127.0.0.1): time from launching the process to the first chat request reaching the
   server (target ≤ 2 s). litellm takes seconds to import; the session imports it on a
   background thread while it sets up the workspace, the task and the prompt.

Each number is the median of ``--repeats`` fresh processes; the load average is printed
because other processes on the machine inflate every wall-clock number.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fake server lives in tests/agent/

from tests.agent.fake_openai import FakeOpenAI, Reply

HELP_TARGET_S = 0.5
FIRST_REQUEST_TARGET_S = 2.0


def _nkiagent() -> list[str]:
    exe = shutil.which("nkiagent")
    return [exe] if exe else [sys.executable, "-m", "nkiagent.cli"]


def time_help() -> float:
    t = time.perf_counter()
    subprocess.run([*_nkiagent(), "run", "--help"], check=True, capture_output=True)
    return time.perf_counter() - t


def time_first_request(workdir: Path) -> float:
    """Seconds from ``Popen`` to the first request the fake server records."""
    ws = workdir / f"ws{time.monotonic_ns()}"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-fake"}
    with FakeOpenAI(lifetime_s=120) as srv:
        srv.push(Reply(content="Nothing to change."))
        cmd = [
            *_nkiagent(),
            "run",
            "--task",
            "vector_add",
            "--model",
            "openai/fake",
            "--api-base",
            srv.url,
            "--approve",
            "never",
            "--max-turns",
            "1",
            "--workspace",
            str(ws),
        ]
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not srv.requests:
                if proc.poll() is not None:
                    raise RuntimeError(f"nkiagent run exited with {proc.returncode} before sending a request: {' '.join(cmd)}")
                time.sleep(0.005)
            return time.perf_counter() - t
        finally:
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    helps = [time_help() for _ in range(args.repeats)]
    with tempfile.TemporaryDirectory() as tmp:
        firsts = [time_first_request(Path(tmp)) for _ in range(args.repeats)]
    h, f = statistics.median(helps), statistics.median(firsts)
    print(f"load average before / after: {load0:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
    print("| measurement | median (min–max) | target | ok |\n|---|---|---|---|")
    print(
        f"| `nkiagent run --help` | {h:.3f} s ({min(helps):.3f}–{max(helps):.3f}) | ≤ {HELP_TARGET_S} s | {'yes' if h <= HELP_TARGET_S else 'NO'} |"
    )
    print(
        f"| launch → first model request | {f:.3f} s ({min(firsts):.3f}–{max(firsts):.3f}) | ≤ {FIRST_REQUEST_TARGET_S} s | "
        f"{'yes' if f <= FIRST_REQUEST_TARGET_S else 'NO'} |"
    )


if __name__ == "__main__":
    main()
