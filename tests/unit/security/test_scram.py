"""Salted keys: only the right password verifies; the stored form holds no password; codecs round-trip."""

import json

import pytest

from fluss_py.security.scram import make_credential, verify
from fluss_py.zk.paths import UserZNode

pytestmark = pytest.mark.unit


def test_only_the_right_password_verifies() -> None:
    cred = make_credential("s3cret-pass")
    assert verify(cred, "s3cret-pass")
    assert not verify(cred, "s3cret-pasS")
    assert not verify(cred, "")


def test_salts_differ_and_the_stored_form_has_no_password() -> None:
    a, b = make_credential("same"), make_credential("same")
    assert a.salt != b.salt and a.stored_key != b.stored_key
    data = UserZNode.encode(a)
    assert b"same" not in data
    assert UserZNode.decode(data) == a


def test_weak_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        make_credential("")
    with pytest.raises(ValueError):
        make_credential("x", iterations=1000)


@pytest.mark.parametrize(
    "change",
    [{"iterations": 1}, {"iterations": 10**10}, {"salt": "00"}, {"stored_key": "00" * 16}, {"server_key": ""}],
)
def test_a_user_znode_with_unsound_parameters_is_refused(change: dict) -> None:
    """A user's znode is input: a count of 1 would make the keys cheap to brute-force, 10**10 would stall
    every login (PBKDF2 on the server); short salts or keys are not what this server wrote."""
    d = json.loads(UserZNode.encode(make_credential("pw")))
    d.update(change)
    with pytest.raises(ValueError):
        UserZNode.decode(json.dumps(d).encode())
