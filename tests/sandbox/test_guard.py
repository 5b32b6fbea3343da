"""The worker's runtime guard and the streamed trace, each tested on its own, below the static gate.

These drive :func:`run_worker` directly, so the gate never sees the kernels: what is tested
is what stops code the gate missed. Honest kernels that use dataclasses, cached helpers and
postponed annotations must run; code built at run time, frames, directory listings, imports
the gate refuses and edits of the trace or the emulator must be refused or detected.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from nkiagent.emu.trace import Trace, TraceStreamError, TraceStreamReader, TraceStreamWriter
from nkiagent.sandbox.launch import run_worker
from nkiagent.tasks import get_task

from .test_sandbox import HONEST

TASK = get_task("vector_add")
RUN = {"id": 0, "dims": {"N": 128, "D": 64}, "seed": 0, "dist": "normal"}

ADD = HONEST  #: the small honest kernel the sandbox tests run, as the base every guard test adds to

#: The facade's closure holds the implementation module: the road code past the gate would take
#: to the emulator's live state (tests/verify/cheats/facade_closure.py shows it).
IMPL = "_impl = next(c.cell_contents for c in type(nl).__getattr__.__closure__ if type(np) in type(c.cell_contents).__mro__)\n"


def _run(tmp_path: Path, source: str, runs: list[dict] | None = None):
    path = tmp_path / "kernel.py"
    path.write_text(textwrap.dedent(source))
    return run_worker(path, TASK.source_path, runs or [RUN], target="trn2")


def _error(out) -> dict:
    assert out.answer is not None, out.detail
    return out.answer["runs"][0].get("error", {})


# ------------------------------------------------------------------------------ honest kernels run


@pytest.mark.parametrize(
    "prelude",
    [
        # a dataclass config at module level, with postponed annotations (strings): the kernel is a real module
        ("from __future__ import annotations\nimport dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Cfg:\n    tile: int = 128\n"
        "    names: tuple[str, ...] = ('a',)\nCFG = Cfg()\n"),
        # the same without the future import: the worker's own __future__ flags do not leak into the kernel
        "import dataclasses\n@dataclasses.dataclass\nclass Cfg:\n    tile: int = 128\nCFG = Cfg()\nassert Cfg.__annotations__['tile'] is int\n",
        # a NamedTuple and an Enum
        "import typing, enum\nclass Shape(typing.NamedTuple):\n    p: int\n    f: int = 64\nclass Mode(enum.Enum):\n    A = 1\nS = Shape(128)\n",
        # a pure cached shape helper
        "import functools\n@functools.lru_cache(maxsize=None)\ndef tiles(n: int, t: int) -> int:\n    return (n + t - 1) // t\nassert tiles(130, 128) == 2\n",
    ],
    ids=["future-dataclass", "dataclass", "namedtuple-enum", "lru_cache"],
)
def test_honest_python_machinery_runs(tmp_path: Path, prelude: str) -> None:
    out = _run(tmp_path, prelude + ADD)
    assert "error" not in out.answer["runs"][0], out.answer["runs"][0].get("error")
    assert out.priced_trace(0).instructions


def test_a_dataclass_defined_inside_the_kernel_runs(tmp_path: Path) -> None:
    body = ADD.replace("    out = nl.ndarray", "    @dataclasses.dataclass\n    class Tile:\n        p: int\n    assert Tile(128).p == 128\n    out = nl.ndarray")
    out = _run(tmp_path, "import dataclasses\n" + body)
    assert "error" not in out.answer["runs"][0], out.answer["runs"][0].get("error")


# ------------------------------------------------------------------------------ refused at run time


@pytest.mark.parametrize(
    "prelude, refused",
    [
        # the red team's road: an allowed module evaluates an annotation string built at run time
        (("import functools, typing\n@functools.singledispatch\ndef f(x):\n    return 0\n"
         "def g(x: 'typing.sys.modules[\"os\"].system(\"true\")'):\n    return 1\nf.register(g)\n"),
         "compiling or running code built at run time"),
        ("import typing\ntyping.get_type_hints(type('T', (), {'__annotations__': {'x': '1 + 1'}}))\n", "compiling or running code built at run time"),
        ("eval('1')\n", "compiling or running code built at run time"),
        ("exec(compile('x = 1', 'k', 'exec'))\n", "compiling or running code built at run time"),
        ("(lambda: 0).__code__.replace(co_consts=(1,))\n", "code.__new__"),
        ("import dataclasses\ndataclasses.inspect.stack()\n", "sys._getframe"),
        ("import typing\ntyping.sys._getframe(0)\n", "sys._getframe"),
        ("def gen():\n    yield 1\ngen().gi_frame\n", "gi_frame"),
        ("import typing\ntyping.sys.modules['os'].listdir('/')\n", "os.listdir"),
        ("import typing\nlist(typing.sys.modules['os'].scandir('/'))\n", "os.scandir"),
        ("open('/etc/hostname').read()\n", "reading '/etc/hostname'"),
        ("import typing\nopen(typing.__file__).read()\n", "is not allowed in kernel code (a kernel reads only its arguments)"),
        ("import typing\ntyping.sys.modules['numpy'].load(typing.sys.argv[0])\n", "reading"),
        ("import inspect\n", "importing 'inspect'"),
        ("import os\n", "importing 'os'"),
        ("from nki import language as nl2\nimport nkiagent\n", "importing 'nkiagent'"),
        ("import numpy.random\n", "importing 'numpy.random'"),
        ("from . import sibling\n", "a relative import"),
    ],
    ids=["singledispatch-annotation", "get_type_hints", "eval", "exec-compile", "code-replace", "inspect-stack", "getframe",
         "gi_frame", "listdir", "scandir", "open", "open-python-file", "np.load", "import-inspect", "import-os", "import-nkiagent", "numpy-random", "relative"],
)
def test_what_kernel_code_may_not_do_is_refused(tmp_path: Path, prelude: str, refused: str) -> None:
    err = _error(_run(tmp_path, prelude + ADD))
    assert err.get("kind") == "sandbox" and refused in err["message"], err


def test_harness_reads_are_limited_to_pythons_files_and_this_requests_inputs(tmp_path: Path) -> None:
    """Even a read the harness makes (a kernel could hand it a callable) never reaches a reference or the checkout."""
    from nkiagent.sandbox.guard import Guard, SandboxViolation
    from nkiagent.sandbox.policy import import_refusal
    from nkiagent.verify.inputs import InputCache, cases

    cache = InputCache().ensure(TASK, cases(TASK, 1, ("normal",))[:1])
    inputs = InputCache.input_paths(cache, 0, 2)
    guard = Guard(str(tmp_path / "kernel.py"), str(tmp_path), [sys.base_prefix], inputs, import_refusal)
    guard._check("open", (inputs[0], "rb", 0))  # this run's input: allowed
    guard._check("open", (str(Path(sys.base_prefix) / "lib"), "r", 0))  # Python's own files: allowed
    for path in (Path(cache) / "ref_0.npy", Path(__file__)):
        with pytest.raises(SandboxViolation, match="sandbox: reading"):
            guard._check("open", (str(path), "rb", 0))
    with pytest.raises(SandboxViolation, match="sandbox: writing"):
        guard._check("open", (str(tmp_path / "out.npy"), "wb", 0))  # not even scratch, unless the worker is writing
    guard.writing = True
    guard._check("open", (str(tmp_path / "out.npy"), "wb", 0))


def _guard(tmp_path: Path):
    from nkiagent.sandbox.guard import Guard
    from nkiagent.sandbox.policy import import_refusal

    return Guard(str(tmp_path / "kernel.py"), str(tmp_path), [sys.base_prefix], [], import_refusal)


def test_the_harness_may_start_only_the_emulators_program_threads(tmp_path: Path) -> None:
    """Even asked by the harness (a kernel could hand it a callable), a thread starts only if it is an LNC program's."""
    import threading

    from nkiagent.emu.lnc import ProgramThread
    from nkiagent.sandbox.guard import SandboxViolation

    started = []
    start = _guard(tmp_path)._thread_starter(lambda fn, *args: started.append(fn))
    with pytest.raises(SandboxViolation, match="sandbox: starting threads is not allowed in kernel code"):
        start(threading.Thread(target=print)._bootstrap, ())
    program = ProgramThread(None, type("P", (), {"index": 0})())  # type: ignore[arg-type]
    start(program._bootstrap, ())
    assert started == [program._bootstrap]


def test_one_thread_inside_the_hook_does_not_wave_another_threads_events_through(tmp_path: Path) -> None:
    """The hook's re-entrancy guard is per thread: an LNC program's thread parked mid-check must not open the door for the one running."""
    import threading

    from nkiagent.sandbox.guard import SandboxViolation

    guard = _guard(tmp_path)
    guard._busy.add(threading.get_ident() + 1)  # another thread is inside the hook
    with pytest.raises(SandboxViolation, match="sandbox: socket.connect"):
        guard.hook("socket.connect", (None, ("example.com", 80)))


# ------------------------------------------------------------------------------ tampering is detected


def test_a_kernel_that_edits_its_own_trace_is_caught_and_the_streamed_copy_is_whole(tmp_path: Path) -> None:
    body = "import numpy as np\nimport nki.language as nl\n" + IMPL + ADD.replace(
        "    return out", "    _impl.current().trace.instructions.clear()\n    return out")
    out = _run(tmp_path, body)
    rec = out.answer["runs"][0]
    assert "error" not in rec and rec["tampered"] == ["the trace lost or gained records after they were made"]
    assert len(out.traces[0]) == rec["trace"]["records"] == 4  # the streamed copy kept every record
    assert "the trace lost or gained records" in out.trace_problem(0)


def test_a_kernel_that_patches_an_emulator_class_is_caught(tmp_path: Path) -> None:
    body = "import numpy as np\nimport nki.language as nl\n" + IMPL + "_impl.NkiTensor.region = lambda self: None\n" + ADD
    out = _run(tmp_path, body)
    assert "the emulator was changed: nkiagent.emu.tensor.NkiTensor.region" in out.trace_problem(0)


def test_emulator_modules_refuse_attribute_writes_from_kernel_code(tmp_path: Path) -> None:
    out = _run(tmp_path, "import nki.isa as nisa\nnisa.nc_matmul = print\n" + ADD)
    err = _error(out)
    assert err["kind"] == "sandbox" and "changing nki.isa.nc_matmul" in err["message"]


def test_forged_stream_lines_are_refused(tmp_path: Path) -> None:
    """Bytes written to the stream pipe by anything but the worker's writer do not decode into a trace."""
    fd_guess = "int(typing.sys.argv[2])"
    body = f"import typing\ntyping.sys.modules['os'].write({fd_guess}, b'[\"X\"]\\n[\"I\",0]\\n')\n" + ADD
    out = _run(tmp_path, body)
    assert out.stream_error and "trace" in out.trace_problem(0)


# ------------------------------------------------------------------------------ the stream itself


def _traced(n: int = 512) -> Trace:
    from nkiagent import emu, shim

    path = Path(__file__).resolve().parents[1] / "verify" / "honest" / "vector_add_opt.py"
    ns: dict = {}
    shim.install()
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 — running the honest kernel in this process is the test
    kernel = next(v for v in ns.values() if isinstance(v, emu.frontend.Kernel))
    trace = Trace()
    a = np.ones((n, 512), np.float32)
    emu.run_kernel(kernel, (a, a), target="trn2", trace=trace)
    return trace


def test_the_stream_rebuilds_the_trace_exactly() -> None:
    trace = _traced()
    lines: list[bytes] = []
    writer = TraceStreamWriter(lines.append)
    writer.begin(7)
    for ins in trace.instructions:
        writer("I", ins)
    writer.end(7, trace)
    reader = TraceStreamReader()
    reader.feed(b"".join(lines))
    back = reader.finish()[7]
    assert back.to_json() == Trace.from_json(trace.to_json()).to_json()
    assert back.digest() == trace.digest()
    # interning: each access record and location is sent once
    assert sum(1 for line in lines if line.startswith(b'["A"')) == len({a for i in trace.instructions for a in i.reads + i.writes})


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_cut_or_forged_stream_does_not_decode(cut: int) -> None:
    trace = _traced(128)
    lines: list[bytes] = []
    writer = TraceStreamWriter(lines.append)
    writer.begin(0)
    for ins in trace.instructions:
        writer("I", ins)
    writer.end(0, trace)
    if cut == 1:  # the end of the run never arrived
        data = b"".join(lines[:-1])
    elif cut == 2:  # a record dropped in transit: the count announced at the end disagrees
        last_record = max(k for k, line in enumerate(lines) if line.startswith(b'["I"'))
        data = b"".join(lines[:last_record] + lines[last_record + 1:])
    else:  # bytes the writer never wrote
        data = b'["R",0]\n["I",0,"x"]\n'
    with pytest.raises(TraceStreamError):
        reader = TraceStreamReader()
        reader.feed(data)
        reader.finish()


def test_runs_of_one_shape_stream_equal_digests_across_processes(tmp_path: Path) -> None:
    runs = [dict(RUN, id=0), dict(RUN, id=1, seed=1, dist="large")]
    a = _run(tmp_path, ADD, runs)
    b = _run(tmp_path, ADD, [dict(RUN, id=1, seed=3, dist="heavy_tailed")])
    assert a.priced_trace(0).digest() == a.priced_trace(1).digest() == b.priced_trace(1).digest()
