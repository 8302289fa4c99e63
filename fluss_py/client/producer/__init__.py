"""The producer pipeline: ``Producer`` (public) -> ``RecordAccumulator`` -> ``Sender`` -> leaders."""

from fluss_py.client.producer.accumulator import RecordMetadata
from fluss_py.client.producer.producer import Producer, ProducerClosedError

__all__ = ["Producer", "ProducerClosedError", "RecordMetadata"]
