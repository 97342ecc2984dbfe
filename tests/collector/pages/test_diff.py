"""The diff page answers first: the verdict with the origin as a link, its cause and changed
values, what each run came to with deltas; findings link to their rows; each side labelled."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from tests.collector.pages.triage import record_triage, seed_pair


def _push(client: TestClient, path: Path, run: str) -> None:
    params = {"source": path.name, "run": run}
    assert client.post("/v1/lines", content=path.read_bytes(), params=params).status_code == 200


def test_the_verdict_comes_first_and_names_the_origin_its_cause_and_values(
    client: TestClient, tmp_path: Path
) -> None:
    """The triage pair (B read another file at step 3): the verdict, the origin (call #5, a
    link to its marked row), the cause, the changed value old → new, and the summary with
    deltas, all above the findings; every finding links to a row."""
    for v in "ab":
        _push(client, record_triage(tmp_path / f"triage-{v}.jsonl", v), f"t{v}")
    html = client.get("/diff", params={"a": "ta", "b": "tb"}).text
    assert html.index("id=verdict") < html.index("id=summary") < html.index("id=findings")
    assert "<a id=first-divergence href='#p5'>call #5</a> · step 3" in html
    assert "cause <b class=cause>model</b>" in html
    paths = html.split("<ul id=changed-paths>")[1].split("</ul>")[0]
    assert "csv_parser.py" in paths and "dashboard.py" in paths and "<del>" in paths
    assert "<b>+530 ms</b> (+8.2%)" in html
    assert "final answer: <b>changed</b>" in html
    final = html.split("<div id=final>")[1].split("id=findings")[0]
    assert "<del>csv_parser</del>" in final and "<ins>dashboard</ins>" in final
    findings = html.split("<ul id=findings>")[1].split("</ul>")[0]
    assert findings.count("<li") == findings.count("class=row href='#p")
    assert "<div class='pair divergence' id=p5>" in html
    assert "<div class=who>A: ta</div>" in html and "<div class=who>B: tb</div>" in html
    assert "origin #5" in html  # the timelines' marker


def test_a_seed_pair_shows_its_tokens_and_never_a_zero_cost(
    client: TestClient, tmp_path: Path
) -> None:
    """Seed lines: the summary's tokens are theirs, the cost is unknown on both sides."""
    a, b = seed_pair(tmp_path)
    _push(client, a, "sa")
    _push(client, b, "sb")
    html = client.get("/diff", params={"a": "sa", "b": "sb"}).text
    tokens = html.split("<tr class=tokens>")[1].split("</tr>")[0]
    assert tokens.count("7,212") == 2
    assert "$0" not in re.sub(r"\$0\.\d+", "", html)
    assert "<a id=first-divergence href='#p2'>call #2</a>" in html
