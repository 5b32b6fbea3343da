"""Tasks from the user's own code: a NumPy or PyTorch function, or an ``nn.Module``, as the reference.

``nkiagent task new --from model.py:fn --inputs "x:4096x1024:bfloat16"`` runs the reference
once to learn the output's shape and dtype, then writes a task file whose reference calls
the user's code (torch on the CPU, imported lazily) every time it is needed.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..emu.dtypes import as_dtype, dtype_name

__all__ = ["parse_input_specs", "reference_from", "write_task_file"]


_IMPORT_LOCK = threading.Lock()


def _import(path: Path) -> Any:
    """The user's module, imported once per process.

    Under a lock: the verifier builds several inputs' references on threads at once, and a
    second thread must not see the module half-executed (it would lack the function).
    """
    name = f"nkiagent_user_ref_{abs(hash(str(path)))}"
    with _IMPORT_LOCK:
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        sys.modules[name] = module  # only once it is whole
        return module


def _to_numpy(x: Any) -> np.ndarray:
    from ..emu.frontend import torch_to_numpy

    arr = torch_to_numpy(x)
    return np.asarray(x) if arr is None else arr


def reference_from(path: str | Path, attr: str) -> Callable[..., np.ndarray]:
    """A NumPy-in/NumPy-out reference calling ``attr`` of the file at ``path``.

    ``attr`` may name a NumPy function, a torch function, or an ``nn.Module`` subclass
    (built with no arguments after ``torch.manual_seed(0)``, so its weights are fixed).
    """
    file = Path(path).resolve()
    state: dict[str, Any] = {}

    def target() -> Any:
        if "fn" not in state:
            obj = getattr(_import(file), attr, None)
            if obj is None:
                raise AttributeError(f"{file} has no attribute {attr!r}")
            if inspect.isclass(obj):
                import torch

                torch.manual_seed(0)
                module: Any = obj()  # a torch.nn.Module class: its instance, in inference mode
                obj = module.eval()
            state["fn"] = obj
            state["torch"] = type(obj).__module__.startswith("torch") or _uses_torch(obj)
        return state["fn"]

    def reference(*arrays: np.ndarray) -> np.ndarray:
        fn = target()
        if state["torch"]:
            import torch

            from ..emu.frontend import numpy_to_torch

            with torch.no_grad():
                return _to_numpy(fn(*[numpy_to_torch(a) for a in arrays]))
        return _to_numpy(fn(*arrays))

    return reference


def _uses_torch(fn: Any) -> bool:
    module = inspect.getmodule(fn)
    return module is not None and "torch" in vars(module)


_INPUT = re.compile(r"^(?P<name>[A-Za-z_]\w*):(?P<shape>\d+(?:x\d+)*):(?P<dtype>\w+)$")


def parse_input_specs(spec: str) -> list[tuple[str, tuple[int, ...], str]]:
    """``"x:4096x1024:bfloat16,w:1024:float32"`` → [(name, shape, dtype), …] with clear errors."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = _INPUT.match(part)
        if m is None:
            raise ValueError(f"input {part!r} must look like NAME:DIMxDIM:DTYPE, e.g. x:4096x1024:bfloat16")
        try:
            as_dtype(m["dtype"])
        except Exception:  # noqa: BLE001 — re-raised as the usage error the CLI reports
            raise ValueError(f"input {part!r}: unknown dtype {m['dtype']!r} (e.g. float32, bfloat16, float16, int32)") from None
        out.append((m["name"], tuple(int(d) for d in m["shape"].split("x")), m["dtype"]))
    if not out:
        raise ValueError("--inputs names no inputs")
    return out


def _hidden(dims: dict[str, int], leading: set[str], check: Callable[[dict[str, int]], bool]) -> list[dict[str, int]]:
    """Up to two smaller variants: leading (row) dims halved, then quartered, kept only if the reference runs.

    Only leading dims vary: trailing ones are usually fixed by the model (feature sizes, weights).
    """
    variants = []
    for div in (2, 4):
        v = {k: (n // div if k in leading and n >= 256 and (n // div) % 128 == 0 else n) for k, n in dims.items()}
        if v != dims and v not in variants and check(v):
            variants.append(v)
    return variants


def write_task_file(source: str, inputs: str, out: str | Path, name: str | None = None) -> Path:
    """Write a task file for ``source`` = ``path/model.py:fn_or_Module`` and return its path."""
    if ":" not in source:
        raise ValueError(f"--from must be PATH.py:NAME, got {source!r}")
    path_s, attr = source.rsplit(":", 1)
    path = Path(path_s).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path_s}")
    specs = parse_input_specs(inputs)
    dims: dict[str, int] = {}
    shapes = []
    for iname, shape, _ in specs:
        syms = []
        for k, n in enumerate(shape):
            sym = f"{iname.upper()}{k}"
            dims[sym] = n
            syms.append(sym)
        shapes.append(tuple(syms))
    ref = reference_from(path, attr)
    rng = np.random.default_rng(0)

    def run(d: dict[str, int]) -> np.ndarray:
        arrays = [rng.standard_normal(tuple(d[s] for s in syms)).astype(as_dtype(dt_)) for (_, _, dt_), syms in zip(specs, shapes)]
        return ref(*arrays)

    def runs_ok(d: dict[str, int]) -> bool:
        try:
            run(d)
        except Exception:  # noqa: BLE001 — a variant the user's code rejects is simply not offered
            return False
        return True

    result = run(dims)
    out_shape = list(result.shape)
    out_syms: list[str | int] = []
    for n in out_shape:  # reuse an input dim symbol when the size matches, so hidden variants stay consistent
        same = next((k for k, v in dims.items() if v == n), None)
        out_syms.append(same if same is not None else n)
    task_name = name or attr.lower()
    dest = Path(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # the reference is found relative to the task file, so the pair can move together (another checkout, CI)
    rel = Path(os.path.relpath(path, dest.parent.resolve())).as_posix()
    low_precision = any(d in ("bfloat16", "float16") for _, _, d in specs) or dtype_name(result.dtype) in ("bfloat16", "float16")
    tol = "Tolerance(rtol=2e-2, atol=2e-2)" if low_precision else "Tolerance(rtol=1e-4, atol=1e-5)"
    lines = [
        f'"""Task {task_name!r}: generated by `nkiagent task new` from {rel}:{attr} (relative to this file). Edit freely."""',
        "",
        "from pathlib import Path",
        "",
        "from nkiagent.tasks.spec import InputSpec, OutputSpec, Task, Tolerance",
        "from nkiagent.tasks.user import reference_from",
        "",
        f"reference = reference_from(Path(__file__).resolve().parent / {rel!r}, {attr!r})",
        "",
        "TASK = Task(",
        f"    name={task_name!r},",
        f"    description={f'Reproduce {attr} from {path.name}.'!r},",
        "    inputs=[" + ", ".join(f"InputSpec({n!r}, {s!r}, {d!r})" for (n, _, d), s in zip(specs, shapes)) + "],",
        f"    output=OutputSpec({tuple(out_syms)!r}, {dtype_name(result.dtype)!r}),",
        "    reference=reference,",
        f"    dims={dims!r},",
        f"    hidden_dims={_hidden(dims, {syms[0] for syms in shapes}, runs_ok)!r},",
        f"    tolerance={tol},",
        "    level=2,",
        '    tags=("user",),',
        ")",
        "",
    ]
    dest.write_text("\n".join(lines))
    return dest
