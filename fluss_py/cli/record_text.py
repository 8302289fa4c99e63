"""How ``fluss-py consume`` shows a record: raw value, a row, or a primary-key table's changes.

A primary-key table's record is a change (docs/primary-key-tables.md §3.4) shown as one line per row of it,
``+I {...}``, ``-U {...}`` then ``+U {...}`` for an update, ``-D {...}``, none for a NOOP; a log table with a
schema holds rows, shown as JSON; any other record's value is shown as it is. With ``--json`` each line is a
JSON object naming bucket and offset. A row of a schema version the client does not know yet (a column just
added) refreshes the metadata once and is decoded again.
"""

from __future__ import annotations

import json
from typing import Any

from fluss_py.client import ConsumerRecord
from fluss_py.client.metadata import ClusterMetadata, TableInfo
from fluss_py.errors import UnknownSchemaIdError
from fluss_py.schema.changelog import change_rows, decode_change
from fluss_py.schema.row import row_codec
from fluss_py.schema.text import row_to_json


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


class RecordText:
    """Formats consumed records of one table (see module docstring); the schema follows metadata refreshes."""

    def __init__(self, info: TableInfo, *, print_offsets: bool, as_json: bool) -> None:
        self._info = info
        self._print_offsets = print_offsets
        self._json = as_json

    async def lines(self, records: list[ConsumerRecord], metadata: ClusterMetadata) -> list[bytes]:
        try:
            return [line for r in records for line in self._lines(r)]
        except UnknownSchemaIdError:
            await metadata.update()
            self._info = metadata.table(self._info.path) or self._info
            return [line for r in records for line in self._lines(r)]

    def _lines(self, r: ConsumerRecord) -> list[bytes]:
        schema = self._info.schema
        if schema is None:  # opaque key/value records
            if self._json:
                doc = {"key": _text(r.key), "value": _text(r.value)}
                return [self._json_line(r, doc)]
            return [self._plain_line(r, r.value or b"")]
        codec = row_codec(schema)
        current = schema.current
        if not schema.is_primary_key_table:  # rows, validated by the leader
            row = row_to_json(current, codec.decode_current(r.value)) if r.value is not None else None
            if self._json:
                return [self._json_line(r, {"row": row})]
            return [self._plain_line(r, json.dumps(row, ensure_ascii=False).encode())]
        out = []
        for label, data in change_rows(decode_change(r.value or b"")):
            row = row_to_json(current, codec.decode_current(data))
            if self._json:
                out.append(self._json_line(r, {"change": label, "row": row}))
            else:
                out.append(self._plain_line(r, f"{label} {json.dumps(row, ensure_ascii=False)}".encode()))
        return out

    def _plain_line(self, r: ConsumerRecord, text: bytes) -> bytes:
        if self._print_offsets:
            return b"%d\t%d\t%s\n" % (r.bucket.bucket, r.offset, text)
        return text + b"\n"

    @staticmethod
    def _json_line(r: ConsumerRecord, doc: dict[str, Any]) -> bytes:
        doc.update(offset=r.offset, bucket=r.bucket.bucket, timestamp=r.timestamp_ms)
        return json.dumps(doc, ensure_ascii=False).encode() + b"\n"
