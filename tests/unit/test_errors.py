from fluss_py import errors
from fluss_py.errors import ErrorCode, error_from, for_code


def test_every_code_has_one_class_and_round_trips():
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        cls = for_code(int(code))
        assert cls.code is code
        assert error_from(int(code)).code is code


def test_flags_drive_retries():
    e = errors.NotLeaderOrFollowerError(leader_id=2, leader_address="127.0.0.1:1")
    assert e.retriable and e.invalid_metadata and e.leader_id == 2
    assert not errors.CorruptMessageError().retriable
    assert errors.NotEnoughReplicasError().retriable and not errors.NotEnoughReplicasError().invalid_metadata


def test_unknown_code_is_unknown_server_error():
    assert for_code(9999) is errors.UnknownServerError


def test_codes_are_stable():
    # Codes are protocol: these numbers must never change.
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 5
    assert ErrorCode.FENCED_LEADER_EPOCH == 11
    assert ErrorCode.INVALID_COORDINATOR_EPOCH == 13
    assert ErrorCode.NOT_COORDINATOR_LEADER == 14
