"""The evaluation worker's runtime guard: what code may do once a kernel's module starts running.

The static gate reads the kernel's source; this guard watches what actually runs, as defence
in depth for the day the gate misses something. It is a CPython audit hook plus a guarded
``__import__``, installed before any kernel code runs and never removed (audit hooks cannot be).

Every decision asks *who started it*: the guard walks the Python stack from the frame that
raised the event to the first frame that is either the kernel's own file (→ the kernel asked)
or nkiagent's package (→ the harness asked, perhaps on the kernel's behalf, e.g. the emulator
finding a kernel's line number). Frames of the standard library and of NumPy are passed over:
``inspect.stack()`` called by a kernel is the kernel asking. Three pieces of standard-library
machinery are trusted to act on a kernel's classes — ``dataclasses``, ``collections.namedtuple``
and ``typing.NamedTuple`` generate methods from field names, which need ``compile``/``exec``
and a look at frames — because the field names come from class statements the gate checked.

Refused, whoever asks:

* network, subprocesses, ctypes, signals, threads (but the emulator's own LNC program threads,
  which run one at a time: see :meth:`Guard._thread_starter`), process control, debugger and profiler
  hooks, the garbage collector's object graph, files written outside the worker's own
  result writes, and new modules on :data:`FORBIDDEN_IMPORTS`;
* compiling or executing any code but the kernel module's own (compiled before the guard
  went in) and what the trusted machinery above generates. This is what closes the road
  from an allowed function that evaluates a string built at run time (``typing``'s
  annotation evaluation, reached through ``functools.singledispatch`` for instance) to
  arbitrary code: no route through any library reaches a compiler.

Refused when the kernel asks: imports the gate would refuse (checked by the guarded
``__import__`` even for modules already loaded, which raise no audit event), opening any
file, listing directories, frames (``sys._getframe``, ``inspect.stack()``, ``gi_frame``,
``tb_frame``, ``f_code`` …), building code objects, and rebinding function internals.

Reads the harness asks for are limited to Python's own files, the exact input files of this
request and the scratch directory: the task's references live elsewhere and are never
readable by the worker at all.
"""

from __future__ import annotations

import builtins
import os
import sys
from _thread import get_ident
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

__all__ = ["FORBIDDEN_IMPORTS", "Guard", "SandboxViolation"]

#: Audit events refused whoever raises them (prefix match).
_FORBIDDEN_EVENT_PREFIXES = (
    "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
    "os.killpg", "os.putenv", "os.unsetenv", "ctypes.", "_thread.start_new_thread", "os.remove", "os.rename", "os.rmdir",
    "os.chmod", "os.chown", "os.symlink", "os.link", "os.truncate", "os.mkdir", "os.utime", "os.chdir", "shutil.", "urllib.",
    "http.", "ftplib.", "smtplib.", "webbrowser.", "sys.setprofile", "sys.settrace", "sys.addaudithook", "gc.get_referrers",
    "gc.get_referents", "gc.get_objects", "sys._current_frames", "sys._current_exceptions", "sys.monitoring", "cpython.",
    "signal.", "fcntl.", "resource.setrlimit", "winreg.", "pty.", "syslog.",
)  # fmt: skip
#: Modules no code in the worker may load once kernels run.
FORBIDDEN_IMPORTS = frozenset(
    {"socket", "subprocess", "ctypes", "_ctypes", "multiprocessing", "_posixsubprocess", "pty", "fcntl", "mmap", "signal",
     "pickle", "_pickle", "marshal", "gc", "inspect", "importlib.util", "code", "codeop", "pdb", "bdb", "runpy", "threading"}
)  # fmt: skip
#: Events that hand out frames, code, directory listings or raw memory: refused when the kernel asks
#: (the harness needs some of them: the emulator finds kernel lines through frames, the worker maps
#: its input files read-only).
_KERNEL_REFUSED = frozenset({"sys._getframe", "sys._getframemodulename", "object.__getattr__", "code.__new__", "function.__new__",
                             "object.__setattr__", "object.__delattr__", "os.listdir", "os.scandir", "glob.glob", "glob.glob/2",
                             "builtins.input", "sys.excepthook", "os.walk", "os.fwalk", "mmap.__new__"})
#: Attribute reads that raise ``object.__getattr__`` but hand out nothing dangerous once running code
#: objects is refused (the emulator reads ``f_code`` of every frame it walks to find a kernel's line).
_HARMLESS_READS = frozenset({"f_code", "__code__", "gi_code", "cr_code", "ag_code"})
#: Events that carry nothing to refuse.
_QUIET = frozenset({"builtins.id", "marshal.loads", "marshal.dumps", "array.__new__", "time.sleep"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_IMPORT_MACHINERY = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


class SandboxViolation(PermissionError):
    """What kernel code tried and may not do. The message starts with ``sandbox:``, which the worker reports as an integrity failure."""


def _compile_only() -> frozenset[tuple[str, str]]:
    """Standard-library code that compiles a string it never runs: ``typing.ForwardRef`` checks a postponed
    annotation's syntax (a NamedTuple under ``from __future__ import annotations``). Running that code
    later would be an ``exec`` event, which stays refused."""
    import typing

    return frozenset({(os.path.realpath(typing.__file__), "__init__")})


def _trusted_machinery() -> frozenset[tuple[str, str]]:
    """(file, function) of the standard-library code that may compile and look at frames for a kernel's classes."""
    import ast
    import collections
    import dataclasses
    import typing

    out = {(collections.__file__, "namedtuple"), (typing.__file__, "__new__"), (typing.__file__, "_make_nmtuple"),
           (ast.__file__, "parse")}  # ast.parse builds a syntax tree, never code (NumPy reads .npy headers with it)
    out |= {(dataclasses.__file__, name) for name in ("_create_fn", "_process_class", "add_fns_to_class", "_add_slots", "_set_new_attribute")}
    return frozenset((os.path.realpath(f), n) for f, n in out if f)


class Guard:
    """The audit hook and guarded ``__import__`` of one worker process (see the module docstring).

    ``kernel_file`` is the scratch copy the worker compiles; ``allowed_imports`` decides a kernel's
    own imports (the gate's policy: ``(module, fromlist) -> None`` or a reason); ``readable`` lists
    directories the harness may read from and ``readable_files`` single files (the inputs).
    """

    def __init__(self, kernel_file: str, scratch: str, readable: Iterable[str], readable_files: Iterable[str],
                 allowed_imports: Callable[[str, tuple[str, ...]], str | None]) -> None:
        self.kernel_file = kernel_file
        self._kernel_real = os.path.realpath(kernel_file)
        self._scratch = os.path.realpath(scratch) + os.sep
        self._roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in readable if r)
        self._files = frozenset(os.path.realpath(p) for p in readable_files)
        self._package = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
        self._trusted = _trusted_machinery()
        self._compile_only = _compile_only()
        self._allowed_imports = allowed_imports
        self._busy: set[int] = set()  #: the threads now inside the hook (whose own events it then lets through)
        self._import = builtins.__import__
        self.kernel_code: Any = None  #: the kernel module's code object, the one thing the worker executes
        self.writing = False  #: set while the worker itself writes a result file into scratch

    # -------------------------------------------------------------------------------- who asked

    def _initiator(self, frame: FrameType | None) -> str:
        """``kernel``, ``trusted`` (stdlib machinery working on a kernel's class) or ``harness``."""
        kernel, package, trusted = self.kernel_file, self._package, self._trusted
        f = frame
        while f is not None:
            code = f.f_code
            name = code.co_filename
            if name == kernel:
                return "kernel"
            if name.startswith(package):
                return "harness"
            if (name, code.co_name) in trusted:
                return "trusted"
            f = f.f_back
        return "harness"

    def _refuse(self, what: str) -> None:
        raise SandboxViolation(f"sandbox: {what} is not allowed in kernel code")

    def refuse_if_kernel(self, what: str) -> None:
        """Refuse ``what`` when kernel code started it (for writes no audit event reports, such as module attributes)."""
        if self._initiator(sys._getframe(2)) == "kernel":
            self._refuse(what)

    # -------------------------------------------------------------------------------- the hook

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        # the emulator raises a dozen of these per instruction (id(), f_code): decide them first and cheaply
        if event in _QUIET or (event == "object.__getattr__" and args[1] in _HARMLESS_READS):
            return
        me = get_ident()  # per thread: one thread inside the hook must not wave another's events through
        if me in self._busy:
            return
        self._busy.add(me)
        try:
            self._check(event, args)
        finally:
            self._busy.discard(me)

    def _check(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            self._open(args)
            return
        if event.startswith(_FORBIDDEN_EVENT_PREFIXES):
            self._refuse(event)
        if event in ("compile", "exec"):
            self._code(event, args)
            return
        if event == "import":
            root = str(args[0])
            if root in FORBIDDEN_IMPORTS or root.split(".")[0] in FORBIDDEN_IMPORTS:
                self._refuse(f"importing {root!r}")
            if self._initiator(sys._getframe(2)) == "kernel":
                reason = self._allowed_imports(root, ())
                if reason:
                    self._refuse(f"importing {root!r} ({reason})")
            return
        if event in _KERNEL_REFUSED and self._initiator(sys._getframe(2)) == "kernel":
            detail = f"{event} {args[1]!r}" if event in ("object.__getattr__", "object.__setattr__", "object.__delattr__") else event
            self._refuse(detail)

    def _code(self, event: str, args: tuple[Any, ...]) -> None:
        """Only the kernel module's own code, imports, and the trusted machinery's generated methods run."""
        if event == "exec" and args and args[0] is self.kernel_code and self.kernel_code is not None:
            return
        caller = sys._getframe(3)
        code = caller.f_code
        if (code.co_filename, code.co_name) in self._trusted:
            return
        if event == "compile" and (code.co_filename, code.co_name) in self._compile_only:
            return
        if event == "exec" and code.co_filename in _IMPORT_MACHINERY:
            return  # a module body being imported: the import itself passed the "import" check
        self._refuse("compiling or running code built at run time (exec, eval, compile, annotation evaluation)")

    def _open(self, args: tuple[Any, ...]) -> None:
        path, mode, flags = args
        if isinstance(path, int) or path is None:
            return
        text = os.fsdecode(path)
        real = os.path.realpath(text)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
        if writing:
            if not (self.writing and real.startswith(self._scratch)):
                raise SandboxViolation(f"sandbox: writing {text!r} is not allowed in kernel code")
            return
        if self._initiator(sys._getframe(3)) == "kernel":
            raise SandboxViolation(f"sandbox: reading {text!r} is not allowed in kernel code (a kernel reads only its arguments)")
        if real in self._files or real == self._kernel_real or (real + os.sep).startswith(self._roots):
            return
        raise SandboxViolation(f"sandbox: reading {text!r} is not allowed (only Python's own files, this run's inputs and scratch)")

    # -------------------------------------------------------------------------------- imports

    def guarded_import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        """``__import__`` that applies the gate's import policy to the kernel's own imports, loaded modules included."""
        caller = sys._getframe(1)
        if caller.f_code.co_filename == self.kernel_file:
            if level:
                self._refuse(f"a relative import ({'.' * level}{name})")
            reason = self._allowed_imports(name, tuple(fromlist or ()))
            if reason:
                self._refuse(f"importing {name!r} ({reason})")
        return self._import(name, globals, locals, fromlist, level)

    # -------------------------------------------------------------------------------- install

    def install(self) -> None:
        """Install the hook and the guarded import, and guard thread creation (it raises no audit event)."""
        sys.addaudithook(self.hook)
        builtins.__import__ = self.guarded_import
        import _thread
        import threading

        for name in ("start_new_thread", "start_new", "start_joinable_thread"):
            if hasattr(_thread, name):
                setattr(_thread, name, self._thread_starter(getattr(_thread, name)))
        threading._start_new_thread = _thread.start_new_thread  # type: ignore[attr-defined]
        if hasattr(threading, "_start_joinable_thread"):
            threading._start_joinable_thread = _thread.start_joinable_thread  # type: ignore[attr-defined]

    def _thread_starter(self, start: Callable[..., Any]) -> Callable[..., Any]:
        """``start`` (a ``_thread`` function) that starts only the emulator's LNC program threads, and only when the harness asks.

        An LNC=2 launch whose program waits for the other (``sendrecv``, ``core_barrier``) runs the
        other on a :class:`~nkiagent.emu.lnc.ProgramThread`, which runs only while it holds the
        scheduler's baton: one program runs at a time, so the threads add no concurrency. Kernel code
        may start no thread at all, that one included: who asks is decided by the stack, as for
        every other event (``threading.Thread.start`` is passed over, so a kernel calling it is the kernel asking).
        """
        from ..emu.lnc import ProgramThread

        def guarded(function: Any, *args: Any, **kwargs: Any) -> Any:
            if type(getattr(function, "__self__", None)) is ProgramThread and self._initiator(sys._getframe(1)) == "harness":
                return start(function, *args, **kwargs)
            raise SandboxViolation("sandbox: starting threads is not allowed in kernel code")

        return guarded
