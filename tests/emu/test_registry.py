"""Every instruction is declared once, completely, in its op family's module, and nothing else lists ops.

Parametrised by op: the test ids list every registered instruction, and an incomplete
declaration (no engines, no rules, no example, an attrs type that is not a cost dataclass)
fails the test of that op.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import nki.isa as nisa
import pytest

import nkiagent.emu.isa as emu_isa
from nkiagent.emu import instructions
from nkiagent.emu.registry import FAMILIES, REGISTRY, CostAttrs, instruction

#: What an op-family module may import: the registry and the shared machinery, never another family.
SHARED = {"registry", "ops", "memory", "tensor", "alu", "dtypes", "errors", "engines", "trace", "common"}
STDLIB_AND_NUMPY = {"__future__", "numpy", "ml_dtypes", "typing", "collections", "dataclasses", "math", "inspect", "weakref"}
ENGINES = {"tensor", "vector", "scalar", "gpsimd", "dma", "sync"}
FAMILY_FILES = sorted(p for p in Path(instructions.__file__).parent.glob("*.py") if p.stem not in ("__init__", "common"))


@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_each_declaration_is_complete(op: str) -> None:
    d = REGISTRY[op]
    assert d.family in FAMILIES, f"nki.isa.{op}: family {d.family!r}"
    assert d.engines and set(d.engines) <= ENGINES and len(set(d.engines)) == len(d.engines), f"nki.isa.{op}: engines {d.engines}"
    assert d.placement.source.startswith(("https://", "docs name no engine")), f"nki.isa.{op}: no source for its engines"
    assert d.summary and d.rules and all(r.strip() for r in d.rules), f"nki.isa.{op}: no summary or no rules"
    assert d.example.startswith(f"nisa.{op}(") or f"= nisa.{op}(" in d.example, f"nki.isa.{op}: its example {d.example!r} does not call it"
    assert dataclasses.is_dataclass(d.attrs) and issubclass(d.attrs, CostAttrs), f"nki.isa.{op}: attrs {d.attrs} is no CostAttrs dataclass"


@pytest.mark.parametrize("op", sorted(REGISTRY))
def test_nki_isa_shows_each_declared_instruction_from_its_family_module(op: str) -> None:
    d = REGISTRY[op]
    assert getattr(nisa, op) is d.impl, "nki.isa shows the declared implementation"
    assert d.impl.__module__ == f"nkiagent.emu.instructions.{Path(inspect.getfile(d.impl)).stem}"


def test_nki_isa_functions_are_the_registry() -> None:
    functions = {n for n in dir(nisa) if inspect.isfunction(getattr(nisa, n))}
    # a query, not an instruction; and the names that import but refuse a call (not emulated, with the reason)
    assert functions - set(REGISTRY) == {"get_nc_version", *emu_isa._KNOWN_NOT_EMULATED}
    assert set(REGISTRY) <= functions


@pytest.mark.parametrize("path", FAMILY_FILES, ids=lambda p: p.stem)
def test_an_op_module_imports_only_the_registry_and_shared_machinery(path: Path) -> None:
    local, external = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            names = [node.module] if node.module else [a.name for a in node.names]  # (``from . import x`` names modules)
            local |= {n.split(".")[0] for n in names}
        elif isinstance(node, ast.ImportFrom):
            external.add(str(node.module).split(".")[0])
        elif isinstance(node, ast.Import):
            external |= {a.name.split(".")[0] for a in node.names}
    assert external <= STDLIB_AND_NUMPY, f"{path.name} imports {sorted(external - STDLIB_AND_NUMPY)}"
    assert local <= SHARED, f"{path.name} imports {sorted(local - SHARED)}"


def test_a_declaration_is_refused_when_incomplete() -> None:
    with pytest.raises(ValueError, match=r"^instruction family 'misc' is not one of"):
        instruction(family="misc", engines="vector", source="https://x", example="nisa.x()")

    def tensor_tensor() -> None:
        """Twice."""

    with pytest.raises(ValueError, match=r"^nki.isa.tensor_tensor is declared twice: in nkiagent.emu.instructions.elementwise and "):
        instruction(family="element-wise", engines="vector", source="https://x", example="nisa.tensor_tensor()")(tensor_tensor)

    def undocumented() -> None:
        pass

    with pytest.raises(ValueError, match=r"^nki.isa.undocumented \(.*\) has no docstring"):
        instruction(family="element-wise", engines="vector", source="https://x", example="nisa.undocumented()")(undocumented)
    assert "undocumented" not in REGISTRY


def _gated_ops() -> set[str]:
    """The declared ops whose body calls ``_require_gen`` (the target check that reads ``nc_version=``)."""
    gated = set()
    for path in FAMILY_FILES:
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef) and fn.name in REGISTRY:
                calls = [
                    c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "_require_gen"
                ]
                if calls:
                    gated.add(fn.name)
    return gated


def test_an_op_declared_for_a_later_generation_checks_the_target() -> None:
    assert _gated_ops() == {op for op, d in REGISTRY.items() if d.nc_version > 2} == {
        "exponential", "range_select", "nonzero_with_count", "sendrecv", "core_barrier"
    }
