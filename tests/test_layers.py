"""The import-layer contract: every import of nkiagent code points down the table in ``docs/architecture.md``.

Every ``import`` statement counts, wherever it is (module top, function body, ``TYPE_CHECKING``
block), and so does ``importlib.import_module("nkiagent...")``: an upward import hidden inside a
function is still an arrow pointing up. The table is read from the project's own docs, so the
docs and the contract cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nkiagent"
TABLE = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Violation:
    """One import the table does not allow: where it is, what it imports, which layers."""

    path: str
    line: int
    target: str
    source_layer: str
    target_layer: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source_layer} imports {self.target} ({self.target_layer}), which it may not"


#: A layer row's first cell: `nkiagent/<package>/` or `nkiagent/<module>.py`, optionally a link (to the package's README).
LAYER_CELL = re.compile(r"\[?`nkiagent/([a-z_]+)(/|\.py)`(?:\]\(([^)\s]+)\))?")


def table_rows(text: str) -> dict[str, dict[str, str]]:
    """Layer name → its row of the markdown table with a "may import" column, as column heading (lower case) → cell text."""

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.lstrip().startswith("|") and "may import" in line.lower()]
    if not heads:
        raise ValueError(f"{TABLE.name} has no table with a 'may import' column")
    columns = [c.lower() for c in cells(lines[heads[0]])]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[heads[0] + 2 :]:
        if not line.lstrip().startswith("|"):
            break
        row = cells(line)
        name = LAYER_CELL.fullmatch(row[0])
        if name is None:
            raise ValueError(f"{TABLE.name}: a layer row must start with `nkiagent/<package>/` or `nkiagent/<module>.py`, not {row[0]!r}")
        rows[name.group(1)] = dict(zip(columns, row))
    return rows


def read_table(text: str) -> dict[str, frozenset[str]]:
    """Layer name → the layers it may import directly, from the markdown table with a "may import" column."""
    rows = {layer: frozenset(re.findall(r"`([a-z_]+)`", row["may import"])) for layer, row in table_rows(text).items()}
    for layer, allowed in rows.items():
        unknown = allowed - rows.keys()
        if unknown:
            raise ValueError(f"{TABLE.name}: {layer} may import {', '.join(sorted(unknown))}, which the table does not list as layers")
    return rows


def closure(table: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """What each layer may import at all: its own column, and what those layers may import, down to the bottom."""
    out: dict[str, frozenset[str]] = {}

    def reach(layer: str, seen: tuple[str, ...]) -> frozenset[str]:
        if layer in seen:
            raise ValueError(f"{TABLE.name}: the layers form a cycle: {' → '.join((*seen, layer))}")
        if layer not in out:
            below = set(table[layer])
            for other in table[layer]:
                below |= reach(other, (*seen, layer))
            out[layer] = frozenset(below)
        return out[layer]

    for layer in table:
        reach(layer, ())
    return out


def module_name(path: Path, package: Path) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports_of(path: Path, package: Path) -> list[tuple[int, str]]:
    """Every nkiagent module ``path`` imports, anywhere in it, as ``(line, absolute dotted name)``."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path, package).split(".")
    pkg = me if path.name == "__init__.py" else me[:-1]
    root = package.name
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            if node.level and len(base) < 1:
                raise ValueError(f"{path}:{node.lineno}: relative import above the package")
            mod = [*base, *(node.module.split(".") if node.module else [])]
            if node.module is None:  # from . import a, b: each name may be a module of its own
                found += [(node.lineno, ".".join([*mod, a.name])) for a in node.names]
            else:
                found.append((node.lineno, ".".join(mod)))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return [(line, name) for line, name in found if name == root or name.startswith(root + ".")]


def layer_of(dotted: str, layers: set[str]) -> str | None:
    """The layer a module belongs to (``None``: the root package itself, or a name of it that is no layer)."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in layers else None


def violations(package: Path, table: dict[str, frozenset[str]]) -> list[Violation]:
    """Every import in ``package`` that points anywhere but down the table."""
    allowed = closure(table)
    out: list[Violation] = []
    for path in sorted(package.rglob("*.py")):
        source = layer_of(module_name(path, package), set(table))
        rel = str(path.relative_to(package.parent))
        if source is None:
            if path.parent == package and path.name != "__init__.py":
                raise AssertionError(f"{rel} is in no layer: add a row `nkiagent/{path.name}` to {TABLE.name}")
            if path.parent != package:
                raise AssertionError(
                    f"{rel} is in no layer: add a row `nkiagent/{path.parent.relative_to(package).parts[0]}/` to {TABLE.name}"
                )
            if imports_of(path, package):
                raise AssertionError(f"{rel} imports nkiagent code: the root package must stay importable by every layer")
            continue
        for line, target in imports_of(path, package):
            dest = layer_of(target, set(table))
            if dest is None or dest == source or dest in allowed[source]:
                continue
            out.append(Violation(rel, line, target, source, dest))
    return out


def test_every_import_points_down_the_layer_table() -> None:
    """No exceptions, the emulator included: it imports only NumPy and ml_dtypes (the cost model's entry points are in ``shim``)."""
    found = violations(PACKAGE, read_table(TABLE.read_text()))
    assert not found, "imports against the layers of docs/architecture.md:\n" + "\n".join(map(str, found))


def test_every_package_has_a_row_in_the_table() -> None:
    table = read_table(TABLE.read_text())
    on_disk = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} | {
        p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"
    }
    assert on_disk == set(table), (
        f"packages without a row: {sorted(on_disk - set(table))}; rows without a package: {sorted(set(table) - on_disk)}"
    )


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "nkiagent"
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


TOY = "| package | owns | may import |\n|---|---|---|\n| `nkiagent/low/` | x | — |\n| `nkiagent/high/` | y | `low` |\n"


@pytest.mark.parametrize(
    "code",
    [
        "from ..high import thing\n",
        "def f():\n    from ..high.mod import thing\n",
        "def f():\n    import nkiagent.high.mod\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nkiagent.high import thing\n",
        "import importlib\ndef f():\n    return importlib.import_module('nkiagent.high.mod')\n",
        "from .. import high\n",
    ],
)
def test_an_upward_import_is_found_wherever_it_hides(tmp_path: Path, code: str) -> None:
    pkg = _tree(tmp_path, {"__init__.py": "", "low/__init__.py": "", "low/mod.py": code, "high/__init__.py": "", "high/mod.py": ""})
    found = violations(pkg, read_table(TOY))
    assert [(v.path, v.source_layer, v.target_layer) for v in found] == [("nkiagent/low/mod.py", "low", "high")]
    assert str(found[0]).startswith("nkiagent/low/mod.py:") and "low imports nkiagent.high" in str(found[0])


def test_downward_and_transitive_imports_are_allowed(tmp_path: Path) -> None:
    table = read_table(TOY + "| `nkiagent/top/` | z | `high` |\n")
    pkg = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "high/__init__.py": "from ..low import x\n",
            "top/__init__.py": "def f():\n    from ..low import x\n    from .. import __version__\n",
        },
    )
    assert violations(pkg, table) == []


def test_a_table_naming_an_unknown_layer_or_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="high may import nowhere, which the table does not list"):
        read_table(TOY.replace("`low` |", "`nowhere` |"))
    cyclic = read_table(TOY.replace("| `nkiagent/low/` | x | — |", "| `nkiagent/low/` | x | `high` |"))
    with pytest.raises(ValueError, match="cycle"):
        closure(cyclic)
