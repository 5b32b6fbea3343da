"""The kernel import policy, shared by the static gate (what a kernel's source may import) and the
worker's runtime guard (what kernel code may import once it runs, modules already loaded included).

One table, two walls: the gate names the rule and the line before anything runs; the guard
refuses the same imports if code the gate never saw tries them at run time.
"""

from __future__ import annotations

__all__ = ["ALLOWED_MODULES", "FORBIDDEN_MODULES", "FORBIDDEN_SUBMODULES", "PREFIXES", "import_refusal", "is_dunder", "module_verdict"]

#: Modules a kernel may import (exact dotted names).
ALLOWED_MODULES = frozenset(
    {
        "nki",
        "nki.language",
        "nki.isa",
        "nki.typing",
        "neuronxcc.nki",
        "neuronxcc.nki.language",
        "neuronxcc.nki.isa",
        "neuronxcc.nki.typing",
        "neuronxcc.nki.compiler",
        "numpy",
        "math",
        "functools",
        "itertools",
        "typing",
        "dataclasses",
        "enum",
        "__future__",
    }
)
#: Top-level modules whose import is ``forbidden-import`` (every other unknown module is ``unknown-import``).
FORBIDDEN_MODULES = frozenset(
    {
        "sys", "os", "inspect", "gc", "builtins", "importlib", "ctypes", "threading", "multiprocessing",
        "subprocess", "socket", "time", "pickle", "marshal", "shelve", "signal", "resource", "io",
        "tempfile", "pathlib", "shutil", "urllib", "http", "asyncio", "concurrent", "torch", "jax",
        "scipy", "_thread", "_ctypes", "posix", "nt", "types", "runpy", "traceback", "atexit",
        "weakref", "copyreg", "__main__", "__builtin__", "nkiagent",
    }
)  # fmt: skip
#: Submodules of allowed packages that reach file I/O, raw memory, compilers or global RNG state.
FORBIDDEN_SUBMODULES = frozenset(
    {"numpy.testing", "numpy.ctypeslib", "numpy.lib", "numpy.core", "numpy._core", "numpy.distutils", "numpy.f2py", "numpy.random"}
)

#: Package names that are only a path to an allowed module (``import neuronxcc.nki`` binds ``neuronxcc``).
PREFIXES = frozenset(p for m in ALLOWED_MODULES for p in (m.rsplit(".", i)[0] for i in range(1, m.count(".") + 1))) - ALLOWED_MODULES


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def module_verdict(dotted: str) -> tuple[str, str] | None:
    """``None`` when ``dotted`` may be imported, else ``(rule, why)``."""
    if dotted in ALLOWED_MODULES:
        return None
    parts = dotted.split(".")
    forbidden = parts[0] in FORBIDDEN_MODULES or any(".".join(parts[: i + 1]) in FORBIDDEN_SUBMODULES for i in range(len(parts)))
    if forbidden or any(p.startswith("_") and not is_dunder(p) for p in parts):
        return "forbidden-import", f"`{dotted}` reaches the interpreter, the file system or the harness"
    return "unknown-import", f"`{dotted}` is not on the kernel import allowlist"


def import_refusal(name: str, fromlist: tuple[str, ...] = ()) -> str | None:
    """Why the runtime guard refuses ``import name`` / ``from name import fromlist`` by kernel code (``None``: allowed).

    A package that is only a path to an allowed module (``neuronxcc``) may be named when the
    import continues to one (``from neuronxcc import nki``).
    """
    if name in PREFIXES and fromlist and all(f"{name}.{f}" in ALLOWED_MODULES for f in fromlist):
        return None
    verdict = module_verdict(name)
    if verdict is not None:
        return verdict[1]
    for f in fromlist:
        full = f"{name}.{f}"
        if full in FORBIDDEN_SUBMODULES or (full not in ALLOWED_MODULES and full.split(".")[0] in FORBIDDEN_MODULES):
            return f"`{full}` reaches the interpreter, the file system or the harness"
    return None
