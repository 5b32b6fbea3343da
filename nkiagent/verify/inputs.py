"""The correctness protocol's cases (seeds × value distributions × shapes) and the input cache.

The arrays of a case are drawn by :mod:`nkiagent.sandbox.arrays`, the same in the worker and the
parent, so the parent computes the reference on exactly what the kernel saw.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..sandbox import arrays
from ..sandbox.arrays import OFFSET, make_case_inputs, save_array
from ..tasks.spec import Task
from .protocol import HIDDEN_SEEDS, VISIBLE_SEEDS

__all__ = ["Case", "InputCache", "cases", "describe_distribution"]

_DESCRIPTIONS = {
    "normal": "normal inputs",
    "heavy_tailed": "heavy-tailed inputs (outliers)",
    "large": "large-magnitude inputs (×1000)",
    "offset": f"inputs with a large mean offset (+{OFFSET:g}, standard deviation 1)",
    "constant_rows": "inputs whose rows are constant (some all zero)",
    "native": "the task's own inputs",
}


def describe_distribution(dist: str) -> str:
    """How a failure report names a distribution (its seed and place in the run order stay private)."""
    return _DESCRIPTIONS.get(dist, f"{dist} inputs")


@dataclass(frozen=True)
class Case:
    """One correctness run: a shape variant, a seed and a value distribution."""

    dims: tuple[tuple[str, int], ...]
    seed: int
    distribution: str
    hidden: bool

    @property
    def dims_dict(self) -> dict[str, int]:
        return dict(self.dims)

    def label(self) -> str:
        """The full description, for logs on this machine (it names the hidden shape and the seed)."""
        shape = ",".join(f"{k}={v}" for k, v in self.dims)
        return f"{'hidden ' if self.hidden else ''}shape({shape}) seed={self.seed} dist={self.distribution}"

    def public_label(self, visible: Mapping[str, int]) -> str:
        """What a kernel's author is told about this case: the visible shape by its sizes, a hidden one only by
        how it relates to the visible one, the distribution by name — never a seed, the run order or a hidden size.

        Those would turn failure messages into an oracle: a deliberately wrong kernel could read
        the hidden shapes off them, then specialise to them.
        """
        dist = describe_distribution(self.distribution)
        if not self.hidden:
            return f"the visible shape ({', '.join(f'{k}={v}' for k, v in visible.items())}) with {dist}"
        return f"a hidden shape ({shape_relation(self.dims_dict, visible)}) with {dist}"


def shape_relation(dims: Mapping[str, int], visible: Mapping[str, int]) -> str:
    """``larger than the visible shape in every dimension``, ``N smaller, D larger than the visible shape`` …"""
    rel = {k: "larger" if dims[k] > v else "smaller" if dims[k] < v else "the same" for k, v in visible.items() if k in dims}
    kinds = set(rel.values())
    if len(kinds) == 1 and len(rel) > 1:
        kind = kinds.pop()
        return "the same as the visible shape" if kind == "the same" else f"{kind} than the visible shape in every dimension"
    return ", ".join(f"{k} {v}" for k, v in rel.items()) + " than the visible shape"


def cases(task: Task, seeds: int = VISIBLE_SEEDS, distributions: tuple[str, ...] | None = None) -> list[Case]:
    """Every case of the protocol: the visible shape × ``seeds`` × distribution, then each hidden shape ×
    ``min(seeds, HIDDEN_SEEDS)`` × distribution (two seeds when there is one distribution).

    ``distributions`` defaults to the task's own (:data:`~nkiagent.sandbox.arrays.DISTRIBUTIONS` plus what the task adds).
    A task that draws its own inputs (``Task.generate``) has one distribution, ``native``.
    """
    if distributions is None:
        distributions = task.distributions
    if task.generate is not None:
        distributions = ("native",)
    hidden_seeds = min(seeds, HIDDEN_SEEDS if len(distributions) > 1 else max(2, HIDDEN_SEEDS))
    out = []
    for k, dims in enumerate(task.all_dims()):
        for seed in range(seeds if k == 0 else hidden_seeds):
            for dist in distributions:
                out.append(Case(tuple(sorted(dims.items())), seed, dist, hidden=k > 0))
    return out


#: How inputs are drawn and cached: a change to either module makes a new cache.
_GENERATOR = hashlib.sha256(Path(__file__).read_bytes() + Path(arrays.__file__).read_bytes()).digest()

#: References loaded by this process, most recently used last: every candidate of a task is compared
#: with the same ones (a search verifies hundreds), so they are read from disk once.
_REFS: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
_REFS_LOCK = threading.Lock()
_REFS_MAX_BYTES = 1 << 30
#: A lock per cache directory being built in this process (other processes race to an atomic rename instead).
_BUILDING: dict[str, threading.Lock] = {}
_BUILDING_LOCK = threading.Lock()


class InputCache:
    """Inputs and references of a task's protocol, generated once and kept on tmpfs.

    Every evaluation of the same task reuses them: workers load the inputs (read-only
    files they cannot write: the sandbox only allows writes to their scratch directory) and
    the parent loads the references it computed itself. A directory is published with an
    atomic rename, so concurrent evaluations never see half a cache.
    """

    MAX_BYTES = 4 * 2**30  #: tmpfs is RAM: keep the cache modest
    MIN_IDLE_S = 600.0  #: never evict an entry used in the last ten minutes (another evaluation may be reading it)

    def __init__(self, root: str | None = None) -> None:
        import os
        import tempfile

        env_root = os.environ.get("NKIAGENT_INPUT_CACHE")
        if root or env_root:
            self.root = str(root or env_root)
        else:
            base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
            self.root = os.path.join(base, f"nkiagent-inputs-{os.getuid()}")
        os.makedirs(self.root, exist_ok=True)

    def _key(self, task: Task, all_cases: list[Case]) -> str:
        h = hashlib.sha256()
        src = task.source_path.read_bytes() if task.source_path else task.name.encode()
        h.update(src)
        h.update(repr([(c.dims, c.seed, c.distribution) for c in all_cases]).encode())
        h.update(_GENERATOR)
        return h.hexdigest()[:24]

    def ensure(self, task: Task, all_cases: list[Case]) -> str:
        """The cache directory for these cases, generating inputs and references if needed."""
        import os

        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in task.name)
        final = os.path.join(self.root, f"{safe}-{self._key(task, all_cases)}")
        if os.path.exists(os.path.join(final, "complete")):
            os.utime(final)
            return final
        with _BUILDING_LOCK:
            building = _BUILDING.setdefault(final, threading.Lock())
        with building:  # a second caller in this process (a session preparing its task, say) waits for the first
            if os.path.exists(os.path.join(final, "complete")):
                return final
            return self._build(task, all_cases, final)

    def _build(self, task: Task, all_cases: list[Case], final: str) -> str:
        import os
        import shutil
        import tempfile

        self._evict()
        tmp = tempfile.mkdtemp(prefix=".building-", dir=self.root)

        # the cases of one shape and seed are drawn together (make_case_inputs shares their normals)
        groups: dict[tuple[tuple[tuple[str, int], ...], int], list[int]] = {}
        for i, case in enumerate(all_cases):
            groups.setdefault((case.dims, case.seed), []).append(i)

        def build(members: list[int]) -> None:
            first = all_cases[members[0]]
            drawn = make_case_inputs(task, first.dims_dict, first.seed, [all_cases[i].distribution for i in members])
            for i in members:
                arrays = drawn[all_cases[i].distribution]
                for k, a in enumerate(arrays):
                    save_array(os.path.join(tmp, f"in_{i}_{k}.npy"), a)
                ref = np.asarray(task.reference(*arrays))
                save_array(os.path.join(tmp, f"ref_{i}.npy"), ref)

        # NumPy's generators, its array maths and file writes release the GIL: one thread per core
        with ThreadPoolExecutor(max_workers=max(1, min(len(groups), os.cpu_count() or 1)), thread_name_prefix="nkiagent-inputs") as pool:
            list(pool.map(build, groups.values()))
        for name in os.listdir(tmp):
            os.chmod(os.path.join(tmp, name), 0o444)
        with open(os.path.join(tmp, "complete"), "w") as fh:
            fh.write(str(len(all_cases)))
        try:
            os.rename(tmp, final)
        except OSError:  # another process published it first
            shutil.rmtree(tmp, ignore_errors=True)
        return final

    @staticmethod
    def input_paths(directory: str, index: int, count: int) -> list[str]:
        import os

        return [os.path.join(directory, f"in_{index}_{k}.npy") for k in range(count)]

    @staticmethod
    def reference(directory: str, index: int) -> np.ndarray:
        """The reference output of case ``index`` (read-only), kept in memory for the next candidate of the task."""
        import os

        key = (directory, index)
        with _REFS_LOCK:
            ref = _REFS.get(key)
            if ref is not None:
                _REFS.move_to_end(key)
                return ref
        ref = np.load(os.path.join(directory, f"ref_{index}.npy"), allow_pickle=False)
        ref.flags.writeable = False
        with _REFS_LOCK:
            _REFS[key] = ref
            total = sum(r.nbytes for r in _REFS.values())
            while total > _REFS_MAX_BYTES and len(_REFS) > 1:
                total -= _REFS.popitem(last=False)[1].nbytes
        return ref

    def _evict(self) -> None:
        import os
        import shutil

        entries = []
        for name in os.listdir(self.root):
            path = os.path.join(self.root, name)
            if name.startswith(".building-"):
                continue
            size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)) if os.path.isdir(path) else 0
            entries.append((os.path.getmtime(path), size, path))
        import time

        total = sum(s for _, s, _ in entries)
        now = time.time()
        for mtime, size, path in sorted(entries):
            if total <= self.MAX_BYTES:
                break
            if now - mtime < self.MIN_IDLE_S:
                continue
            shutil.rmtree(path, ignore_errors=True)
            total -= size
