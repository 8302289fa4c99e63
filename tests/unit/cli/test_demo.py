"""Pure parts of `fluss-py demo failover` (the run itself is exercised by tests/integration/test_cli.py)."""

from fluss_py.cli.demo import _last_epoch_start


def test_last_epoch_start_of_a_checkpoint() -> None:
    assert _last_epoch_start(["0", "3", "0 0", "1 70", "2 299"]) == 299
    assert _last_epoch_start(["0", "1", "0 0"]) == 0
    assert _last_epoch_start(["(missing)"]) is None
