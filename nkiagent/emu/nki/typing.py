"""``nki.typing``: tensor annotations (``nt.tensor[128, 512]``, ``nt.mutable_tensor``)."""

from __future__ import annotations

from typing import Any

__all__ = ["mutable_tensor", "scalar", "tensor"]


class _Annotation:
    """Subscriptable annotation object; annotations are documentation for the emulator."""

    def __init__(self, name: str, mutable: bool = False, args: Any = None) -> None:
        self.name = name
        self.mutable = mutable
        self.args = args

    def __getitem__(self, args: Any) -> _Annotation:
        return _Annotation(self.name, self.mutable, args)

    def __repr__(self) -> str:
        return f"nt.{self.name}[{self.args!r}]" if self.args is not None else f"nt.{self.name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor", mutable=True)
scalar = _Annotation("scalar")
