"""Compiled row layouts: what ``RowCodec`` runs per row (docs/primary-key-tables.md §3.1). Pure.

A row's layout is fixed once its schema id and null bitmap are known: which columns are present, where the
fixed-width ones sit between the variable-width ones. ``compile_plan`` turns one (version, bitmap) into a
``RowPlan`` holding straight lists of closures, so the per-row work is a few struct calls and no dispatch on
types:

    validate_steps  one closure per variable-width column and per run of fixed-width columns that needs a
                    check (BOOLEAN, DATE, TIMESTAMP); runs needing no check are a constant skip folded into the
                    next step (``step(data, pos) -> pos``); ``tail`` is the skip after the last step
    decode_steps    one closure per run of fixed-width columns (one ``struct.unpack_from``) and per
                    variable-width column, appending Python values (``step(data, pos, out) -> pos``)
    key_slices      where the primary-key columns are when no variable-width column precedes any of them
                    (constant offsets); else ``key_walk``, the columns to step over up to the last key column

``RowCodec`` caches plans per (schema id, bitmap) and is the only caller.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fluss_py.errors import InvalidRowError
from fluss_py.schema.schema import Column, SchemaVersion
from fluss_py.schema.types import TypeRoot
from fluss_py.schema.values import (
    fixed_check,
    fixed_size,
    fixed_to_py,
    is_var,
    length_prefix,
    payload_check,
    payload_to_py,
)

ValidateStep = Callable[[bytes, int], int]
DecodeStep = Callable[[bytes, int, list], int]
# (None and the size of a fixed-width column or run, or the unpack of a length prefix and its size; slot in the
# key or -1)
WalkEntry = tuple["Callable[[bytes, int], tuple[int]] | None", int, int]


@dataclass(frozen=True, slots=True)
class RowPlan:
    schema_id: int
    header_size: int
    present: tuple[int, ...]  # indexes of the non-null columns, in order
    null_violations: tuple[int, ...]  # NOT NULL columns the bitmap marks null
    column_count: int
    validate_steps: tuple[ValidateStep, ...]
    tail: int
    decode_steps: tuple[DecodeStep, ...]
    key_slices: tuple[tuple[int, int], ...] | None
    key_walk: tuple[WalkEntry, ...]
    key_parts: int
    key_end: int  # the end of the last key slice (key_slices only)


def header_size(column_count: int) -> int:
    return 2 + (column_count + 7) // 8


def null_columns(bitmap: bytes, column_count: int) -> list[int]:
    """Indexes whose null bit is set; InvalidRowError for a bit set past the last column."""
    nulls = []
    for byte_index, byte in enumerate(bitmap):
        while byte:
            low = byte & -byte
            i = byte_index * 8 + low.bit_length() - 1
            if i >= column_count:
                raise InvalidRowError(f"null bitmap marks column {i}, past the last ({column_count - 1})")
            nulls.append(i)
            byte ^= low
    return nulls


def compile_plan(version: SchemaVersion, bitmap: bytes, key_indexes: tuple[int, ...]) -> RowPlan:
    """The plan of rows of ``version`` with this null bitmap; InvalidRowError for a bit past the last column.
    NOT NULL columns marked null are listed in ``null_violations`` (a partial update's row may have them)."""
    columns = version.columns
    nulls = set(null_columns(bitmap, len(columns)))
    present = tuple(i for i in range(len(columns)) if i not in nulls)
    header = header_size(len(columns))
    runs = _runs(columns, present)
    steps, tail = _validate_steps(columns, runs)
    key_slices, walk = _key_layout(columns, present, header, key_indexes)
    return RowPlan(
        schema_id=version.schema_id,
        header_size=header,
        present=present,
        null_violations=tuple(i for i in sorted(nulls) if not columns[i].nullable),
        column_count=len(columns),
        validate_steps=steps,
        tail=tail,
        decode_steps=tuple(_decode_step(columns, run) for run in runs),
        key_slices=key_slices,
        key_walk=walk,
        key_parts=len(key_indexes),
        key_end=max((end for _, end in key_slices), default=0) if key_slices else 0,
    )


def _runs(columns: tuple[Column, ...], present: tuple[int, ...]) -> list[list[int]]:
    """The present columns grouped: each variable-width column alone, consecutive fixed-width ones together."""
    runs: list[list[int]] = []
    for i in present:
        if is_var(columns[i].type):
            runs.append([i])
        elif runs and not is_var(columns[runs[-1][0]].type):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _fixed_struct(columns: tuple[Column, ...], run: list[int]) -> struct.Struct:
    return struct.Struct(">" + "".join(columns[i].type.fixed_format for i in run))  # type: ignore[misc]


def truncated(column: Column) -> InvalidRowError:
    return InvalidRowError(f"truncated at column {column.name!r} ({column.type})")


def _validate_steps(columns: tuple[Column, ...], runs: list[list[int]]) -> tuple[tuple[ValidateStep, ...], int]:
    steps: list[ValidateStep] = []
    skip = 0
    for run in runs:
        first = columns[run[0]]
        if is_var(first.type):
            steps.append(_var_validate(first, skip))
        else:
            checks = [fixed_check(columns[i].name, columns[i].type) for i in run]
            if not any(checks):
                skip += _fixed_struct(columns, run).size
                continue
            # unpack only the checked columns: the others are pad bytes ("8x")
            fmt = "".join(
                columns[i].type.fixed_format if check else f"{fixed_size(columns[i].type)}x"
                for i, check in zip(run, checks, strict=True)
            )
            steps.append(_fixed_validate(struct.Struct(">" + fmt), tuple(c for c in checks if c), skip, first))
        skip = 0
    return tuple(steps), skip


def _fixed_validate(
    fixed: struct.Struct, checks: tuple[Callable[[Any], None], ...], skip: int, first: Column
) -> ValidateStep:
    unpack, size = fixed.unpack_from, fixed.size
    if len(checks) == 1:
        (check,) = checks

        def step_one(data: bytes, pos: int) -> int:
            pos += skip
            try:
                (raw,) = unpack(data, pos)
            except struct.error:
                raise truncated(first) from None
            check(raw)
            return pos + size

        return step_one

    def step(data: bytes, pos: int) -> int:
        pos += skip
        try:
            raws = unpack(data, pos)
        except struct.error:
            raise truncated(first) from None
        for check, raw in zip(checks, raws, strict=True):
            check(raw)
        return pos + size

    return step


def _var_validate(column: Column, skip: int) -> ValidateStep:
    prefix = length_prefix(column.type)
    unpack, prefix_size = prefix.unpack_from, prefix.size
    check = payload_check(column.name, column.type)
    if column.type.root is TypeRoot.STRING:  # the check inlined: one call less per string

        def step_str(data: bytes, pos: int) -> int:
            pos += skip
            try:
                (length,) = unpack(data, pos)
            except struct.error:
                raise truncated(column) from None
            start = pos + 4
            end = start + length
            if end > len(data):
                raise truncated(column)
            try:
                data[start:end].decode()
            except UnicodeDecodeError as e:
                raise InvalidRowError(f"column {column.name!r} (STRING): invalid UTF-8 at byte {e.start}") from None
            return end

        return step_str

    def step(data: bytes, pos: int) -> int:
        pos += skip
        try:
            (length,) = unpack(data, pos)
        except struct.error:
            raise truncated(column) from None
        start = pos + prefix_size
        end = start + length
        if end > len(data):
            raise truncated(column)
        if check is not None:
            check(data[start:end])
        return end

    return step


def _decode_step(columns: tuple[Column, ...], run: list[int]) -> DecodeStep:
    first = columns[run[0]]
    if is_var(first.type):
        prefix = length_prefix(first.type)
        unpack_len, prefix_size = prefix.unpack_from, prefix.size
        to_py = payload_to_py(first.name, first.type)

        def var_step(data: bytes, pos: int, out: list) -> int:
            try:
                (length,) = unpack_len(data, pos)
            except struct.error:
                raise truncated(first) from None
            start = pos + prefix_size
            end = start + length
            if end > len(data):
                raise truncated(first)
            out.append(to_py(data[start:end]))
            return end

        return var_step
    fixed = _fixed_struct(columns, run)
    unpack, size = fixed.unpack_from, fixed.size
    converters = tuple((k, f) for k, i in enumerate(run) if (f := fixed_to_py(columns[i].name, columns[i].type)))

    def fixed_step(data: bytes, pos: int, out: list) -> int:
        try:
            raw = unpack(data, pos)
        except struct.error:
            raise truncated(first) from None
        if converters:
            values = list(raw)
            for k, convert in converters:
                values[k] = convert(values[k])
            out.extend(values)
        else:
            out.extend(raw)
        return pos + size

    return fixed_step


def _key_layout(
    columns: tuple[Column, ...], present: tuple[int, ...], header: int, key_indexes: tuple[int, ...]
) -> tuple[tuple[tuple[int, int], ...] | None, tuple[WalkEntry, ...]]:
    """Constant slices of the key columns when possible (merged where adjacent and in key order), and the
    general walk up to the last key column."""
    if not key_indexes:
        return None, ()
    slot = {index: k for k, index in enumerate(key_indexes)}
    last = max(key_indexes)
    walk: list[WalkEntry] = []
    for i in present:
        if i > last:
            break
        dtype = columns[i].type
        if is_var(dtype):
            prefix = length_prefix(dtype)
            walk.append((prefix.unpack_from, prefix.size, slot.get(i, -1)))
            continue
        size = fixed_size(dtype)
        if i not in slot and walk and walk[-1][0] is None and walk[-1][2] < 0:
            walk[-1] = (None, walk[-1][1] + size, -1)
        else:
            walk.append((None, size, slot.get(i, -1)))
    slices: dict[int, tuple[int, int]] = {}
    pos = header
    for prefix, size, k in walk:
        if prefix is not None:
            break
        if k >= 0:
            slices[k] = (pos, pos + size)
        pos += size
    if len(slices) < len(key_indexes):
        return None, tuple(walk)
    ordered = [slices[k] for k in range(len(key_indexes))]
    merged = [ordered[0]]
    for start, end in ordered[1:]:
        if start == merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return tuple(merged), tuple(walk)
