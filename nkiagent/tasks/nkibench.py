"""NKIBench (AccelOpt) tasks from a checkout of that repository, as they are.

Each case of ``NKIBench/summary.json`` names a NumPy reference module (``get_inputs``,
``forward``, ``transform_to_nki_inputs``) and a kernel. The task's inputs are the
reference's own ``get_inputs()`` (seeded per case) in NKI layout; its reference maps them
back, runs ``forward`` and is compared with the kernel's output reshaped to the reference's
shape, at NKIBench's relative-L2 tolerance of 2e-5. The benchmark's kernel is the baseline.
Nothing from the checkout is copied into this project.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..emu.dtypes import dtype_name
from .spec import InputSpec, OutputSpec, Task, Tolerance

__all__ = ["NKIBENCH_REL_L2", "load_nkibench"]

NKIBENCH_REL_L2 = 2e-5


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"nkibench_ref_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("get_inputs", "forward", "transform_to_nki_inputs"):
        if not hasattr(mod, name):
            raise ValueError(f"{path}: an NKIBench reference must define {name}()")
    return mod


def _draw(mod: ModuleType, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        originals = [np.asarray(a) for a in mod.get_inputs()]
    finally:
        np.random.set_state(state)
    return originals, [np.ascontiguousarray(a) for a in mod.transform_to_nki_inputs(list(originals))]


def _signature(mod: ModuleType, ref_path: Path) -> dict[str, Any]:
    """Input layouts and output shape/dtype of a reference, cached by the file's hash.

    Drawing NKIBench's inputs and running ``forward`` takes seconds to a minute per task, so a
    listing would be slow; the cache makes every load after the first instant.
    """
    import hashlib
    import os

    cache_dir = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nkiagent"
    key = hashlib.sha256(ref_path.read_bytes()).hexdigest()[:32]
    cache = cache_dir / f"nkibench-{key}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    originals, nki_inputs = _draw(mod, 0)
    out = np.asarray(mod.forward(*originals))
    sig = {
        "inputs": [[list(a.shape), dtype_name(a.dtype)] for a in nki_inputs],
        "originals": [list(a.shape) for a in originals],
        "output": [list(out.shape), dtype_name(out.dtype)],
    }
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(sig))
    except OSError:
        pass  # a read-only home only costs the recomputation next time
    return sig


def _task(name: str, case_id: str, ref_path: Path, kernel_path: Path, values: dict[str, Any]) -> Task:
    mod = _module(ref_path)
    sig = _signature(mod, ref_path)
    orig_shapes = [tuple(s) for s in sig["originals"]]

    def generate(seed: int) -> list[np.ndarray]:
        return _draw(mod, seed)[1]

    def reference(*arrays: np.ndarray) -> np.ndarray:
        if len(arrays) != len(orig_shapes):
            raise ValueError(f"{name}: expected {len(orig_shapes)} inputs, got {len(arrays)}")
        return np.asarray(mod.forward(*[a.reshape(s) for a, s in zip(arrays, orig_shapes)]))

    params = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
    return Task(
        name=f"nkibench/{name}",
        description=f"NKIBench {name} ({params}); reference {ref_path.name}",
        inputs=[InputSpec(f"in{i}", tuple(shape), dtype) for i, (shape, dtype) in enumerate(sig["inputs"])],
        output=OutputSpec(tuple(sig["output"][0]), sig["output"][1]),
        reference=reference,
        dims={},
        tolerance=Tolerance(rel_l2=NKIBENCH_REL_L2),
        baseline=str(kernel_path),
        level=3,
        tags=("nkibench", name, f"case-{case_id}"),
        source_path=ref_path,
        generate=generate,
        reshape_output=True,
    )


def load_nkibench(directory: str | Path, names: list[str] | None = None) -> dict[str, Task]:
    """The NKIBench tasks of a checkout (the repository root or its ``NKIBench/`` folder), by name.

    ``names`` limits loading to those tasks (each load runs the reference once).
    """
    root = Path(directory)
    bench = root / "NKIBench" if (root / "NKIBench" / "summary.json").is_file() else root
    summary_path = bench / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{directory}: no NKIBench/summary.json (pass the AccelOpt checkout or its NKIBench folder)")
    summary = json.loads(summary_path.read_text())
    tasks: dict[str, Task] = {}
    unknown = sorted(set(names or ()) - set(summary))
    if unknown:
        raise KeyError(f"unknown NKIBench task(s) {', '.join(unknown)}; available: {', '.join(sorted(summary))}")
    for name, entry in sorted(summary.items()):
        if names and name not in names:
            continue
        for case_id, case in sorted(entry.get("cases", {}).items()):
            for impl in case.get("impls", [])[:1]:
                ref = (bench / impl["task"]).resolve()
                kernel = (bench / impl["kernel"]).resolve()
                tasks[name] = _task(name, case_id, ref, kernel, case.get("values", {}))
    return tasks
