"""The collector attacked through a browser and through its own messages: tokens, DNS
rebinding, cross-site writes, security headers, the session cookie, /docs, values echoed in
errors, secrets learned across batches, compressed bodies and bombs, health under load."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import subprocess
import threading
import time
import zlib
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.collector.conftest import HEADERS, TOKEN
from tests.collector.test_app import SECRET, jsonl, seed_line
from tests.collector.test_server import PY, serving
from tracetape import ConfigError
from tracetape.collector import Settings, create_app
from tracetape.collector.security import SESSION_S, check_session, new_session
from tracetape.stores.database import Database

PASSWORD = "correct-horse-battery-staple-42"


def _open(db: Database, **options: object) -> TestClient:
    """The app without a token (a loopback collector), as a browser on 127.0.0.1 sees it."""
    app = create_app(db, Settings(**options))  # type: ignore[arg-type]
    return TestClient(app, base_url="http://127.0.0.1:8750")


# -- tokens -----------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", [" ", "\t\n", ""])
def test_a_blank_token_is_refused_not_an_open_door(db: Database, blank: str) -> None:
    if blank:
        with pytest.raises(ConfigError, match="blank"):
            create_app(db, Settings(token=blank))
    env_blank = {"TRACETAPE_TOKEN": blank or " "}
    done = subprocess.run(
        [PY, "-m", "tracetape", "serve", "--host", "0.0.0.0", "--port", "0"],
        env={**_env(), **env_blank}, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "tracetape collector on" not in done.stderr


def test_a_short_token_beyond_loopback_is_refused() -> None:
    done = subprocess.run(
        [PY, "-m", "tracetape", "serve", "--host", "0.0.0.0", "--port", "0", "--token", "abc"],
        env=_env(), capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "at least 16" in done.stderr


def test_a_token_with_spaces_around_it_is_the_token(db: Database) -> None:
    client = TestClient(create_app(db, Settings(token=f"  {TOKEN}\n")), base_url="http://127.0.0.1")
    assert client.get("/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/", params={"token": " "}).status_code == 401


def _env() -> dict[str, str]:
    import os

    env = {**os.environ}
    env.pop("TRACETAPE_TOKEN", None)
    return env


# -- DNS rebinding and cross-site requests ------------------------------------------------------


def test_a_rebound_host_name_cannot_read_a_loopback_collector(db: Database) -> None:
    """No token on loopback: a page whose name now points at 127.0.0.1 sends its own Host."""
    client = _open(db)
    assert (
        client.post("/v1/lines", content=jsonl(seed_line("r1", 1)), headers=HEADERS).status_code
        == 200
    )
    for host in ("rebind.attacker.example:8750", "rebind.attacker.example", "127.0.0.1.nip.io"):
        answer = client.get("/v1/runs/r1", headers={"Host": host})
        assert answer.status_code == 421, host
        assert "--allowed-host" in answer.json()["error"] and "r1" not in answer.text
    for host in ("127.0.0.1:8750", "localhost:8750", "[::1]:8750", "LOCALHOST"):
        assert client.get("/v1/runs/r1", headers={"Host": host}).status_code == 200, host
    # a probe reaches /healthz by any address; it tells nothing
    assert client.get("/healthz", headers={"Host": "10.1.2.3:8750"}).status_code == 200


def test_an_allowed_host_name_is_answered(db: Database) -> None:
    client = _open(db, bind="0.0.0.0", allowed_hosts=("traces.internal",))
    assert client.get("/v1/runs", headers={"Host": "traces.internal:8750"}).status_code == 200
    assert client.get("/v1/runs", headers={"Host": "0.0.0.0:8750"}).status_code == 200
    assert client.get("/v1/runs", headers={"Host": "other.internal"}).status_code == 421


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "https://attacker.example", "Content-Type": "text/plain"}, 403),
        ({"Origin": "https://attacker.example", "Content-Type": "application/json"}, 403),
        ({"Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-ndjson"}, 403),
        ({"Sec-Fetch-Site": "same-site", "Content-Type": "application/x-ndjson"}, 403),
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
        ({}, 415),
    ],
)
def test_a_cross_site_write_is_refused_and_stores_nothing(
    db: Database, headers: dict[str, str], status: int
) -> None:
    client = _open(db)
    for route in ("/v1/lines", "/v1/otlp/v1/traces"):
        answer = client.post(route, content=jsonl(seed_line("r1", 1)), headers=headers)
        assert answer.status_code == status, (route, answer.text)
        assert set(answer.json()) == {"error"}
    assert client.get("/v1/runs").json()["runs"] == []


def test_a_same_origin_write_is_stored(db: Database) -> None:
    client = _open(db)
    headers = {"Origin": "http://127.0.0.1:8750", "Sec-Fetch-Site": "same-origin",
               "Content-Type": "application/x-ndjson; charset=utf-8"}  # fmt: skip
    assert (
        client.post("/v1/lines", content=jsonl(seed_line("r1", 1)), headers=headers).status_code
        == 200
    )


# -- headers, cookie, docs ----------------------------------------------------------------------


def test_every_answer_carries_the_security_headers_and_pages_a_csp(client: TestClient) -> None:
    client.post("/v1/lines", content=jsonl(seed_line("r1", 1)))
    for url in ("/v1/runs", "/healthz", "/v1/runs/nope", "/", "/runs/r1", "/docs"):
        answer = client.get(url)
        assert answer.headers["x-content-type-options"] == "nosniff", url
        assert answer.headers["referrer-policy"] == "no-referrer", url
        assert answer.headers["x-frame-options"] == "DENY", url
    page = client.get("/")
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    # the page's one script and one style run because their hashes are named; nothing else
    scripts = re.findall(r"<script>(.*?)</script>", page.text, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page.text, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    for text in scripts + styles:
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert " style=" not in page.text and " onclick=" not in page.text


def test_the_session_cookie_is_signed_not_the_token(client: TestClient) -> None:
    bare = TestClient(client.app, base_url="http://127.0.0.1")
    first = bare.get("/", params={"token": TOKEN})
    cookie = bare.cookies.get("tracetape_session")
    assert first.status_code == 200 and cookie and TOKEN not in cookie
    forged = TestClient(client.app, base_url="http://127.0.0.1")
    for value in (TOKEN, f"{int(time.time())}.{'0' * 64}", "garbage", f"{cookie}x"):
        forged.cookies.set("tracetape_session", value)
        assert forged.get("/").status_code == 401, value
    now = time.time()
    assert check_session(TOKEN, new_session(TOKEN, now - 10), now)
    assert not check_session(TOKEN, new_session(TOKEN, now - SESSION_S - 1), now)
    assert not check_session("another-token-0123456789", new_session(TOKEN, now), now)


def test_docs_are_served_here_and_behind_the_token(client: TestClient) -> None:
    bare = TestClient(client.app, base_url="http://127.0.0.1")
    assert bare.get("/docs").status_code == 401 and bare.get("/openapi.json").status_code == 401
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/v1/lines" in docs.text
    assert not re.search(r"(src|href)=['\"]?https?://", docs.text)  # no CDN, no asset elsewhere
    assert client.get("/openapi.json").json()["paths"]["/v1/lines"]


def test_framework_errors_have_the_one_error_shape(client: TestClient) -> None:
    for answer in (client.get("/no/such/route"), client.delete("/v1/lines")):
        assert answer.status_code in (404, 405) and set(answer.json()) == {"error"}


# -- values never echoed; secrets learned across batches ----------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        {"run_id": "r1", "step": SECRET, "tool": "t", "args": {}, "output_sha": "ab"},
        {"run_id": "r1", "step": 1, "tool": "t", "args": {}, "output_sha": "ab", "effect": SECRET},
        {"run_id": "r1", "step": 1, "tool": {"password": PASSWORD}, "args": {}, "output_sha": "ab"},
        {"run_id": "r1", "step": 1, "tool": "t", "args": {}, "output_sha": "ab", "ts": [SECRET]},
        {"run_id": SECRET, "step": 1, "tool": "t", "args": {}, "output_sha": "ab"},
    ],
)
def test_a_refused_line_never_echoes_its_value(client: TestClient, line: dict[str, object]) -> None:
    answer = client.post("/v1/lines", content=jsonl(json.dumps(line)))
    assert answer.status_code == 400 and answer.json()["lines"][0]["field"]
    assert SECRET not in answer.text and PASSWORD not in answer.text


def test_push_prints_no_refused_value(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"run_id": "r1", "step": SECRET, "tool": "t", "args": {},
                                 "output_sha": "ab"}) + "\n")  # fmt: skip
    with serving(f"sqlite:///{tmp_path / 'c.db'}") as url:
        done = subprocess.run(
            [PY, "-m", "tracetape", "push", str(trace), "--url", url, "--token", TOKEN],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    assert done.returncode == 2 and "step" in done.stderr
    assert SECRET not in done.stderr + done.stdout


def _line(run: str, step: int, **args: object) -> str:
    return seed_line(run, step, **args)


def test_a_password_quoted_before_the_line_naming_it_is_redacted(
    client: TestClient, db: Database
) -> None:
    """In the same batch; in the next batch; and in a batch stored before the one that named
    it (the stored lines are rewritten)."""
    client.post("/v1/lines", content=jsonl(_line("r1", 1, note=f"logged in with {PASSWORD}")),
                params={"source": "a", "offset": "0"})  # fmt: skip
    same = jsonl(_line("r1", 2, note=f"again {PASSWORD}"), _line("r1", 3, password=PASSWORD))
    assert (
        client.post("/v1/lines", content=same, params={"source": "a", "offset": "1"}).status_code
        == 200
    )
    later = jsonl(_line("r1", 4, note=f"and later {PASSWORD}"))
    assert (
        client.post("/v1/lines", content=later, params={"source": "a", "offset": "3"}).status_code
        == 200
    )
    stored = json.dumps(client.get("/v1/runs/r1").json())
    assert PASSWORD not in stored and stored.count("[REDACTED:") >= 4
    with db.engine.connect() as conn:
        import sqlalchemy as sa

        raw = " ".join(r for (r,) in conn.execute(sa.text("SELECT record FROM events")))
    assert PASSWORD not in raw


def test_a_secret_of_one_run_is_not_learned_for_another(client: TestClient) -> None:
    """The registry is per run: what run r1 named is not a secret of run r2's (it is only
    redacted where r2 names it too)."""
    client.post("/v1/lines", content=jsonl(_line("r1", 1, password="plain-words-here-x")))
    client.post("/v1/lines", content=jsonl(_line("r2", 1, note="plain-words-here-x")))
    assert "plain-words-here-x" in json.dumps(client.get("/v1/runs/r2").json())


# -- compressed bodies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "encode",
    [
        pytest.param(("gzip", gzip.compress), id="gzip"),
        pytest.param(("deflate", zlib.compress), id="deflate-zlib"),
        pytest.param(("deflate", lambda b: zlib.compress(b, wbits=-15)), id="deflate-raw"),
    ],
)
def test_a_compressed_body_is_read_on_every_ingest_route(client: TestClient, encode) -> None:  # type: ignore[no-untyped-def]
    name, compress = encode
    body = compress(jsonl(seed_line("r1", 1), seed_line("r1", 2)))
    answer = client.post("/v1/lines", content=body, headers={"Content-Encoding": name})
    assert answer.status_code == 200 and answer.json()["stored"] == 2
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "ls"}},
    ]
    span = {"traceId": "t9", "spanId": "s1", "startTimeUnixNano": "1", "attributes": attributes}
    otlp = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    headers = {"Content-Encoding": name, "Content-Type": "application/json"}
    answer = client.post("/v1/otlp/v1/traces", content=compress(otlp), headers=headers)
    assert answer.status_code == 200, answer.text
    assert client.get("/v1/runs/t9").json()["run"]["events"] == 1


def test_a_gzip_bomb_is_a_413_and_broken_encodings_are_refused(client: TestClient) -> None:
    bomb = gzip.compress(b"\n" * (64 << 20))  # 64 MiB of newlines in about 64 KiB
    assert len(bomb) < 1 << 20
    answer = client.post("/v1/lines", content=bomb, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 413 and "decompressed" in answer.json()["error"]
    cut = gzip.compress(jsonl(seed_line("r1", 1)))[:-12]
    assert (
        client.post("/v1/lines", content=cut, headers={"Content-Encoding": "gzip"}).status_code
        == 400
    )
    assert (
        client.post(
            "/v1/lines", content=b"not gzip", headers={"Content-Encoding": "gzip"}
        ).status_code
        == 400
    )
    assert (
        client.post("/v1/lines", content=b"x", headers={"Content-Encoding": "br"}).status_code
        == 415
    )
    assert client.get("/v1/runs").json()["runs"] == []


# -- health under load ----------------------------------------------------------------------------


def test_health_answers_while_analyses_queue_and_busy_analyses_say_retry(tmp_path: Path) -> None:
    """Sixty diffs at once on a collector that runs two at a time: the rest answer 503 with
    Retry-After at once, and /healthz answers every time meanwhile."""
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    lines = [seed_line(f"r{k}", i, q=str(i % 7)) for k in (1, 2) for i in range(1, 3001)]
    with (
        serving(db_url, "--max-lines", "10000", "--max-analyses", "2") as url,
        httpx.Client(headers=HEADERS, timeout=120) as c,
    ):
        assert c.post(f"{url}/v1/lines", content=jsonl(*lines)).status_code == 200
        codes: list[int] = []
        retry: list[str | None] = []

        def diff() -> None:
            with httpx.Client(headers=HEADERS, timeout=120) as own:
                answer = own.get(f"{url}/v1/diff", params={"a": "r1", "b": "r2"})
            codes.append(answer.status_code)
            retry.append(answer.headers.get("retry-after"))

        threads = [threading.Thread(target=diff) for _ in range(60)]
        for t in threads:
            t.start()
        waits = []
        for _ in range(10):
            started = time.perf_counter()
            assert c.get(f"{url}/healthz").status_code == 200
            waits.append(time.perf_counter() - started)
        for t in threads:
            t.join()
    assert set(codes) <= {200, 503} and 200 in codes and 503 in codes
    assert all(r == "1" for code, r in zip(codes, retry, strict=True) if code == 503)
    assert max(waits) < 5.0, waits  # 9-36 s before it had threads of its own


@pytest.mark.parametrize(
    ("method", "headers", "status"),
    [
        pytest.param("PUT", {"Content-Type": "text/plain"}, 405, id="put-any-type"),
        pytest.param("DELETE", {}, 405, id="delete"),
        pytest.param("POST", {"Content-Type": "text/plain"}, 415, id="post-not-json"),
        pytest.param("PUT", {"Sec-Fetch-Site": "cross-site"}, 403, id="put-cross-site"),
    ],
)
def test_a_wrong_method_is_a_405_not_a_415(
    client: TestClient, method: str, headers: dict[str, str], status: int
) -> None:
    """Only a POST sends a body here, so only a POST's content type is checked; another
    method is told it is not allowed (405), after the cross-site checks every change gets."""
    answer = client.request(method, "/v1/lines", content=b"x", headers=headers)
    assert answer.status_code == status
    if status == 405:
        assert answer.json() == {"error": "Method Not Allowed"}


def test_a_conflicting_source_is_quoted_short(client: TestClient) -> None:
    """The 409 for lines of another source quotes both sources at most 80 characters each
    (a source is at most 1,000 characters; longer is a 400)."""
    first, second = "a/" + "x" * 990 + ".jsonl", "b/" + "y" * 990 + ".jsonl"
    line = jsonl(seed_line("r1", 1))
    assert client.post("/v1/lines", content=line, params={"source": first}).status_code == 200
    clash = client.post("/v1/lines", content=jsonl(seed_line("r1", 2)), params={"source": second})
    message = clash.json()["error"]
    assert clash.status_code == 409 and len(message) < 400
    assert "'a/xxx" in message and "x.jsonl'" in message and "…" in message
    over = client.post("/v1/lines", content=line, params={"source": "z" * 1001})
    assert over.status_code == 400 and "source" in over.json()["error"]


def test_a_session_cookie_is_good_for_its_issue_time_signed_and_no_other() -> None:
    """The MAC covers the issue time: an expired cookie re-dated to now, or a valid one's
    time moved, is refused; one dated in the future is refused; the last second of its
    life is good and the next is not."""
    now = 1_800_000_000.0
    old = new_session(TOKEN, now - SESSION_S - 100)
    issued, _, mac = old.partition(".")
    assert not check_session(TOKEN, f"{int(now)}.{mac}", now)  # re-dated, MAC kept
    fresh = new_session(TOKEN, now - 10)
    assert not check_session(TOKEN, f"{int(now) - 5}.{fresh.partition('.')[2]}", now)
    assert not check_session(TOKEN, new_session(TOKEN, now + 60), now)  # from the future
    assert check_session(TOKEN, new_session(TOKEN, now - SESSION_S), now)
    assert not check_session(TOKEN, new_session(TOKEN, now - SESSION_S - 1), now)
    assert int(issued) == int(now - SESSION_S - 100)
