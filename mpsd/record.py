"""Plain value records: what ``@dataclass(frozen=True)`` gave, without importing ``dataclasses``.

``dataclasses`` imports ``inspect``, which costs a command that loads a record (``mpsd status``
loads ``Config``, ``Limits`` and ``Sample``) a large share of its start-up. A record names its
fields in order in ``_fields`` (and ``__slots__ = _fields``) and sets them in an explicit
``__init__`` taking the same keywords; this base adds equality, a hash, a repr, ``replace``
and ``as_dict`` over those fields. Records are values: nothing changes a field after
``__init__``; ``replace`` makes a changed copy.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs start-up; mypy still reads the block below
if TYPE_CHECKING:
    from typing import Any, ClassVar, Self


class Record:
    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((self.__class__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, in order (``dataclasses.asdict`` for flat records)."""
        return {name: getattr(self, name) for name in self._fields}

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{**self.as_dict(), **changes})
