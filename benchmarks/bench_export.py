"""Export benchmark (run by hand): synthetic sessions → training data, timed.

    python benchmarks/bench_export.py [--sessions 1000] [--turns 10] [--keep DIR]

Writes ``--sessions`` synthetic sessions of ``--turns`` turns each in the agent loop's event
format (a growing conversation in every ``model_request``; each turn proposes a whole kernel
with ``write_file``, which is reviewed, applied and evaluated; one turn in ten is a cheat the
verifier rejects and one in ten an edit the reviewer refuses), then times the exports
(scrubbing and dedup on), in wall and CPU seconds (the CPU time says what a loaded machine hides). Target: SFT JSONL (OpenAI format) for 1 000 × 10 in ≤ 20 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from nkiagent.training.export import ExportOptions, export_sessions, write_rows

SYSTEM = ("You are nkiagent, an expert AWS Trainium kernel engineer. " * 30).strip()
KERNEL = """import nki
import nki.isa as nisa
import nki.language as nl

TILE_F = {tile}


@nki.jit
def kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        for j in nl.affine_range(d // TILE_F):
            rows, cols = nl.ds(i * 128, 128), nl.ds(j * TILE_F, TILE_F)
            ta = nl.ndarray((128, TILE_F), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((128, TILE_F), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[rows, cols])
            nisa.dma_copy(dst=tb, src=b[rows, cols])
            nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=ta)
    return out
# session {sid} turn {turn}
"""


def _evaluation(verdict: str, speedup: float, sha: str) -> dict[str, Any]:
    passed = verdict == "pass"
    return {
        "verdict": verdict,
        "task": "vector_add",
        "target": "trn2",
        "compiled": verdict != "rejected",
        "correct": passed,
        "reasons": [] if passed else ["static gate [forbidden-import] /home/someone/ws/kernels/vector_add.py:3: os"],
        "latency_us": 100.0 / speedup if passed else None,
        "timing_source": "emulator-estimate",
        "baseline_latency_us": 100.0,
        "speedup": speedup if passed else None,
        "fraction_of_peak": 0.5 if passed else None,
        "code_sha256": sha,
        "profile": {"summary": "latency 70 µs on trn2 (emulator-estimate)\n" + "  DMA ████████ 95%\n" * 12},
    }


def synthesize(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        sid = f"20261130-000000-{s:06x}"
        d = root / sid
        (d / "kernels").mkdir(parents=True)
        (d / "meta.json").write_text(
            json.dumps(
                {"id": sid, "task": "vector_add", "model": "openai/bench", "strategy": "refine", "workspace": f"/home/someone/ws{s}"}
            )
        )
        events: list[dict[str, Any]] = [
            {
                "type": "session_start",
                "task": "vector_add",
                "model": "openai/bench",
                "target": "trn2",
                "kernel_path": "kernels/vector_add.py",
            }
        ]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Task: vector_add in /home/someone/ws{s}/kernels/vector_add.py"},
        ]
        for t in range(1, turns + 1):
            code = KERNEL.format(tile=128 * (1 + (s + t) % 8), sid=s, turn=t)
            sha = hashlib.sha256(code.encode()).hexdigest()  # exports find a proposal's evaluation by its code's hash
            (d / "kernels" / f"{sha}.py").write_text(code)
            cid = f"call_{t}"
            events.append(
                {
                    "type": "model_request",
                    "turn": t,
                    "model": "openai/bench",
                    "messages": list(messages),
                    "tools": ["read_file", "write_file", "edit_file", "evaluate", "submit"],
                }
            )
            msg = {
                "role": "assistant",
                "content": f"Turn {t}: trying a tile of {128 * (1 + (s + t) % 8)}.",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "write_file", "arguments": json.dumps({"path": "kernels/vector_add.py", "content": code})},
                    }
                ],
            }
            events.append({"type": "model_response", "turn": t, "message": msg, "usage": {"prompt_tokens": 1000, "completion_tokens": 300}})
            events.append({"type": "tool_call", "turn": t, "id": cid, "name": "write_file", "arguments": {"path": "kernels/vector_add.py"}})
            events.append(
                {"type": "edit_proposed", "turn": t, "path": "kernels/vector_add.py", "diff": "-TILE_F = 512\n+TILE_F = 1024", "hunks": 1}
            )
            refused = t % 10 == 5
            events.append(
                {
                    "type": "review_decision",
                    "turn": t,
                    "path": "kernels/vector_add.py",
                    "decision": {"action": "reject" if refused else "accept"},
                    "mode": "ask",
                    "tool_call_id": cid,
                }
            )
            feedback = "The reviewer rejected your edit."
            if not refused:
                verdict = "rejected" if t % 10 == 3 else "pass"
                ev = _evaluation(verdict, 0.5 + ((s * 7 + t) % 10) / 5, sha)
                events.append({"type": "edit_applied", "turn": t, "path": "kernels/vector_add.py", "code_sha256": sha, "action": "accept"})
                events.append({"type": "evaluation", "turn": t, "path": "kernels/vector_add.py", "result": ev})
                events.append({"type": "candidate", "turn": t, "code_sha256": sha, "verdict": verdict, "speedup": ev["speedup"]})
                feedback = f"Applied. verdict: {verdict}\n" + ev["profile"]["summary"]
            messages += [msg, {"role": "tool", "tool_call_id": cid, "content": feedback}]
        events.append({"type": "session_end", "stop_reason": "max-turns"})
        with open(d / "events.jsonl", "w") as fh:
            fh.writelines(json.dumps({**e, "ts": 0.0, "session_id": sid, "seq": k}) + "\n" for k, e in enumerate(events))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--keep", help="write the sessions and exports here instead of a temporary folder")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nkiagent-bench-export-"))
    try:
        t0 = time.perf_counter()
        synthesize(work / "sessions", args.sessions, args.turns)
        size = sum(p.stat().st_size for p in (work / "sessions").rglob("events.jsonl")) / 1e6
        print(f"synthesized {args.sessions} sessions × {args.turns} turns ({size:.0f} MB of events) in {time.perf_counter() - t0:.1f} s\n")
        print(f"{'export':<22}{'rows':>8}{'seconds':>10}{'cpu s':>8}{'rows/s':>10}{'MB out':>9}  target (wall time)")
        for kind, fmt, suffix in (
            ("sft", "openai", "jsonl"),
            ("sft", "trl", "jsonl"),
            ("rl", "steps", "jsonl"),
            ("dpo", "openai", "jsonl"),
        ):
            t0, c0 = time.perf_counter(), time.process_time()
            # the refused proposals were never evaluated: verifying 1 000 of them would time the verifier, not the export
            res = export_sessions(work / "sessions", kind, fmt, ExportOptions(verify_missing=False))
            out = write_rows(res.rows, work / f"{kind}-{fmt}.{suffix}")
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            target = "≤ 20 s " + ("ok" if dt <= 20 else "MISSED") if (kind, fmt) == ("sft", "openai") else ""
            print(
                f"{kind + ' ' + fmt:<22}{len(res.rows):>8}{dt:>10.2f}{cpu:>8.2f}{len(res.rows) / dt:>10.0f}{out.stat().st_size / 1e6:>9.1f}  {target}"
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
