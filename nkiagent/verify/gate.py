"""The static gate: reject kernel source that could cheat the verifier, before any of it runs.

Why a static gate when the worker is sandboxed and the emulator's tiles are opaque: those
defences stop a cheat by making it crash, and a crash teaches the agent nothing. The gate
names the rule and the line and says what to write instead, it costs milliseconds, and it
is a second, independent wall (``kernel-agents-landscape.md`` §5, checklist item 2). It
parses with tree-sitter and never imports or executes the kernel.

A kernel is one small file of NKI calls, so the gate is deliberately strict: anything a
kernel does not need is rejected, and every message says what to do instead.

Rules (``Violation.rule``):

``syntax-error``
    tree-sitter found an ERROR or MISSING node (reported at the first one), a Python 2
    ``print``/``exec`` statement, or CPython's tokenizer refused the text.
``too-large``
    tree-sitter did not finish within :data:`PARSE_DEADLINE_S` (its parse is superlinear in
    long runs of comments: a few MB of them took minutes, holding the GIL of a reward
    server). Like a syntax error this is a compile failure, not a cheat.
``source-text``
    text on which tree-sitter and CPython could read different programs: NUL bytes, a
    carriage return that is not part of CRLF (CPython ends a line there, tree-sitter does
    not, so code could hide inside a comment), a coding declaration other than UTF-8, tabs
    in indentation, characters that cannot be encoded.
``parser-mismatch``
    a differential check: the identifiers and keywords CPython's tokenizer sees outside
    string literals must be exactly those in the tree-sitter tree, line by line, so code the
    gate did not see cannot run. (Interpolations inside f-strings are left out on both
    sides; tree-sitter parses them and every rule checks them.) Identifiers are compared
    and checked after NFKC normalization, as CPython does (``ｅｖａｌ`` is ``eval``).
``forbidden-import`` / ``unknown-import``
    imports are limited to :data:`ALLOWED_MODULES`. Modules in :data:`~nkiagent.sandbox.policy.FORBIDDEN_MODULES`
    and NumPy's reach-arounds (:data:`~nkiagent.sandbox.policy.FORBIDDEN_SUBMODULES`: ``numpy.testing``,
    ``numpy.lib`` …) are ``forbidden-import``, anything else ``unknown-import``, and so are
    relative imports (a kernel is one file; the task's reference lives next door). The same
    holds for modules reached through attributes (``np.lib``, ``dataclasses.sys``,
    ``getattr(np, "testing")``): an attribute of an allowed module that is itself a module
    must be allowed too. ``from m import *`` is rejected (it hides which names exist), and
    a module may only be used as ``mod.name``: binding it to another name or passing it
    around would hide what is later reached through it.
``forbidden-call``
    :data:`FORBIDDEN_BUILTINS` (``open``, ``exec``, ``eval``, ``compile``, ``globals``,
    ``vars``, ``id``, ``exit`` …) wherever they are not a function's own local name — a
    module-level ``def open`` does not count, because a missing global falls back to the
    builtin; ``getattr``/``setattr``/``delattr``/``hasattr`` unless called with a plain
    string literal that is not a dunder (a literal name is then checked like ``obj.name``);
    ``type`` except as ``type(x)``; ``str.format`` on a template that is not a literal;
    NumPy file and memory I/O (``np.load``, ``np.save``, ``x.tofile``, ``.ctypes`` …);
    ``typing.get_type_hints`` (it evaluates strings as code); calling ``nl.NkiTensor``
    (a type for isinstance checks; tensors come from ``nl.ndarray``); interpreter names
    such as ``__builtins__``, ``__import__`` or ``__file__``.
``dunder-attribute``
    ``x.__anything__``, also through ``"{0.__class__}".format`` fields and
    ``case C(__x__=...)`` patterns, and dunder method definitions other than ``__init__``
    and ``__post_init__`` (``__eq__``, ``__array__``, ``__reduce__``, ``__del__`` …
    change what the harness sees when it compares, converts, pickles or frees objects).
``private-attribute``
    ``x._name`` on anything, and ``from m import _name``: the emulator keeps its tensors'
    internals behind underscore names. A file's own ``_helper`` functions are fine.
``introspection``
    frame, code and class-graph attributes (:data:`INTROSPECTION_ATTRIBUTES`: ``f_back``,
    ``gi_frame``, ``tb_frame``, ``__globals__``, ``__subclasses__``, ``mro`` …) and
    ``type(x).attr``: the roads from any object to the harness's frames and data.
``swallowed-exception``
    an ``except`` clause that does not end in ``raise`` (bare or ``raise X from e``), or
    whose ``return``/``yield``/``break``/``continue`` leaves it (the ``try: kernel()
    except: return reference()`` fallback), or that re-raises as an exception Python
    swallows (:data:`SWALLOWED_BY_PYTHON`: ``hasattr`` hides an ``AttributeError``); ``return``/``break``/``continue`` in
    ``finally`` (they discard the exception in flight); ``with`` on anything but an NKI
    context manager (``with nl.no_reorder():``), since any ``__exit__`` can swallow.
``global-state``
    state that outlives a call, or that the harness shares:

    * ``global``, and ``nonlocal`` from a function that leaves its owner's call (see below);
    * attribute writes (``x.a = …``, ``del x.a``, ``setattr``) anywhere except on ``self``
      in a method or on an instance of one of the file's classes created in the same
      function (module level: at import time) — functions, classes, NKI objects and call
      results are shared; and a method may not be reached through its class
      (``C.method(other)`` would let any object be ``self``);
    * item writes and mutating methods (``x[i] = …``, ``append``, ``update``, ``fill`` …)
      inside a function on anything but the function's own objects: not module-level
      state, closure variables or call results, nor local aliases of them
      (``row = GRID[0]; row.append(x)``, ``for r in GRID: r.append(x)``);
    * changing an imported module or any object taken from one, directly or through an
      alias (``np.allclose = …``, ``state = nl.tile_size; state.calls = …``), anywhere;
    * inside a function, using a module-level container or object other than by reading
      it (``X[i]``, ``X.attr``, ``for a in X``, ``a in X``, arithmetic, ``len(X)``, an NKI
      call's argument): aliasing or passing it elsewhere would let a helper write to it,
      and iterating a module-level iterator (``itertools.count()``) counts calls;
    * default values that are not constants (``def k(x, cache={})``, ``c=make()``),
      ``functools.partial`` bound to non-constants, and class attributes holding
      containers: each is created once and handed to every call;
    * NumPy's process-wide settings (``np.seterr`` …).

    ``functools.cache``/``lru_cache`` are allowed: every run gets a fresh module, so a memo
    lives for one run at most, and within a run the emulator refuses a tile that one SPMD
    program allocated and another uses (a cached helper cannot hand tiles between programs).
    Closure state is allowed when every function between the one that changes it and the
    one that owns it is only ever called where it is defined (never returned, stored, passed
    on or decorated): a per-call counter or dict cache dies with the call.

    Module-level code may build whatever it likes: it runs once, at import.
``host-compute``
    inside any function (kernels, helpers, methods): the NumPy calls in
    :data:`HOST_COMPUTE_NUMPY` — readers such as ``np.asarray``, ``np.array``,
    ``np.frombuffer`` and array constructors such as ``np.zeros``, ``np.arange`` — also
    through ``from numpy import …`` and aliases, and the methods ``.tolist()``,
    ``.item()``, ``.numpy()``, ``.tobytes()``, ``.itemset()``. Everything else NumPy is
    allowed anywhere: dtypes and scalar types (``np.float32``, ``np.float32(1.0)``,
    ``np.dtype``, ``np.finfo``), constants (``np.pi``), math on shapes and other Python
    numbers (``np.prod(shape)``, ``np.sqrt(d)``), and at module level any array (it is
    data, built once). NumPy applied to tile data cannot work anyway (the emulator's tiles
    are opaque); this rule reports the attempt by name instead of as a crash.
``class-base``
    a class may derive only from ``object``, enums, ``NamedTuple``, the exceptions in
    :data:`_ALLOWED_BASE_BUILTINS` and the file's own classes, with no ``metaclass=`` or
    other class keywords; ``dataclasses.make_dataclass`` and enum metaclasses are rejected
    too. Subclassing NumPy, NKI or builtin types is how a fake or lazy output is built.

Decisions on the questions the issue left open: ``id()`` is forbidden (object identity is
the usual key of a cross-call cache and kernels never need it); ``if __name__ ==
"__main__":`` is allowed at module level, exactly in that form (the worker imports the
kernel under another name, so the block never runs during verification), and its body is a
script's: no rule applies there (a self-test may use ``numpy.random``), while its ``else`` is
checked like the rest of the file; ``__all__`` may be assigned at module
level; ``with`` is limited to context managers of the NKI modules; classes are allowed
inside and outside kernels under ``class-base`` and the dunder-method rule.

Known limits, left to the worker's fresh process per evaluation, the determinism re-run and
the speed-of-light bound: a closure's container handed out by a call (``get()`` returning
it, or passed as an argument to a helper that writes to it), and anything decided at run
time (types, values, which branch runs).
"""

from __future__ import annotations

import ast
import codecs
import functools
import importlib
import importlib.util
import io
import re
import time
import tokenize
import types
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Tree

from ..sandbox.policy import ALLOWED_MODULES, PREFIXES, is_dunder, module_verdict

__all__ = ["ALLOWED_MODULES", "GATE_VERSION", "Violation", "check_source"]

#: Bump when a rule changes what passes, so stored verdicts can say which gate judged them.
GATE_VERSION = "2"
#: Longest tree-sitter may parse one source, in seconds (a real kernel takes milliseconds).
PARSE_DEADLINE_S = 5.0


@dataclass(frozen=True)
class Violation:
    """One rejection: the rule id, what to do instead, and where (1-based line and column)."""

    rule: str
    message: str
    line: int
    col: int

    def where(self, filename: str) -> str:
        """``file:line``, the form editors and the agent's tools jump to."""
        return f"{filename}:{self.line}"


# ---------------------------------------------------------------------------- policy tables

#: The NKI front-ends: their calls are the kernel's real work, their context managers are allowed.
SWALLOWED_BY_PYTHON = frozenset({"AttributeError", "StopIteration", "StopAsyncIteration", "GeneratorExit"})
"""Exceptions that ``hasattr``, 3-argument ``getattr``, ``for`` and generators turn into normal control flow."""

NKI_MODULES = frozenset(m for m in ALLOWED_MODULES if m == "nki" or m.startswith(("nki.", "neuronxcc.")))
#: Allowed modules the gate may import to learn which of their attributes are modules.
_INTROSPECTABLE = frozenset({"numpy", "math", "functools", "itertools", "typing", "dataclasses", "enum"})

_IO_ADVICE = "a kernel reads only its arguments and returns its output; it does no file or raw-memory I/O"
#: Members of allowed modules with their own verdict: (module, name) -> (rule, why).
_MEMBER_RULES: dict[tuple[str, str], tuple[str, str]] = {
    **{
        ("numpy", n): ("forbidden-call", _IO_ADVICE)
        for n in (
            "load", "loadtxt", "genfromtxt", "fromfile", "fromregex", "memmap", "save", "savez",
            "savez_compressed", "savetxt", "DataSource", "from_dlpack", "info", "source", "lookfor",
            "show_config", "show_runtime", "get_include",
        )
    },
    **{
        ("numpy", n): ("global-state", "it changes NumPy's process-wide settings, which the harness shares; leave them alone")
        for n in ("seterr", "seterrcall", "setbufsize", "set_printoptions", "printoptions", "errstate")
    },
    **{
        ("typing", n): ("forbidden-call", "it evaluates strings as code; annotations are for reading, not for evaluating")
        for n in ("get_type_hints", "evaluate_forward_ref", "ForwardRef")
    },
    **{
        (m, n): ("class-base", "it builds classes from data, around the class-definition rules; write a `class` statement")
        for m, n in (("dataclasses", "make_dataclass"), ("enum", "EnumMeta"), ("enum", "EnumType"))
    },
}  # fmt: skip

#: NumPy calls that read data into host arrays; with the array constructors they form
#: :data:`HOST_COMPUTE_NUMPY`, rejected inside functions (``host-compute``).
_HOST_READERS = frozenset(
    {
        "asarray",
        "array",
        "asanyarray",
        "ascontiguousarray",
        "asfortranarray",
        "asarray_chkfinite",
        "frombuffer",
        "fromiter",
        "copy",
        "require",
    }
)
#: Methods that pull a tensor's values to the host: rejected inside functions (``host-compute``).
HOST_COMPUTE_METHODS = frozenset({"tolist", "item", "numpy", "tobytes", "itemset"})
#: NumPy constructors whose result is a mutable array (module-level state when bound at module level).
_NUMPY_ARRAY_CONSTRUCTORS = frozenset(
    {
        "array", "asarray", "asanyarray", "ascontiguousarray", "zeros", "ones", "empty", "full", "zeros_like",
        "ones_like", "empty_like", "full_like", "arange", "linspace", "logspace", "geomspace", "eye", "identity",
        "tri", "diag", "copy", "frombuffer", "fromiter", "fromfunction", "concatenate", "stack", "vstack",
        "hstack", "tile", "repeat", "meshgrid", "indices", "ndarray", "matrix", "recarray", "memmap",
    }
)  # fmt: skip

HOST_COMPUTE_NUMPY = _HOST_READERS | _NUMPY_ARRAY_CONSTRUCTORS
#: NKI exports that are types for isinstance checks, never to be called by a kernel.
NKI_TYPES_ONLY = frozenset({"NkiTensor"})

#: Builtins that are forbidden wherever they are not a function's own local name, with what to do instead.
FORBIDDEN_BUILTINS: dict[str, str] = {
    **dict.fromkeys(("open", "input", "help", "license", "credits", "copyright"), _IO_ADVICE),
    **dict.fromkeys(("exec", "eval", "compile"), "a kernel is the code in this file; it may not build and run code from strings"),
    **dict.fromkeys(("globals", "locals", "vars", "dir"), "namespace introspection reaches the harness; refer to names directly"),
    "breakpoint": "debugger hooks do not belong in a kernel; remove the call",
    "memoryview": "raw memory views bypass the tensor API; use NKI loads and stores",
    "id": "object identity is how cross-call caches are keyed; a kernel never needs it",
    **dict.fromkeys(
        ("exit", "quit", "SystemExit", "KeyboardInterrupt", "GeneratorExit"),
        "a kernel may not end or interrupt the process; raise an ordinary exception",
    ),
}  # fmt: skip
#: Attribute names that write files or expose raw memory, whatever object they are read from.
FORBIDDEN_ATTRIBUTES: dict[str, str] = {
    "tofile": _IO_ADVICE,
    "dump": _IO_ADVICE,
    "ctypes": "raw memory pointers bypass the tensor API; use NKI loads and stores",
}
#: Builtins that reach attributes by a computed name.
_ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "hasattr"})

#: Attributes that lead from any object to frames, code objects or the class graph.
INTROSPECTION_ATTRIBUTES = frozenset(
    {
        "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "gi_frame", "gi_code",
        "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "ag_await", "tb_frame",
        "tb_next", "co_code", "co_consts", "co_names", "mro", "__code__", "__closure__", "__globals__",
        "__dict__", "__class__", "__bases__", "__base__", "__subclasses__", "__mro__", "__traceback__",
        "__builtins__", "__self__", "__func__", "__wrapped__", "__defaults__", "__kwdefaults__",
    }
)  # fmt: skip
#: Dunder methods a class in a kernel may define: construction, and the container and call protocols a
#: tiling helper uses (iteration, length, indexing, calls, text). Not comparison, hashing, conversion
#: (``__array__``, ``__index__``, ``__bool__``), attribute hooks, pickling or finalizers: those change
#: what the harness's own operations do with an object.
_ALLOWED_DUNDER_METHODS = frozenset(
    {"__init__", "__post_init__", "__iter__", "__next__", "__len__", "__getitem__", "__contains__", "__call__", "__repr__", "__str__"}
)

#: Method names that mutate their receiver (lists, dicts, sets, deques, NumPy arrays).
_MUTATING_METHODS = frozenset(
    {
        "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update", "setdefault", "add",
        "discard", "difference_update", "intersection_update", "symmetric_difference_update", "sort",
        "reverse", "appendleft", "extendleft", "popleft", "rotate", "fill", "put", "itemset", "resize",
        "setflags", "setfield", "send", "throw", "close",
    }
)  # fmt: skip
#: Methods that only read a container.
_READONLY_METHODS = frozenset({"get", "keys", "values", "items", "index", "count", "copy"})
#: Parents that only read the value of their operand.
_READING_PARENTS = frozenset(
    {"binary_operator", "unary_operator", "comparison_operator", "not_operator", "interpolation", "assert_statement"}
)
#: Builtins that read a module-level value without keeping it or iterating it.
_READONLY_BUILTINS = frozenset({"len", "isinstance", "int", "float", "bool", "str", "repr", "abs", "round", "print", "hash", "format"})
#: Builtins that iterate their argument: fine on containers, not on module-level iterators.
_ITERATING_BUILTINS = frozenset(
    {"min", "max", "sum", "sorted", "tuple", "list", "set", "frozenset", "enumerate", "zip", "reversed", "any", "all", "dict"}
)
#: Builtins whose result is immutable when their arguments are (constant default values, constants).
_CONSTANT_BUILTINS = frozenset(
    {
        "int",
        "float",
        "complex",
        "bool",
        "str",
        "bytes",
        "tuple",
        "frozenset",
        "range",
        "slice",
        "abs",
        "min",
        "max",
        "round",
        "len",
        "sum",
        "pow",
        "divmod",
        "ord",
        "chr",
    }
)
_MUTABLE_BUILTINS = frozenset({"list", "dict", "set", "bytearray"})
#: Base classes a class in a kernel may name (builtins, and members of allowed modules).
_ALLOWED_BASE_BUILTINS = frozenset(
    {
        "object",
        "Exception",
        "ValueError",
        "TypeError",
        "RuntimeError",
        "AssertionError",
        "NotImplementedError",
        "ArithmeticError",
        "LookupError",
        "IndexError",
        "KeyError",
    }
)
_ALLOWED_BASE_MEMBERS = frozenset(
    {("enum", "Enum"), ("enum", "IntEnum"), ("enum", "Flag"), ("enum", "IntFlag"), ("enum", "StrEnum"), ("typing", "NamedTuple")}
)

#: Node types that are constant when all their parts are.
_CONSTANT_STRUCTURE = frozenset(
    {
        "string", "concatenated_string", "interpolation", "format_specifier", "format_expression", "tuple",
        "parenthesized_expression", "expression_list", "unary_operator", "binary_operator", "boolean_operator",
        "not_operator", "comparison_operator", "conditional_expression", "subscript", "slice", "argument_list",
        "for_in_clause", "if_clause",
    }
)  # fmt: skip
_CONTAINER_DISPLAYS = frozenset({"list", "dictionary", "set", "list_comprehension", "set_comprehension", "dictionary_comprehension"})
_COMPREHENSIONS = frozenset({"list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"})
_PATTERNS = frozenset(
    {
        "pattern_list",
        "tuple_pattern",
        "list_pattern",
        "tuple",
        "list",
        "expression_list",
        "parenthesized_expression",
        "list_splat_pattern",
        "list_splat",
    }
)
_IMPORTS = frozenset({"import_statement", "import_from_statement", "future_import_statement"})
_EXTRAS = frozenset({"comment", "line_continuation"})
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_WORD = re.compile(r"[^\W\d]\w*")
_FORMAT_FIELD = re.compile(r"\{([^{}]*)\}")
_LANGUAGE = Language(tree_sitter_python.language())


# ---------------------------------------------------------------------------- small helpers


def _norm(text: str) -> str:
    """An identifier as CPython sees it: NFKC-normalized, so ``ｅｖａｌ`` is ``eval``."""
    return unicodedata.normalize("NFKC", text)


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _named(node: Node) -> list[Node]:
    """Named children without comments and line continuations."""
    return [c for c in node.named_children if c.type not in _EXTRAS]


def _unparen(node: Node) -> Node:
    while node.type == "parenthesized_expression" and len(_named(node)) == 1:
        node = _named(node)[0]
    return node


def _field(node: Node, name: str) -> Node:
    """The field ``name`` of ``node``, one its grammar rule requires (an ``attribute``'s ``object``, a ``call``'s ``function``).

    The checker only walks trees without ERROR or MISSING nodes, where a required field is always
    there; a missing one means tree-sitter-python's grammar changed under the gate, and a gate
    that misreads the tree must stop rather than pass the kernel.
    """
    child = node.child_by_field_name(name)
    if child is None:
        raise RuntimeError(
            f"static gate: the `{node.type}` at line {node.start_point[0] + 1} has no `{name}` field, which tree-sitter-python's "
            "grammar requires; install the tree-sitter-python version pinned in pyproject.toml"
        )
    return child


def _is_field(parent: Node | None, name: str, child: Node) -> bool:
    if parent is None:
        return False
    found = parent.child_by_field_name(name)
    return found is not None and found.id == child.id


def _outer(node: Node) -> tuple[Node, Node]:
    """``(node, parent)`` after climbing out of the parentheses around ``node``."""
    parent = node.parent
    assert parent is not None
    while parent.type == "parenthesized_expression" and parent.parent is not None:
        node, parent = parent, parent.parent
    return node, parent


def _chain_root(node: Node) -> Node:
    """The object at the bottom of ``a.b[c].d``: ``a``."""
    node = _unparen(node)
    while node.type in ("attribute", "subscript"):
        node = _unparen(_field(node, "object" if node.type == "attribute" else "value"))
    return node


def _flatten_targets(node: Node) -> Iterator[Node]:
    """The single targets in an assignment's left side (``a, (b.c, *d)`` → ``a``, ``b.c``, ``d``)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in _PATTERNS:
            stack.extend(reversed(_named(n)))
        else:
            yield n


def _literal_str(node: Node) -> str | None:
    """The value of a plain string literal (escapes decoded), or None for anything else."""
    node = _unparen(node)
    if node.type not in ("string", "concatenated_string"):
        return None
    try:
        value = ast.literal_eval("(" + _text(node) + "\n)")
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _positional_args(call: Node) -> tuple[list[Node], bool]:
    """A call's positional arguments, and whether it has keywords or splats."""
    args = call.child_by_field_name("arguments")
    if args is None or args.type != "argument_list":
        return [], True
    positional = [a for a in _named(args) if a.type not in ("keyword_argument", "list_splat", "dictionary_splat")]
    return positional, len(positional) != len(_named(args))


@functools.lru_cache(maxsize=4096)
def _submodule(module: str, attr: str) -> str | None:
    """The real name of the module ``module.attr`` is, if it is one (imported or importable).

    Only :data:`_INTROSPECTABLE` modules are imported here — trusted standard modules and
    NumPy, which the parent process has loaded anyway. ``find_spec`` locates a lazily
    loaded submodule (``numpy.testing``) without running it.
    """
    mod = importlib.import_module(module)
    value = vars(mod).get(attr)
    if isinstance(value, types.ModuleType):
        return value.__name__
    if hasattr(mod, "__path__"):
        try:
            spec = importlib.util.find_spec(f"{module}.{attr}")
        except (ImportError, ValueError):
            return None
        return spec.name if spec is not None else None
    return None


_ALLOWLIST_TEXT = (
    "import only nki / nki.language / nki.isa / nki.typing (or neuronxcc.nki.*), "
    "numpy, math, functools, itertools, typing, dataclasses, enum"
)


# ---------------------------------------------------------------------------- scopes


@dataclass(eq=False)
class _Binding:
    """One place a name is bound. ``kind``: module, prefix, member, def, class, param, value, loop, target."""

    kind: str
    node: Node
    module: str = ""  # module/prefix: the module; member: the module it was imported from
    member: str = ""  # member: the imported name
    value: Node | None = None  # value/loop: the expression assigned or iterated


@dataclass(eq=False)
class _Scope:
    kind: str  # "module" | "class" | "function" | "comprehension"
    node: Node
    parent: _Scope | None
    names: dict[str, list[_Binding]] = field(default_factory=dict)
    containers: set[str] = field(default_factory=set)  # names bound to a mutable container here

    def bind(self, name: str, binding: _Binding) -> None:
        self.names.setdefault(name, []).append(binding)

    @property
    def home(self) -> _Scope:
        """The function (or module/class body) this scope's code runs in; comprehensions are inlined."""
        scope = self
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return scope


def _params(params: Node, outer: _Scope, scope_of: dict[int, _Scope]) -> None:
    """Parameter names live in the function; defaults and annotations are evaluated outside it."""
    for p in params.children:
        if p.type in ("default_parameter", "typed_default_parameter", "typed_parameter"):
            for i, c in enumerate(p.children):
                if p.field_name_for_child(i) in ("value", "type"):
                    scope_of[c.id] = outer


def _scopes(root: Node) -> tuple[list[tuple[Node, _Scope]], _Scope]:
    """Every node in document order with the scope its code is evaluated in."""
    module = _Scope("module", root, None)
    scope_of: dict[int, _Scope] = {}
    order: list[tuple[Node, _Scope]] = []
    stack: list[tuple[Node, _Scope]] = [(root, module)]
    while stack:
        node, scope = stack.pop()
        scope = scope_of.get(node.id, scope)
        order.append((node, scope))
        push: list[tuple[Node, _Scope]] = []
        t = node.type
        if t in ("function_definition", "lambda"):
            inner = _Scope("function", node, scope)
            for i, c in enumerate(node.children):
                f = node.field_name_for_child(i)
                if f == "parameters":
                    _params(c, scope, scope_of)
                push.append((c, inner if f in ("body", "type_parameters", "parameters") else scope))
        elif t == "class_definition":
            inner = _Scope("class", node, scope)
            for i, c in enumerate(node.children):
                push.append((c, inner if node.field_name_for_child(i) == "body" else scope))
        elif t in _COMPREHENSIONS:
            inner = _Scope("comprehension", node, scope)
            first = next((c for c in node.named_children if c.type == "for_in_clause"), None)
            for c in node.children:
                push.append((c, inner))
                if first is not None and c.id == first.id:
                    right = c.child_by_field_name("right")
                    if right is not None:
                        scope_of[right.id] = scope  # the first iterable is evaluated outside
        else:
            push = [(c, scope) for c in node.children]
        stack.extend(reversed(push))
    return order, module


def _collect_bindings(order: list[tuple[Node, _Scope]]) -> None:
    """Record every name binding in its scope (Python's rule: bound anywhere in a body = local there)."""
    scope_at = {node.id: scope for node, scope in order}

    def bind_targets(target: Node, kind: str, value: Node | None = None) -> None:
        for t in _flatten_targets(target):
            if t.type == "identifier":
                scope_at[t.id].bind(_norm(_text(t)), _Binding(kind, t, value=value))

    for node, scope in order:
        t = node.type
        if t in ("function_definition", "class_definition"):
            name = node.child_by_field_name("name")
            if name is not None:
                scope.bind(_norm(_text(name)), _Binding("def" if t == "function_definition" else "class", name))
        elif t in ("parameters", "lambda_parameters"):
            for p in _named(node):
                ident = p.child_by_field_name("name") if p.type in ("default_parameter", "typed_default_parameter") else p
                for leaf in [ident] if ident is not None and ident.type == "identifier" else _named(ident or p):
                    if leaf.type == "identifier":
                        scope_at[leaf.id].bind(_norm(_text(leaf)), _Binding("param", leaf))
                    elif leaf.type in ("list_splat_pattern", "dictionary_splat_pattern"):
                        for inner in _named(leaf):
                            scope_at[inner.id].bind(_norm(_text(inner)), _Binding("param", inner))
        elif t == "assignment":
            left, value = node.child_by_field_name("left"), node.child_by_field_name("right")
            while value is not None and value.type == "assignment":
                value = value.child_by_field_name("right")
            if left is None:
                continue
            elems_l, elems_r = _named(left), _named(value) if value is not None else []
            if (
                left.type in ("pattern_list", "tuple_pattern")
                and value is not None
                and value.type in ("expression_list", "tuple")
                and len(elems_l) == len(elems_r)
            ):
                for tl, tr in zip(elems_l, elems_r):
                    bind_targets(tl, "value", tr)
            else:
                bind_targets(left, "value" if value is not None else "target", value)
        elif t == "augmented_assignment":
            left = node.child_by_field_name("left")
            if left is not None:
                bind_targets(left, "target")
        elif t in ("delete_statement", "as_pattern_target"):
            for target in _named(node):
                bind_targets(target, "target")
        elif t in ("for_statement", "for_in_clause"):
            left = node.child_by_field_name("left")
            if left is not None:
                bind_targets(left, "loop", node.child_by_field_name("right"))
        elif t == "as_pattern" and node.parent is not None and node.parent.type == "case_pattern":
            alias = node.child_by_field_name("alias")
            if alias is not None:
                bind_targets(alias, "target")
        elif t in ("dotted_name", "splat_pattern") and node.parent is not None and node.parent.type in ("case_pattern", "splat_pattern"):
            parts = _named(node)
            if len(parts) == 1 and parts[0].type == "identifier":
                scope.bind(_norm(_text(parts[0])), _Binding("target", parts[0]))
        elif t == "named_expression":
            name = node.child_by_field_name("name")
            if name is not None:
                scope.home.bind(_norm(_text(name)), _Binding("value", name, value=node.child_by_field_name("value")))
        elif t == "import_statement":
            for item in node.children_by_field_name("name"):
                dotted, alias = (_field(item, "name"), _field(item, "alias")) if item.type == "aliased_import" else (item, None)
                full = _norm(_text(dotted))
                if alias is not None:
                    scope.bind(_norm(_text(alias)), _Binding("module", alias, module=full))
                else:
                    top = full.split(".")[0]
                    scope.bind(top, _Binding("module" if top in ALLOWED_MODULES else "prefix", dotted, module=top))
        elif t == "import_from_statement":
            mod = node.child_by_field_name("module_name")
            base = _norm(_text(mod)) if mod is not None and mod.type == "dotted_name" else ""
            for item in node.children_by_field_name("name"):
                dotted, alias = (_field(item, "name"), _field(item, "alias")) if item.type == "aliased_import" else (item, None)
                member = _norm(_text(dotted))
                full = f"{base}.{member}"
                where = alias if alias is not None else dotted
                if full in ALLOWED_MODULES:
                    scope.bind(_norm(_text(where)), _Binding("module", where, module=full))
                else:
                    scope.bind(_norm(_text(where)), _Binding("member", where, module=base, member=member))
        elif t == "type_alias_statement":
            left = node.child_by_field_name("left")
            if left is not None:
                for ident in (n for n in _named(left) if n.type == "identifier"):
                    scope.bind(_norm(_text(ident)), _Binding("def", ident))


def _decorators(fn: Node) -> list[str]:
    """The decorator expressions of a function or class definition, as written (without ``@``)."""
    holder = fn.parent
    if holder is None or holder.type != "decorated_definition":
        return []
    return [_text(d).lstrip("@").strip() for d in holder.named_children if d.type == "decorator"]


def _reads_only(fn: Node) -> bool:
    """A function body with no assignment to an attribute or item, no ``del`` and no ``global``/``nonlocal``."""
    stack = [fn.child_by_field_name("body")]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        if n.type in ("delete_statement", "global_statement", "nonlocal_statement"):
            return False
        if n.type in ("assignment", "augmented_assignment"):
            left = n.child_by_field_name("left")
            if left is not None and any(t.type in ("attribute", "subscript") for t in _flatten_targets(left)):
                return False
        stack.extend(n.named_children)
    return True


def _plain_methods(cls: Node) -> set[str]:
    """Names of the methods of a class body that take ``self`` (not static or class methods, nor read-only properties)."""
    body = cls.child_by_field_name("body")
    names: set[str] = set()
    for stmt in _named(body) if body is not None else []:
        fn = stmt.child_by_field_name("definition") if stmt.type == "decorated_definition" else stmt
        if fn is not None and fn.type == "function_definition" and "property" in _decorators(fn) and _reads_only(fn):
            continue  # reading it computes a value and changes nothing
        if fn is not None and fn.type == "function_definition" and not {"classmethod", "staticmethod"} & set(_decorators(fn)):
            name = fn.child_by_field_name("name")
            if name is not None:
                names.add(_norm(_text(name)))
    return names


def _is_self_parameter(scope: _Scope, bindings: list[_Binding]) -> bool:
    """The name is the first parameter of a plain method (not a classmethod or staticmethod) of a class body."""
    fn = scope.node
    params = fn.child_by_field_name("parameters") if fn.type == "function_definition" else None
    first = next((p for p in _named(params) if p.type == "identifier"), None) if params is not None else None
    if first is None or len(bindings) != 1 or bindings[0].node.id != first.id:
        return False
    holder = fn.parent.parent if fn.parent is not None and fn.parent.type == "decorated_definition" else fn.parent
    in_class = holder is not None and holder.type == "block" and holder.parent is not None and holder.parent.type == "class_definition"
    return in_class and not {"classmethod", "staticmethod"} & set(_decorators(fn))


# ---------------------------------------------------------------------------- the checker


class _Checker:
    """One kernel's analysis: scopes, value classes, then every rule over every node."""

    def __init__(self, source: bytes, root: Node, filename: str) -> None:
        self.lines = source.split(b"\n")
        self.filename = filename
        self.violations: list[Violation] = []
        self.order, self.module = _scopes(root)
        _collect_bindings(self.order)
        self.scope_at = {node.id: scope for node, scope in self.order}
        self.idents: dict[str, list[Node]] = {}
        for node, _ in self.order:
            if node.type == "identifier":
                self.idents.setdefault(_norm(_text(node)), []).append(node)
        self._mark_containers()
        self.module_class = self._classify_module_names()

    # -- reporting

    def report(self, rule: str, node: Node, message: str) -> None:
        row, col_bytes = node.start_point
        line = self.lines[row] if row < len(self.lines) else b""
        col = len(line[:col_bytes].decode("utf-8", errors="replace")) + 1
        self.violations.append(Violation(rule, message, row + 1, col))

    def at(self, node: Node) -> str:
        return f"{self.filename}:{node.start_point[0] + 1}"

    # -- name resolution

    def lookup(self, name: str, scope: _Scope) -> tuple[_Scope | None, list[_Binding]]:
        """Python's rule: the innermost function scope binding ``name``; class bodies only see their own names."""
        s: _Scope | None = scope
        while s is not None:
            if (s.kind != "class" or s is scope) and name in s.names:
                return s, s.names[name]
            s = s.parent
        return None, []

    def where(self, name: str, scope: _Scope) -> str:
        """``local`` (this function's), ``enclosing`` (a closure's), ``global`` (module or class) or ``builtin``."""
        s, _ = self.lookup(name, scope)
        if s is None:
            return "builtin"
        if s.kind in ("module", "class"):
            return "global"
        return "local" if s.home is scope.home else "enclosing"

    def only_called(self, fn_scope: _Scope) -> bool:
        """The function ``fn_scope`` defines is only ever called in the scope that defines it: never returned,
        stored, passed, decorated or used as a decorator, so it cannot outlive that scope's call."""
        fn = fn_scope.node
        name_node = fn.child_by_field_name("name") if fn.type == "function_definition" else None
        if name_node is None or _decorators(fn) or fn_scope.parent is None:
            return False
        name = _norm(_text(name_node))
        owner, bindings = self.lookup(name, fn_scope.parent)
        if len(bindings) != 1 or bindings[0].node.id != name_node.id:
            return False
        for ident in self.idents.get(name, []):
            if ident.id == name_node.id or self.lookup(name, self.scope_at[ident.id])[0] is not owner:
                continue
            parent = ident.parent
            if parent is None or parent.type != "call" or parent.child_by_field_name("function") != ident:
                return False
        return True

    def contained(self, scope: _Scope, owner: _Scope | None) -> bool:
        """Closure state of ``owner`` changed from ``scope`` dies with ``owner``'s call: every function from
        ``scope`` out to ``owner`` is only called where it is defined (see :meth:`only_called`)."""
        s: _Scope | None = scope.home
        while s is not None and s is not owner:
            if s.kind != "function" or not self.only_called(s):
                return False
            s = s.parent.home if s.parent is not None else None
        return owner is not None and s is owner and owner.kind == "function"

    def module_binding(self, ident: Node) -> _Binding | None:
        """The import binding ``ident`` refers to, if it names a module."""
        _, bindings = self.lookup(_norm(_text(ident)), self.scope_at[ident.id])
        return next((b for b in bindings if b.kind in ("module", "prefix")), None)

    def module_path(self, expr: Node) -> str | None:
        """The module ``expr`` evaluates to (``nl``, ``neuronxcc.nki.language``), or None if it is not one."""
        attrs: list[str] = []
        expr = _unparen(expr)
        while expr.type == "attribute":
            attrs.append(_norm(_text(_field(expr, "attribute"))))
            expr = _unparen(_field(expr, "object"))
        if expr.type != "identifier":
            return None
        binding = self.module_binding(expr)
        if binding is None:
            return None
        path = binding.module
        for attr in reversed(attrs):
            full = f"{path}.{attr}"
            if full not in ALLOWED_MODULES and full not in PREFIXES:
                return None
            path = full
        return path

    def in_function(self, scope: _Scope) -> bool:
        return scope.home.kind == "function"

    # -- value classes: "const", "container" (mutable container) or "other" (opaque, maybe stateful)

    def is_container(self, expr: Node) -> bool:
        stack = [expr]
        while stack:
            n = _unparen(stack.pop())
            if n.type in _CONTAINER_DISPLAYS:
                return True
            if n.type in ("conditional_expression", "boolean_operator"):
                stack.extend(_named(n))
            elif n.type == "call":
                fn = _unparen(_field(n, "function"))
                if (
                    fn.type == "identifier"
                    and _norm(_text(fn)) in _MUTABLE_BUILTINS
                    and self.where(_norm(_text(fn)), self.scope_at[fn.id]) == "builtin"
                ):
                    return True
                if (
                    fn.type == "attribute"
                    and self.module_path(_field(fn, "object")) == "numpy"
                    and _norm(_text(_field(fn, "attribute"))) in _NUMPY_ARRAY_CONSTRUCTORS
                ):
                    return True
        return False

    def value_class(self, expr: Node, deps: list[str] | None = None) -> str:
        """Whether ``expr`` is built only from constants (numbers, strings, tuples, dtypes, NKI/math calls).

        Module-level names it uses are appended to ``deps`` when given (the caller propagates
        their classes); otherwise their computed class counts.
        """
        if self.is_container(expr):
            return "container"
        stack: list[tuple[Node, bool]] = [(expr, False)]
        while stack:
            n, scalar_only = stack.pop()
            t = n.type
            if not n.is_named or t in _EXTRAS or t in ("integer", "float", "true", "false", "none", "ellipsis", "lambda"):
                continue
            if t in ("string_start", "string_content", "string_end", "escape_sequence", "type_conversion", "escape_interpolation"):
                continue
            if t == "tuple" and scalar_only:
                return "other"
            if t in _CONSTANT_STRUCTURE:
                stack.extend((c, scalar_only) for c in n.children)
            elif t == "keyword_argument":
                value = n.child_by_field_name("value")
                if value is not None:
                    stack.append((value, scalar_only))
            elif t == "attribute":
                stack.append((_field(n, "object"), scalar_only))
            elif t == "call":
                fn = _unparen(_field(n, "function"))
                args = n.child_by_field_name("arguments")
                numpy_call = False
                if fn.type == "identifier":
                    name = _norm(_text(fn))
                    if name not in _CONSTANT_BUILTINS or self.where(name, self.scope_at[fn.id]) != "builtin":
                        return "other"
                elif fn.type == "attribute":
                    mod = self.module_path(_field(fn, "object"))
                    attr = _norm(_text(_field(fn, "attribute")))
                    if mod == "numpy" and attr not in _NUMPY_ARRAY_CONSTRUCTORS:
                        numpy_call = True
                    elif mod is None or not (mod in NKI_MODULES or mod == "math"):
                        return "other"
                else:
                    return "other"
                if args is not None and args.type == "generator_expression":
                    stack.extend((c, scalar_only or numpy_call) for c in args.children)  # `tuple(x for x in …)`: consumed at once
                elif args is not None:
                    stack.append((args, scalar_only or numpy_call))
            elif t == "identifier":
                cls = self.name_class(n, deps)
                if cls != "const":
                    return "other"
            else:
                return "other"
        return "const"

    def name_class(self, ident: Node, deps: list[str] | None) -> str:
        name = _norm(_text(ident))
        s, bindings = self.lookup(name, self.scope_at[ident.id])
        if s is None or any(b.kind in ("module", "prefix", "def", "class") for b in bindings):
            return "const"
        if s.kind == "module":
            if deps is not None:
                deps.append(name)
                return "const"
            return self.module_class.get(name, "const")
        return "other" if name in s.containers else "const"

    def _mark_containers(self) -> None:
        """Names each scope binds to a mutable container (what a default value may not alias)."""
        for scope in {id(s): s for _, s in self.order}.values():
            for name, bindings in scope.names.items():
                if any(b.kind == "value" and b.value is not None and self.is_container(b.value) for b in bindings):
                    scope.containers.add(name)

    def _classify_module_names(self) -> dict[str, str]:
        """Module-level names → const/container/other; a name built from a non-constant one is not constant."""
        base: dict[str, str] = {}
        users: dict[str, set[str]] = {}
        for name, bindings in self.module.names.items():
            cls = "const"
            for b in bindings:
                if b.kind in ("module", "prefix", "def", "class", "member"):
                    continue
                if b.value is None:
                    continue  # `del X`, `X += …`, `X: int`: the kind of object stays what the other bindings made it
                deps: list[str] = []
                c = self.value_class(b.value, deps)
                if b.kind == "loop" and c == "container":
                    c = "other"  # the loop variable is an element of the container, not the container
                for d in deps:
                    users.setdefault(d, set()).add(name)
                if c == "container" or (c == "other" and cls == "const"):
                    cls = c
            base[name] = cls
        work = [n for n, c in base.items() if c != "const"]
        while work:
            for user in users.get(work.pop(), ()):
                if base.get(user) == "const":
                    base[user] = "other"
                    work.append(user)
        return base

    # -- the rules

    def run(self) -> list[Violation]:
        handlers = {
            "identifier": self.check_identifier,
            "attribute": self.check_attribute,
            "call": self.check_call,
            "import_statement": self.check_import,
            "import_from_statement": self.check_import,
            "try_statement": self.check_try,
            "with_statement": self.check_with,
            "global_statement": self.check_global,
            "nonlocal_statement": self.check_global,
            "assignment": self.check_assignment,
            "augmented_assignment": self.check_assignment,
            "delete_statement": self.check_assignment,
            "for_statement": self.check_assignment,
            "for_in_clause": self.check_assignment,
            "as_pattern_target": self.check_assignment,
            "class_definition": self.check_class,
            "default_parameter": self.check_default,
            "typed_default_parameter": self.check_default,
            "keyword_pattern": self.check_keyword_pattern,
        }
        script_only = self.script_only_nodes()
        for node, scope in self.order:
            handler = handlers.get(node.type)
            if handler is not None and node.id not in script_only:
                handler(node, scope)
        return self.violations

    def script_only_nodes(self) -> set[int]:
        """Nodes of the body of a module-level ``if __name__ == "__main__":`` (not its ``else``), which never runs in
        the worker (it imports the kernel under another name and kernels cannot rename it): a self-test there may
        use anything a script may (``numpy.random``, ``numpy.testing`` …)."""
        out: set[int] = set()
        for node, _ in self.order:
            if node.type == "if_statement" and node.parent is not None and node.parent.type == "module":
                cond = node.child_by_field_name("condition")
                body = node.child_by_field_name("consequence")
                if cond is not None and body is not None and self.is_main_guard(_unparen(cond)):
                    out |= {n.id for n in _walk(body)}
        return out

    # identifiers

    def check_identifier(self, node: Node, scope: _Scope) -> None:
        parent = node.parent
        assert parent is not None
        pt = parent.type
        if (pt == "attribute" and _is_field(parent, "attribute", node)) or (pt == "keyword_argument" and _is_field(parent, "name", node)):
            return  # an attribute name or a keyword: not a reference
        if pt in ("global_statement", "nonlocal_statement", "keyword_pattern"):
            return  # reported by their own rules
        if pt == "dotted_name":
            holder = parent.parent
            if holder is not None and (holder.type in _IMPORTS or holder.type in ("aliased_import", "relative_import")):
                return  # module paths in imports: the import rule
            if node.id != parent.named_children[0].id:
                self.check_attribute_name(node, _norm(_text(node)))  # `case a.b.c:` looks attributes up
                return
        name = _norm(_text(node))
        if is_dunder(name):
            self.check_dunder_name(node, name, parent)
            return
        where = self.where(name, scope)
        if name in FORBIDDEN_BUILTINS and where in ("global", "builtin"):
            self.report("forbidden-call", node, f"`{name}` is not allowed in a kernel: {FORBIDDEN_BUILTINS[name]}")
            return
        is_callee = pt == "call" and _is_field(parent, "function", node)
        if where == "builtin" and name in _ATTRIBUTE_FUNCTIONS and not is_callee:
            self.report(
                "forbidden-call", node, f"`{name}` may only be called directly with a string literal name; write `obj.name` instead"
            )
            return
        if where == "builtin" and name == "type" and not is_callee:
            self.report("forbidden-call", node, "`type` may only be called as `type(x)`; compare dtypes and shapes instead of classes")
            return
        if pt == "aliased_import":
            return
        if self.module_binding(node) is not None:
            if not (pt == "attribute" and _is_field(parent, "object", node)) and not self.is_attribute_function_target(node):
                self.report(
                    "forbidden-import", node, f"module `{name}` may only be used as `{name}.member`; do not bind, pass or replace a module"
                )
            return
        if self.in_function(scope):
            member = self.resolve_member(node)
            if member is not None and member[0] == "numpy" and member[1] in HOST_COMPUTE_NUMPY:
                self.report_host_numpy(node, member[1])
                return
        if self.in_function(scope) and where == "global":
            self.check_state_use(node, name, scope)

    def is_attribute_function_target(self, node: Node) -> bool:
        """``node`` is the object argument of ``getattr``/``setattr``/…, which :meth:`check_attribute_function` judges."""
        parent = node.parent
        call = parent.parent if parent is not None and parent.type == "argument_list" else None
        if call is None or call.type != "call":
            return False
        fn = _unparen(_field(call, "function"))
        positional, _ = _positional_args(call)
        return (
            fn.type == "identifier"
            and _norm(_text(fn)) in _ATTRIBUTE_FUNCTIONS
            and self.where(_norm(_text(fn)), self.scope_at[fn.id]) == "builtin"
            and bool(positional)
            and positional[0].id == node.id
        )

    def check_dunder_name(self, node: Node, name: str, parent: Node) -> None:
        if name == "__name__" and self.is_main_guard(parent):
            return
        if (
            name == "__all__"
            and parent.type == "assignment"
            and _is_field(parent, "left", node)
            and self.scope_at[node.id].kind == "module"
        ):
            return
        if parent.type == "function_definition" and _is_field(parent, "name", node):
            holder = parent.parent
            if holder is not None and holder.type == "decorated_definition":
                holder = holder.parent
            in_class = (
                holder is not None and holder.type == "block" and holder.parent is not None and holder.parent.type == "class_definition"
            )
            if in_class and name in _ALLOWED_DUNDER_METHODS:
                return
            self.report(
                "dunder-attribute",
                node,
                f"defining `{name}` changes how the harness's own operations (comparison, conversion, pickling, cleanup) "
                "treat the kernel's objects; a kernel's classes may define only "
                + ", ".join(f"`{d}`" for d in sorted(_ALLOWED_DUNDER_METHODS)),
            )
            return
        if name in INTROSPECTION_ATTRIBUTES and name != "__builtins__":
            self.report(
                "introspection", node, f"`{name}` reaches frames, code or the class graph; kernels use only their arguments and NKI"
            )
            return
        if name == "__import__":
            self.report("forbidden-call", node, f"`__import__` bypasses the import allowlist; {_ALLOWLIST_TEXT}")
            return
        self.report(
            "forbidden-call",
            node,
            f"the interpreter name `{name}` is not available to kernels (the one exception is a module-level "
            '`if __name__ == "__main__":`); use the kernel\'s arguments and NKI',
        )

    def is_main_guard(self, comparison: Node) -> bool:
        """``if __name__ == "__main__":`` at module level, exactly."""
        if comparison.type != "comparison_operator":
            return False
        cond_holder = comparison.parent
        if cond_holder is None or cond_holder.type != "if_statement" or not _is_field(cond_holder, "condition", comparison):
            return False
        if cond_holder.parent is None or cond_holder.parent.type != "module":
            return False
        operands = _named(comparison)
        ops = [c.type for c in comparison.children if not c.is_named]
        return len(operands) == 2 and ops == ["=="] and _literal_str(operands[1]) == "__main__"

    def instance_methods(self, name: str) -> set[str]:
        """The methods of this file's classes that module-level ``name`` may be an instance of."""
        methods: set[str] = set()
        for b in self.module.names.get(name, []):
            value = _unparen(b.value) if b.kind == "value" and b.value is not None else None
            cls = _unparen(_field(value, "function")) if value is not None and value.type == "call" else None
            if cls is not None and cls.type == "identifier":
                for c in self.lookup(_norm(_text(cls)), self.scope_at[cls.id])[1]:
                    if c.kind == "class" and c.node.parent is not None:
                        methods |= _plain_methods(c.node.parent)
        return methods

    def is_partial(self, name: str) -> bool:
        """Module-level ``name`` is bound once, to ``functools.partial(...)``."""
        bindings = self.module.names.get(name, [])
        if len(bindings) != 1 or bindings[0].kind != "value" or bindings[0].value is None:
            return False
        value = _unparen(bindings[0].value)
        return value.type == "call" and self.resolve_member(_field(value, "function")) == ("functools", "partial")

    def check_state_use(self, node: Node, name: str, scope: _Scope) -> None:
        """A module-level container or object, read inside a function: only plain reads are allowed."""
        cls = self.module_class.get(name, "const")
        if cls == "const":
            return
        child, parent = _outer(node)
        pt = parent.type
        ok = False
        if pt == "attribute" and _is_field(parent, "object", child):
            attr = _norm(_text(_field(parent, "attribute")))
            grand = parent.parent
            called = grand is not None and grand.type == "call" and _is_field(grand, "function", parent)
            if attr in _MUTATING_METHODS or attr in self.instance_methods(name):
                ok = False  # a bound method, called now or later, can change the object
            else:
                ok = attr in _READONLY_METHODS if called else True
        elif (pt == "subscript" and _is_field(parent, "value", child)) or pt in _READING_PARENTS:
            ok = True
        elif pt in ("for_statement", "for_in_clause") and _is_field(parent, "right", child):
            ok = cls == "container"
        elif pt == "call" and _is_field(parent, "function", child) and self.is_partial(name):
            ok = True  # calling a partial bound to constants (checked where it is made) changes nothing
        elif pt in ("argument_list", "keyword_argument"):
            args = parent if pt == "argument_list" else parent.parent
            call = args.parent if args is not None else None
            if call is not None and call.type == "call":
                fn = _unparen(_field(call, "function"))
                if fn.type == "attribute":
                    ok = (self.module_path(_field(fn, "object")) or "") in NKI_MODULES
                elif fn.type == "identifier" and self.where(_norm(_text(fn)), self.scope_at[fn.id]) == "builtin":
                    fname = _norm(_text(fn))
                    ok = fname in _READONLY_BUILTINS or (fname in _ITERATING_BUILTINS and cls == "container")
        if not ok:
            kind = "container" if cls == "container" else "object"
            defined = self.module.names[name][0].node
            self.report(
                "global-state",
                node,
                f"module-level {kind} `{name}` (defined at {self.at(defined)}) is used here in a way that could keep or change it "
                "between calls; inside functions only read it (`X[i]`, `X.attr`, `for a in X`, arithmetic), or make it a tuple/constant",
            )

    # attributes

    def check_attribute(self, node: Node, scope: _Scope) -> None:
        attr_node = node.child_by_field_name("attribute")
        obj = node.child_by_field_name("object")
        if attr_node is None or obj is None:
            return
        self.check_access(obj, attr_node, _norm(_text(attr_node)), scope)

    def check_access(self, obj: Node, node: Node, attr: str, scope: _Scope) -> None:
        """Reading ``obj.attr``, written as an attribute or as ``getattr(obj, "attr")``; reported at ``node``."""
        attr_node = node
        if not self.check_attribute_name(attr_node, attr):
            return
        module = self.module_path(obj)
        if module is not None:
            self.check_member(attr_node, module, attr)
        self.check_class_member(obj, attr_node, attr)
        if attr in ("format", "format_map"):
            self.check_format(attr_node, obj)
        if attr in FORBIDDEN_ATTRIBUTES:
            self.report("forbidden-call", attr_node, f"`.{attr}` is not allowed: {FORBIDDEN_ATTRIBUTES[attr]}")
        if self.in_function(scope):
            if attr in HOST_COMPUTE_METHODS:
                self.report("host-compute", attr_node, f"`.{attr}()` pulls values to the host; keep the data in tiles and use NKI ops")
            elif module == "numpy" and attr in HOST_COMPUTE_NUMPY:
                self.report_host_numpy(attr_node, attr)

    def constant_table(self, node: Node) -> bool:
        """``node`` (``np.f`` or an alias of it) is called with arguments built only from literals, module-level
        constants and calls on them: a table the trace needs (``nl.shared_constant(np.identity(128))``), not data."""
        call = node
        while call.parent is not None and call.type != "call":
            if call.type not in ("attribute", "identifier"):
                return False
            call = call.parent
        fn = call.child_by_field_name("function") if call.type == "call" else None
        if fn is None or not (fn.id == node.id or (node.parent is not None and fn.id == node.parent.id)):
            return False
        args = call.child_by_field_name("arguments")
        stack = list(_named(args)) if args is not None else []
        while stack:
            n = stack.pop()
            if n.type == "identifier":
                parent = n.parent
                if parent is not None and ((parent.type == "attribute" and _is_field(parent, "attribute", n))
                                           or (parent.type == "keyword_argument" and _is_field(parent, "name", n))):
                    continue
                name = _norm(_text(n))
                scope, bindings = self.lookup(name, self.scope_at[n.id])
                if scope is None:
                    if name not in _CONSTANT_BUILTINS:
                        return False
                elif scope.kind != "module":
                    return False  # a local or a parameter: could be a tile or a value read from one
                elif not any(b.kind in ("module", "prefix", "member") for b in bindings) and self.module_class.get(name, "const") != "const":
                    return False
            elif n.type in ("lambda", "named_expression", "await", "yield"):
                return False
            stack.extend(_named(n))
        return True

    def report_host_numpy(self, node: Node, name: str) -> None:
        if name in _NUMPY_ARRAY_CONSTRUCTORS and self.constant_table(node):
            return
        self.report(
            "host-compute",
            node,
            f"`numpy.{name}` inside a function builds or reads host arrays; a kernel's data lives in tiles: "
            "use nl.ndarray, NKI loads, ops and stores",
        )

    def check_class_member(self, obj: Node, node: Node, attr: str) -> None:
        """``C.method`` lets any object stand in for ``self``; ``type(x).attr`` reaches a class from an object."""
        obj = _unparen(obj)
        if obj.type == "call":
            fn = _unparen(_field(obj, "function"))
            if fn.type == "identifier" and _norm(_text(fn)) == "type" and self.where("type", self.scope_at[fn.id]) == "builtin":
                self.report("introspection", node, "`type(x).attr` reaches the class behind an object; use the object's own attributes")
            return
        if obj.type != "identifier":
            return
        _, bindings = self.lookup(_norm(_text(obj)), self.scope_at[obj.id])
        classes = [b.node.parent for b in bindings if b.kind == "class" and b.node.parent is not None]
        if any(attr in _plain_methods(c) for c in classes):
            self.report(
                "global-state",
                node,
                f"`.{attr}` is a method reached through its class, so any object can be passed as `self` and have its "
                "attributes set; call methods on instances (`obj.method()`)",
            )

    def check_attribute_name(self, node: Node, attr: str) -> bool:
        """Introspection, dunder and private attribute names; False when one was reported."""
        if attr in INTROSPECTION_ATTRIBUTES:
            self.report(
                "introspection", node, f"`.{attr}` reaches frames, code or the class graph; kernels use only their arguments and NKI"
            )
        elif is_dunder(attr):
            self.report(
                "dunder-attribute",
                node,
                f"`.{attr}` is interpreter machinery; use the object's public API (for tensors: .shape, .dtype, indexing)",
            )
        elif attr.startswith("_"):
            self.report(
                "private-attribute", node, f"`.{attr}` is private; use the public NKI API (tensors expose .shape, .dtype and indexing)"
            )
        else:
            return True
        return False

    def check_member(self, node: Node, module: str, attr: str) -> None:
        """``module.attr`` reached by attribute, ``getattr`` or ``from module import attr``."""
        full = f"{module}.{attr}"
        if full in ALLOWED_MODULES or full in PREFIXES:
            return
        if module in PREFIXES:
            self.report("unknown-import", node, f"`{full}` is not on the kernel import allowlist; {_ALLOWLIST_TEXT}")
            return
        special = _MEMBER_RULES.get((module, attr))
        if special is not None:
            self.report(special[0], node, f"`{full}` is not allowed: {special[1]}")
            return
        if module in _INTROSPECTABLE:
            real = _submodule(module, attr)
            if real is not None:
                verdicts = {(module_verdict(n) or ("unknown-import", ""))[0] for n in (full, real)}
                rule = "forbidden-import" if "forbidden-import" in verdicts else "unknown-import"
                what = f"`{full}` is a module" if real == full else f"`{full}` is the module `{real}`"
                self.report(rule, node, f"{what}, which kernels may not use; {_ALLOWLIST_TEXT}")

    def check_format(self, node: Node, receiver: Node) -> None:
        """``str.format`` fields can read attributes (``"{0.__class__}"``): only literal templates, no ``._`` fields."""
        template = _literal_str(receiver)
        if template is None:
            self.report(
                "forbidden-call", node, "`.format` with a template that is not a string literal can read any attribute; use an f-string"
            )
            return
        for fld in _FORMAT_FIELD.findall(template):
            name = re.split(r"[!:]", fld, maxsplit=1)[0]
            if re.search(r"\.\s*__", name):
                self.report("dunder-attribute", node, "a format field reads a dunder attribute; use an f-string with public names")
            elif re.search(r"\.\s*_", name):
                self.report("private-attribute", node, "a format field reads a private attribute; use an f-string with public names")

    def check_keyword_pattern(self, node: Node, scope: _Scope) -> None:
        """``case C(attr=...)`` reads ``attr`` from the subject."""
        names = [c for c in node.named_children if c.type == "identifier"]
        if names:
            self.check_attribute_name(names[0], _norm(_text(names[0])))

    # calls

    def check_call(self, node: Node, scope: _Scope) -> None:
        fn = _unparen(_field(node, "function"))
        member = self.resolve_member(fn)
        if member is not None and member[0] in NKI_MODULES and member[1] in NKI_TYPES_ONLY:
            self.report("forbidden-call", fn, f"`{member[1]}` is exported for isinstance checks; allocate tensors with `nl.ndarray`")
        if member in (("functools", "partial"), ("functools", "partialmethod")):
            args = node.child_by_field_name("arguments")
            bound = (
                [_unparen(a.child_by_field_name("value") or a) if a.type == "keyword_argument" else a for a in _named(args)[1:]]
                if args is not None
                else []
            )
            for arg in bound:
                if self.value_class(arg) != "const":
                    self.report(
                        "global-state",
                        arg,
                        "`functools.partial` keeps this object and hands the same one to every call; bind constants only",
                    )
        if fn.type == "identifier":
            name = _norm(_text(fn))
            if self.where(name, self.scope_at[fn.id]) != "builtin":
                return
            if name in _ATTRIBUTE_FUNCTIONS:
                self.check_attribute_function(node, fn, name, scope)
            elif name == "type":
                positional, extra = _positional_args(node)
                if len(positional) != 1 or extra:
                    self.report("forbidden-call", fn, "`type(name, bases, dict)` creates classes at run time; define classes with `class`")
        elif fn.type == "attribute":
            method = _norm(_text(_field(fn, "attribute")))
            obj = _field(fn, "object")
            # a module's function is no container method: `nl.add(x, y)` adds tiles, it changes nothing in `nl`
            if method in _MUTATING_METHODS and (self.module_path(obj) or "") not in NKI_MODULES:
                self.check_item_write(obj, fn, f"`.{method}()`")

    def check_attribute_function(self, call: Node, fn: Node, name: str, scope: _Scope) -> None:
        positional, _ = _positional_args(call)
        literal = _literal_str(positional[1]) if len(positional) >= 2 else None
        if literal is None or is_dunder(literal):
            self.report(
                "forbidden-call", fn, f"`{name}` needs a plain, non-dunder string literal as the attribute name; write `obj.name` instead"
            )
            return
        self.check_access(positional[0], positional[1], literal, scope)
        if name in ("setattr", "delattr"):
            self.check_attribute_write(positional[0], fn)

    # -- writes: what may be changed

    def shared_origin(self, root: Node) -> str | None:
        """Where the object ``root`` names comes from, when that makes it shared between calls.

        ``"module"``: an imported module or an object taken from one (``state = nl.tile_size``);
        ``"global"``: a module-level container or object; ``"enclosing"``: a closure variable.
        Local names are followed through their assignments (``x = TABLE[0]``), so one alias
        more does not hide the origin; a call's result is a new object and ends the trail
        (except ``getattr``, which is an attribute read).
        """
        stack, seen = [root], set()
        while stack:
            n = _unparen(stack.pop())
            if n.type in ("attribute", "subscript"):
                stack.append(_chain_root(n))
            elif n.type == "call":
                fn = _unparen(_field(n, "function"))
                positional, _ = _positional_args(n)
                if fn.type == "identifier" and _norm(_text(fn)) == "getattr" and positional:
                    stack.append(positional[0])
            elif n.type == "identifier" and n.id not in seen:
                seen.add(n.id)
                if self.module_binding(n) is not None:
                    return "module"
                name = _norm(_text(n))
                where = self.where(name, self.scope_at[n.id])
                if where == "enclosing":
                    return "enclosing"
                if where == "global" and self.module_class.get(name, "const") != "const":
                    return "global"
                if where == "local":
                    _, bindings = self.lookup(name, self.scope_at[n.id])
                    stack.extend(b.value for b in bindings if b.kind in ("value", "loop") and b.value is not None)
        return None

    def resolve_member(self, expr: Node) -> tuple[str, str] | None:
        """``(module, name)`` when ``expr`` is a module member, reached directly (``np.zeros``), by
        ``from numpy import zeros`` or through plain aliases (``Z = np.zeros``)."""
        seen: set[int] = set()
        while True:
            expr = _unparen(expr)
            if expr.type == "attribute":
                module = self.module_path(_field(expr, "object"))
                return (module, _norm(_text(_field(expr, "attribute")))) if module is not None else None
            if expr.type != "identifier" or expr.id in seen:
                return None
            seen.add(expr.id)
            _, bindings = self.lookup(_norm(_text(expr)), self.scope_at[expr.id])
            member = next((b for b in bindings if b.kind == "member"), None)
            if member is not None:
                return member.module, member.member
            values = [b.value for b in bindings if b.kind == "value" and b.value is not None]
            if len(bindings) != 1 or len(values) != 1:
                return None
            expr = values[0]

    def is_own_object(self, ident: Node) -> bool:
        """``self`` of a method of this file's classes, or a name bound only to new instances of them."""
        scope, bindings = self.lookup(_norm(_text(ident)), self.scope_at[ident.id])
        if scope is None or not bindings:
            return False
        if scope.kind == "function" and _is_self_parameter(scope, bindings):
            return True
        if self.in_function(self.scope_at[ident.id]) and self.where(_norm(_text(ident)), self.scope_at[ident.id]) != "local":
            return False  # an instance kept outside this call is shared state
        for b in bindings:
            value = _unparen(b.value) if b.kind == "value" and b.value is not None else None
            if value is None or value.type != "call":
                return False
            cls = _unparen(_field(value, "function"))
            if cls.type != "identifier" or not any(c.kind == "class" for c in self.lookup(_norm(_text(cls)), self.scope_at[cls.id])[1]):
                return False
        return True

    def report_patch(self, node: Node, root: Node) -> None:
        self.report(
            "global-state",
            node,
            f"this changes `{_norm(_text(root))}`, which belongs to an imported module the harness shares "
            "(timers, comparisons, the NKI API); never modify a module or an object taken from one",
        )

    def check_attribute_write(self, obj: Node, node: Node) -> None:
        """``obj.attr = …``, ``del obj.attr``, ``setattr(obj, …)``: only on ``self`` or a new instance of this file's classes."""
        root = _chain_root(obj)
        if self.shared_origin(root) == "module":
            self.report_patch(node, root)
            return
        obj = _unparen(obj)
        if obj.type == "identifier" and self.is_own_object(obj):
            return
        self.report(
            "global-state",
            node,
            "attributes may be set only on `self` in a method, or on a new instance of a class defined in this file; "
            "other objects (functions, classes, NKI objects, call results) are shared and keep state between calls",
        )

    def check_item_write(self, obj: Node, node: Node, what: str) -> None:
        """``obj[i] = …`` or ``obj.append(…)``: never on module objects; inside functions only on the
        function's own objects (not module-level state, closure variables, call results, or aliases of them)."""
        root = _chain_root(obj)
        origin = self.shared_origin(root)
        if origin == "module":
            self.report_patch(node, root)
            return
        if not self.in_function(self.scope_at[node.id]):
            return
        if root.type == "call":
            self.report("global-state", node, f"{what} changes the result of a call, which may be shared state; assign it to a local first")
            return
        if root.type != "identifier":
            return
        name = _norm(_text(root))
        where = self.where(name, self.scope_at[root.id])
        if where == "local" and origin is None:
            return
        if where == "enclosing" and origin == "enclosing" and self.contained(self.scope_at[node.id], self.lookup(name, self.scope_at[root.id])[0]):
            return  # a per-call container of the enclosing function, changed by a helper that never leaves that call
        if "enclosing" in (where, origin):
            self.report(
                "global-state",
                node,
                f"{what} changes `{name}`, a closure variable of an enclosing function (or an alias of one), from a function "
                "that leaves that call (returned, stored, passed on or decorated), so the state outlives the call: keep the "
                "helper to plain calls inside the function that owns the variable, or pass values in and return results",
            )
        else:
            self.report(
                "global-state",
                node,
                f"{what} changes `{name}`, which is (or aliases) module-level state, from inside a function, so it survives "
                "between calls; keep per-call data in local variables",
            )

    # imports

    def check_import(self, node: Node, scope: _Scope) -> None:
        if node.type == "import_statement":
            for item in node.children_by_field_name("name"):
                dotted = _field(item, "name") if item.type == "aliased_import" else item
                verdict = module_verdict(_norm(_text(dotted)))
                if verdict is not None:
                    self.report(verdict[0], dotted, f"{verdict[1]}; {_ALLOWLIST_TEXT}")
            return
        mod = node.child_by_field_name("module_name")
        if mod is None or mod.type != "dotted_name":
            self.report("unknown-import", node, "relative imports reach other files; a kernel is one self-contained file")
            return
        base = _norm(_text(mod))
        if any(c.type == "wildcard_import" for c in node.children):
            self.report("forbidden-import", node, f"`from {base} import *` hides which names the kernel uses; import names explicitly")
            return
        names = node.children_by_field_name("name")
        if base not in ALLOWED_MODULES and not all(f"{base}.{_norm(_text(self.import_name(n)))}" in ALLOWED_MODULES for n in names):
            verdict = module_verdict(base) or ("unknown-import", f"`{base}` is not on the kernel import allowlist")
            self.report(verdict[0], mod, f"{verdict[1]}; {_ALLOWLIST_TEXT}")
            return
        for item in names:
            dotted = self.import_name(item)
            name = _norm(_text(dotted))
            if f"{base}.{name}" in ALLOWED_MODULES:
                continue
            if self.check_attribute_name(dotted, name):
                self.check_member(dotted, base, name)

    @staticmethod
    def import_name(item: Node) -> Node:
        name = item.child_by_field_name("name") if item.type == "aliased_import" else None
        return name if name is not None else item

    # exceptions and context managers

    def check_try(self, node: Node, scope: _Scope) -> None:
        for clause in node.named_children:
            if clause.type == "except_clause":  # `except*` too
                body = next((c for c in reversed(clause.named_children) if c.type == "block"), None)
                stmts = _named(body) if body is not None else []
                if not stmts or stmts[-1].type != "raise_statement":
                    self.report(
                        "swallowed-exception",
                        clause,
                        "an `except` clause must end with `raise` (bare, or `raise X from e`); "
                        "errors around kernel work may not be swallowed or replaced by a fallback",
                    )
                    continue
                disguised = self.disguised_raise(clause)
                if disguised is not None:
                    self.report(
                        "swallowed-exception",
                        disguised[0],
                        f"an `except` clause may not re-raise as `{disguised[1]}`: hasattr(), 3-argument getattr() and "
                        "iteration silently swallow it, which hides errors around kernel work",
                    )
                    continue
                escape = self.escapes(clause, ("return_statement", "yield", "break_statement", "continue_statement"))
                if escape is not None:
                    self.report(
                        "swallowed-exception",
                        escape,
                        f"`{escape.type.split('_')[0]}` inside an `except` clause skips the `raise`; let the error propagate",
                    )
            elif clause.type == "finally_clause":
                escape = self.escapes(clause, ("return_statement", "break_statement", "continue_statement"))
                if escape is not None:
                    self.report(
                        "swallowed-exception",
                        escape,
                        f"`{escape.type.split('_')[0]}` in `finally` discards the exception in flight; move it out of `finally`",
                    )

    def disguised_raise(self, clause: Node) -> tuple[Node, str] | None:
        """A ``raise`` in ``clause`` of an exception that Python itself swallows (not counting nested functions)."""
        stack = list(reversed(clause.named_children))
        while stack:
            n = stack.pop()
            if n.type in ("function_definition", "lambda", "class_definition"):
                continue
            if n.type == "raise_statement":
                raised = next(iter(_named(n)), None)
                if raised is not None and raised.type == "call":
                    raised = raised.child_by_field_name("function")
                name = _text(raised).rsplit(".", 1)[-1] if raised is not None else ""
                if name in SWALLOWED_BY_PYTHON:
                    return n, name
            stack.extend(reversed(n.named_children))
        return None

    @staticmethod
    def escapes(clause: Node, kinds: tuple[str, ...]) -> Node | None:
        """The first statement of ``kinds`` that leaves ``clause`` (not counting nested functions or inner loops)."""
        stack = list(reversed(clause.named_children))
        while stack:
            n = stack.pop()
            if n.type in ("function_definition", "lambda", "class_definition"):
                continue
            if n.type in kinds:
                if n.type in ("break_statement", "continue_statement"):
                    loop = n.parent
                    while loop is not None and loop.id != clause.id and loop.type not in ("for_statement", "while_statement"):
                        loop = loop.parent
                    if loop is not None and loop.id != clause.id:
                        continue  # leaves a loop inside the clause only
                return n
            stack.extend(reversed(n.named_children))
        return None

    def check_with(self, node: Node, scope: _Scope) -> None:
        clause = next((c for c in node.named_children if c.type == "with_clause"), None)
        items = [c for c in clause.named_children if c.type == "with_item"] if clause is not None else []
        for item in items:
            value = item.child_by_field_name("value")
            if value is not None and value.type == "as_pattern":
                value = _named(value)[0]
            value = _unparen(value) if value is not None else None
            ok = False
            if value is not None and value.type == "call":
                fn = _unparen(_field(value, "function"))
                ok = fn.type == "attribute" and (self.module_path(_field(fn, "object")) or "") in NKI_MODULES
            if not ok:
                self.report(
                    "swallowed-exception",
                    item,
                    "only NKI context managers (e.g. `with nl.no_reorder():`) are allowed; any other `__exit__` can swallow errors",
                )

    # state

    def check_global(self, node: Node, scope: _Scope) -> None:
        kw = node.type.split("_")[0]
        if kw == "nonlocal" and scope.home.parent is not None:
            names = [_norm(_text(n)) for n in _named(node) if n.type == "identifier"]
            if names and all(self.contained(scope, self.lookup(n, scope.home.parent)[0]) for n in names):
                return  # a counter of the enclosing call, bumped by a helper that never leaves it
            self.report("global-state", node, "`nonlocal` here changes a variable of an enclosing function from a function that leaves "
                        "that call (returned, stored, passed on or decorated), so it keeps state between calls; keep the helper to "
                        "plain calls inside the owner, or pass values in and return results")
            return
        self.report("global-state", node, f"`{kw}` lets a function keep state between calls; pass values in and return results instead")

    def check_assignment(self, node: Node, scope: _Scope) -> None:
        if node.type in ("delete_statement", "as_pattern_target"):
            targets: Iterable[Node] = (t for c in _named(node) for t in _flatten_targets(c))
        else:
            left = node.child_by_field_name("left")
            targets = _flatten_targets(left) if left is not None else ()
        for target in targets:
            if target.type == "attribute":
                self.check_attribute_write(_field(target, "object"), target)
            elif target.type == "subscript":
                self.check_item_write(_field(target, "value"), target, "assigning or deleting here")

    def check_default(self, node: Node, scope: _Scope) -> None:
        value = node.child_by_field_name("value")
        if value is None:
            return
        cls = self.value_class(value)
        if cls != "const":
            self.report(
                "global-state",
                value,
                "a default value is created once and shared by every call; use a constant (number, string, tuple, dtype) "
                "or `None` and build the object inside the function",
            )

    def check_class(self, node: Node, scope: _Scope) -> None:
        bases = node.child_by_field_name("superclasses")
        for base in _named(bases) if bases is not None else []:
            if not self.allowed_base(base):
                self.report(
                    "class-base",
                    base,
                    "a kernel's classes may derive only from object, enums, NamedTuple, exceptions and the file's own classes, "
                    "with no metaclass or class keywords; return NKI tensors, not custom array types",
                )
        body = node.child_by_field_name("body")
        for stmt in _named(body) if body is not None else []:
            expr = _named(stmt)[0] if stmt.type == "expression_statement" and _named(stmt) else None
            if expr is not None and expr.type == "assignment":
                value = expr.child_by_field_name("right")
                if value is not None and self.is_container(value):
                    self.report(
                        "global-state",
                        value,
                        "a class attribute holding a container is shared by every instance and every call; "
                        "use a tuple or build it in `__init__`",
                    )

    def allowed_base(self, base: Node) -> bool:
        base = _unparen(base)
        if base.type == "identifier":
            name = _norm(_text(base))
            s, bindings = self.lookup(name, self.scope_at[base.id])
            if s is None:
                return name in _ALLOWED_BASE_BUILTINS
            member = next((b for b in bindings if b.kind == "member"), None)
            if member is not None:
                return (member.module, member.member) in _ALLOWED_BASE_MEMBERS
            return any(b.kind == "class" for b in bindings)
        if base.type == "attribute":
            module = self.module_path(_field(base, "object"))
            return (module or "", _norm(_text(_field(base, "attribute")))) in _ALLOWED_BASE_MEMBERS
        return False


# ---------------------------------------------------------------------------- text-level checks


def _line_of(source: str, index: int) -> int:
    return source.count("\n", 0, index) + 1


def _check_text(source: str) -> list[Violation]:
    """Text on which tree-sitter and CPython could read different programs."""
    found: list[Violation] = []
    nul = source.find("\x00")
    if nul >= 0:
        found.append(Violation("source-text", "the source contains a NUL byte; remove it", _line_of(source, nul), 1))
    cr = re.search(r"\r(?!\n)", source)
    if cr is not None:
        found.append(
            Violation(
                "source-text",
                "a carriage return that is not part of CRLF ends a line for Python but not for the gate; use \\n or \\r\\n line endings",
                _line_of(source, cr.start()),
                1,
            )
        )
    for number, line in enumerate(source.split("\n")[:2], start=1):
        m = _CODING.match(line)
        if m is not None:
            try:
                ok = codecs.lookup(m.group(1)).name == "utf-8"
            except LookupError:
                ok = False
            if not ok:
                found.append(
                    Violation("source-text", f"coding declaration `{m.group(1)}`: kernels are UTF-8; remove the declaration", number, 1)
                )
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        found.append(
            Violation(
                "source-text",
                "the source contains characters that are not valid UTF-8 (lone surrogates); remove them",
                _line_of(source, exc.start),
                1,
            )
        )
    return found


def _walk(root: Node) -> Iterator[Node]:
    """Every node in document order, without recursion (kernels can nest deeper than Python's stack)."""
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _first_error(root: Node) -> Node | None:
    stack = [root]
    while stack:
        n = stack.pop()
        if n.is_error or n.is_missing:
            return n
        stack.extend(reversed([c for c in n.children if c.has_error or c.is_missing]))
    return None


def _tree_words(root: Node) -> list[tuple[int, str]]:
    """Identifier and keyword tokens outside strings and comments, with their lines."""
    words: list[tuple[int, str]] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in ("string", "comment", "integer", "float"):
            continue
        if n.child_count == 0:
            text = _text(n)
            row = n.start_point[0] + 1
            for m in _WORD.finditer(text):
                words.append((row + text.count("\n", 0, m.start()), m.group()))
        else:
            stack.extend(reversed(n.children))
    return words


def _cpython_words(source: str) -> tuple[list[tuple[int, str]], list[Violation]]:
    """NAME tokens as CPython's tokenizer sees them (outside strings), and tokenizer errors."""
    words: list[tuple[int, str]] = []
    found: list[Violation] = []
    starts = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
    ends = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in starts:
                depth += 1
            elif tok.type in ends:
                depth -= 1
            elif depth:
                continue
            elif tok.type == tokenize.NAME:
                words.append((tok.start[0], tok.string))
            elif tok.type == tokenize.INDENT and "\t" in tok.string:
                found.append(Violation("source-text", "indent with spaces: tab widths are where parsers disagree", tok.start[0], 1))
            elif tok.type == tokenize.ERRORTOKEN and not tok.string.isspace():
                found.append(
                    Violation("syntax-error", f"Python cannot tokenize `{tok.string}`; fix the syntax", tok.start[0], tok.start[1] + 1)
                )
                break
    except (tokenize.TokenError, SyntaxError) as exc:
        line = exc.args[1][0] if isinstance(exc, tokenize.TokenError) and len(exc.args) > 1 else getattr(exc, "lineno", None) or 1
        found.append(Violation("syntax-error", f"Python cannot tokenize the source ({exc.args[0]}); fix the syntax", line, 1))
    return words, found


def _compare_words(tree: list[tuple[int, str]], cpython: list[tuple[int, str]]) -> Violation | None:
    for i, (a, b) in enumerate(zip(tree, cpython)):
        if a != b:
            return Violation(
                "parser-mismatch",
                f"Python reads `{b[1]}` at line {b[0]} where the gate's parser reads `{a[1]}` at line {a[0]}; "
                "rewrite this line with plain spaces and \\n line endings",
                min(a[0], b[0]),
                1,
            )
    if len(tree) != len(cpython):
        extra = tree[len(cpython)] if len(tree) > len(cpython) else cpython[len(tree)]
        return Violation(
            "parser-mismatch",
            f"the gate's parser and Python disagree about the code at `{extra[1]}`; rewrite this line plainly",
            extra[0],
            1,
        )
    return None


def _cpython_syntax_error(source: str) -> Violation | None:
    """Python's own syntax error (its line, column and words), or None when Python parses ``source`` (parsed only, never run)."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return Violation("syntax-error", f"the kernel does not parse here ({exc.msg}); fix the syntax", exc.lineno or 1, exc.offset or 1)
    except (ValueError, MemoryError, RecursionError):
        return None
    return None


def _parse(data: bytes, deadline_s: float) -> Tree | None:
    """tree-sitter's parse, or ``None`` past ``deadline_s``: read in chunks so its progress callback runs,
    which both enforces the deadline and lets other threads (a server's signal handling) take the GIL."""
    end = time.monotonic() + deadline_s
    try:
        return Parser(_LANGUAGE).parse(lambda offset, _point: data[offset : offset + 65536], progress_callback=lambda *_: time.monotonic() > end)
    except ValueError:  # "Parsing failed": the callback cancelled it
        return None


def check_source(source: str, filename: str = "<kernel>") -> list[Violation]:
    """Every rule violation in ``source``, ordered by position; an empty list means the kernel passes.

    ``filename`` is used in messages that point to a second place in the file. The source
    is parsed, never imported or run.
    """
    text_issues = _check_text(source)
    if text_issues:
        return text_issues
    data = source.encode("utf-8")
    tree = _parse(data, PARSE_DEADLINE_S)
    if tree is None:
        lines = source.count("\n") + 1
        return [Violation("too-large", f"the static gate gave up parsing {lines} lines after {PARSE_DEADLINE_S:g} s; "
                                       "send the kernel alone, without long runs of comments", 1, 1)]
    root = tree.root_node
    if root.has_error:
        bad = _first_error(root) or root
        snippet = (_text(bad).splitlines() or [""])[0][:40]
        what = f"missing `{bad.type}`" if bad.is_missing else f"unexpected `{snippet}`"
        row, col = bad.start_point
        line = data.split(b"\n")[row] if row < data.count(b"\n") + 1 else b""
        py = _cpython_syntax_error(source)
        if py is not None:  # tree-sitter's error node starts where the broken statement does (a decorator 25 lines up); Python names the line
            return [py]
        return [
            Violation(
                "syntax-error",
                f"the kernel does not parse here ({what}); fix the syntax",
                row + 1,
                len(line[:col].decode("utf-8", "replace")) + 1,
            )
        ]
    legacy = next((n for n in _walk(root) if n.type in ("print_statement", "exec_statement")), None)
    if legacy is not None:
        kw = legacy.type.split("_")[0]
        return [
            Violation("syntax-error", f"Python 2 `{kw}` statement; write `{kw}(...)`", legacy.start_point[0] + 1, legacy.start_point[1] + 1)
        ]
    cpython, token_issues = _cpython_words(source)
    if token_issues:
        return token_issues
    mismatch = _compare_words(_tree_words(root), cpython)
    if mismatch is not None:
        return [mismatch]
    violations = _Checker(data, root, filename).run()
    unique = {(v.line, v.col, v.rule): v for v in reversed(violations)}
    return sorted(unique.values(), key=lambda v: (v.line, v.col, v.rule))
