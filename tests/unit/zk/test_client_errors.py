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


# ---------------------------------------------------------------- a multi's answer (multi_outcome)
FENCE = zc.EpochFence(3, 7)
OPS = [zc.CreateOp("/fluss/a"), zc.CreateOp("/fluss/b")]


def test_a_failing_op_of_a_fenced_commit_is_that_ops_error_not_fencing():
    # ZooKeeper answers RolledBackError for every op before the failing one, the fence's check included
    results = [kz.RolledBackError(), kz.RolledBackError(), kz.NodeExistsError()]
    with pytest.raises(zc.NodeExistsError, match="/fluss/b"):
        zc.multi_outcome(OPS, results, FENCE)
    with pytest.raises(zc.BadVersionError, match="/fluss/a"):
        zc.multi_outcome(OPS, [kz.RolledBackError(), kz.BadVersionError(), kz.RuntimeInconsistency()], FENCE)
    with pytest.raises(zc.ZkError, match="BadArguments") as refused:
        zc.multi_outcome(OPS, [kz.RolledBackError(), kz.BadArgumentsError(), kz.RuntimeInconsistency()], FENCE)
    assert not isinstance(refused.value, zc.EpochFencedError)


@pytest.mark.parametrize("check", [kz.BadVersionError(), kz.NoNodeError()])
def test_only_the_checks_own_failure_is_fencing(check):
    results = [check, kz.RuntimeInconsistency(), kz.RuntimeInconsistency()]
    with pytest.raises(zc.EpochFencedError):
        zc.multi_outcome(OPS, results, FENCE)


def test_an_unfenced_commit_and_a_successful_one():
    with pytest.raises(zc.NoNodeError, match="/fluss/a"):
        zc.multi_outcome(OPS, [kz.NoNodeError(), kz.RuntimeInconsistency()], None)
    assert zc.multi_outcome(OPS, [True, "/fluss/a", "/fluss/b"], FENCE) == ["/fluss/a", "/fluss/b"]
    with pytest.raises(zc.ZkError, match="rolled back"):  # not an answer ZooKeeper gives
        zc.multi_outcome(OPS, [kz.RolledBackError()] * 3, FENCE)
