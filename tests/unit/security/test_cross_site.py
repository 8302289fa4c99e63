"""Cross-site requests may not change state: the header a form cannot set, Sec-Fetch-Site and Origin."""

import pytest

from fluss_py.common.cross_site import REQUEST_HEADER, refusal

pytestmark = pytest.mark.unit

OWN = {"host": "127.0.0.1:9124", REQUEST_HEADER.lower(): "1"}


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "get"])
def test_reads_are_never_refused(method: str) -> None:
    assert refusal(method, {"origin": "https://evil.example", "sec-fetch-site": "cross-site"}, "https") is None


@pytest.mark.parametrize("method", ["POST", "DELETE", "PUT", "PATCH"])
def test_a_state_change_without_the_header_is_refused(method: str) -> None:
    # what <form method=POST enctype=text/plain action=...> sends: no custom header can be added
    form = {"host": "127.0.0.1:9124", "content-type": "text/plain"}
    assert REQUEST_HEADER in (refusal(method, form, "https") or "")
    assert refusal(method, {**form, REQUEST_HEADER.lower(): "0"}, "https") is not None
    assert refusal(method, OWN, "https") is None  # the CLI: no Origin, no Sec-Fetch-Site


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_browser_saying_cross_site_is_refused_even_with_the_header(site: str) -> None:
    assert site in (refusal("POST", {**OWN, "sec-fetch-site": site}, "http") or "")
    assert refusal("POST", {**OWN, "sec-fetch-site": "same-origin"}, "http") is None
    assert refusal("POST", {**OWN, "sec-fetch-site": "none"}, "http") is None


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://127.0.0.1:9124", "https://127.0.0.1:9125", ""]
)
def test_an_origin_other_than_the_server_itself_is_refused(origin: str) -> None:
    assert "origin" in (refusal("POST", {**OWN, "origin": origin}, "https") or "")


def test_the_console_on_the_server_itself_may_change_state() -> None:
    headers = {**OWN, "origin": "https://127.0.0.1:9124", "sec-fetch-site": "same-origin"}
    assert refusal("POST", headers, "https") is None
    assert refusal("DELETE", {**headers, "origin": "http://127.0.0.1:9124"}, "http") is None
