"""Events of a verify run and their JSON-lines codec (one JSON object per line, ``k`` says which kind).

    {"k": "send", "t": 12.5, "p": 0, "s": 41, "b": 1}                 producer 0 sent its seq 41 to bucket 1
    {"k": "ack",  "t": 12.6, "p": 0, "s": 41, "b": 1, "o": 207}       ... acknowledged at offset 207
    {"k": "fail", "t": 42.0, "p": 0, "s": 41, "b": 1, "e": "..."}     ... failed (the record may still land)
    {"k": "read", "t": 12.9, "b": 1, "o": 207, "v": "p0-41"}          a tailing consumer was handed it
    {"k": "fault", "t": 30.0, "end": 38.0, "kind": "partition", "what": "isolate tablet-server-2"}

``t`` is seconds since the run's start (the workload's and the runner's clocks share CLOCK_MONOTONIC).
A value ``p<producer>-<seq>`` is unique in the run, so any record names its send. Pure: no I/O but the codec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

SEND, ACK, FAIL, READ, FAULT = "send", "ack", "fail", "read", "fault"
_VALUE = re.compile(r"p(\d+)-(\d+)")


def value_of(producer: int, seq: int) -> str:
    return f"p{producer}-{seq}"


def parse_value(value: str) -> tuple[int, int] | None:
    """``(producer, seq)`` of a workload value, None for anything else."""
    m = _VALUE.fullmatch(value)
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Fault:
    """One fault of the schedule as it happened: ``[start, end)`` seconds since the run's start."""

    start: float
    end: float
    kind: str
    what: str


def encode(event: dict) -> str:
    return json.dumps(event, separators=(",", ":")) + "\n"


def decode_lines(lines: Iterable[str]) -> Iterator[dict]:
    """Events of a JSON-lines history; a torn last line (a killed writer) is skipped."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue
