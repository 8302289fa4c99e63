"""One column value: Python value <-> bytes, per type (docs/primary-key-tables.md §2 and §3.1). Pure.

Each type gets, per column, closures made once when a schema version is compiled (``fluss_py.schema.plan``):

    encoder(value) -> bytes          checks the Python value (type, range, digits) and encodes it
    fixed types (BOOLEAN INT BIGINT FLOAT DOUBLE DATE TIMESTAMP): one struct character each (types.FIXED_FORMATS);
        check(raw)  -> None          refuses an unpacked raw value that no Python value encodes to (None: any)
        to_py(raw)  -> value         the Python value of a raw value (None: the raw value is the value)
    variable types (STRING BYTES: u32 length; DECIMAL: u8 length) — the payload after the length:
        check_payload(bytes) -> None / payload_to_py(bytes) -> value

Encodings are canonical, so that equal keys are equal bytes: BOOLEAN is 0 or 1, a DECIMAL's unscaled value
is in the fewest bytes of two's complement, a TIMESTAMP(p) holds a multiple of 10^(6-p) microseconds. A
decoder refuses anything else. FLOAT and DOUBLE are kept bit for bit (they cannot be primary-key columns).
Every refusal is an InvalidRowError naming the column.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from fluss_py.errors import InvalidRowError
from fluss_py.schema.types import DataType, TypeRoot

U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
MAX_DECIMAL_BYTES = 16  # 10^38 - 1 needs 127 bits
_EPOCH = datetime(1970, 1, 1)
_US = timedelta(microseconds=1)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
MIN_DATE_DAYS = date.min.toordinal() - _EPOCH_ORDINAL
MAX_DATE_DAYS = date.max.toordinal() - _EPOCH_ORDINAL
MIN_TIMESTAMP_US = (datetime.min - _EPOCH) // _US
MAX_TIMESTAMP_US = (datetime.max - _EPOCH) // _US

Encoder = Callable[[Any], bytes]
Check = Callable[[Any], None]
ToPy = Callable[[Any], Any]


def describe(name: str, dtype: DataType) -> str:
    return f"column {name!r} ({dtype})"


def _refuse(name: str, dtype: DataType, problem: str) -> InvalidRowError:
    return InvalidRowError(f"{describe(name, dtype)}: {problem}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_var(dtype: DataType) -> bool:
    return dtype.fixed_format is None


def fixed_size(dtype: DataType) -> int:
    """Bytes of a fixed-width type's value (not for STRING, BYTES, DECIMAL)."""
    return struct.calcsize(">" + dtype.fixed_format)  # type: ignore[operator]


def length_prefix(dtype: DataType) -> struct.Struct:
    """The length field of a variable-width type."""
    return U8 if dtype.root is TypeRoot.DECIMAL else U32


# ---------------------------------------------------------------- Python value -> bytes


def encoder(name: str, dtype: DataType) -> Encoder:
    """The checking encoder of one column (the value is never None here: nulls live in the bitmap)."""
    root = dtype.root
    wrong = _wrong_type(name, dtype)
    if root is TypeRoot.BOOLEAN:

        def enc_bool(v: Any) -> bytes:
            if v is True:
                return b"\x01"
            if v is False:
                return b"\x00"
            raise wrong(v)

        return enc_bool
    if root in (TypeRoot.INT, TypeRoot.BIGINT):
        packer = struct.Struct(">" + dtype.fixed_format).pack  # type: ignore[operator]
        bits = 32 if root is TypeRoot.INT else 64
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

        def enc_int(v: Any) -> bytes:
            if not isinstance(v, int) or isinstance(v, bool):
                raise wrong(v)
            if not lo <= v <= hi:
                raise _refuse(name, dtype, f"{v} is outside {lo}..{hi}")
            return packer(v)

        return enc_int
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        packer = struct.Struct(">" + dtype.fixed_format).pack  # type: ignore[operator]

        def enc_float(v: Any) -> bytes:
            if not isinstance(v, (float, int)) or isinstance(v, bool):
                raise wrong(v)
            try:
                return packer(v)
            except (OverflowError, struct.error):
                raise _refuse(name, dtype, f"{_shown(v)} is out of range") from None

        return enc_float
    if root is TypeRoot.STRING:

        def enc_str(v: Any) -> bytes:
            if not isinstance(v, str):
                raise wrong(v)
            try:
                data = v.encode("utf-8")
            except UnicodeEncodeError:
                raise _refuse(name, dtype, "not encodable as UTF-8 (a lone surrogate)") from None
            return U32.pack(len(data)) + data

        return enc_str
    if root is TypeRoot.BYTES:

        def enc_bytes(v: Any) -> bytes:
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise wrong(v)
            data = bytes(v)
            return U32.pack(len(data)) + data

        return enc_bytes
    if root is TypeRoot.DECIMAL:
        return _decimal_encoder(name, dtype, wrong)
    if root is TypeRoot.DATE:

        def enc_date(v: Any) -> bytes:
            if not isinstance(v, date) or isinstance(v, datetime):
                raise wrong(v)
            return _I32.pack(v.toordinal() - _EPOCH_ORDINAL)

        return enc_date
    return _timestamp_encoder(name, dtype, wrong)


def _wrong_type(name: str, dtype: DataType) -> Callable[[Any], InvalidRowError]:
    expected = {
        TypeRoot.BOOLEAN: "a bool",
        TypeRoot.INT: "an int",
        TypeRoot.BIGINT: "an int",
        TypeRoot.FLOAT: "a float",
        TypeRoot.DOUBLE: "a float",
        TypeRoot.STRING: "a str",
        TypeRoot.BYTES: "bytes",
        TypeRoot.DECIMAL: "a decimal.Decimal or an int",
        TypeRoot.DATE: "a datetime.date",
        TypeRoot.TIMESTAMP: "a datetime.datetime",
    }[dtype.root]

    def wrong(v: Any) -> InvalidRowError:
        return _refuse(name, dtype, f"expected {expected}, got {type(v).__name__} {_shown(v)}")

    return wrong


def decimal_unscaled(v: Decimal | int, scale: int) -> int | None:
    """The unscaled integer of ``v`` at ``scale``, or None when ``v`` has non-zero digits beyond it.
    Exact integer arithmetic (a Decimal context would round 38-digit values)."""
    if isinstance(v, int):
        return v * 10**scale
    sign, digits, exponent = v.as_tuple()
    magnitude = int("".join(map(str, digits))) if digits else 0
    shift = exponent + scale  # type: ignore[operator]
    if shift >= 0:
        magnitude *= 10**shift
    else:
        magnitude, rest = divmod(magnitude, 10**-shift)
        if rest:
            return None
    return -magnitude if sign else magnitude


def decimal_bytes(unscaled: int) -> bytes:
    """Fewest bytes of big-endian two's complement (0 is one zero byte)."""
    size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return unscaled.to_bytes(size, "big", signed=True)


def _decimal_encoder(name: str, dtype: DataType, wrong: Callable[[Any], InvalidRowError]) -> Encoder:
    scale, limit = dtype.scale or 0, 10 ** (dtype.precision or 0)

    def enc_decimal(v: Any) -> bytes:
        if isinstance(v, bool) or not isinstance(v, (Decimal, int)):
            raise wrong(v)
        if isinstance(v, Decimal) and not v.is_finite():
            raise _refuse(name, dtype, f"{v} is not a finite number")
        unscaled = decimal_unscaled(v, scale)
        if unscaled is None:
            raise _refuse(name, dtype, f"{v} has more than {scale} digits after the point")
        if not -limit < unscaled < limit:
            raise _refuse(name, dtype, f"{v} has more than {dtype.precision} digits")
        data = decimal_bytes(unscaled)
        return U8.pack(len(data)) + data

    return enc_decimal


def _timestamp_encoder(name: str, dtype: DataType, wrong: Callable[[Any], InvalidRowError]) -> Encoder:
    unit = 10 ** (6 - (dtype.precision or 0))
    packer = struct.Struct(">q").pack

    def enc_timestamp(v: Any) -> bytes:
        if not isinstance(v, datetime):
            raise wrong(v)
        if v.tzinfo is not None:
            try:
                v = v.astimezone(UTC).replace(tzinfo=None)
            except OverflowError:
                raise _refuse(name, dtype, f"{v} is out of range in UTC") from None
        micros = (v - _EPOCH) // _US
        if micros % unit:
            raise _refuse(name, dtype, f"{v} has digits below the precision ({dtype.precision} after the second)")
        return packer(micros)

    return enc_timestamp


# ---------------------------------------------------------------- bytes -> checked raw / Python value


def fixed_check(name: str, dtype: DataType) -> Check | None:
    """The check of an unpacked fixed-width raw value, None when every raw value is valid."""
    root = dtype.root
    if root is TypeRoot.BOOLEAN:

        def check_bool(raw: int) -> None:
            if raw > 1:
                raise _refuse(name, dtype, f"byte {raw} is not 0 or 1")

        return check_bool
    if root is TypeRoot.DATE:

        def check_date(raw: int) -> None:
            if not MIN_DATE_DAYS <= raw <= MAX_DATE_DAYS:
                raise _refuse(name, dtype, f"{raw} days from the epoch is outside years 1..9999")

        return check_date
    if root is TypeRoot.TIMESTAMP:
        unit = 10 ** (6 - (dtype.precision or 0))

        def check_timestamp(raw: int) -> None:
            if not MIN_TIMESTAMP_US <= raw <= MAX_TIMESTAMP_US:
                raise _refuse(name, dtype, f"{raw} microseconds from the epoch is outside years 1..9999")
            if raw % unit:
                raise _refuse(name, dtype, f"{raw} microseconds has digits below the precision")

        def check_timestamp_us(raw: int) -> None:
            if not MIN_TIMESTAMP_US <= raw <= MAX_TIMESTAMP_US:
                raise _refuse(name, dtype, f"{raw} microseconds from the epoch is outside years 1..9999")

        return check_timestamp if unit > 1 else check_timestamp_us
    return None


def fixed_to_py(name: str, dtype: DataType) -> ToPy | None:
    """Raw value -> Python value, checking as ``fixed_check`` does; None when the raw value is the value."""
    root = dtype.root
    check = fixed_check(name, dtype)
    if root is TypeRoot.BOOLEAN:

        def to_bool(raw: int) -> bool:
            check(raw)  # type: ignore[misc]
            return raw == 1

        return to_bool
    if root is TypeRoot.DATE:

        def to_date(raw: int) -> date:
            check(raw)  # type: ignore[misc]
            return date.fromordinal(raw + _EPOCH_ORDINAL)

        return to_date
    if root is TypeRoot.TIMESTAMP:

        def to_timestamp(raw: int) -> datetime:
            check(raw)  # type: ignore[misc]
            return _EPOCH + timedelta(microseconds=raw)

        return to_timestamp
    return None


def payload_check(name: str, dtype: DataType) -> Callable[[bytes], None] | None:
    """The check of a variable-width payload (after its length), None when any bytes are valid (BYTES)."""
    if dtype.root is TypeRoot.STRING:
        to_str = payload_to_py(name, dtype)
        return to_str  # decoding is the check; the str is dropped
    if dtype.root is TypeRoot.DECIMAL:
        return payload_to_py(name, dtype)
    return None


def payload_to_py(name: str, dtype: DataType) -> Callable[[bytes], Any]:
    """A variable-width payload -> Python value, refusing invalid UTF-8 and non-canonical decimals."""
    if dtype.root is TypeRoot.STRING:

        def to_str(payload: bytes) -> str:
            try:
                return payload.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _refuse(name, dtype, f"invalid UTF-8 at byte {e.start}") from None

        return to_str
    if dtype.root is TypeRoot.BYTES:
        return bytes
    scale, limit = dtype.scale or 0, 10 ** (dtype.precision or 0)

    def to_decimal(payload: bytes) -> Decimal:
        if not 1 <= len(payload) <= MAX_DECIMAL_BYTES:
            raise _refuse(name, dtype, f"unscaled value of {len(payload)} bytes (1..{MAX_DECIMAL_BYTES})")
        unscaled = int.from_bytes(payload, "big", signed=True)
        if not -limit < unscaled < limit:
            raise _refuse(name, dtype, f"unscaled value {unscaled} has more than {dtype.precision} digits")
        if len(payload) > 1 and decimal_bytes(unscaled) != payload:
            raise _refuse(name, dtype, "unscaled value not in its fewest bytes")
        return Decimal(f"{unscaled}e-{scale}")

    return to_decimal
