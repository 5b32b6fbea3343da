"""The ``nkiagent`` command. Thin: parse arguments, then call one function per subcommand.

Nothing heavy is imported at module level, so ``nkiagent --help`` answers instantly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .verify.protocol import VISIBLE_SEEDS

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nkiagent",
        description="A coding agent for AWS Trainium NKI kernels, with an embedded NKI emulator.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "--completion", choices=["bash", "zsh"], help='print a shell completion script (eval "$(nkiagent --completion bash)")'
    )
    ui = parser.add_argument_group("the terminal UI (no COMMAND opens it in the workspace)")
    ui.add_argument("--task", dest="ui_task", metavar="NAME", help="start a session on this task in the UI")
    add_settings_options(ui, dest_prefix="ui_")
    ui.add_argument("--workspace", dest="ui_workspace", metavar="DIR", default=".", help="the repository to work in (default: here)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sim = sub.add_parser("simulate", help="run a kernel file on the embedded emulator with random inputs")
    sim.add_argument("kernel", help="path to a Python file defining an @nki.jit kernel")
    sim.add_argument("--kernel-name", help="function to run (default: the only @nki.jit kernel in the file)")
    sim.add_argument("--inputs", required=True, help='comma-separated NAME:SHAPE:DTYPE, e.g. "a:256x512:float32,b:256x512:float32"')
    sim.add_argument(
        "--target", choices=["trn1", "trn2", "trn3"], help="Trainium generation (default: $NEURON_PLATFORM_TARGET_OVERRIDE or trn2)"
    )
    sim.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    sim.add_argument("--json", action="store_true", help="print a JSON summary")

    prof = sub.add_parser("profile", help="estimate a kernel's latency on trn1/trn2/trn3 and explain where the time goes")
    prof.add_argument("kernel", help="path to a Python file defining an @nki.jit kernel")
    prof.add_argument("--kernel-name", help="function to run (default: the only @nki.jit kernel in the file)")
    prof.add_argument("--inputs", required=True, help='comma-separated NAME:SHAPE:DTYPE, e.g. "a:4096x8192:bfloat16"')
    prof.add_argument(
        "--target", choices=["trn1", "trn2", "trn3"], help="Trainium generation (default: $NEURON_PLATFORM_TARGET_OVERRIDE or trn2)"
    )
    prof.add_argument(
        "--timing-only",
        action="store_true",
        help="run control flow and the instruction stream without computing numbers (fast, no tensor data)",
    )
    prof.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    prof.add_argument("--json", action="store_true", help="print the profile as JSON")
    prof.add_argument("--trace", metavar="OUT.json", help="write a Chrome-trace/Perfetto timeline (one track per engine and DMA queue)")
    prof.add_argument("--plot", metavar="OUT.png", help="write a PNG with the timeline and the roofline point")
    _backend_option(prof)

    ev = sub.add_parser("eval", help="verify a kernel against a task: correctness, integrity, latency estimate and speedup")
    ev.add_argument("kernel", help="path to the kernel file")
    ev.add_argument("--task", required=True, help="builtin task name (see `nkiagent tasks`) or path to a task file")
    ev.add_argument("--target", choices=["trn1", "trn2", "trn3"], help="Trainium generation (default: trn2)")
    ev.add_argument("--json", action="store_true", help="print the evaluation JSON")
    ev.add_argument("--suite", choices=["builtin", "nkibench"], default="builtin", help="where --task is looked up")
    ev.add_argument("--nkibench-dir", help="checkout of zhang677/AccelOpt (for --suite nkibench)")
    ev.add_argument("--seeds", type=int, default=VISIBLE_SEEDS, help=f"seeds of the visible shape (default {VISIBLE_SEEDS})")
    _backend_option(ev)

    tasks = sub.add_parser("tasks", help="list the builtin task suite (or NKIBench's)")
    tasks.add_argument("--json", action="store_true")
    tasks.add_argument("--suite", choices=["builtin", "nkibench"], default="builtin")
    tasks.add_argument("--nkibench-dir", help="checkout of zhang677/AccelOpt (for --suite nkibench)")

    task = sub.add_parser("task", help="create a task from your own code")
    task_sub = task.add_subparsers(dest="task_command", metavar="ACTION")
    new = task_sub.add_parser("new", help="write a task file whose reference is your NumPy/PyTorch function or nn.Module")
    new.add_argument("--from", dest="source", required=True, help="PATH.py:FUNCTION_OR_MODULE")
    new.add_argument("--inputs", required=True, help='comma-separated NAME:SHAPE:DTYPE, e.g. "x:4096x1024:bfloat16"')
    new.add_argument("--name", help="task name (default: the function name, lower-cased)")
    new.add_argument("--out", help="task file to write (default: tasks/NAME.py)")

    run = sub.add_parser("run", help="run an agent session headless on a task")
    run.add_argument("--task", required=True, help="builtin task name or task file")
    add_settings_options(run)
    run.add_argument("--workspace", default=".", help="the repository to work in (default: here)")
    run.add_argument("--kernel", help="kernel file in the workspace (default: kernels/<task>.py)")
    run.add_argument("--json", action="store_true", help="print the final summary as JSON")
    _output_options(run)
    _backend_option(run)

    cfg = sub.add_parser("config", help="show the configuration a session here would use, and where each value came from")
    cfg.add_argument("action", choices=["show"])
    cfg.add_argument("--workspace", default=".", help="the repository whose .nkiagent/config.toml is read (default: here)")
    cfg.add_argument("--json", action="store_true", help="print {key: {value, source}} as JSON")
    add_settings_options(cfg)

    demo = sub.add_parser("demo", help="an offline demo session (builtin/tuner model, embedded emulator)")
    demo.add_argument("--headless", action="store_true", help="run in the terminal without the UI")
    demo.add_argument("--task", default="vector_add")
    demo.add_argument("--target", choices=["trn1", "trn2", "trn3"])
    demo.add_argument("--max-turns", type=int, default=40)
    demo.add_argument("--json", action="store_true")
    _output_options(demo)

    sess = sub.add_parser("sessions", help="list, show or resume stored sessions")
    sess.add_argument("action", choices=["list", "show", "resume"])
    sess.add_argument("id", nargs="?", help="session id (show and resume; see --last)")
    sess.add_argument("--last", action="store_true", help="the newest session (show and resume)")
    sess.add_argument("--sessions-dir", default="sessions")
    sess.add_argument("--approve", choices=["ask", "auto", "never"], help="override the session's review mode when resuming")
    sess.add_argument("--headless", action="store_true", help="resume in the terminal without the UI")
    _output_options(sess)

    res = sub.add_parser("resume", help="resume a stored session (same as `sessions resume`; --last for the newest)")
    res.add_argument("id", nargs="?", help="session id")
    res.add_argument("--last", action="store_true", help="the newest session")
    res.add_argument("--sessions-dir", default="sessions")
    res.add_argument("--approve", choices=["ask", "auto", "never"], help="override the session's review mode")
    res.add_argument("--headless", action="store_true", help="resume in the terminal without the UI")
    res.set_defaults(action="resume")
    _output_options(res)

    undo = sub.add_parser("undo", help="restore the previous snapshot of the session's kernel")
    undo.add_argument("--session", help="session id (default: the newest)")
    undo.add_argument("--workspace", default=".")

    search = sub.add_parser("search", help="search for a fast kernel: best-of-n, refine, beam or evolve over one candidate database")
    from .commands.search import add_search_arguments

    add_search_arguments(search)

    rep = sub.add_parser("report", help="write a Markdown + PNG report of one or more search sessions")
    rep.add_argument("sessions", nargs="+", metavar="SESSION", help="session ids (in --sessions-dir) or session folders")
    rep.add_argument("--sessions-dir", default="sessions")
    rep.add_argument("--out", help="Markdown file to write (default: <first session>/report.md; the PNG goes beside it)")

    ops = sub.add_parser("ops", help="list the nki.isa and nki.language APIs the emulator supports")
    ops.add_argument("--json", action="store_true")

    doc = sub.add_parser(
        "doctor", help="show which Neuron software (nki, neuronx-cc, devices, profiler) is here and which backend each command uses"
    )
    doc.add_argument("--json", action="store_true")
    doc.add_argument(
        "--model",
        metavar="MODEL",
        help="also send one tiny request to this model (with the configured endpoint and key) and say what works",
    )
    doc.add_argument("--api-base", help="endpoint for --model (default: the configuration's)")
    doc.add_argument("--api-key-env", help="environment variable holding the key for --model")
    doc.add_argument("--workspace", default=".", help="the repository whose configuration --model uses (default: here)")

    cc = sub.add_parser("crosscheck", help="run a kernel on the emulator and on AWS's real toolchain and report the differences")
    cc.add_argument("kernel", help="path to the kernel file")
    cc.add_argument("--task", required=True, help="builtin task name or task file")
    cc.add_argument("--target", choices=["trn1", "trn2", "trn3"], help="Trainium generation (default: trn2)")
    cc.add_argument(
        "--backend",
        choices=["auto", "neuron-sim", "neuron-hw"],
        default="auto",
        help="the real side (default: hardware if present, else AWS's simulator)",
    )
    cc.add_argument("--seeds", type=int, default=VISIBLE_SEEDS, help=f"seeds of the visible shape (default {VISIBLE_SEEDS})")
    cc.add_argument("--report", metavar="OUT.md", help="write a Markdown report to attach to an issue")
    cc.add_argument("--json", action="store_true", help="print the report as JSON")

    integ = sub.add_parser(
        "integrate", help="write a wrapper that calls the kernel from your model on Trainium (original function elsewhere) and its test"
    )
    integ.add_argument("source", metavar="SESSION|KERNEL", help="a session id (its best passing kernel) or a kernel file")
    integ.add_argument("--into", required=True, metavar="PATH.py:FN", help="the model file and function the kernel replaces")
    integ.add_argument("--inputs", help="test inputs NAME:SHAPE:DTYPE,… (default: the task's shapes)")
    integ.add_argument("--task", help="task whose shapes and tolerance the generated test uses (default: the session's task)")
    integ.add_argument("--sessions-dir", default="sessions")

    from .commands.export import add_export_parsers  # export, serve-reward, corpus (argparse only: no heavy imports)

    add_export_parsers(sub)
    return parser


def add_settings_options(p: argparse._ActionsContainer, dest_prefix: str = "") -> None:
    """One flag per :class:`~nkiagent.config.Settings` field (``--timeout-s`` for ``timeout_s``), default None: unset flags do not override the config."""
    from .config import Settings, setting_help

    kinds = {"int": int, "float": float}
    for key, value in Settings().to_dict().items():
        help_, choices, kind = setting_help(key)
        p.add_argument(
            "--" + key.replace("_", "-"),
            dest=dest_prefix + key,
            type=kinds.get(kind, str),
            choices=choices or None,
            default=None,
            metavar=None if choices else key.upper(),
            help=f"{help_} (default: {value if value is not None else 'not set'}; see `nkiagent config show`)",
        )


def _output_options(p: argparse.ArgumentParser) -> None:
    out = p.add_mutually_exclusive_group()
    out.add_argument("-q", "--quiet", action="store_true", help="print only the summary (errors still go to stderr)")
    out.add_argument("-v", "--verbose", action="store_true", help="also print every tool call and result")
    out.add_argument("--json-events", action="store_true", help="print each session event as one JSON object per line on stdout")


def _backend_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        choices=["auto", "emulator", "neuron-sim", "neuron-hw"],
        default="auto",
        help="where kernels run: auto (hardware if present, else AWS's simulator, else the emulator), or one of them; see `nkiagent doctor`",
    )


def _use_backend(requested: str) -> str | None:
    """Resolve ``--backend`` and make it the verifier's default in this process; an error text if unavailable."""
    import os

    from .backends import BackendUnavailable, detect, select_backend
    from .verify.verifier import BACKEND_ENV

    try:
        os.environ[BACKEND_ENV] = select_backend(requested, detect())
    except BackendUnavailable as exc:
        return str(exc)
    return None


#: exit codes, documented in the README ("Exit codes")
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 130, 141

#: optional packages → the extra of pyproject.toml that installs them
EXTRAS = {"ray": "ray", "pyarrow": "export", "datasets": "export", "torch": "torch"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; interrupts, closed pipes and missing optional packages end with one line, not a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    name = f"nkiagent {args.command}" if args.command else "nkiagent"
    restore = _catch_ctrl_c()
    try:
        return _dispatch(parser, args)
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if root not in EXTRAS:
            raise
        print(f"{name}: this needs {root}, which is not installed: pip install 'nkiagent[{EXTRAS[root]}]'", file=sys.stderr)
        return EXIT_USAGE
    finally:
        restore()


def _catch_ctrl_c() -> Callable[[], None]:
    """ctrl+c raises KeyboardInterrupt as always, and also sets the flag the model waits poll: Python drops an
    exception raised inside a weakref or import-lock callback, and a ctrl+c landing there was lost. Returns what
    puts the previous handler back and clears the flag (a caller of :func:`main` in-process goes on)."""
    import signal
    import threading
    import types

    from .agent.models.base import INTERRUPTED

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return lambda: None  # not ours to change: an embedding program or a test harness handles ctrl+c

    def on_sigint(signum: int, frame: types.FrameType | None) -> None:
        INTERRUPTED.set()
        if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            return  # raised here it would be dropped with an "Exception ignored" traceback; the next poll raises it
        signal.default_int_handler(signum, frame)

    INTERRUPTED.clear()
    signal.signal(signal.SIGINT, on_sigint)

    def restore() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        INTERRUPTED.clear()

    return restore


def _quiet_stdout() -> None:
    """The reader of our stdout went away (``| head``): send the rest to /dev/null so the exit flush does not fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    if args.completion:
        from .commands.completion import completion_script

        print(completion_script(parser, args.completion))
        return 0
    if args.command == "config":
        from .commands.agent import run_config

        return run_config(args)
    if args.command == "simulate":
        from .commands.simulate import run_simulate

        return run_simulate(args)
    if args.command == "profile":
        from .commands.profile import run_profile

        return run_profile(args)
    if args.command in ("eval", "run"):
        problem = _use_backend(args.backend)
        if problem:
            print(f"nkiagent {args.command}: {problem}", file=sys.stderr)
            return 2
    if args.command == "eval":
        from .commands.evaluate import run_eval

        return run_eval(args)
    if args.command == "tasks":
        from .commands.evaluate import run_tasks

        return run_tasks(args)
    if args.command == "task":
        if args.task_command != "new":
            parser.parse_args(["task", "--help"])
        from .commands.task_new import run_task_new

        return run_task_new(args)
    if args.command in ("run", "demo", "sessions", "resume", "undo"):
        from .commands import agent

        return {
            "run": agent.run_run,
            "demo": agent.run_demo,
            "sessions": agent.run_sessions,
            "resume": agent.run_sessions,
            "undo": agent.run_undo,
        }[args.command](args)
    if args.command == "search":
        from .commands.search import run_search_command

        return run_search_command(args)
    if args.command == "report":
        from .commands.report import run_report

        return run_report(args)
    if args.command == "ops":
        from .commands.simulate import run_ops

        return run_ops(args)
    if args.command in ("export", "serve-reward", "corpus"):
        from .commands import export

        return {"export": export.run_export, "serve-reward": export.run_serve_reward, "corpus": export.run_corpus}[args.command](args)
    if args.command in ("doctor", "crosscheck", "integrate"):
        from .commands import crosscheck, doctor, integrate

        return {"doctor": doctor.run_doctor, "crosscheck": crosscheck.run_crosscheck, "integrate": integrate.run_integrate}[args.command](
            args
        )
    if args.command is None:
        from .commands.agent import run_ui

        return run_ui(args)
    parser.print_help()
    return 0


def entry() -> None:
    """The ``nkiagent`` command: :func:`main`, and after ctrl+c an exit at once — threads still waiting on a
    model's retry or a library import must not hold the process open (sessions are fsynced as they go)."""
    import os

    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
