"""Column types of a table schema (docs/primary-key-tables.md §2): their names, parameters and canonical text.

    BOOLEAN  INT (alias INTEGER)  BIGINT  FLOAT  DOUBLE  STRING  BYTES
    DECIMAL(p,s)   1 <= p <= 38, 0 <= s <= p   (DECIMAL alone is DECIMAL(10,0), DECIMAL(p) is DECIMAL(p,0))
    DATE
    TIMESTAMP(p)   0 <= p <= 6                 (TIMESTAMP alone is TIMESTAMP(6))

Type names are case-insensitive in a schema string; ``str(DataType)`` is the canonical spelling that the
znode and the wire carry ("BIGINT", "DECIMAL(10,2)", "TIMESTAMP(6)"), so ``parse_type(str(t)) == t``.
How each type's values are encoded is in ``fluss_py.schema.values``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from fluss_py.errors import InvalidRequestError

MAX_DECIMAL_PRECISION = 38
MAX_TIMESTAMP_PRECISION = 6
DEFAULT_DECIMAL_PRECISION = 10


class TypeRoot(Enum):
    """The type families; the value is the canonical name."""

    BOOLEAN = "BOOLEAN"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    STRING = "STRING"
    BYTES = "BYTES"
    DECIMAL = "DECIMAL"
    DATE = "DATE"
    TIMESTAMP = "TIMESTAMP"


_ALIASES = {"INTEGER": TypeRoot.INT}
_ROOTS = {root.value: root for root in TypeRoot} | _ALIASES
# fixed-width encodings (struct format characters, big-endian); the others are length-prefixed
FIXED_FORMATS = {
    TypeRoot.BOOLEAN: "B",
    TypeRoot.INT: "i",
    TypeRoot.BIGINT: "q",
    TypeRoot.FLOAT: "f",
    TypeRoot.DOUBLE: "d",
    TypeRoot.DATE: "i",
    TypeRoot.TIMESTAMP: "q",
}
_TYPE_RE = re.compile(r"\s*([A-Za-z]+)\s*(?:\(\s*(\d{1,3})\s*(?:,\s*(\d{1,3})\s*)?\))?\s*")


@dataclass(frozen=True, slots=True)
class DataType:
    """One column type. ``precision``/``scale`` are set for DECIMAL (both) and TIMESTAMP (precision) only;
    construct through ``parse_type`` or ``DataType.of`` to get the defaults filled and the bounds checked."""

    root: TypeRoot
    precision: int | None = None
    scale: int | None = None

    def __post_init__(self) -> None:
        problem = _problem(self.root, self.precision, self.scale)
        if problem:
            raise InvalidRequestError(f"invalid type {self.root.value}: {problem}")

    @classmethod
    def of(cls, root: TypeRoot, precision: int | None = None, scale: int | None = None) -> DataType:
        """``root`` with the defaults of an omitted precision/scale filled in."""
        if root is TypeRoot.DECIMAL:
            precision = DEFAULT_DECIMAL_PRECISION if precision is None else precision
            scale = 0 if scale is None else scale
        elif root is TypeRoot.TIMESTAMP and precision is None:
            precision = MAX_TIMESTAMP_PRECISION
        return cls(root, precision, scale)

    @property
    def fixed_format(self) -> str | None:
        """The struct format character of a fixed-width type, None for STRING, BYTES and DECIMAL."""
        return FIXED_FORMATS.get(self.root)

    def __str__(self) -> str:
        if self.root is TypeRoot.DECIMAL:
            return f"DECIMAL({self.precision},{self.scale})"
        if self.root is TypeRoot.TIMESTAMP:
            return f"TIMESTAMP({self.precision})"
        return self.root.value


def _problem(root: TypeRoot, precision: int | None, scale: int | None) -> str | None:
    if not isinstance(root, TypeRoot):
        return f"unknown type root {root!r}"
    if root is TypeRoot.DECIMAL:
        if type(precision) is not int or not 1 <= precision <= MAX_DECIMAL_PRECISION:
            return f"precision {precision!r} is outside 1..{MAX_DECIMAL_PRECISION}"
        if type(scale) is not int or not 0 <= scale <= precision:
            return f"scale {scale!r} is outside 0..{precision} (the precision)"
        return None
    if root is TypeRoot.TIMESTAMP:
        if type(precision) is not int or not 0 <= precision <= MAX_TIMESTAMP_PRECISION:
            return f"precision {precision!r} is outside 0..{MAX_TIMESTAMP_PRECISION}"
        return None if scale is None else "takes no scale"
    if precision is not None or scale is not None:
        return "takes no parameters"
    return None


def parse_type(text: str) -> DataType:
    """``"decimal(10, 2)"`` -> ``DataType(DECIMAL, 10, 2)``; InvalidRequestError naming what is wrong."""
    m = _TYPE_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidRequestError(f"cannot parse type {text!r} (expected e.g. BIGINT, DECIMAL(10,2), TIMESTAMP(3))")
    name, p, s = m.group(1).upper(), m.group(2), m.group(3)
    root = _ROOTS.get(name)
    if root is None:
        known = ", ".join(sorted(_ROOTS))
        raise InvalidRequestError(f"unknown type {m.group(1)!r} (known: {known})")
    if p is not None and root not in (TypeRoot.DECIMAL, TypeRoot.TIMESTAMP):
        raise InvalidRequestError(f"type {root.value} takes no parameters: {text.strip()!r}")
    if s is not None and root is not TypeRoot.DECIMAL:
        raise InvalidRequestError(f"type {root.value} takes at most one parameter: {text.strip()!r}")
    return DataType.of(root, None if p is None else int(p), None if s is None else int(s))
