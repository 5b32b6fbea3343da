"""``nkiagent report SESSION…``: a Markdown report of one or more searches, with a PNG plot.

The report reads only the sessions' files (``meta.json``, ``events.jsonl``): best speedup
against candidates evaluated and against model cost (USD), one line per strategy, then a
table per session (stop reason, best candidate, evaluations to reach 90% of the best) and its
leaderboard. Every speedup is the verifier's ``pass`` speedup over the task's baseline with
its timing source. matplotlib is imported only here, with the Agg backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sessions.store import read_events

__all__ = ["SearchTrace", "evals_to_fraction", "load_trace", "write_report"]


@dataclass
class SearchTrace:
    """One search, as the report needs it: per candidate in order, its speedup (pass only) and the cumulative cost."""

    session_id: str
    task: str
    strategy: str
    model: str
    stop_reason: str
    candidates: list[dict[str, Any]]

    def best_curve(self) -> tuple[list[int], list[float], list[float]]:
        """(candidates evaluated, best speedup so far, cumulative model cost USD), one point per candidate."""
        xs, best, cost = [], [], []
        b, usd = 0.0, 0.0
        for i, c in enumerate(self.candidates, 1):
            if c.get("verdict") == "pass" and c.get("speedup") is not None:
                b = max(b, float(c["speedup"]))
            usd += float(c.get("cost_usd") or 0.0)
            xs.append(i)
            best.append(b)
            cost.append(usd)
        return xs, best, cost

    @property
    def best(self) -> dict[str, Any] | None:
        passing = [c for c in self.candidates if c.get("verdict") == "pass" and c.get("speedup") is not None]
        return max(passing, key=lambda c: (c["speedup"], -c["candidate_id"])) if passing else None


def evals_to_fraction(speedups: list[float], fraction: float = 0.9) -> int | None:
    """How many evaluations a best-so-far curve needs to reach ``fraction`` of its final value (None: nothing passed)."""
    if not speedups or speedups[-1] <= 0:
        return None
    goal = fraction * speedups[-1]
    return next(i for i, s in enumerate(speedups, 1) if s >= goal)


def load_trace(session_dir: Path) -> SearchTrace:
    import json

    meta_path = session_dir / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{session_dir} is not a session (no meta.json)")
    meta = json.loads(meta_path.read_text())
    events = read_events(session_dir / "events.jsonl")
    cands = sorted((e for e in events if e.get("type") == "candidate" and "candidate_id" in e), key=lambda e: e["candidate_id"])
    ends = [e for e in events if e.get("type") == "session_end"]
    return SearchTrace(
        session_dir.name,
        meta.get("task", ""),
        meta.get("strategy", ""),
        meta.get("model", ""),
        ends[-1].get("stop_reason", "") if ends else "(not finished)",
        cands,
    )


def _plot(traces: list[SearchTrace], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for t in traces:
        xs, best, cost = t.best_curve()
        label = f"{t.strategy} ({t.task}, {t.session_id[-6:]})"
        ax1.step(xs, best, where="post", label=label)
        ax2.step(cost, best, where="post", label=label)
    ax1.set_xlabel("candidates evaluated")
    ax1.set_ylabel("best speedup over baseline (pass only)")
    ax2.set_xlabel("model cost (USD)")
    if all(t.best_curve()[2][-1:] in ([], [0.0]) for t in traces):
        ax2.text(0.5, 0.5, "no model cost recorded\n(offline or unpriced model)", transform=ax2.transAxes, ha="center", va="center")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    fig.suptitle("nkiagent search: best speedup (emulator-estimate unless stated)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _speedup(c: dict[str, Any] | None, with_source: bool = True) -> str:
    if c is None or c.get("speedup") is None:
        return "—"
    return f"{c['speedup']:.3f}×" + (f" ({c.get('timing_source')})" if with_source else "")


def write_report(session_dirs: list[Path], out_md: Path) -> Path:
    """Write ``out_md`` and the plot beside it (same name, ``.png``); return the Markdown path."""
    traces = [load_trace(d) for d in session_dirs]
    png = out_md.with_suffix(".png")
    out_md.parent.mkdir(parents=True, exist_ok=True)
    _plot(traces, png)
    lines = [
        "# nkiagent search report",
        "",
        f"![best speedup vs candidates and cost]({png.name})",
        "",
        "| session | task | strategy | model | candidates | passed | best speedup | evals to 90% | cost (USD) | stopped because |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for t in traces:
        _, best_curve, cost = t.best_curve()
        best = t.best
        passed = sum(1 for c in t.candidates if c.get("verdict") == "pass")
        lines.append(
            f"| {t.session_id} | {t.task} | {t.strategy} | {t.model} | {len(t.candidates)} | {passed} | "
            f"{_speedup(best)} | "
            f"{evals_to_fraction(best_curve) or '—'} | {cost[-1] if cost else 0.0:.4f} | {t.stop_reason} |"
        )
    for t in traces:
        lines += [
            "",
            f"## {t.session_id}: {t.strategy} on {t.task}",
            "",
            "| # | parents | island | gen | stage | verdict | speedup | latency (µs) | mutation |",
            "|---:|---|---:|---:|---|---|---:|---:|---|",
        ]
        ranked = sorted(t.candidates, key=lambda c: (c.get("verdict") != "pass", -(c.get("speedup") or 0.0), c["candidate_id"]))
        for c in ranked[:15]:
            lat = c.get("latency_us")
            lines.append(
                f"| {c['candidate_id']} | {','.join(map(str, c.get('parents', []))) or '—'} | {c.get('island', 0)} | "
                f"{c.get('generation', 0)} | {c.get('stage', '')} | {c.get('verdict')} | "
                f"{_speedup(c, with_source=False)} | {'—' if lat is None else f'{lat:.2f}'} | "
                f"{str(c.get('mutation', '')).replace('|', '/')[:90]} |"
            )
        if len(ranked) > 15:
            lines.append(f"| … | | | | | {len(ranked) - 15} more | | | |")
    out_md.write_text("\n".join(lines) + "\n")
    return out_md
