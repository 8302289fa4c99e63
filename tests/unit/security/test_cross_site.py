"""Cross-site requests may not change state: the header a form cannot set, Sec-Fetch-Site and Origin."""

import pytest

from fluss_py.common.cross_site import REQUEST_HEADER, refusal

pytestmark = pytest.mark.unit

OWN = {"host": "127.0.0.1:9124", REQUEST_HEADER.lower(): "1"}


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "get"])
def test_reads_are_never_refused(method: str) -> None:
    assert refusal(method, {"origin": "https://evil.example", "sec-fetch-site": "cross-site"}, "https") is None


@pytest.mark.parametrize("method", ["POST", "DELETE", "PUT", "PATCH"])
def test_a_request_no_browser_sent_may_change_state_without_the_header(method: str) -> None:
    # curl -X POST http://coordinator:9124/rebalance (the runbook's command), scripts: no Origin,
    # no Sec-Fetch-Site, no Referer
    assert refusal(method, {"host": "127.0.0.1:9124", "user-agent": "curl/8.5.0", "accept": "*/*"}, "http") is None
    assert refusal(method, {}, "https") is None  # not even a Host header
    assert refusal(method, OWN, "https") is None  # the CLI sends the header as well


@pytest.mark.parametrize("method", ["POST", "DELETE", "PUT", "PATCH"])
@pytest.mark.parametrize(
    "marker",
    [{"origin": "https://127.0.0.1:9124"}, {"sec-fetch-site": "same-origin"}, {"sec-fetch-site": "none"},
     {"referer": "https://127.0.0.1:9124/console"}],
)  # fmt: skip
def test_a_browsers_state_change_without_the_header_is_refused(method: str, marker: dict[str, str]) -> None:
    """Even from the server's own origin: only the console's script sets the header."""
    browser = {"host": "127.0.0.1:9124", "content-type": "text/plain", **marker}
    assert REQUEST_HEADER in (refusal(method, browser, "https") or "")
    assert refusal(method, {**browser, REQUEST_HEADER.lower(): "0"}, "https") is not None
    assert refusal(method, {**browser, REQUEST_HEADER.lower(): "1"}, "https") is None


def test_a_form_post_from_another_page_is_refused_with_or_without_the_header() -> None:
    # what <form method=POST enctype=text/plain action=...> on another origin makes a browser send: a browser
    # always sends Origin on a POST (before Sec-Fetch-Site existed, too)
    form = {"host": "127.0.0.1:9124", "content-type": "text/plain", "origin": "https://evil.example"}
    assert "origin" in (refusal("POST", form, "https") or "")
    assert "origin" in (refusal("POST", {**form, REQUEST_HEADER.lower(): "1"}, "https") or "")
    referred = {"host": "127.0.0.1:9124", "referer": "https://evil.example/page?x=1"}
    assert "referer" in (refusal("POST", referred, "https") or "")
    assert "referer" in (refusal("POST", {**referred, "referer": "not a url"}, "https") or "")


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
