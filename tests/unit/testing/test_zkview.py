"""wchc parsing (pure)."""

from fluss_py.testing.zkview import parse_wchc


def test_parse_wchc_groups_paths_by_session():
    text = "0x1000009c5b00001\n\t/a/c_0000000000\n\t/a/leader\n\n0x1000009c5b00002\n\t/a/c_0000000001\n\n"
    assert parse_wchc(text) == {
        0x1000009C5B00001: {"/a/c_0000000000", "/a/leader"},
        0x1000009C5B00002: {"/a/c_0000000001"},
    }
    assert parse_wchc("") == {}
