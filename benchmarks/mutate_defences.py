"""Mutation check of the judge's defences (run by hand): remove one defence at a time, its tests must fail.

    python benchmarks/mutate_defences.py [--only NAME[,NAME…]] [--list]

Each entry below names a defence, the source text that implements it, a replacement that
removes it, and the tests that must then fail. For each, the script checks the current
commit out into a temporary git worktree, applies the one replacement, runs the tests there
and reports whether they failed (they must), then discards the worktree. A defence whose tests
still pass when it is gone is untested. Run on a clean tree: uncommitted changes are not in
the worktree.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    every: bool = False  #: replace every occurrence (a defence written at more than one place)


G = "tests/sandbox/test_guard.py::"
MUTATIONS = [
    # class 1: arbitrary Python in the worker
    Mutation("no compile/exec refusal", "nkiagent/sandbox/guard.py",
             '        """Only the kernel module\'s own code, imports, and the trusted machinery\'s generated methods run."""\n',
             '        """Only the kernel module\'s own code, imports, and the trusted machinery\'s generated methods run."""\n        return\n',
             (G + "test_what_kernel_code_may_not_do_is_refused",)),
    Mutation("no guarded import", "nkiagent/sandbox/guard.py", "        if caller.f_code.co_filename == self.kernel_file:",
             "        if False:", (G + "test_what_kernel_code_may_not_do_is_refused",)),
    Mutation("frames not refused", "nkiagent/sandbox/guard.py", "        if event in _KERNEL_REFUSED and", "        if False and",
             (G + "test_what_kernel_code_may_not_do_is_refused",)),
    Mutation("kernel file reads not refused", "nkiagent/sandbox/guard.py",
             '        if self._initiator(sys._getframe(3)) == "kernel":\n            raise SandboxViolation(f"sandbox: reading',
             '        if False:\n            raise SandboxViolation(f"sandbox: reading', (G + "test_what_kernel_code_may_not_do_is_refused",)),
    Mutation("harness may read the reference cache", "nkiagent/sandbox/guard.py",
             "        if real in self._files or real == self._kernel_real", "        if True or real in self._files or real == self._kernel_real",
             (G + "test_harness_reads_are_limited_to_pythons_files_and_this_requests_inputs",)),
    Mutation("kernels inherit the worker's __future__ flags", "nkiagent/sandbox/worker.py",
             'code = compile(source, kernel_file, "exec", dont_inherit=True)', 'code = compile(source, kernel_file, "exec")',
             (G + "test_honest_python_machinery_runs",)),
    Mutation("kernel module not in sys.modules", "nkiagent/sandbox/worker.py",
             "        sys.modules[name] = module  #", "        module = module  #", (G + "test_honest_python_machinery_runs",)),
    Mutation("trace copy not checked", "nkiagent/sandbox/worker.py", "            if len(trace.instructions) != writer.sent:",
             "            if False:", (G + "test_a_kernel_that_edits_its_own_trace_is_caught_and_the_streamed_copy_is_whole",)),
    Mutation("emulator not fingerprinted", "nkiagent/sandbox/worker.py", "    out: dict[str, int] = {}\n    for m in modules:",
             "    out: dict[str, int] = {}\n    for m in []:", (G + "test_a_kernel_that_patches_an_emulator_class_is_caught",)),
    Mutation("emulator modules not sealed", "nkiagent/sandbox/worker.py", "    _seal(modules, guard)\n", "\n",
             (G + "test_emulator_modules_refuse_attribute_writes_from_kernel_code",)),
    Mutation("stream accepts any count", "nkiagent/emu/trace.py", "            if int(sent) != len(self._trace.instructions):",
             "            if False:", (G + "test_a_cut_or_forged_stream_does_not_decode",)),
    # class 4: the invariant
    Mutation("no one-stream-per-shape check", "nkiagent/verify/verifier.py", "    if task.data_dependent:\n        return True",
             "    if True:\n        return True", ("tests/verify/test_invariant.py::test_a_kernel_whose_instructions_follow_the_data_is_rejected",)),
    Mutation("correctness judged before integrity", "nkiagent/verify/verifier.py",
             "        if be is None and not _judge_integrity(res, task, batch, runs, all_cases):\n            return res\n        _judge_runs(",
             "        _judge_runs(", ("tests/verify/test_redteam.py::test_exploit_is_caught[rt_c5_bits_oracle_softmax]",)),
    # class 5: what failure text shows
    Mutation("hidden sizes shown", "nkiagent/verify/inputs.py", '        return f"a hidden shape ({shape_relation(self.dims_dict, visible)}) with {dist}"',
             '        return f"hidden {self.label()}"',
             ("tests/verify/test_verifier.py::test_shape_specialized_kernel_fails_on_a_hidden_shape_without_naming_it",)),
    Mutation("exact mismatch counts", "nkiagent/verify/compare.py", "    if n < 100:\n        return str(n)", "    if True:\n        return str(n)",
             ("tests/verify/test_redteam.py::test_exploit_is_caught[value_count_oracle_softmax]",)),
    Mutation("hidden error messages unmasked", "nkiagent/verify/verifier.py", '    return _NUMBER.sub("#", _unscratch(', '    return (lambda m: m)(_unscratch(',
             ("tests/verify/test_verifier.py::test_an_error_on_a_hidden_shape_names_the_authors_file_and_dtypes_but_no_sizes",)),
    # class 6: shapes and data
    Mutation("no offset inputs for layernorm", "nkiagent/tasks/builtin/layernorm.py", '"large", "offset", "constant_rows"', '"large", "constant_rows"',
             ("tests/verify/test_redteam.py::test_exploit_is_caught[rt_c6_onepass_layernorm]",)),
    Mutation("no larger hidden shape for bmm", "nkiagent/tasks/builtin/bmm.py", ', {"B": 9, "M": 384, "K": 640, "N": 1024}]', "]",
             ("tests/verify/test_redteam.py::test_exploit_is_caught[rt_c6_n512_only_bmm]",)),
    # class 8: timing-only runs
    Mutation("timing-only reads not noted", "nkiagent/emu/ops.py", "    if len(ctx.data_reads) < 20:", "    if False:",
             ("tests/verify/test_invariant.py::test_timing_only_profile_says_it_is_not_faithful_when_registers_come_from_data",)),
    # classes 2, 3, 7 (the emulator and the cost model)
    Mutation("engine not checked", "nkiagent/emu/engines.py", "    if name not in allowed:", "    if False:",
             ("tests/emu/test_engines.py",)),
    Mutation("onezero promise not checked", "nkiagent/emu/instructions/tensor_engine.py", "        if bad.any():\n            first = np.argwhere(bad)[0]",
             "        if False:\n            first = np.argwhere(bad)[0]", ("tests/emu/test_onezero.py",)),
    Mutation("unpriceable engines priced", "nkiagent/perf/cost.py", "        raise UnpricedInstruction(", "        return Cost(engine, 0.0, 0.0)\n        raise UnpricedInstruction(",
             ("tests/perf/test_cost.py::test_an_engine_without_a_lane_is_refused_not_priced",)),
    Mutation("undeclared engine priced", "nkiagent/perf/cost.py", "    if declared is not None and engine not in declared.engines:", "    if False:",
             ("tests/perf/test_rules.py::test_an_op_on_an_engine_its_declaration_lacks_is_refused",)),
    Mutation("index tiles are not reads", "nkiagent/emu/ops.py", "    if ix:  # what operand addresses come from", "    if False:  # what operand addresses come from",
             ("tests/perf/test_dma_pricing.py::test_a_gather_starts_after_the_vector_engine_chain_that_computes_its_indices",)),
    Mutation("HBM→HBM charged once", "nkiagent/perf/cost.py", "    moved = max(nbytes, hbm_read + hbm_write)", "    moved = nbytes",
             ("tests/perf/test_dma_pricing.py::test_an_hbm_to_hbm_copy_is_not_cheaper_than_the_load_and_store_it_replaces",)),
    Mutation("tiles cross SPMD programs", "nkiagent/emu/ops.py", "            if rec.program != pid:\n                raise _foreign_tile(op, role, rec, pid)\n", "",
             ("tests/emu/test_spmd_launch.py::test_a_tile_of_one_program_cannot_be_used_by_another",), every=True),
    # class 9: the gate's relaxations (removing one must reject honest code)
    Mutation("closure helpers never contained", "nkiagent/verify/gate.py", "        return owner is not None and s is owner and owner.kind == \"function\"",
             "        return False", ("tests/verify/test_gate.py::test_closure_state_is_allowed_only_while_the_helper_stays_inside_the_call",)),
    Mutation("constant numpy tables refused", "nkiagent/verify/gate.py", "        if name in _NUMPY_ARRAY_CONSTRUCTORS and self.constant_table(node):\n            return\n", "",
             ("tests/verify/test_gate.py::test_honest_idioms_the_red_team_found_rejected_now_pass",)),
]


def _run(m: Mutation, scratch: Path) -> tuple[bool, str, float]:
    tree = scratch / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), "HEAD"], cwd=REPO, check=True)
    try:
        target = tree / m.path
        text = target.read_text()
        if m.old not in text:
            return False, "the defence's text is not in the source (update this script)", 0.0
        target.write_text(text.replace(m.old, m.new) if m.every else text.replace(m.old, m.new, 1))
        env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *m.tests], cwd=tree, env=env,
                             capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t
        last = (out.stdout.strip().splitlines() or [""])[-1]
        return out.returncode != 0, last, wall
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or any(part in m.name for part in args.only.split(","))]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.path} → {', '.join(m.tests)}")
        return
    rows = []
    for m in chosen:
        with tempfile.TemporaryDirectory(prefix="nkiagent-mutate-") as tmp:
            failed, last, wall = _run(m, Path(tmp))
        rows.append((m, failed, last, wall))
        print(f"{'caught' if failed else 'NOT CAUGHT'}  {m.name}  ({wall:.0f} s)  {last}", flush=True)
    print("\n| defence removed | tests | they fail? |\n|---|---|---|")
    for m, failed, last, _ in rows:
        print(f"| {m.name} | {', '.join(t.split('::')[-1] for t in m.tests)} | {'yes' if failed else '**NO**'} ({last}) |")
    sys.exit(0 if all(failed for _, failed, _, _ in rows) else 1)


if __name__ == "__main__":
    main()
