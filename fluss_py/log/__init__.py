"""Synchronous local storage of bucket logs: segments, indexes, epoch cache, writer state, checkpoints.

Knows nothing of asyncio, gRPC or kazoo. See docs/storage.md for file formats and recovery.
"""

from fluss_py.log.config import LogConfig
from fluss_py.log.epoch_cache import LeaderEpochCache
from fluss_py.log.manager import LogManager
from fluss_py.log.results import FetchDataInfo, LogAppendInfo
from fluss_py.log.tablet import LogTablet
from fluss_py.log.writer_state import BatchMetadata, WriterStateEntry

__all__ = [
    "BatchMetadata",
    "FetchDataInfo",
    "LeaderEpochCache",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogTablet",
    "WriterStateEntry",
]
