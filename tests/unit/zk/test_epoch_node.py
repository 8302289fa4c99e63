"""The epoch node's pure rules: what it may hold, the next epoch, the version padding, the restart value."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluss_py.zk.epoch_node import InvalidEpochNodeError, next_epoch, padding, parse_epoch, restart_value

PATH = "/fluss/coordinator/epoch"


@pytest.mark.parametrize("data", [b"-5", b"-1", b"abc", b"", b"1.5", b"+3", b"0x10", b"\xff", "٣".encode()])
def test_anything_but_a_non_negative_integer_is_refused_naming_the_node(data):
    with pytest.raises(InvalidEpochNodeError, match=PATH):
        parse_epoch(PATH, data)


@pytest.mark.parametrize(("data", "epoch"), [(b"0", 0), (b"7", 7), (b" 12\n", 12)])
def test_non_negative_integers_are_read(data, epoch):
    assert parse_epoch(PATH, data) == epoch


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_after_padding_and_the_bump_version_equals_the_epoch_and_both_grow(value, version):
    epoch = next_epoch(value, version)
    assert epoch > value and epoch > version
    pad = padding(PATH, b"x", version, epoch - 1, limit=20_000)
    assert [op.version for op in pad] == list(range(version, epoch - 1))
    assert version + len(pad) + 1 == epoch  # the bump's set is the last version step


def test_padding_is_bounded_per_transaction():
    assert len(padding(PATH, b"3000", 0, 2999, limit=500)) == 500


def test_a_deleted_node_restarts_at_the_highest_stored_epoch_and_a_new_cluster_at_zero():
    assert restart_value([]) == 0
    assert restart_value([3, 9, 4]) == 9
