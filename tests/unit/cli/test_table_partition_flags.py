"""``table create`` partition flags -> table properties (docs/partitioning.md)."""

import argparse

import pytest

from fluss_py.cli.common import CliError
from fluss_py.cli.table import partition_properties


def args(**kw) -> argparse.Namespace:
    base = {"partitioned_by": None, "auto_partition": None, "num_precreate": None, "retention": None}
    return argparse.Namespace(**{**base, **kw})


def test_flags_become_the_spec_properties():
    assert partition_properties(args()) == {}
    assert partition_properties(args(partitioned_by="dt", auto_partition="day", num_precreate=3, retention=0)) == {
        "table.partition.key": "dt",
        "table.auto-partition.time-unit": "day",
        "table.auto-partition.num-precreate": "3",
        "table.auto-partition.num-retention": "0",
    }


@pytest.mark.parametrize("kw", [{"partitioned_by": "dt"}, {"auto_partition": "day"}, {"retention": 2}])
def test_an_incomplete_spec_is_a_usage_error(kw):
    with pytest.raises(CliError):
        partition_properties(args(**kw))
