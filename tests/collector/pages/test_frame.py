"""The frame every page shares: errors as small pages for browsers (JSON for the API), the
icon, and one script and style sheet named by hash in the CSP."""

from __future__ import annotations

import base64
import hashlib
import struct

from fastapi.testclient import TestClient

from tracetape.collector.pages import frame

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


def test_a_page_error_is_a_page_for_a_browser_and_json_for_everyone_else(
    client: TestClient,
) -> None:
    """A missing run opened in a browser is a 404 page with the message and a way home; the
    same request from a script, and any ``/v1`` request, is the JSON error."""
    page = client.get("/runs/nope", headers=BROWSER)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "no run &#x27;nope&#x27; in this collector" in page.text
    assert "<a href='/'>all runs</a>" in page.text
    plain = client.get("/runs/nope")
    assert plain.status_code == 404 and plain.json() == {"error": "no run 'nope' in this collector"}
    api = client.get("/v1/runs/nope", headers=BROWSER)
    assert api.status_code == 404 and api.json()["error"].startswith("no run")
    bad = client.get("/", params={"sort": "<b>"}, headers=BROWSER)
    assert bad.status_code == 400 and "<b>" not in bad.text and "sort" in bad.text


def test_a_page_without_the_token_says_how_to_open_it_as_a_page(client: TestClient) -> None:
    """A browser without the token gets a 401 page naming ``?token=``, not raw JSON."""
    page = client.get("/", headers={**BROWSER, "Authorization": ""})
    assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
    assert "?token=$TRACETAPE_TOKEN" in page.text


def test_the_icon_is_a_16_pixel_ico_served_without_the_token(client: TestClient) -> None:
    """``/favicon.ico`` answers without the token (a browser asks before any page): a valid
    one-image ICO of 16x16 pixels at 32 bits, whose sizes add up."""
    icon = client.get("/favicon.ico", headers={"Authorization": ""})
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    data = icon.content
    assert struct.unpack("<HHH", data[:6]) == (0, 1, 1)
    width, height, _, _, planes, bits, size, offset = struct.unpack("<BBBBHHII", data[6:22])
    assert (width, height, planes, bits, offset) == (16, 16, 1, 32, 22)
    assert size == len(data) - 22 == 40 + 16 * 16 * 4 + 16 * 4


def test_every_page_runs_the_one_script_and_style_the_csp_names() -> None:
    """The page frame holds the one script and style sheet; the CSP names their hashes, so an
    injected script or style would not run."""
    html = frame.page("t", "<p>x</p>")
    assert f"<script>{frame.SCRIPT}</script>" in html and f"<style>{frame.STYLE}</style>" in html
    for text in (frame.SCRIPT, frame.STYLE):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in frame.CSP
    assert "<link rel=icon href='/favicon.ico'>" in html


def test_an_error_page_escapes_its_message() -> None:
    """The message of an error page is text, whatever it holds."""
    html = frame.error_page(400, "<script>alert(1)</script>")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
