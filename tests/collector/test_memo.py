"""The collector's kept analyses: a page viewed again is not analysed again, and never shows
what the stored texts no longer hold (a run that grew, a secret redacted since)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.conftest import TOKEN
from tests.collector.test_app import jsonl, seed_line
from tracetape.collector import jobs
from tracetape.collector.memo import Analyses
from tracetape.collector.workers import Workers
from tracetape.record import RecordTexts

PASSWORD = "correct-horse-battery-staple-42"


def test_the_least_recently_used_goes_first_and_an_error_is_not_kept() -> None:
    memo = Analyses(size=2)
    made: list[str] = []

    def make(name: str) -> Any:
        return lambda: made.append(name) or name

    assert memo.get("a", make("a")) == "a" and memo.get("b", make("b")) == "b"
    assert memo.get("a", make("a again")) == "a"  # kept, and now the most recent
    memo.get("c", make("c"))  # b goes
    assert memo.get("b", make("b again")) == "b again"
    assert made == ["a", "b", "c", "b again"]

    def fail() -> str:
        raise ValueError("no")

    with pytest.raises(ValueError):
        memo.get("d", fail)
    assert memo.get("d", make("d")) == "d"
    memo.clear()
    assert memo.get("d", make("d again")) == "d again"


def test_texts_kept_stay_within_the_budget() -> None:
    memo = Analyses(size=10, budget=10)
    memo.get("a", lambda: "x" * 6)
    memo.get("r", lambda: {"report": 1})  # a report weighs nothing
    memo.get("b", lambda: "y" * 4)
    assert memo.get("a", lambda: "again") == "x" * 6  # 10 characters: both kept
    memo.get("c", lambda: "z")  # 11: the least recently used text (b) goes
    assert memo.get("b", lambda: "b again") == "b again"
    assert memo.get("huge", lambda: "h" * 11) == "h" * 11  # over the budget: not kept
    assert memo.get("huge", lambda: "made again") == "made again"
    assert memo.get("r", lambda: "lost") == {"report": 1}


@pytest.mark.parametrize(
    ("one", "other"),
    [
        pytest.param([[b"ab", b"c"]], [[b"a", b"bc"]], id="texts-split-otherwise"),
        pytest.param([[b"a"], [b"b"]], [[b"a", b"b"]], id="runs-split-otherwise"),
        pytest.param([[b"a"], []], [[], [b"a"]], id="an-empty-run"),
        pytest.param([[b'{"q": 1}']], [[b'{"q": 2}']], id="one-byte"),
    ],
)
def test_a_key_tells_every_input_apart(one: list[list[bytes]], other: list[list[bytes]]) -> None:
    key = Analyses.key
    assert key("diff", ("a",), *map(RecordTexts, one)) != key(
        "diff", ("a",), *map(RecordTexts, other)
    )
    assert key("diff", ("a",), *map(RecordTexts, one)) == key(
        "diff", ("a",), *map(RecordTexts, one)
    )
    assert key("diff", ("a",), RecordTexts([])) != key("check", ("a",), RecordTexts([]))


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the analyses any app asks its worker processes for (the real ones run): the
    query routes' and the diff page's, by job (drawing the run list or a run's page
    analyses nothing, and the background worker's summaries are not counted)."""
    made: list[str] = []
    run = Workers.run

    async def counted(self: Workers, job: Callable[..., Any], *args: Any) -> Any:
        if job in (jobs.check, jobs.diff, jobs.diff_page):
            made.append(job.__name__)
        return await run(self, job, *args)

    monkeypatch.setattr(Workers, "run", counted)
    return made


PAGES = ["/", "/diff?a=r1&b=r2", "/v1/diff?a=r1&b=r2", "/v1/runs/r1/check"]


def test_a_page_viewed_again_is_not_analysed_again_until_its_runs_grow(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _spy(monkeypatch)
    for run in ("r1", "r2"):
        client.post("/v1/lines", content=jsonl(seed_line(run, 1, q="first")))
    first = [client.get(url).text for url in PAGES]
    assert len(made) == 3  # the run list analyses nothing on view (``summaries``)
    assert [client.get(url).text for url in PAGES] == first and len(made) == 3
    client.post("/v1/lines", content=jsonl(seed_line("r2", 2, q="grown-step")))
    grown = [client.get(url) for url in PAGES]
    assert all(page.status_code == 200 for page in grown)
    assert "grown-step" in grown[1].text and "grown-step" in json.dumps(grown[2].json())
    # r1's check read the same texts: kept; the diff page and the diff: made again
    assert len(made) == 5 and grown[3].text == first[3]


def test_a_secret_redacted_since_is_not_shown_from_a_kept_page(client: TestClient) -> None:
    """A run's first line quotes a password nobody has named yet; the pages show it. A later
    line names it: the stored texts are rewritten, and no page shows it again."""
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1, note=f"logged in with {PASSWORD}")),
                params={"source": "a", "offset": "0"})  # fmt: skip
    client.post("/v1/lines", content=jsonl(seed_line("r2", 1, note="logged in")))
    assert PASSWORD in client.get("/diff?a=r1&b=r2").text  # not a secret yet
    for url in PAGES:
        client.get(url)
    named = jsonl(seed_line("r1", 1, password=PASSWORD))
    answer = client.post("/v1/lines", content=named, params={"source": "a", "offset": "1"})
    assert answer.status_code == 200
    for url in [*PAGES, "/runs/r1"]:
        page = client.get(url)
        assert page.status_code == 200 and PASSWORD not in page.text, url


def test_a_recordings_diff_page_is_drawn_when_stored_and_read_back_in_a_new_process(
    client: TestClient, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The diff of a recording against the run of its source before it is drawn when its
    last lines are stored: a collector started afresh serves it (gzipped to a client that
    accepts it) without analysing; a line stored later forgets it, and it is drawn again."""
    from tests.analysis.helpers import record_tools
    from tracetape.collector import Settings, create_app

    for run, out in (("first", "9"), ("second", "10")):
        path = record_tools(tmp_path / f"{run}.jsonl", [out])
        params = {"source": "runs/agent.jsonl", "run": run}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    app = client.app
    assert app.state.collector.summaries.wait(["first", "second"])  # type: ignore[attr-defined]
    made = _spy(monkeypatch)
    fresh = TestClient(create_app(app.state.db, Settings(token=TOKEN)),  # type: ignore[attr-defined]
                       base_url="http://127.0.0.1", headers=client.headers)  # fmt: skip
    page = fresh.get("/diff", params={"a": "first", "b": "second"})
    assert page.status_code == 200 and made == []
    assert page.headers["content-encoding"] == "gzip" and "id=verdict" in page.text
    assert fresh.get("/diff", params={"a": "second", "b": "first"}).status_code == 200
    assert made == ["diff_page"]  # another pair: drawn on view, and kept
    fresh.get("/diff", params={"a": "second", "b": "first"})
    assert made == ["diff_page"]
    more = {"source": "runs/agent.jsonl", "run": "second", "append": "true"}
    fresh.post("/v1/lines", content=jsonl(seed_line("second", 2, q="later")), params=more)
    again = fresh.get("/diff", params={"a": "first", "b": "second"})
    assert "later" in again.text and made == ["diff_page", "diff_page"]


def test_a_page_over_the_budget_is_not_kept_and_evicts_nothing() -> None:
    """A text longer than the whole budget is returned, not kept, and every kept result
    stays; one exactly at the budget is kept, the texts before it going to make room, a
    report (no text) staying."""
    memo = Analyses(size=8, budget=10)
    memo.get("a", lambda: "aaaa")
    memo.get("b", lambda: "bbbb")
    memo.get("report", lambda: 42)  # not a text: weighs nothing
    assert memo.get("huge", lambda: "h" * 11) == "h" * 11
    made: list[str] = []
    assert memo.get("a", lambda: made.append("a") or "again") == "aaaa"
    assert memo.get("b", lambda: made.append("b") or "again") == "bbbb"
    assert memo.get("huge", lambda: made.append("huge") or "h" * 11) and made == ["huge"]
    memo.get("full", lambda: "f" * 10)
    assert memo.get("a", lambda: "gone") == "gone" and memo.get("report", lambda: 0) == 42
