"""kazoo's exceptions never leak: each becomes the matching ZkError (callers branch on ours only)."""

import pytest
from kazoo import exceptions as kz

from fluss_py.errors import ErrorCode
from fluss_py.zk import client as zc


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (kz.NodeExistsError(), zc.NodeExistsError),
        (kz.NoNodeError(), zc.NoNodeError),
        (kz.BadVersionError(), zc.BadVersionError),
        (kz.NotEmptyError(), zc.NotEmptyError),
        (kz.ConnectionLoss(), zc.SessionLostError),
        (kz.SessionExpiredError(), zc.SessionLostError),
        (kz.ConnectionClosedError(), zc.SessionLostError),
        (kz.NoAuthError(), zc.NotAuthorizedError),
    ],
)
def test_kazoo_errors_are_translated(raised, expected):
    translated = zc._translate(raised)
    assert type(translated) is expected
    assert isinstance(translated, zc.ZkError)


def test_foreign_errors_pass_through_and_fencing_has_its_code():
    err = ValueError("x")
    assert zc._translate(err) is err
    assert zc.EpochFencedError("fenced").code == ErrorCode.INVALID_COORDINATOR_EPOCH
    assert zc.SessionLostError("gone").retriable
