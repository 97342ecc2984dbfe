"""The collector's web pages: served HTML, and a real headless Chromium driven by Playwright
(Debian's chromium package), with screenshots taken in the test run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.analysis.helpers import record_tools
from tests.collector.conftest import TOKEN
from tests.collector.pages.browser import CHROMIUM_ARGS, chromium
from tests.collector.test_app import jsonl, seed_line
from tests.collector.test_server import serving
from tests.span.test_model import record_agent
from tracetape.stores.client import push

EDITED = "Find why the parser loses the last row of CSV exports"
HOSTILE = "<script>alert(1)</script>"


def _push_runs(client: TestClient, tmp_path: Path) -> None:
    for path in (
        record_agent(tmp_path / "good.jsonl"),
        record_agent(tmp_path / "bad.jsonl", EDITED),
    ):
        # filed under a chosen run id (a cassette's own is its name and 12 hex digits)
        params = {"source": str(path), "run": path.stem}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200


def test_pages_render_runs_a_timeline_and_a_diff(client: TestClient, tmp_path: Path) -> None:
    _push_runs(client, tmp_path)
    index = client.get("/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert "href='/runs/good'" in index.text and "href='/runs/bad'" in index.text
    run = client.get("/runs/good")
    assert run.status_code == 200 and run.text.count("class=step") == 4
    diff = client.get("/diff", params={"a": "good", "b": "bad"})
    assert diff.status_code == 200
    assert "<a id=first-divergence href='#p1'>call #1</a>" in diff.text
    assert "<div class='pair divergence' id=p1>" in diff.text
    # the verdict on top, the summary under it, the origin's changed values shown
    assert (
        "<p id=verdict><b>B diverged from A at step 1 (call #1): the user&#x27;s input to the "
        "model changed  [cause: input]</b></p>"
    ) in diff.text
    assert "B: 7 calls (A 7), 0 tokens (A 0)" in diff.text
    assert "<del>Find why the parser drops the last row of CSV exports</del>" in diff.text
    # the run list shows each run's final answer
    assert "<td class=final>#412: split_rows() returns rows[:-1], dropping the last row.</td>" in (
        index.text
    )


def test_the_verdict_redacts_and_escapes_what_it_quotes(client: TestClient) -> None:
    """A secret and a script in the changed values: redacted and escaped on the diff page."""
    secret = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6"
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1, q=f"{HOSTILE} {secret}")))
    client.post("/v1/lines", content=jsonl(seed_line("r2", 1, q="x")))
    page = client.get("/diff?a=r1&b=r2")
    assert page.status_code == 200 and "id=verdict" in page.text
    assert secret not in page.text and HOSTILE not in page.text


def test_pages_escape_what_a_trace_holds(client: TestClient) -> None:
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1, tool=HOSTILE, q=HOSTILE)))
    client.post("/v1/lines", content=jsonl(seed_line("r2", 1, tool=HOSTILE, q="x")))
    assert HOSTILE not in client.get("/").text
    for page in (client.get("/runs/r1"), client.get("/diff?a=r1&b=r2")):
        assert page.status_code == 200
        assert HOSTILE not in page.text and "&lt;script&gt;alert(1)" in page.text


def test_pages_need_the_token_then_remember_it(client: TestClient) -> None:
    """Without the token: a 401 page that says how; ?token= sets an HTTP-only cookie."""
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1)))
    bare = TestClient(client.app, base_url="http://127.0.0.1")
    denied = bare.get("/")
    assert denied.status_code == 401 and "?token=" in denied.text
    assert bare.get("/", params={"token": "wrong"}).status_code == 401
    first = bare.get("/", params={"token": TOKEN})
    cookie = first.headers["set-cookie"]
    assert first.status_code == 200 and "httponly" in cookie.lower()
    assert "samesite=strict" in cookie.lower()
    assert TOKEN not in cookie  # a signed session, never the token itself
    assert bare.get("/runs/r1").status_code == 200  # the cookie
    assert bare.get("/runs/nope").status_code == 404


def test_a_user_compares_two_runs_in_a_real_browser(tmp_path: Path) -> None:
    """Chromium: open the runs page with the token, filter, tick two runs, compare, and read
    the divergence and the highlighted findings; a run's timeline; screenshots of each."""
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    good = record_agent(tmp_path / "good.jsonl")
    bad = record_agent(tmp_path / "bad.jsonl", EDITED)
    (tmp_path / "shots").mkdir()
    with serving(db_url) as url:
        for path in (good, bad):
            push(path, url, token=TOKEN, run_id=path.stem)
        dialogs: list[str] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            answer = page.goto(f"{url}/?token={TOKEN}")
            assert answer is not None
            headers = answer.headers
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] == "no-referrer"
            assert page.locator("#runs tbody tr").count() == 2
            page.fill("#filter", "goo")  # typed: the server's answer to ?q=goo
            expect(page.locator("#runs tbody tr")).to_have_count(1)
            expect(page).to_have_url(re.compile(r"/\?q=goo(&|$)"))
            page.fill("#filter", "")
            expect(page.locator("#runs tbody tr")).to_have_count(2)
            page.screenshot(path=str(tmp_path / "shots" / "runs.png"), full_page=True)
            assert page.is_disabled("#compare-button")
            page.check("input.pick[value='good']")
            page.check("input.pick[value='bad']")
            page.click("#compare-button")
            page.wait_for_url("**/diff?**")
            assert page.text_content("#first-divergence") == "call #1"
            assert page.locator(".pair.divergence").count() == 1
            assert page.locator("#findings li.suspicious").count() >= 1
            verdict = page.text_content("#verdict") or ""
            assert verdict.startswith(
                "B diverged from A at step 1 (call #1): the user's input to the model changed"
            )
            assert "same final answer" in (page.text_content("#verdict-details") or "")
            # the reworded task left the final answer alone: the divergence is expected
            assert page.locator("#diff .side.expected").count() >= 1
            page.screenshot(path=str(tmp_path / "shots" / "diff.png"), full_page=True)
            page.click("h1 a >> text=good")
            page.wait_for_url("**/runs/good")
            assert page.locator("#timeline tr.step").count() == 4
            page.screenshot(path=str(tmp_path / "shots" / "run.png"), full_page=True)
            browser.close()
        assert dialogs == []
        # the pages' own script and style ran under the CSP: no violation reported
        assert not [e for e in errors if "Content Security Policy" in e], errors
    for name in ("runs", "diff", "run"):
        shot = tmp_path / "shots" / f"{name}.png"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
FORECASTS = {"Paris": "sunny and 21°C", "Rome": "cloudy and 18°C"}


def _weather_agent(base_url: str, city: str, path: Path) -> str:
    """A tool-calling agent on the real openai SDK, recorded against the local fake server:
    it asks the weather, calls ``get_weather`` (a taped tool), then answers."""
    import json

    import openai

    import tracetape

    @tracetape.tool(effect="read")
    def get_weather(city: str) -> str:
        return FORECASTS[city]

    client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test", max_retries=0)
    question = f"What is the weather in {city} and what should I wear?"
    messages: list[Any] = [{"role": "user", "content": question}]
    with tracetape.Tape(path, mode="record") as tape, tracetape.patch_sdks(tape):
        while True:
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=WEATHER_TOOLS
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return str(message.content)
            for call in message.tool_calls:
                result = get_weather(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def test_a_conversation_reads_as_one_and_the_change_is_marked(tmp_path: Path) -> None:
    """Chromium, two runs of a real SDK agent (Paris, then Rome) pushed to the collector: the
    run page reads as a conversation (the answer in full, the tool call as a call, its
    result, tokens and cost, one timeline bar per decision); the diff page marks Paris as
    removed and Rome as added, and draws both timelines. Screenshots at 1280 and 390 px."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    from tests.integrations.fakeserver import FakeServer

    server = FakeServer().start()
    try:
        answers = {
            city: _weather_agent(server.base_url, city, tmp_path / f"{city.lower()}.jsonl")
            for city in ("Paris", "Rome")
        }
    finally:
        server.stop()
    assert "sunny and 21°C" in answers["Paris"]
    shots = tmp_path / "shots"
    shots.mkdir()
    with serving(f"sqlite:///{tmp_path / 'c.db'}") as url:
        for city in ("paris", "rome"):
            push(tmp_path / f"{city}.jsonl", url, token=TOKEN, run_id=city)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/runs/paris?token={TOKEN}")
            text = page.inner_text("main")
            assert answers["Paris"] in text  # the final answer, whole
            assert 'get_weather(city="Paris")' in text  # the call, readable
            assert "sunny and 21°C" in text  # the tool's result
            assert "What is the weather in Paris" in text  # what the user said
            tokens_in = int(page.inner_text(".total-tokens").split(" in")[0])
            assert tokens_in > 0
            assert page.inner_text(".total-cost").startswith("$")
            assert page.locator("svg.timeline a.bar").count() == 3  # llm, tool, llm
            assert page.locator("details.raw").count() == 3  # the raw, one click away
            page.screenshot(path=str(shots / "run-1280.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=str(shots / "run-390.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= 400
            page.set_viewport_size({"width": 1280, "height": 900})
            page.goto(f"{url}/diff?a=paris&b=rome")
            dels = page.locator("del").all_inner_texts()
            inss = page.locator("ins").all_inner_texts()
            assert any("Paris" in d for d in dels) and any("Rome" in i for i in inss)
            assert page.text_content("#first-divergence") == "call #1"
            assert "messages[0].content" in page.inner_text("#changed-paths")
            timelines = page.locator("svg.timeline")
            assert timelines.count() == 2
            assert [timelines.nth(i).locator("a.bar").count() for i in (0, 1)] == [3, 3]
            page.screenshot(path=str(shots / "diff-1280.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=str(shots / "diff-390.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= 400
            browser.close()
    for shot in shots.iterdir():
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _runs_listed(client: TestClient, **params: str) -> list[str]:
    page = client.get("/", params=params)
    assert page.status_code == 200, page.text
    rows = page.text.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [part.split("'", 1)[0] for part in rows.split("href='/runs/")[1:]]


def test_the_run_list_filters_by_text_time_and_severity_and_sorts_by_any_column(
    client: TestClient,
) -> None:
    """Without JavaScript: a text (a run id, or a tool a run called), a time range and a
    findings' severity filter the list; every column's header sorts it, both ways."""
    client.post("/v1/lines", content=jsonl(*(seed_line("alpha", s, q="x") for s in (1, 2, 3))))
    client.post("/v1/lines", content=jsonl(seed_line("beta", 1, tool="fetch_page", q="y")))
    # a run that repeats one call: a finding of its own
    client.post("/v1/lines", content=jsonl(*(seed_line("gamma", 1, q="z") for _ in range(6))))
    assert set(_runs_listed(client)) == {"alpha", "beta", "gamma"}
    assert _runs_listed(client, q="alp") == ["alpha"]
    assert _runs_listed(client, q="fetch_PAGE") == ["beta"]  # a tool it called
    assert _runs_listed(client, q="100%_") == []  # LIKE's wildcards are letters here
    assert set(_runs_listed(client, since="2000-01-01")) == {"alpha", "beta", "gamma"}
    assert _runs_listed(client, until="2000-01-01") == []
    assert client.get("/", params={"since": "yesterday"}).status_code == 400
    assert _runs_listed(client, sort="steps", order="desc")[0] == "alpha"
    assert _runs_listed(client, sort="run", order="asc") == ["alpha", "beta", "gamma"]
    assert _runs_listed(client, sort="run", order="desc") == ["gamma", "beta", "alpha"]
    assert set(_runs_listed(client, sort="latency")) == {"alpha", "beta", "gamma"}
    assert set(_runs_listed(client, sort="cost", order="asc")) == {"alpha", "beta", "gamma"}
    flagged = _runs_listed(client, severity="suspicious")
    assert "gamma" in flagged and "beta" not in flagged
    assert client.get("/", params={"sort": "nope"}).status_code == 400
    page = client.get("/", params={"q": "alp", "sort": "tokens"}).text
    assert "q=alp" in page and "sort=tokens" in page  # the links keep the filters


def test_conversations_escape_what_a_recording_holds(client: TestClient, tmp_path: Path) -> None:
    """A prompt, an answer, a tool name, its arguments and its result holding markup, in a
    cassette: the run page, the diff page and the raw record show it as text."""
    from tracetape import Tape

    hostile = "</pre><script>alert(1)</script><svg onload=alert(2)>"
    for run, extra in (("h1", ""), ("h2", " more")):
        path = tmp_path / f"{run}.jsonl"
        with Tape(path, mode="record") as tape:
            messages = [{"role": "user", "content": hostile + extra}]
            answer = {"content": hostile, "tool": hostile, "args": {hostile: hostile}}
            tape.call("llm", {"messages": messages, "step": 1}, lambda a=answer: a)
            tape.call("tool", {"name": hostile, "args": {"q": hostile}, "step": 1},
                      lambda: hostile)  # fmt: skip
        params = {"source": str(path), "run": run}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    for url in ("/runs/h1", "/diff?a=h1&b=h2"):
        page = client.get(url)
        assert page.status_code == 200
        assert "<script>alert" not in page.text and "<svg onload" not in page.text
        assert "&lt;script&gt;alert(1)" in page.text
    raw = client.get("/runs/h1/raw/1")
    assert raw.headers["content-type"].startswith("application/json")
    assert raw.json()["out"]["content"] == hostile
    assert client.get("/runs/h1/raw/9").status_code == 404


def test_the_run_list_reads_each_run_against_the_one_before_it(
    client: TestClient, tmp_path: Path
) -> None:
    """Two recordings of one agent pushed from the same source: the later run's row shows its
    verdict against the earlier one (computed when its cassette was stored, not on view) and
    links to that diff, and says that it failed; a run first of its source has neither. Lines
    added to a run later make its verdict go (until its recording is stored whole again)."""
    for run, fail in (("first", False), ("second", True)):
        path = record_tools(tmp_path / f"{run}.jsonl", ["9"], fail=fail)
        params = {"source": "runs/agent.jsonl", "run": run}
        assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200
    page = client.get("/").text
    rows = {row.split("href='/runs/")[1].split("'")[0]: row for row in page.split("<tr>")[2:]}
    assert "href='/diff?a=first&amp;b=second'>vs first</a>" in rows["second"]
    said = "B diverged from A at call #2: the runs made the same calls and ended differently"
    assert f"<b>{said}  [cause: ending]</b>" in rows["second"]
    assert "B: 1 call (A 1), 0 tokens (A 0)" in rows["second"]
    assert "ended failed: ValueError (A completed)" in rows["second"]
    assert "<span class='badge fatal'>failed: ValueError</span>" in rows["second"]
    assert "vs " not in rows["first"] and "badge fatal" not in rows["first"]
    verdict = client.get("/diff", params={"a": "first", "b": "second"}).text
    assert said in verdict
    more = jsonl(seed_line("second", 2))
    added = {"source": "runs/agent.jsonl", "run": "second", "append": "true"}
    assert client.post("/v1/lines", content=more, params=added).status_code == 200
    page = client.get("/").text
    row = next(r for r in page.split("<tr>") if "href='/runs/second'" in r)
    assert "vs first</a>" in row and said not in row
