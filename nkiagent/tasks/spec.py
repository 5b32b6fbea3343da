"""The task format: what a kernel must compute, on which inputs, how exactly, and against what.

A task is one Python file a user can write by hand: it defines ``TASK = Task(...)`` with a
NumPy reference, symbolic input shapes resolved from ``dims`` (the visible shape) and
``hidden_dims`` (variants never shown to the model), a tolerance, the work done (for the
speed of light) and the path of a plain, correct baseline kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Dims", "InputSpec", "OutputSpec", "Task", "Tolerance"]

Dims = Mapping[str, int]


def _resolve(shape: Sequence[int | str], dims: Dims) -> tuple[int, ...]:
    out = []
    for d in shape:
        if isinstance(d, str):
            if d not in dims:
                raise KeyError(f"shape dimension {d!r} is not defined in dims {dict(dims)}")
            out.append(int(dims[d]))
        else:
            out.append(int(d))
    return tuple(out)


@dataclass(frozen=True)
class InputSpec:
    """One kernel input. ``shape`` entries are ints or names of ``Task.dims``.

    ``domain`` restricts values: ``real`` (default), ``positive`` (> 0), ``nonnegative`` (≥ 0, exact zeros
    where the distribution has them), ``unit`` ([0, 1)).
    """

    name: str
    shape: tuple[int | str, ...]
    dtype: str = "float32"
    layout: str = ""
    domain: str = "real"

    def resolve(self, dims: Dims) -> tuple[int, ...]:
        return _resolve(self.shape, dims)


@dataclass(frozen=True)
class OutputSpec:
    shape: tuple[int | str, ...]
    dtype: str = "float32"

    def resolve(self, dims: Dims) -> tuple[int, ...]:
        return _resolve(self.shape, dims)


@dataclass(frozen=True)
class Tolerance:
    """Pass when ``|out − ref| ≤ atol·rms(ref) + rtol·|ref|`` element-wise (atol scales with the reference's RMS,
    so it means the same for ×1000 inputs), or (``rel_l2`` set) ‖out − ref‖ ≤ rel_l2·‖ref‖."""

    rtol: float = 1e-5
    atol: float = 1e-5
    rel_l2: float | None = None


@dataclass
class Task:
    """A kernel-writing task. See the module docstring."""

    name: str
    description: str
    inputs: list[InputSpec]
    output: OutputSpec
    reference: Callable[..., np.ndarray]
    dims: dict[str, int]
    tolerance: Tolerance = field(default_factory=Tolerance)
    hidden_dims: list[dict[str, int]] = field(default_factory=list)
    constraints: str = ""
    flops: Callable[[Dims], float] | None = None  #: matmul FLOPs (TensorE work) for speed of light
    #: The part of ``flops`` whose operands must keep fp32 accuracy, because bf16 operands fail the
    #: tolerance (a test must show it: ``tests/tasks/test_precision.py``); the speed of light prices
    #: them at the cheapest fp32-accurate scheme, the rest at TensorE's bf16 rate. A matmul of bf16
    #: inputs, or one whose inputs may be rounded to bf16 within the tolerance, declares none.
    fp32_flops: Callable[[Dims], float] | None = None
    vector_elems: Callable[[Dims], float] | None = None  #: unavoidable elementwise work (elements)
    scalar_elems: Callable[[Dims], float] | None = None  #: unavoidable transcendental work (elements)
    min_hbm_bytes: Callable[[Dims], float] | None = None  #: default: read every input once, write the output once
    baseline: str = ""  #: path of the baseline kernel file, relative to the task file
    level: int = 1
    tags: tuple[str, ...] = ()
    source_path: Path | None = None
    #: Inputs drawn by the task itself (``generate(seed) -> arrays``) instead of the protocol's
    #: distributions — for suites such as NKIBench whose inputs have their own semantics.
    generate: Callable[[int], list[np.ndarray]] | None = None
    #: Compare the kernel's output after reshaping it to ``output.shape`` (NKIBench kernels may
    #: return any layout with the right number of elements).
    reshape_output: bool = False
    #: Value distributions of the correctness protocol. Every task has normal, heavy-tailed and
    #: large inputs; one whose maths is sensitive to a large mean offset or to constant (and all
    #: zero) rows adds ``"offset"`` / ``"constant_rows"`` (see ``nkiagent.sandbox.arrays``).
    distributions: tuple[str, ...] = ("normal", "heavy_tailed", "large")
    #: The task's kernels may choose their instructions from the data (registers loaded from
    #: tensors: dynamic loops, data-dependent addresses), as MoE routing or ragged batches do. Off
    #: by default: an NKI kernel's instruction stream is a function of its shapes, so the verifier
    #: rejects a kernel whose stream changes between two inputs of one shape. When on, the
    #: reported latency is the worst over the visible shape's runs.
    data_dependent: bool = False
    #: The narrowest floating-point type the task's arithmetic may use: ``"bfloat16"`` lets a
    #: kernel cast fp32 operands to bf16 (TensorE's full rate); ``"float32"`` says the tolerance
    #: needs fp32 throughout, and the profile never advises a narrower type. Empty: derived from
    #: the tolerance (see :attr:`precision_floor`).
    precision: str = ""

    # -- shapes ---------------------------------------------------------------------------------
    def input_shapes(self, dims: Dims | None = None) -> list[tuple[int, ...]]:
        d = self.dims if dims is None else dims
        return [spec.resolve(d) for spec in self.inputs]

    def output_shape(self, dims: Dims | None = None) -> tuple[int, ...]:
        return self.output.resolve(self.dims if dims is None else dims)

    def all_dims(self) -> list[dict[str, int]]:
        """The visible shape first, then the hidden variants."""
        return [dict(self.dims)] + [dict(h) for h in self.hidden_dims]

    # -- work -----------------------------------------------------------------------------------
    def hbm_bytes(self, dims: Dims | None = None) -> float:
        d = self.dims if dims is None else dims
        if self.min_hbm_bytes is not None:
            return float(self.min_hbm_bytes(d))
        from ..emu.dtypes import as_dtype

        total = sum(math.prod(s.resolve(d)) * as_dtype(s.dtype).itemsize for s in self.inputs)
        return float(total + math.prod(self.output.resolve(d)) * as_dtype(self.output.dtype).itemsize)

    @property
    def precision_floor(self) -> str:
        """:attr:`precision`, or what the tolerance allows: bf16 keeps 8 significant bits (relative
        rounding error up to 2⁻⁸ ≈ 0.4%), so a tighter tolerance needs fp32."""
        if self.precision:
            return self.precision
        tol = self.tolerance.rel_l2 if self.tolerance.rel_l2 is not None else self.tolerance.rtol
        return "float32" if tol < 2.0**-8 else "bfloat16"

    def work(self, dims: Dims | None = None) -> dict[str, float]:
        d = self.dims if dims is None else dims
        return {
            "matmul_flops": float(self.flops(d)) if self.flops else 0.0,
            "fp32_matmul_flops": float(self.fp32_flops(d)) if self.fp32_flops else 0.0,
            "vector_elems": float(self.vector_elems(d)) if self.vector_elems else 0.0,
            "scalar_elems": float(self.scalar_elems(d)) if self.scalar_elems else 0.0,
            "hbm_bytes": self.hbm_bytes(d),
        }

    def baseline_path(self) -> Path | None:
        if not self.baseline:
            return None
        base = self.source_path.parent if self.source_path else Path.cwd()
        return (base / self.baseline).resolve()

    def describe(self) -> dict[str, Any]:
        """JSON-able summary for prompts and listings (hidden shapes are not included)."""
        return {
            "name": self.name,
            "level": self.level,
            "tags": list(self.tags),
            "description": self.description,
            "inputs": [{"name": s.name, "shape": list(s.resolve(self.dims)), "dtype": s.dtype, "layout": s.layout} for s in self.inputs],
            "output": {"shape": list(self.output_shape()), "dtype": self.output.dtype},
            "tolerance": {"rtol": self.tolerance.rtol, "atol": self.tolerance.atol, "rel_l2": self.tolerance.rel_l2},
            "constraints": self.constraints,
        }
