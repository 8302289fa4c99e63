"""Compression of a batch's record block, and decompression that never produces more than a bound.

A compressed batch is small on the wire and may be huge once decompressed (a 16 KiB zstd frame can expand to
512 MiB): every decompression here stops at ``max_bytes`` of output and raises ``CorruptMessageError`` past it,
so neither the leader validating a batch nor a consumer decoding one allocates more than the bound.

- zstd: a frame that declares its content size is refused before decoding when the size is above the bound;
  one that does not is decoded into a buffer of at most the bound (the library stops there). Only the first
  frame is decoded, so bytes after it (a second frame, junk) are refused: a decoder reading across frames
  would see records the leader never checked.
- lz4 (frame format): its header's content size is optional and a frame can lie about it, so the block is
  decoded incrementally and decoding stops once the bound is passed; bytes after the frame are refused.
"""

from __future__ import annotations

from enum import IntEnum

import lz4.frame
import zstandard

from fluss_py.errors import CorruptMessageError, UnsupportedCompressionError


class CompressionType(IntEnum):
    NONE = 0
    LZ4 = 1
    ZSTD = 2


def compress(kind: CompressionType, data: bytes) -> bytes:
    if kind is CompressionType.NONE:
        return data
    if kind is CompressionType.LZ4:
        return lz4.frame.compress(data)
    if kind is CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise UnsupportedCompressionError(f"compression {kind!r}")


def decompress(kind: int, data: bytes | memoryview, max_bytes: int) -> bytes | memoryview:
    """The records block of a batch with compression ``kind``, at most ``max_bytes`` long.

    ``CorruptMessageError`` for a block that does not decode, or would decode to more than ``max_bytes``;
    ``UnsupportedCompressionError`` for an unknown ``kind``. Uncompressed data is returned as it is (no copy).
    """
    if kind == CompressionType.NONE:
        return data
    if kind == CompressionType.ZSTD:
        return _zstd(data, max_bytes)
    if kind == CompressionType.LZ4:
        return _lz4(data, max_bytes)
    raise UnsupportedCompressionError(f"unknown compression code {kind}")


def _too_large(kind: str, max_bytes: int, declared: int = -1) -> CorruptMessageError:
    size = f"{declared} bytes (declared in the frame)" if declared >= 0 else f"more than {max_bytes} bytes"
    return CorruptMessageError(f"{kind} records decompress to {size}: over the limit of {max_bytes} bytes")


def _zstd(data: bytes | memoryview, max_bytes: int) -> bytes:
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as e:
        raise CorruptMessageError(f"cannot decompress records (ZSTD): {e}") from None
    if declared > max_bytes:  # -1: not declared
        raise _too_large("ZSTD", max_bytes, declared)
    try:
        # With a declared size the output buffer has exactly that size; without, ``max_output_size``. Either
        # way the library refuses a frame that produces more than its buffer. It decodes the first frame only;
        # ``allow_extra_data=False`` refuses bytes after it, but only for a frame declaring its size.
        out = zstandard.ZstdDecompressor().decompress(
            data, max_output_size=max_bytes, read_across_frames=False, allow_extra_data=False
        )
    except zstandard.ZstdError as e:
        if "unused data" in str(e):
            raise _after_frame(_zstd_after_frame(data)) from None
        # "did not decompress full frame" is also what a truncated frame reports: tell the two apart with a
        # bounded streaming read
        if declared < 0 and "did not decompress full frame" in str(e) and _zstd_exceeds(data, max_bytes):
            raise _too_large("ZSTD", max_bytes) from None
        raise CorruptMessageError(f"cannot decompress records (ZSTD): {e}") from None
    if declared < 0:
        trailing = _zstd_after_frame(data)
        if trailing:
            raise _after_frame(trailing)
    return out


def _after_frame(trailing: int, kind: str = "ZSTD") -> CorruptMessageError:
    return CorruptMessageError(f"{kind} records: {trailing} bytes after the frame")


def _zstd_after_frame(data: bytes | memoryview) -> int:
    """Bytes after the first frame of ``data``, a frame already decoded once within the bound (so this second
    decoding is bounded too): a decompressobj stops at the end of the frame and keeps the rest apart. Only
    frames without a declared size pay it; the producer's batches declare theirs."""
    decoder = zstandard.ZstdDecompressor().decompressobj(read_across_frames=False)
    try:
        decoder.decompress(data)
    except zstandard.ZstdError as e:
        raise CorruptMessageError(f"cannot decompress records (ZSTD): {e}") from None
    return len(decoder.unused_data)


def _zstd_exceeds(data: bytes | memoryview, max_bytes: int) -> bool:
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(data))
    try:
        produced = 0
        while produced <= max_bytes:
            chunk = reader.read(min(1 << 20, max_bytes + 1 - produced))
            if not chunk:
                return False
            produced += len(chunk)
        return True
    except zstandard.ZstdError:
        return False


def _lz4(data: bytes | memoryview, max_bytes: int) -> bytes:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(data, max_length=max_bytes + 1)
    except RuntimeError as e:  # lz4 reports every decoding failure as RuntimeError
        raise CorruptMessageError(f"cannot decompress records (LZ4): {e}") from None
    if len(out) > max_bytes:
        raise _too_large("LZ4", max_bytes)
    if not decompressor.eof:
        raise CorruptMessageError("cannot decompress records (LZ4): the frame is truncated")
    if decompressor.unused_data:
        raise _after_frame(len(decompressor.unused_data), "LZ4")
    return out
