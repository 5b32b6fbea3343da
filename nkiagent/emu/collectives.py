"""``nki.collectives``: the multi-rank collectives import, and calling one is the "not emulated" error naming it.

AWS's collectives (``all_gather``, ``all_reduce``, ``collective_permute``, …) move tiles between
the ranks of a collective group: separate launches of the kernel, one per rank, each with its own
inputs. The emulator runs one launch (whose LNC=2 cores do talk: ``nisa.sendrecv`` and
``nisa.core_barrier``), so a collective has no peer ranks to exchange with. Its names still
import, and :class:`ReplicaGroup` is a real value, because AWS's NKI Library and its tests import
and build them at module level, on code paths a run may never reach; the call is where the run
stops, with an error naming the collective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import NkiTypeError, NkiUnsupportedError, NkiValidationError
from .ops import kernel_location

if TYPE_CHECKING:  # not at run time: ``nki.collectives`` shows every public name of this module
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = [
    "ReplicaGroup", "all_gather", "all_gather_v", "all_reduce", "all_to_all", "all_to_all_v", "collective_permute",
    "collective_permute_implicit", "collective_permute_implicit_current_processing_rank_id", "collective_permute_implicit_reduce",
    "rank_id", "reduce_scatter",
]  # fmt: skip
#: AWS's collectives (nki-signatures.txt, SDK 2.29 and HEAD): every public name but the group type, bound at the end.


class ReplicaGroup:
    """The ranks a collective runs on, as rank-lists that do not overlap (AWS's ``nki.collectives.ReplicaGroup``)."""

    def __init__(self, groups: Sequence[Sequence[int]]) -> None:
        lists = [list(g) for g in groups] if isinstance(groups, (list, tuple)) else None
        if lists is None or not all(isinstance(r, int) and not isinstance(r, bool) for g in lists for r in g):
            raise NkiTypeError("err_replica_group", f"ReplicaGroup takes a list of rank-lists of ints, e.g. [[0, 1, 2, 3]], got {groups!r}")
        ranks = [r for g in lists for r in g]
        if len(set(ranks)) != len(ranks):
            raise NkiValidationError("err_replica_group", f"ReplicaGroup {lists}: a rank appears in more than one rank-list")
        self.groups = lists

    def __repr__(self) -> str:
        return f"ReplicaGroup({self.groups})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplicaGroup) and other.groups == self.groups

    def __hash__(self) -> int:
        return hash(tuple(map(tuple, self.groups)))


def _not_emulated(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise NkiUnsupportedError(
            "err_not_emulated",
            f"nki.collectives.{name} is not emulated by the nkiagent emulator: collectives exchange data between the ranks of a "
            "collective group, separate launches the emulator does not run; the two cores of one LNC=2 launch can exchange tiles "
            "with nisa.sendrecv and synchronise with nisa.core_barrier",
            kernel_location(),
        )

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Not emulated: AWS's nki.collectives.{name} needs the other ranks of a collective group."
    return call


all_gather = _not_emulated("all_gather")
all_gather_v = _not_emulated("all_gather_v")
all_reduce = _not_emulated("all_reduce")
all_to_all = _not_emulated("all_to_all")
all_to_all_v = _not_emulated("all_to_all_v")
collective_permute = _not_emulated("collective_permute")
collective_permute_implicit = _not_emulated("collective_permute_implicit")
collective_permute_implicit_current_processing_rank_id = _not_emulated("collective_permute_implicit_current_processing_rank_id")
collective_permute_implicit_reduce = _not_emulated("collective_permute_implicit_reduce")
rank_id = _not_emulated("rank_id")
reduce_scatter = _not_emulated("reduce_scatter")
