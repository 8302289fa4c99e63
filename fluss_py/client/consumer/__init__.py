"""The consumer: ``Consumer`` (public) over ``Fetcher`` (background) and ``Positions``."""

from fluss_py.client.consumer.consumer import Consumer, ConsumerClosedError
from fluss_py.client.consumer.fetcher import ConsumerRecord

__all__ = ["Consumer", "ConsumerClosedError", "ConsumerRecord"]
