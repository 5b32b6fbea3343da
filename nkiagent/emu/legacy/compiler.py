"""``neuronxcc.nki.compiler``: the 0.1 compiler directives, accepted by the emulator.

Decorators that steer the compiler's passes (``skip_middle_end_transformations``,
``enable_stack_allocator``, ``force_auto_alloc``) change nothing the emulator models and
return the kernel unchanged; ``allocation_scope`` / ``multi_buffer`` are
no-op context managers (execution is always in program order); ``no_reorder`` is the 0.2+
``nl.no_reorder``, which marks its instructions for the cost model to keep in program order. ``sbuf`` and ``psum`` are
the buffers themselves plus the direct-allocation constructors: ``mod_alloc`` and ``alloc``
place each physical tile at the requested address, and logical blocks that share a physical
tile share its storage, as on the hardware. The 0.1 compiler traced a loop body once, so a
direct allocation inside an NKI loop keeps the placement of its first iteration even when the
kernel advances a Python address counter as it goes (nki-samples' allocated attention).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import kernel_location as _kernel_location
from ..language import no_reorder  # noqa: F401  (re-exported: ncc.no_reorder())
from ..memory import BUFFERS as _BUFFERS
from ..memory import Buffer as _Buffer
from ..memory import running as _running
from .runtime import DirectAlloc as _DirectAlloc


def _directive(func: Any) -> Any:
    """``@directive`` and ``@directive(...)`` both return the kernel unchanged."""
    return func if callable(func) else (lambda f: f)


def skip_middle_end_transformations(func: Any = None) -> Any:
    """Skip the compiler's middle-end passes (no effect in the emulator)."""
    return _directive(func)


def enable_stack_allocator(func: Any = None, log_level: int = 50) -> Any:
    """Allocate SBUF/PSUM with the stack allocator (the emulator's allocator pass is the same for every kernel)."""
    return _directive(func)


def force_auto_alloc(func: Any = None) -> Any:
    """Ignore direct allocation in the kernel (no effect in the emulator)."""
    return _directive(func)


@contextmanager
def allocation_scope() -> Iterator[None]:
    """A scope for tensor allocation (no effect in the emulator)."""
    yield


class _MultiBuffer:
    """``ncc.multi_buffer(factor)``: a multi-buffering directive, usable as a decorator or a ``with`` block."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        return func

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def multi_buffer(factor: int = 2) -> _MultiBuffer:
    """Request ``factor``-way multi-buffered allocation (the emulator's allocator rotates buffers anyway)."""
    return _MultiBuffer(factor)


def _traced_once(make: Callable[[], _DirectAlloc]) -> _DirectAlloc:
    """``make()``, or inside an NKI loop the placement this call site got in the loop's first iteration."""
    ctx = _running()
    if ctx is None or ctx.legacy is None or not ctx.loops:
        return make()
    key = (_kernel_location(), tuple(f[0] for f in ctx.loops), ctx.program_id)
    sites = ctx.legacy.direct_sites
    if key not in sites:
        sites[key] = make()
    return sites[key]


class _SbufSpace(_Buffer):
    """``ncc.sbuf``: the SBUF buffer, ``auto_alloc()``, and direct allocation with ``mod_alloc`` / ``alloc``."""

    __slots__ = ()

    def auto_alloc(self) -> _Buffer:
        return _BUFFERS["sbuf"]

    def mod_alloc(self, *, base_addr: int, base_partition: int = 0, num_par_tiles: Any = (), num_free_tiles: Any = ()) -> _DirectAlloc:
        """Block ``idx`` at byte ``base_addr + linear(idx mod num_free_tiles) · tile_bytes`` of every partition."""
        return _traced_once(lambda: _DirectAlloc("sbuf", int(base_addr), tuple(num_free_tiles)))

    def alloc(self, func: Callable[..., Any]) -> _DirectAlloc:
        """Block ``idx`` at ``func(idx, pdim_size, fdim_size) = (start_partition, byte_addr)``."""
        return _traced_once(lambda: _DirectAlloc("sbuf", func=func))


class _PsumSpace(_Buffer):
    """``ncc.psum``: the PSUM buffer, ``auto_alloc()``, and direct allocation by bank with ``mod_alloc`` / ``alloc``."""

    __slots__ = ()

    def auto_alloc(self) -> _Buffer:
        return _BUFFERS["psum"]

    def mod_alloc(self, *, base_bank: int, base_addr: int = 0, base_partition: int = 0, num_bank_tiles: Any = (), num_par_tiles: Any = (),
                  num_free_tiles: Any = ()) -> _DirectAlloc:
        """Block ``idx`` in bank ``base_bank + linear(idx mod num_bank_tiles)`` (2 KiB each), at ``base_addr`` in it."""
        tiles = tuple(num_bank_tiles) or tuple(num_free_tiles)
        return _traced_once(lambda: _DirectAlloc("psum", int(base_bank) * 2048 + int(base_addr), tiles, bank=bool(tuple(num_bank_tiles))))

    def alloc(self, func: Callable[..., Any]) -> _DirectAlloc:
        return _traced_once(lambda: _DirectAlloc("psum", func=func))


sbuf = _SbufSpace("sbuf")
psum = _PsumSpace("psum")
