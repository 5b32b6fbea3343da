"""``NeuronBackend``: AWS's real simulator, compiler and Trainium hardware behind the backend interface.

Two modes:

* ``neuron-sim`` — functional runs through AWS's simulator (``nki.simulate(kernel)(*arrays)``
  or legacy ``neuronxcc.nki.simulate_kernel``) inside the same sandboxed worker the emulator
  uses. The simulator has no latency model, so these runs are untimed. With ``neuronx-cc``
  installed, :meth:`NeuronBackend.check_compile` also compiles the kernel for the target
  (``baremetal`` with ``--target``/``--lnc``; a NEFF written before the device-less run failed
  counts as compiled), catching what the simulator misses (SBUF capacity, MLIR verifier).
* ``neuron-hw`` — the kernel is compiled and run on a NeuronCore by a driver process
  (``python -m nkiagent.backends.driver``, which calls ``baremetal`` with ``--target`` and
  ``--lnc``), then timed from the NEFF alone with the profiler (``neuron-profile`` or
  ``neuron-explorer``): warm-up captures, then rounds of captures, the median of
  ``total_time`` per round, repeated until the max–min spread is ≤ 1 % (NKIBench's gate).
  The last capture's summary JSON (engine active fractions, HBM bytes, FLOPs) becomes a
  :class:`nkiagent.perf.Profile` labelled ``neuron-profile``.

Each hardware process is pinned to one NeuronCore with ``NEURON_RT_VISIBLE_CORES`` (a lock
file per core, so parallel evaluations never share one), and compile artifacts (NEFF plus the
hardware outputs for those exact inputs) are cached by source, inputs, target, LNC and
toolchain versions. Compiler failures are mapped to the verifier's reasons: the NCC code,
the kernel's ``file:line`` and the message.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .base import RunResult, detect_api
from .detect import Toolchain, detect

__all__ = [
    "NCC_HINTS",
    "SPREAD_LIMIT",
    "CorePool",
    "NeuronBackend",
    "compiler_error",
    "profile_from_summary",
    "summary_metrics",
]

#: NKIBench retries until (max − min) / min of the captured latencies is at most this.
SPREAD_LIMIT = 0.01

#: What the documented compiler codes mean (nki-reference.md §3.9), appended to the verifier's reason.
NCC_HINTS = {
    "GCA035": "SBUF overflow: an instruction's tiles exceed the per-partition SBUF size",
    "GCA046": "buffer overflow (infinite-cost nodes): use smaller local buffers",
    "NLA001": "allocated memory out of bounds",
    "NKI005": "non-IO HBM tensor in an allocated kernel",
    "TEN404": "`+=` on an SBUF tile is not supported",
    "F134": "the compiler terminated abnormally",
    "NCC_ISCH714": "PSUM read while material-blocking is open, or an aliased address= read-after-write",
    "NCC_IBIR441": "memset of a bf16 transpose PSUM tile",
    "NCC_INLA001": "4-D affine_select destination access pattern",
    "NCC_IXGM002": "fori_loop / while_loop basic blocks differ between cores",
    "NCC_ICFG018": "nested dynamic loops are not supported",
}

_CODE_RE = re.compile(r"\[(NCC_[A-Z]+\d+|[A-Z]{1,4}\d{3})\]")


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nkiagent"


def compiler_error(text: str, kernel_path: str, shown_as: str | None = None) -> dict[str, Any]:
    """Turn the compiler's output into the verifier's error record: code, ``file:line``, message.

    The code is the bracketed NCC code (``[NCC_IBIR441]``, ``[GCA035]``); the line is the last
    traceback frame or ``path:line`` in the kernel file; the message is the line carrying the
    code (else the last non-empty line). ``shown_as`` replaces the kernel path in the location.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    code, message = "", lines[-1] if lines else "the compiler failed without output"
    for ln in lines:
        m = _CODE_RE.search(ln)
        if m:
            code, message = m.group(1), ln
            break
    name = re.escape(kernel_path)
    lineno = ""
    for m in re.finditer(rf'File "{name}", line (\d+)|{name}:(\d+)', text):
        lineno = m.group(1) or m.group(2)
    location = f"{shown_as or kernel_path}:{lineno}" if lineno else f"{shown_as or kernel_path}:0"
    message = message.replace(kernel_path, shown_as or kernel_path)  # the scratch copy's path means nothing to the user
    hint = NCC_HINTS.get(code, "")
    return {"kind": "compiler", "code": code or "compile", "message": message[:2000], "location": location, "hint": hint}


def summary_metrics(summary: Any) -> dict[str, Any]:
    """The metrics of ``neuron-profile view --output-format summary-json``.

    The real output is ``{"<neff name>": {"total_time": seconds, …}}``; a bare metrics object is
    accepted as well.
    """
    if isinstance(summary, dict) and "total_time" not in summary and summary:
        first = next(iter(summary.values()))
        if isinstance(first, dict):
            return first
    if isinstance(summary, dict):
        return summary
    raise ValueError(f"unexpected profiler summary: {type(summary).__name__}")


_ENGINE_FIELDS = (("TensorE", "tensor_engine"), ("VectorE", "vector_engine"), ("ScalarE", "scalar_engine"),
                  ("GpSimd", "gpsimd_engine"), ("DMA", "dma"))


def profile_from_summary(metrics: dict[str, Any], target: str, latency_us: float, profiler_version: str) -> Any:
    """A :class:`nkiagent.perf.Profile` from the profiler's summary metrics, labelled ``neuron-profile``.

    ``*_active_time_percent`` fields are fractions (0.28 = 28 %) and ``*_active_time`` seconds,
    as Neuron Explorer 2.32 writes them.
    """
    from ..perf import EngineStat, Profile

    engines = {}
    for label, key in _ENGINE_FIELDS:
        frac = metrics.get(f"{key}_active_time_percent")
        if frac is None:
            continue
        busy_s = metrics.get(f"{key}_active_time")
        busy_us = float(busy_s) * 1e6 if busy_s is not None else float(frac) * latency_us
        count = int(metrics.get(f"{key}_instruction_count", 0) or 0)
        engines[label] = EngineStat(round(busy_us, 3), round(100.0 * float(frac), 2), count)
    bottleneck = max(engines, key=lambda k: engines[k].active_pct) if engines else ""
    flops = float(metrics.get("hardware_flops", 0) or 0)
    hbm_r, hbm_w = int(metrics.get("hbm_read_bytes", 0) or 0), int(metrics.get("hbm_write_bytes", 0) or 0)
    mfu = float(metrics.get("mfu_estimated_percent", 0) or 0) * 100.0
    return Profile(
        target=target,
        latency_us=round(latency_us, 3),
        timing_source="neuron-profile",
        model_version=profiler_version,
        instructions=int(metrics.get("instruction_count", 0) or 0),
        engines=engines,
        bottleneck=bottleneck,
        hbm_read_bytes=hbm_r,
        hbm_write_bytes=hbm_w,
        dma_count=int(metrics.get("dma_instruction_count", 0) or 0),
        dma_histogram={},
        flops=flops,
        hfu_pct=round(mfu, 2),
        mfu_pct=round(mfu, 2),
        arithmetic_intensity=round(float(metrics.get("mm_arithmetic_intensity", 0) or 0), 2),
        roofline_us=0.0,
        roofline_bound="",
    )


class CorePool:
    """One lock file per NeuronCore: each hardware process holds one core, so parallel runs never collide.

    ``flock`` locks vanish with their process, so a killed evaluation never leaks a core.
    """

    def __init__(self, cores: int, lock_dir: str | Path | None = None) -> None:
        self.cores = max(1, cores)
        self.lock_dir = Path(lock_dir) if lock_dir else _cache_root() / "cores"

    @contextlib.contextmanager
    def acquire(self) -> Iterator[int]:
        """Yield a free core index (blocking on one when all are busy), released on exit."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fds: list[int] = []
        try:
            for core in range(self.cores):
                fd = os.open(self.lock_dir / f"core-{core}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                fds.append(fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield core
                return
            core = os.getpid() % self.cores
            fcntl.flock(fds[core], fcntl.LOCK_EX)
            yield core
        finally:
            for fd in fds:
                os.close(fd)  # closing drops the lock


def _driver_env(toolchain: Toolchain, core: int, target: str, lnc: int, workdir: Path) -> dict[str, str]:
    """The environment of every hardware process: one pinned core, the target, its own inspect dir."""
    from ..sandbox.launch import neuron_env, scrubbed_env

    env = {**scrubbed_env(workdir), **neuron_env()}
    env["PATH"] = os.environ.get("PATH", env["PATH"])  # the Neuron tools live under /opt/aws/neuron/bin and venvs
    env["PYTHONPATH"] = os.pathsep.join([*toolchain.package_paths(), env["PYTHONPATH"]])
    if "LD_LIBRARY_PATH" in os.environ:
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    env["NEURON_RT_VISIBLE_CORES"] = str(core)
    env["NEURON_PLATFORM_TARGET_OVERRIDE"] = target
    env["NEURON_CC_FLAGS"] = f"--target {target} --lnc {lnc}"
    env["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    env["NEURON_RT_INSPECT_OUTPUT_DIR"] = str(workdir / "inspect")
    return env


class NeuronBackend:
    """The real toolchain behind :class:`nkiagent.backends.Backend` (see the module docstring)."""

    def __init__(self, mode: str = "neuron-hw", toolchain: Toolchain | None = None, *, lnc: int = 1,
                 cache_dir: str | Path | None = None, lock_dir: str | Path | None = None, warmup: int = 2,
                 captures: int = 10, max_rounds: int = 3, spread_limit: float = SPREAD_LIMIT, timeout_s: float = 1800.0) -> None:
        if mode not in ("neuron-sim", "neuron-hw"):
            raise ValueError(f"NeuronBackend mode must be neuron-sim or neuron-hw, not {mode!r}")
        self.name = mode
        self.toolchain = toolchain or detect()
        self.lnc = lnc
        self.cache_dir = Path(cache_dir) if cache_dir else _cache_root() / "neff"
        self.pool = CorePool(self.toolchain.neuron_cores or len(self.toolchain.devices), lock_dir)
        self.warmup, self.captures, self.max_rounds = warmup, captures, max_rounds
        self.spread_limit = spread_limit
        self.timeout_s = timeout_s

    def versions(self) -> dict[str, str]:
        return self.toolchain.versions()

    # ---------------------------------------------------------------- the Backend interface
    def run(self, kernel_source: str, inputs: list[np.ndarray], target: str, *, kernel_name: str | None = None,
            timed: bool = True) -> RunResult:
        """Run once on ``inputs``: on the real simulator (untimed), or compiled on hardware and timed."""
        if self.name == "neuron-sim":
            return self._simulate(kernel_source, inputs, target, kernel_name)
        res = RunResult(self.name, target, toolchain=self.versions())
        with tempfile.TemporaryDirectory(prefix="nkiagent-neuron-") as tmp, self.pool.acquire() as core:
            work = Path(tmp)
            built = self.compile(kernel_source, inputs, target, kernel_name=kernel_name, core=core, workdir=work)
            res.measurement["cache_hit"] = built["cache_hit"]
            res.measurement["core"] = core
            if built.get("error"):
                res.error = built["error"]
                return res
            res.outputs = [np.load(p, allow_pickle=False) for p in built["outputs"]]
            if timed:
                prof, meas = self.measure(built["neff"], target, core=core, workdir=work)
                res.measurement.update(meas)
                res.profile, res.latency_us, res.timing_source = prof, prof.latency_us, "neuron-profile"
        return res

    def _simulate(self, source: str, inputs: list[np.ndarray], target: str, kernel_name: str | None) -> RunResult:
        from .emulator import run_in_worker

        res = RunResult(self.name, target, toolchain=self.versions())
        run_in_worker(res, source, inputs, kernel_name, backend="neuron-sim", package_paths=self.toolchain.package_paths())
        return res

    # ---------------------------------------------------------------- compile (cached) and run on a core
    def check_compile(self, source: str, inputs: list[np.ndarray], target: str, *, kernel_name: str | None = None) -> dict[str, Any] | None:
        """Compile only (no device needed): the compiler's error record, or None when it compiled."""
        # where a device exists baremetal also runs the kernel: hold a core like any hardware run
        with tempfile.TemporaryDirectory(prefix="nkiagent-ncc-") as tmp, self.pool.acquire() as core:
            built = self.compile(source, inputs, target, kernel_name=kernel_name, core=core, workdir=Path(tmp), compile_only=True)
        return built.get("error")

    def cache_key(self, source: str, inputs: list[np.ndarray], target: str, kernel_name: str | None, compile_only: bool = False) -> str:
        """Source, exact inputs, target, LNC, kernel name and toolchain versions: same key, same NEFF and outputs."""
        h = hashlib.sha256()
        h.update(json.dumps([source, target, self.lnc, kernel_name or "", self.versions(), compile_only], sort_keys=True).encode())
        for a in inputs:
            arr = np.ascontiguousarray(a)
            h.update(f"{arr.shape}{arr.dtype}".encode())
            h.update(arr.tobytes())
        return h.hexdigest()

    def compile(self, source: str, inputs: list[np.ndarray], target: str, *, kernel_name: str | None = None,
                core: int = 0, workdir: Path, compile_only: bool = False) -> dict[str, Any]:
        """Compile and run once on ``core`` through the driver, or reuse the cached artifacts.

        Returns ``{"neff", "outputs": [paths], "cache_hit"}`` or ``{"error", "cache_hit": False}``;
        ``compile_only`` accepts a NEFF whose run failed (no device) and keeps no outputs.
        """
        from ..sandbox.arrays import save_array

        key = self.cache_key(source, inputs, target, kernel_name, compile_only)
        entry = self.cache_dir / key
        meta_path = entry / "meta.json"
        if meta_path.is_file():
            meta = json.loads(meta_path.read_text())
            return {"neff": str(entry / "kernel.neff"), "outputs": [str(entry / n) for n in meta["outputs"]], "cache_hit": True}
        kpath = workdir / "kernel.py"
        kpath.write_text(source)
        in_paths = []
        for i, a in enumerate(inputs):
            in_paths.append(str(workdir / f"in_{i}.npy"))
            save_array(in_paths[-1], a)
        build = workdir / "build"
        build.mkdir()
        request = {"kernel_path": str(kpath), "kernel_name": kernel_name, "input_paths": in_paths, "out_dir": str(build),
                   "target": target, "lnc": self.lnc, "api": detect_api(source), "package_paths": self.toolchain.package_paths(),
                   "compile_only": compile_only}
        env = _driver_env(self.toolchain, core, target, self.lnc, workdir)
        try:
            proc = subprocess.run([sys.executable, "-s", "-m", "nkiagent.backends.driver"], input=json.dumps(request), capture_output=True,
                                  text=True, env=env, cwd=workdir, timeout=self.timeout_s, start_new_session=True, check=False)
        except subprocess.TimeoutExpired:
            return {"error": {"kind": "timeout", "code": "timeout", "message": f"compile and run exceeded {self.timeout_s:.0f} s",
                              "location": "<driver>:0"}, "cache_hit": False}
        answer = _last_json(proc.stdout)
        if proc.returncode != 0 or answer is None or answer.get("error"):
            text = (answer or {}).get("error") or (proc.stdout + "\n" + proc.stderr)
            return {"error": compiler_error(text, str(kpath), shown_as="kernel.py"), "cache_hit": False}
        tmp_entry = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=_ensure(self.cache_dir)))
        shutil.copyfile(answer["neff"], tmp_entry / "kernel.neff")
        names = []
        for k, p in enumerate(answer["outputs"]):
            names.append(f"out_{k}.npy")
            shutil.copyfile(p, tmp_entry / names[-1])
        (tmp_entry / "meta.json").write_text(json.dumps({"outputs": names, "target": target, "lnc": self.lnc, "versions": self.versions()}))
        try:
            os.rename(tmp_entry, entry)  # atomic: a concurrent writer of the same key simply loses
        except OSError:
            shutil.rmtree(tmp_entry, ignore_errors=True)
        return {"neff": str(entry / "kernel.neff"), "outputs": [str(entry / n) for n in names], "cache_hit": False}

    # ---------------------------------------------------------------- timing with the profiler
    def _profiler(self, args: list[str], env: dict[str, str]) -> str:
        proc = subprocess.run([self.toolchain.profiler, *args], capture_output=True, text=True, env=env, timeout=self.timeout_s, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{os.path.basename(self.toolchain.profiler)} {args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        return proc.stdout

    def measure(self, neff: str, target: str, *, core: int, workdir: Path) -> tuple[Any, dict[str, Any]]:
        """Warm up, then capture rounds until the spread gate holds; the median latency and the profile."""
        env = _driver_env(self.toolchain, core, target, self.lnc, workdir)
        prof_dir = workdir / "profiles"
        prof_dir.mkdir(exist_ok=True)
        for i in range(self.warmup):
            self._profiler(["capture", "-n", neff, "-s", str(prof_dir / f"warmup_{i}.ntff")], env)
        rounds: list[dict[str, Any]] = []
        last_metrics: dict[str, Any] = {}
        for r in range(self.max_rounds):
            times = []
            for i in range(self.captures):
                ntff = str(prof_dir / f"r{r}_{i}.ntff")
                self._profiler(["capture", "-n", neff, "-s", ntff], env)
                last_metrics = summary_metrics(json.loads(self._profiler(["view", "--output-format", "summary-json", "-n", neff, "-s", ntff], env)))
                times.append(float(last_metrics["total_time"]) * 1e6)
            spread = (max(times) - min(times)) / min(times) if min(times) > 0 else float("inf")
            rounds.append({"times_us": [round(t, 3) for t in times], "median_us": round(statistics.median(times), 3), "spread": round(spread, 6)})
            if spread <= self.spread_limit:
                break
        best = min(rounds, key=lambda x: x["spread"])
        meas = {"warmup": self.warmup, "captures": self.captures, "rounds": rounds, "median_us": best["median_us"], "spread": best["spread"],
                "spread_limit": self.spread_limit, "stable": best["spread"] <= self.spread_limit, "core": core}
        version = f"{os.path.basename(self.toolchain.profiler)} {self.toolchain.neuronx_cc_version or self.toolchain.nki_version or self.toolchain.neuronxcc_version}".strip()
        return profile_from_summary(last_metrics, target, best["median_us"], version), meas


def _ensure(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
