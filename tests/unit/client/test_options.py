"""Client option objects: defaults, validation, and reading the client.* keys of a Config."""

from __future__ import annotations

import pytest

from fluss_py.client.options import Backoff, ConsumerOptions, ProducerOptions, RetryOptions
from fluss_py.config import load_config
from fluss_py.errors import ConfigError


def test_producer_defaults_and_validation() -> None:
    o = ProducerOptions()
    assert (o.acks, o.idempotence, o.in_flight_per_bucket) == (-1, True, 5)
    assert ProducerOptions(acks="0").idempotence is False
    assert ProducerOptions(acks=1, idempotence=False).in_flight_per_bucket == 1
    with pytest.raises(ConfigError):
        ProducerOptions(acks=0, idempotence=True)
    with pytest.raises(ConfigError):
        ProducerOptions(max_in_flight_per_bucket=6)
    with pytest.raises(ConfigError):
        ProducerOptions(acks="most")


def test_options_from_config_keys_and_overrides() -> None:
    config = load_config(
        "client",
        overrides={
            "client.request.acks": "1",
            "client.writer.batch-size": "16kb",
            "client.writer.batch-timeout": "5ms",
            "client.retry.backoff": "10ms",
            "client.delivery.timeout": "40s",
        },
    )
    o = ProducerOptions.from_config(config, buffer_memory=1 << 20)
    assert (o.acks, o.batch_size, o.linger, o.delivery_timeout, o.buffer_memory) == (1, 16384, 0.005, 40.0, 1 << 20)
    assert o.retry == RetryOptions(0.01, 0.5)
    assert (
        ProducerOptions.from_config(load_config("client", overrides={"client.request.acks": "0"})).idempotence is False
    )
    with pytest.raises(ConfigError):
        ProducerOptions.from_config(config, no_such_option=1)
    assert ConsumerOptions.from_config(config).retry.backoff == 0.01


def test_backoff_grows_and_caps_and_hints_skip_it() -> None:
    b = Backoff(RetryOptions(0.02, 0.1))
    assert [b.next_delay() for _ in range(5)] == [0.02, 0.04, 0.08, 0.1, 0.1]
    assert b.next_delay(hinted=True) == 0.0
    b.reset()
    assert b.next_delay() == 0.02
    b.reset()
    assert [b.next_delay(hinted=True) for _ in range(6)] == [0.0] * 6  # stale servers naming each other
    assert b.next_delay() == 0.02 and b.attempts == 7  # hinted retries do not double the backoff


@pytest.mark.parametrize("bad", [0.0, 0.05, -1.0, float("nan"), float("inf"), 86_401.0])
def test_max_poll_interval_is_bounded(bad: float) -> None:
    assert ConsumerOptions().max_poll_interval == 300.0  # Kafka's max.poll.interval.ms default
    assert ConsumerOptions(max_poll_interval=1.5).max_poll_interval == 1.5
    with pytest.raises(ConfigError, match="max_poll_interval"):
        ConsumerOptions(max_poll_interval=bad)
