"""``nkiagent export sft|rl|dpo``, ``nkiagent serve-reward`` and ``nkiagent corpus build``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..verify.protocol import VISIBLE_SEEDS

__all__ = ["add_export_parsers", "run_corpus", "run_export", "run_serve_reward", "search_evaluator"]

_DEFAULT_FORMAT = {"sft": "openai", "rl": "steps", "dpo": "openai"}


def add_export_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The three subcommands' arguments (kept here so cli.py stays a table of contents)."""
    ex = sub.add_parser("export", help="turn stored sessions into SFT, RL or preference (DPO) training data")
    ex.add_argument("kind", choices=["sft", "rl", "dpo"])
    ex.add_argument("--sessions", default="sessions", help="a sessions folder (or one session's folder); default: ./sessions")
    ex.add_argument("--format", help="sft: openai|trl|sharegpt (default openai); rl: steps|verl|trl-grpo (default steps); dpo: openai|trl")
    ex.add_argument("--out", help="output file: .jsonl, or .parquet (default exports/KIND-FORMAT.jsonl; verl: .parquet)")
    ex.add_argument("--hf", metavar="DIR", help="also write a Hugging Face datasets folder (parquet + dataset card)")
    ex.add_argument(
        "--reward",
        default="gated-speedup",
        help="reward spec: gated-speedup, tiered, log-speedup, sol, weighted:compiles=0.3,… (NAME[@VERSION][:k=v,…])",
    )
    ex.add_argument("--gamma", type=float, default=0.4, help="discount of multi-turn returns R_t = Σ γ^(k−t) r_k (default 0.4)")
    ex.add_argument("--verdict", choices=["any", "pass"], default="any", help="pass: only sessions in which a kernel passed")
    ex.add_argument("--min-speedup", type=float, help="only sessions whose best passing kernel reached this speedup")
    ex.add_argument(
        "--last-turn-only", action="store_true", help="SFT: train on the last trainable turn only (default: the whole trajectory)"
    )
    ex.add_argument("--exclude-tasks", default="", help="comma-separated task names or globs held out for evaluation")
    ex.add_argument(
        "--timing-source",
        help="only sessions whose every latency came from this source, e.g. neuron-profile (hardware) or emulator-estimate",
    )
    ex.add_argument("--no-dedup", action="store_true", help="keep rows with the same prompt and code hash")
    ex.add_argument("--no-scrub", action="store_true", help="keep absolute paths, user names and key-like strings (for private use only)")
    ex.add_argument(
        "--validation", type=float, default=0.1, help="--hf: fraction of sessions held out as the validation split (default 0.1)"
    )
    ex.add_argument(
        "--tokenizer",
        help="--hf: a local tokenizer folder (transformers) to count the card's token lengths exactly "
        "(default: an estimate at 3.2 characters per token)",
    )
    ex.add_argument(
        "--compact-system",
        action="store_true",
        help="replace the NKI cheat-sheet in system prompts (~17k characters) with a "
        "pointer to the nki_docs tool: rows fit a trainer's max_length",
    )
    ex.add_argument(
        "--no-verify-missing",
        action="store_true",
        help="RL: leave out turns whose kernel the session never evaluated (edits the person turned down) instead of verifying them",
    )
    ex.add_argument("--json", action="store_true", help="print the summary as JSON")

    sr = sub.add_parser("serve-reward", help="score completions over HTTP with the verifier (for trainers on other machines)")
    sr.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; use 0.0.0.0 to serve the network)")
    sr.add_argument("--port", type=int, default=8765)
    sr.add_argument("--reward", default="gated-speedup", help="reward spec (see `nkiagent export --help`)")
    sr.add_argument("--workers", type=int, help="concurrent verifications (default: all cores)")
    sr.add_argument("--seeds", type=int, default=1, help="seeds of the correctness protocol per kernel (default 1: fast rollouts)")
    sr.add_argument("--no-hidden", action="store_true", help="skip the hidden shapes (faster, weaker)")
    sr.add_argument("--executor", choices=["local", "ray"], default="local", help="where kernels are verified: this machine's pool, or Ray")
    sr.add_argument("--ray-address", help="a Ray cluster to connect to (default with --executor ray: start a local Ray)")
    sr.add_argument(
        "--task-dir",
        help="serve the task files in this folder too (clients name them without .py); "
        "without it only builtin tasks are served: a client-supplied task path is never imported",
    )

    co = sub.add_parser("corpus", help="build an SFT corpus from a folder of tasks and kernels")
    co_sub = co.add_subparsers(dest="corpus_command", metavar="ACTION")
    cb = co_sub.add_parser("build", help="verify, deduplicate, decontaminate and balance kernels into SFT rows + a dataset card")
    cb.add_argument(
        "--from",
        dest="source",
        required=True,
        help="folder with one sub-folder per task (task.py or a builtin name) of kernels, or an NKIBench checkout",
    )
    cb.add_argument("--out", default="corpus", help="output folder (default ./corpus)")
    cb.add_argument("--held-out", default="", help="comma-separated task names or globs to decontaminate against")
    cb.add_argument("--similarity", type=float, default=0.9, help="near-duplicate threshold on normalized token similarity (default 0.9)")
    cb.add_argument("--max-per-task", type=int)
    cb.add_argument("--max-per-level", type=int)
    cb.add_argument(
        "--with-history", action="store_true", help="one row per task: its kernels slowest → fastest as a refinement conversation"
    )
    cb.add_argument("--target", choices=["trn1", "trn2", "trn3"], default="trn2")
    cb.add_argument("--seeds", type=int, default=VISIBLE_SEEDS)
    cb.add_argument("--no-hidden", action="store_true", help="skip the hidden shapes (faster, weaker)")
    cb.add_argument("--workers", type=int)
    cb.add_argument("--json", action="store_true")


def _csv(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def run_export(args: argparse.Namespace) -> int:
    from ..training.export import ExportOptions, export_sessions, write_hf, write_rows
    from ..training.schemas import openai_chat_errors, openai_preference_errors

    fmt = args.format or _DEFAULT_FORMAT[args.kind]
    opts = ExportOptions(
        spec=args.reward,
        gamma=args.gamma,
        verdict=args.verdict,
        min_speedup=args.min_speedup,
        last_turn_only=args.last_turn_only,
        exclude_tasks=_csv(args.exclude_tasks),
        timing_source=args.timing_source,
        dedup=not args.no_dedup,
        scrub=not args.no_scrub,
        verify_missing=not args.no_verify_missing,
        compact_system=args.compact_system,
    )
    try:
        res = export_sessions(args.sessions, args.kind, fmt, opts)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"nkiagent export: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    if fmt == "openai":
        check = openai_chat_errors if args.kind == "sft" else openai_preference_errors
        bad = [(i, e) for i, row in enumerate(res.rows) for e in check(row)[:1]]
        if bad:
            print(f"nkiagent export: {len(bad)} rows break OpenAI's format, first: row {bad[0][0]}: {bad[0][1]}", file=sys.stderr)
            return 1
    out = Path(args.out or f"exports/{args.kind}-{fmt}.{'parquet' if fmt == 'verl' else 'jsonl'}")
    write_rows(res.rows, out)
    summary = {"kind": args.kind, "format": fmt, "out": str(out), "rows": len(res.rows), "reward_spec": res.spec.id, **dict(res.stats)}
    if args.hf:
        try:
            summary["hf"] = str(write_hf(res, args.hf, args.validation, _token_counter(args.tokenizer)))
        except (ValueError, OSError) as exc:
            print(f"nkiagent export: --hf {args.hf}: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        extra = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(res.stats.items()) if k != "rows")
        print(
            f"{len(res.rows)} {args.kind} rows ({fmt}, reward {res.spec.id}) → {out}"
            + (f"; dataset folder {summary['hf']}" if args.hf else "")
        )
        print(extra)
    return 0


def _token_counter(tokenizer: str | None) -> Any:
    """``len(tokens)`` of a text with a local tokenizer (transformers, no download), or ``None`` to estimate."""
    if not tokenizer:
        return None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    return lambda text: len(tok(text)["input_ids"])


def run_serve_reward(args: argparse.Namespace) -> int:
    from ..training.env import Scorer
    from ..training.serve import RewardServer

    try:
        scorer = Scorer(args.reward, seeds=args.seeds, hidden=not args.no_hidden, workers=args.workers)
    except (ValueError, KeyError) as exc:
        print(f"nkiagent serve-reward: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    if args.executor == "ray":
        scorer.evaluate_many = search_evaluator("ray", scorer.seeds, scorer.hidden, args.workers, args.ray_address)
    try:
        server = RewardServer(scorer, args.host, args.port, task_dir=args.task_dir)
    except (FileNotFoundError, OSError) as exc:
        print(f"nkiagent serve-reward: {exc}", file=sys.stderr)
        return 2
    _stop_on_signals()
    print(f"scoring with {scorer.reward_spec.id} at {server.url}/score (GET {server.url}/health); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        scorer.close()
    print("stopped", flush=True)
    return 0


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM (a service manager, a container stop) end the server cleanly.

    Set explicitly: a process started in the background by a non-interactive shell inherits an
    ignored SIGINT, and Python then never raises KeyboardInterrupt.
    """
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)


def search_evaluator(kind: str, seeds: int, hidden: bool, workers: int | None = None, ray_address: str | None = None) -> Any:
    """Verification through the search's executors (``local`` pool or ``ray``): the full protocol, no cascade."""
    from ..sandbox.arrays import DISTRIBUTIONS
    from ..search.evaluate import EvalJob, make_executor

    executor = make_executor(kind, workers, ray_address)

    def evaluate_many(items: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
        return executor.map(
            [
                EvalJob(code, task, target, seeds=seeds, distributions=DISTRIBUTIONS, hidden=hidden, cascade=False)
                for code, task, target in items
            ]
        )

    return evaluate_many


def run_corpus(args: argparse.Namespace) -> int:
    from ..training.corpus import CorpusOptions, build_corpus

    if args.corpus_command != "build":
        print("usage: nkiagent corpus build --from DIR [--out DIR] …", file=sys.stderr)
        return 2
    opts = CorpusOptions(
        target=args.target,
        seeds=args.seeds,
        hidden=not args.no_hidden,
        workers=args.workers,
        similarity=args.similarity,
        held_out=_csv(args.held_out),
        max_per_task=args.max_per_task,
        max_per_level=args.max_per_level,
        with_history=args.with_history,
    )
    try:
        rep = build_corpus(args.source, args.out, opts)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"nkiagent corpus build: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    summary = {
        "out": str(rep.out),
        "collected": len(rep.items),
        "kept": len(rep.kept),
        "rows": len(rep.rows),
        "dropped": dict(rep.dropped()),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"kept {len(rep.kept)} of {len(rep.items)} kernels → {len(rep.rows)} SFT rows in {rep.out} (README.md, sft.jsonl, data/)")
        for it in rep.items:
            print(
                f"  {'keep' if not it.dropped else 'drop'} {it.path.name}: {it.dropped or f'pass, {it.latency:.3f} µs (emulator-estimate)'}"
            )
    return 0
