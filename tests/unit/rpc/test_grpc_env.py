"""``fluss_py.grpc_env.choice``: when importing fluss_py switches gRPC core to its classic I/O engine."""

from __future__ import annotations

from fluss_py.grpc_env import CLASSIC_IO, ENV, choice


def test_a_fresh_process_with_a_tested_grpcio_gets_the_classic_engine() -> None:
    assert choice({}, grpc_imported=False, grpcio_version="1.85.3") == CLASSIC_IO
    assert choice({}, grpc_imported=False, grpcio_version="1.85.1") == CLASSIC_IO


def test_the_users_setting_wins_even_when_empty() -> None:
    assert choice({ENV: ""}, grpc_imported=False, grpcio_version="1.85.3") is None
    assert choice({ENV: "event_engine_dns"}, grpc_imported=False, grpcio_version="1.85.3") is None


def test_nothing_is_set_once_grpc_is_imported() -> None:
    assert choice({}, grpc_imported=True, grpcio_version="1.85.3") is None


def test_an_untested_or_missing_grpcio_keeps_grpcs_defaults() -> None:
    for version in ("1.86.0", "1.8.5", "2.85.0", "1.84.9", "garbage", ""):
        assert choice({}, grpc_imported=False, grpcio_version=version) is None, version
    assert choice({}, grpc_imported=False, grpcio_version=None) is None
