"""The fluss_py client: asyncio ``Producer``, ``Consumer``, ``Admin``, the primary-key tables' ``Upserter``,
``Deleter`` and ``Lookuper``, plus ``Sync*`` wrappers.

See docs/client.md for the producer pipeline, the retry/ordering rules and the consumer loop.
"""

from fluss_py.client.admin import (
    Admin,
    BucketDescription,
    BucketOffsets,
    GroupBucketOffset,
    OffsetSpec,
    TableDescription,
)
from fluss_py.client.consumer import Consumer, ConsumerClosedError, ConsumerRecord
from fluss_py.client.kv import Deleter, Lookuper, Upserter
from fluss_py.client.metadata import BucketLocation, ClusterMetadata, TableInfo
from fluss_py.client.options import ConsumerOptions, LookupOptions, ProducerOptions, RetryOptions
from fluss_py.client.producer import Producer, ProducerClosedError, RecordMetadata
from fluss_py.client.sync import SyncAdmin, SyncConsumer, SyncDeleter, SyncLookuper, SyncProducer, SyncUpserter
from fluss_py.client.transport import GrpcTransport, Transport

__all__ = [
    "Admin",
    "BucketDescription",
    "BucketLocation",
    "BucketOffsets",
    "ClusterMetadata",
    "Consumer",
    "ConsumerClosedError",
    "ConsumerOptions",
    "ConsumerRecord",
    "Deleter",
    "GroupBucketOffset",
    "GrpcTransport",
    "LookupOptions",
    "Lookuper",
    "OffsetSpec",
    "Producer",
    "ProducerClosedError",
    "ProducerOptions",
    "RecordMetadata",
    "RetryOptions",
    "SyncAdmin",
    "SyncConsumer",
    "SyncDeleter",
    "SyncLookuper",
    "SyncProducer",
    "SyncUpserter",
    "TableDescription",
    "TableInfo",
    "Transport",
    "Upserter",
]
