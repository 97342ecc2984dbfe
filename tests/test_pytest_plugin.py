"""The pytest plugin, run on generated suites with ``pytester`` (pytest-recording installed)."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from tests.echo_server import fake_openai
from tracetape import read_cassette

pytest_plugins = ["pytester"]

# A generated test module: ``agent_step`` is an unmodified-agent stand-in deciding through
# whatever tape is current; ``ran.txt`` counts live executions.
AGENT = """
import pathlib, socket
import pytest
import tracetape
from tracetape.integrations.tools import tool

RAN = pathlib.Path(__file__).with_name("ran.txt")

@tool
def lookup(city):
    with RAN.open("a") as fh:
        fh.write(city + "\\n")
    return {"city": city, "temp": 21}

def agent_step(city):
    return lookup(city)["temp"]
"""


def make(pytester: pytest.Pytester, body: str, name: str = "test_agent") -> None:
    pytester.makepyfile(**{name: AGENT + textwrap.dedent(body)})


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # Plugins unrelated to the test only slow each in-process session down.
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:backspin", *args)


def ran(pytester: pytest.Pytester) -> list[str]:
    path = pytester.path / "ran.txt"
    return path.read_text().split() if path.exists() else []


ONE = """
def test_one(tape):
    assert agent_step("Oslo") == 21
"""


def test_missing_cassette_fails_with_the_record_command(pytester: pytest.Pytester) -> None:
    """By default a test whose cassette is missing fails, naming the command that records it."""
    make(pytester, ONE)
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*no cassette to replay; record it first: "
            "pytest test_agent.py::test_one --tape-mode=record*"
        ]
    )
    # The error once above the short summary (which pytest cuts on a terminal, not under CI).
    out = result.stdout.str().split("short test summary info")[0]
    assert out.count("no cassette to replay") == 1
    assert "During handling" not in out
    assert ran(pytester) == []


def test_record_then_replay_from_the_default_cassette(pytester: pytest.Pytester) -> None:
    """``--tape-mode=record`` writes cassettes/<module>/<test>.jsonl; replay runs no tool."""
    make(pytester, ONE)
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_agent" / "test_one.jsonl"
    assert [r.input["name"] for r in read_cassette(cassette).records] == ["lookup"]
    # the run is named by the test's node id, unique per recording
    run_id = read_cassette(cassette).header["run_id"]  # type: ignore[index]
    assert re.fullmatch(r"test_agent.py::test_one@[0-9a-f]{12}", run_id)
    run(pytester).assert_outcomes(passed=1)
    assert ran(pytester) == ["Oslo"]


def test_record_never_overwrites_and_rewrite_does(pytester: pytest.Pytester) -> None:
    """``record`` refuses an existing cassette, pointing at ``rewrite``, which re-records it."""
    make(pytester, ONE)
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    again = run(pytester, "--tape-mode=record")
    again.assert_outcomes(errors=1)
    again.stdout.fnmatch_lines(["*already recorded*never overwrites*--tape-mode=rewrite*"])
    run(pytester, "--tape-mode=rewrite").assert_outcomes(passed=1)
    assert ran(pytester) == ["Oslo", "Oslo"]


def test_auto_records_once_then_replays(pytester: pytest.Pytester) -> None:
    """``auto`` records a missing cassette and replays it afterwards."""
    make(pytester, ONE)
    run(pytester, "--tape-mode=auto").assert_outcomes(passed=1)
    run(pytester, "--tape-mode=auto").assert_outcomes(passed=1)
    assert ran(pytester) == ["Oslo"]


def test_marker_sets_path_and_mode_and_tapes_tests_without_the_fixture(
    pytester: pytest.Pytester,
) -> None:
    """``@pytest.mark.tape(path=, mode=)`` wins over --tape-mode and works without the fixture."""
    make(
        pytester,
        """
        @pytest.mark.tape(path="tapes/shared.jsonl", mode="auto")
        def test_marked():
            assert tracetape.current_tape() is not None
            assert agent_step("Rome") == 21
        """,
    )
    run(pytester).assert_outcomes(passed=1)
    run(pytester).assert_outcomes(passed=1)
    assert (pytester.path / "tapes" / "shared.jsonl").exists()
    assert ran(pytester) == ["Rome"]


def test_replay_miss_fails_with_diagnosis_and_rewrite_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diverging test fails with the changed field and the command that re-records it."""
    make(
        pytester,
        """
        import os
        def test_city(tape):
            agent_step(os.environ.get("CITY", "Oslo"))
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    monkeypatch.setenv("CITY", "Bergen")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ReplayMiss*was never recorded*",
            "*at test_agent.py:*in test_city*",
            "*changed: args.city*",
            "*re-record: pytest test_agent.py::test_city --tape-mode=rewrite*",
        ]
    )
    out = result.stdout.str()
    assert "Tape(" not in out  # one fix, the one for pytest
    assert "tracetape/tape.py" not in out and "def play" not in out


def test_swallowed_replay_miss_still_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code that catches the ReplayMiss and goes on does not make the test pass."""
    make(
        pytester,
        """
        import os
        def test_city(tape):
            try:
                agent_step(os.environ.get("CITY", "Oslo"))
            except Exception:
                pass
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    monkeypatch.setenv("CITY", "Bergen")
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*caught this ReplayMiss and went on*"])


NETWORK = """
import threading

@pytest.fixture
def server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    yield srv.getsockname()
    srv.close()

def connect(address):
    with socket.create_connection(address, timeout=2):
        return "connected"

@pytest.mark.tape(mode="replay", path="empty.jsonl")
def test_loopback_blocked(server):
    connect(server)

@pytest.mark.tape(mode="replay", path="empty.jsonl", allow_loopback=True)
def test_loopback_allowed(server):
    assert connect(server) == "connected"

@pytest.mark.tape(mode="replay", path="empty.jsonl")
def test_swallowed_in_a_thread(server):
    errors = []
    def work():
        try:
            connect(server)
        except Exception as exc:
            errors.append(exc)
    t = threading.Thread(target=work)
    t.start(); t.join()
    assert errors

def test_untaped_after_taped(server):
    assert connect(server) == "connected"

@pytest.mark.tape(mode="replay", path="empty.jsonl")
def test_dns_blocked():
    socket.getaddrinfo("example.org", 443)
"""


def test_replay_blocks_the_network_loudly(pytester: pytest.Pytester) -> None:
    """In replay any connection fails, loopback too unless allowed, even if caught in a thread."""
    make(pytester, NETWORK)
    (pytester.path / "empty.jsonl").write_text('{"tracetape": 1}\n')
    result = run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "E *.NetworkBlockedError: tracetape: network access blocked in replay: connect to "
            "127.0.0.1:*; a replayed test must not reach the network (let it reach loopback with "
            "@pytest.mark.tape(allow_loopback=True), or re-record it live: pytest "
            "test_agent.py::test_loopback_blocked --tape-mode=rewrite*",
        ]
    )
    result.stdout.fnmatch_lines(["*resolve host 'example.org'*"])
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_swallowed_in_a_thread*"])


def test_tests_without_tape_are_untouched(pytester: pytest.Pytester) -> None:
    """A test using neither fixture nor marker connects freely, even with --tape-mode=replay."""
    pytester.makepyfile(
        test_plain="""
        import socket
        def test_plain():
            srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
            socket.create_connection(srv.getsockname(), timeout=2).close()
            srv.close()
        """
    )
    run(pytester, "--tape-mode=replay", "--tape-report").assert_outcomes(passed=1)


def test_tape_report_lists_unused_cassettes_and_unplayed_decisions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--tape-report`` names orphan cassettes and unplayed decisions, not skipped tests'."""
    make(
        pytester,
        """
        import os
        def test_two(tape):
            agent_step("Oslo")
            if not os.environ.get("SHORT"):
                agent_step("Rome")

        @pytest.mark.skipif(bool(os.environ.get("SHORT")), reason="short run")
        def test_skipped(tape):
            agent_step("Lima")
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=2)
    folder = pytester.path / "cassettes" / "test_agent"
    (folder / "test_deleted_long_ago.jsonl").write_text('{"tracetape": 1}\n')
    monkeypatch.setenv("SHORT", "1")
    result = run(pytester, "--tape-report", "--tape-report-json=report.json")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*tracetape report*",
            "cassettes no test used: 1",
            "  cassettes/test_agent/test_deleted_long_ago.jsonl",
            "recorded decisions no test played: 1",
            "  cassettes/test_agent/test_two.jsonl: #2 tool:* (tool, step 0)",
        ]
    )
    data = json.loads((pytester.path / "report.json").read_text())
    assert [p.rsplit("/", 1)[-1] for p in data["unused_cassettes"]] == [
        "test_deleted_long_ago.jsonl"
    ]
    assert [d["seq"] for d in data["unplayed_decisions"]] == [2]


def test_parametrized_and_class_tests_get_their_own_cassettes(pytester: pytest.Pytester) -> None:
    """Each parameter set and each class method records into its own named cassette."""
    make(
        pytester,
        """
        @pytest.mark.parametrize("city", ["Oslo", "New York/NY"])
        def test_city(tape, city):
            agent_step(city)

        class TestAgent:
            def test_method(self, tape):
                agent_step("Kyiv")
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=3)
    names = sorted(p.name for p in (pytester.path / "cassettes" / "test_agent").iterdir())
    assert names == [
        "TestAgent.test_method.jsonl",
        "test_city[New_York_NY].jsonl",
        "test_city[Oslo].jsonl",
    ]


def test_coexists_with_pytest_recording(pytester: pytest.Pytester) -> None:
    """Both plugins load, their options combine, and each one's fixtures work in one session."""
    make(
        pytester,
        """
        def test_taped(tape):
            assert agent_step("Oslo") == 21

        @pytest.mark.vcr
        def test_vcr(vcr):
            assert vcr is not None

        @pytest.mark.block_network
        def test_blocked_by_recording():
            with pytest.raises(RuntimeError, match="Network is disabled"):
                socket.create_connection(("192.0.2.1", 80), timeout=1)
        """,
    )
    run(pytester, "--tape-mode=record", "-k", "taped").assert_outcomes(passed=1, deselected=2)
    result = run(
        pytester, "--tape-mode=replay", "--record-mode=none", "--block-network", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=3)
    help_text = run(pytester, "--help").stdout.str()
    assert "--tape-mode" in help_text
    assert "--record-mode" in help_text


SDK_TEST = """
import os
import openai

def test_agent(tape):
    client = openai.OpenAI(base_url=os.environ["FAKE_URL"], api_key=os.environ["OPENAI_API_KEY"],
                           max_retries=0)
    prompt = os.environ.get("PROMPT", "hello")
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
    )
    assert isinstance(reply, openai.types.chat.ChatCompletion)
    assert reply.choices[0].message.content == "echo: hello"
"""


def test_sdk_agent_records_then_replays_with_the_server_stopped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unmodified OpenAI-SDK test records live, replays offline, and names a changed prompt."""
    secret = "sk-proj-pluginsecret0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    pytester.makepyfile(test_sdk=SDK_TEST)
    with fake_openai() as url:
        monkeypatch.setenv("FAKE_URL", url)
        run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_sdk" / "test_agent.jsonl"
    assert secret not in cassette.read_text()
    run(pytester).assert_outcomes(passed=1)
    monkeypatch.setenv("PROMPT", "hello there")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*changed: messages[[]0[]].content*"])


def test_the_marker_takes_every_tape_option() -> None:
    """Each option of ``TapeOptions`` is an option of the marker too."""
    from tracetape.options import OPTIONS
    from tracetape.pytest_plugin import _marker_names

    assert set(OPTIONS) <= _marker_names()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        pytest.param("mode='bogus'", "*'bogus' is not a valid mode; use one of*", id="mode"),
        pytest.param(
            "strikt=True",
            "*test_bad: @pytest.mark.tape got unknown option(s) strikt; valid:*",
            id="typo",
        ),
        pytest.param("'a.jsonl', 'b.jsonl'", "*at most one positional argument*", id="two-paths"),
    ],
)
def test_bad_marker_options_fail_clearly(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    """A wrong marker option fails the test with one line naming the test and the option."""
    make(pytester, f"@pytest.mark.tape({marker})\ndef test_bad():\n    pass\n")
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])


def test_positional_marker_argument_is_the_path(pytester: pytest.Pytester) -> None:
    """``@pytest.mark.tape("tapes/x.jsonl")`` names the cassette, relative to the test file."""
    make(pytester, '@pytest.mark.tape("tapes/x.jsonl")\ndef test_p():\n    agent_step("Oslo")\n')
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    assert (pytester.path / "tapes" / "x.jsonl").exists()


def test_ini_sets_the_default_mode_and_the_option_wins(pytester: pytest.Pytester) -> None:
    """``tape_mode`` in the ini file is the default; ``--tape-mode`` overrides it."""
    make(pytester, ONE)
    pytester.makeini("[pytest]\ntape_mode = auto\n")
    run(pytester).assert_outcomes(passed=1)
    assert ran(pytester) == ["Oslo"]
    run(pytester, "--tape-mode=rewrite").assert_outcomes(passed=1)
    assert ran(pytester) == ["Oslo", "Oslo"]


def test_async_tests_see_the_tape(pytester: pytest.Pytester) -> None:
    """An async test (anyio) sees the fixture's tape and its async tools replay."""
    make(
        pytester,
        """
        @tool
        async def fetch(n):
            with RAN.open("a") as fh:
                fh.write(f"fetch{n}\\n")
            return n + 1

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.anyio
        async def test_async(tape):
            assert tracetape.current_tape() is tape
            assert await fetch(1) == 2
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    run(pytester).assert_outcomes(passed=1)
    assert ran(pytester) == ["fetch1"]


def test_xfail_on_a_replay_miss_is_not_reported_twice(pytester: pytest.Pytester) -> None:
    """A test expected to fail on a ReplayMiss xfails and gets no teardown error."""
    make(
        pytester,
        """
        import os
        @pytest.mark.xfail(raises=tracetape.ReplayMiss, strict=True)
        def test_city(tape):
            agent_step(os.environ.get("CITY", "Oslo"))
        """,
    )
    (pytester.path / "cassettes" / "test_agent").mkdir(parents=True)
    (pytester.path / "cassettes" / "test_agent" / "test_city.jsonl").write_text(
        '{"tracetape": 1}\n'
    )
    run(pytester).assert_outcomes(xfailed=1)


def test_a_recording_that_reached_the_network_where_no_tape_heard_warns(
    pytester: pytest.Pytester,
) -> None:
    """A test that reached the network where no tape heard it is never silent, whether or not
    it taped something: a TapeWarning names what it reached and the fix that fits (a hooked
    client's request no tape took: ``patch_http``; a client no hook hears: a tool or another
    engine). A test that taped everything it reached, or reached nothing, does not warn."""
    make(
        pytester,
        """
        import socket, urllib.error, urllib.request
        import requests

        def _refused(get):
            with socket.socket() as s:  # bound, never listening: refused while held
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
                try:
                    get(f"http://127.0.0.1:{port}/v1/models")
                except (urllib.error.URLError, OSError, requests.ConnectionError):
                    pass

        def test_untaped(tape):
            _refused(lambda url: urllib.request.urlopen(url, timeout=30))

        def test_taped_then_untaped(tape):
            assert agent_step("Oslo") == 21
            _refused(lambda url: urllib.request.urlopen(url, timeout=30))

        def test_hooked_but_not_taken(tape):
            _refused(lambda url: requests.get(url, timeout=30))

        def test_quiet(tape):
            pass

        def test_taped(tape):
            assert agent_step("Oslo") == 21
        """,
    )
    result = run(pytester, "--tape-mode=record", "-W", "always::tracetape.TapeWarning")
    result.assert_outcomes(passed=5)
    out = result.stdout.str()
    assert out.count("the program reached the network where no tape heard it") == 3
    assert out.count("sent where no hook hears: no hook of tracetape hears that client") == 2
    result.stdout.fnmatch_lines(
        [
            "*test_hooked_but_not_taken*",
            "*connect to 127.0.0.1:*, sent by urllib3 and taken by no tape*"
            "tracetape.patch_http(tape)*",
        ]
    )


def test_a_miss_a_framework_wraps_is_reported_with_its_diagnosis(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A framework that turns the miss into its own error (litellm's 500, instructor's retry
    error): the test fails, and the report shows the miss's diagnosis, not only that error."""
    make(
        pytester,
        """
        import os
        class FrameworkError(Exception):
            pass
        def test_city(tape):
            try:
                agent_step(os.environ.get("CITY", "Oslo"))
            except Exception as exc:
                raise FrameworkError("Connection error.") from exc
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    monkeypatch.setenv("CITY", "Bergen")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*was never recorded*", "*Oslo*", "*Bergen*"])


def test_fork_mode_goes_live_at_the_first_miss_into_a_branch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--tape-mode=fork``: the test's recorded calls replay, the first that differs and
    those after it run live, the whole run goes to a branch beside the cassette (named in a
    warning), and the cassette itself is never changed; ``--tape-fork-at`` goes live from a
    step that matched (these tool calls, made before any model call, are step 0)."""
    make(
        pytester,
        """
        import os

        def test_two(tape):
            assert agent_step("Oslo") == 21
            assert agent_step(os.environ.get("CITY", "Rome")) == 21
        """,
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_agent" / "test_two.jsonl"
    recorded = cassette.read_bytes()
    (pytester.path / "ran.txt").unlink()
    monkeypatch.setenv("CITY", "Paris")
    result = run(pytester, "--tape-mode=fork")
    result.assert_outcomes(passed=1)
    assert ran(pytester) == ["Paris"]
    assert cassette.read_bytes() == recorded
    branch = cassette.with_name("test_two.fork-miss.jsonl")
    result.stdout.fnmatch_lines([f"*forked at decision 2 (first miss)*{branch}*"])
    assert '"parent"' in branch.read_text().splitlines()[0]
    (pytester.path / "ran.txt").unlink()
    run(pytester, "--tape-mode=fork", "--tape-fork-at=0").assert_outcomes(passed=1)  # tools: step 0
    assert ran(pytester) == ["Oslo", "Paris"]
