"""The pytest plugin (entry point ``tracetape``): thin fixtures over ``tracetape.testing``.

* fixture ``tape``: a ``Tape`` on ``cassettes/<test module>/<test name>.jsonl`` beside the test,
  every provider's SDK and MCP clients patched for the test's duration, the network blocked
  in replay;
* marker ``@pytest.mark.tape(path=..., mode=..., allow_loopback=..., allow_hosts=[...],
  **tape_options)``: configures it, and taps a test that does not ask for the fixture;
* ``--tape-mode=replay|record|auto|rewrite`` (default: the ``tape_mode`` ini option, else
  ``replay``; a marker's ``mode`` wins);
* ``--tape-report`` (and ``--tape-report-json=PATH``): cassettes no test used and recorded
  decisions no test played.

Names are chosen not to clash with pytest-recording (``--record-mode``, ``--block-network``,
``vcr``...), so both plugins live in one environment. Tests that use neither the fixture nor the
marker are not touched.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .errors import ReplayMiss, TapeError
from .formats.cassette import new_run_id
from .tape import Tape
from .testing import TapeCase, TapeUsage, TestMode, default_cassette_path, is_replay_miss

__all__ = ["tape"]

_USAGE = pytest.StashKey[TapeUsage]()
_CALL_FAILED = pytest.StashKey[bool]()
_MARKER_KEYS = ("path", "mode", "allow_loopback", "allow_hosts")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracetape", "tracetape cassettes")
    group.addoption(
        "--tape-mode",
        action="store",
        default=None,
        choices=[m.value for m in TestMode],
        help="replay (default): replay only, a missing cassette fails; record: run live and "
        "write missing cassettes; auto: replay or record; rewrite: run live, overwrite; fork: "
        "replay until the first miss, then live, into a branch beside the cassette. "
        "Default from the tape_mode ini option.",
    )
    group.addoption(
        "--tape-fork-at",
        action="store",
        type=int,
        default=None,
        metavar="STEP",
        help="With --tape-mode=fork: go live from this step on (retry a step that matched).",
    )
    group.addoption(
        "--tape-latency",
        action="store",
        default=None,
        metavar="instant|recorded|FACTOR",
        help="In replay: wait each decision's recorded time, or a factor of it.",
    )
    group.addoption(
        "--tape-report",
        action="store_true",
        default=False,
        help="List cassettes no test used and recorded decisions no test played.",
    )
    group.addoption(
        "--tape-report-json",
        action="store",
        default=None,
        metavar="PATH",
        help="Write the --tape-report data as JSON to PATH.",
    )

    parser.addini(
        "tape_mode",
        "default --tape-mode (replay, record, auto or rewrite); the command line wins",
        default="replay",
    )


def _suite_mode(config: pytest.Config) -> str:
    return str(config.getoption("tape_mode") or config.getini("tape_mode") or "replay")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "tape(path=None, mode=None, allow_loopback=False, allow_hosts=(), **tape_options): "
        "run the test under a tracetape cassette (see the tape fixture)",
    )
    config.stash[_USAGE] = TapeUsage()


def _test_parts(item: pytest.Item) -> tuple[Path, str, str | None]:
    cls = getattr(item, "cls", None)
    name = getattr(item, "name", item.nodeid.rsplit("::", 1)[-1])
    return Path(str(item.path)), name, cls.__name__ if cls is not None else None


def _marker_options(item: pytest.Item) -> dict[str, Any]:
    """The ``tape`` marker's options (a positional argument is the path), checked."""
    marker = item.get_closest_marker("tape")
    if marker is None:
        return {}
    if len(marker.args) > 1:
        raise ValueError(
            f"{item.nodeid}: @pytest.mark.tape takes at most one positional argument (the "
            f"cassette path), got {len(marker.args)}"
        )
    options = dict(marker.kwargs)
    if marker.args:
        options.setdefault("path", marker.args[0])
    unknown = sorted(set(options) - _marker_names())
    if unknown:
        raise ValueError(
            f"{item.nodeid}: @pytest.mark.tape got unknown option(s) {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(_marker_names()))}"
        )
    return options


def _marker_names() -> set[str]:
    """The marker's options: every option of a tape, and the fixture's own."""
    from .options import OPTIONS

    return set(OPTIONS) | {"path", "allow_loopback", "allow_hosts", "sdk"}


def cassette_path(item: pytest.Item) -> Path:
    """The cassette of ``item``: the marker's ``path`` (relative to its file), else the default."""
    test_file, name, cls = _test_parts(item)
    marker = item.get_closest_marker("tape")
    path = None
    if marker is not None:
        path = marker.kwargs.get("path") or (marker.args[0] if marker.args else None)
    if path:
        return test_file.parent / str(path)
    return default_cassette_path(test_file, name, cls)


def _command(item: pytest.Item, mode: str) -> str:
    return f"pytest {shlex.quote(item.nodeid)} --tape-mode={mode}  (run in {item.config.rootpath})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        # Any exception counts (an xfail too): only a call that raised nothing is checked for
        # a swallowed ReplayMiss or blocked connection at teardown.
        item.stash[_CALL_FAILED] = call.excinfo is not None
        if (
            report.failed
            and call.excinfo is not None
            and is_replay_miss(call.excinfo.value)
            and (
                "tape" in getattr(item, "fixturenames", ())
                or item.get_closest_marker("tape") is not None
            )
        ):
            report.longrepr = _miss_longrepr(item, call.excinfo)
    return report


_OURS = str(Path(__file__).resolve().parent)


def _miss_longrepr(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """A replay miss as the test's failure: where the test's code was, the diagnosis, and the
    one command that re-records this test (tracetape's own frames left out)."""
    miss: BaseException | None = excinfo.value
    while miss is not None and not isinstance(miss, ReplayMiss):
        miss = miss.__cause__ or miss.__context__
    root = item.config.rootpath
    where = []
    # From the test function on (pytest's own frames before it are left out, as pytest does).
    for entry in excinfo.traceback.cut(path=item.path):
        path = Path(str(entry.path))
        if str(path.resolve()).startswith(_OURS):
            continue
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        where.append(f"{shown}:{entry.lineno + 1} in {entry.name}")
    # The tape was opened with this test's re-record command: the miss already names it.
    lines = str(miss).splitlines()
    if miss is not excinfo.value:
        lines.append(f"  (raised to the test as {type(excinfo.value).__name__})")
    at = [f"  at {' > '.join(where)}"] if where else []
    return "\n".join([f"ReplayMiss: {lines[0]}", *at, *lines[1:]])


@pytest.fixture
def tape(request: pytest.FixtureRequest) -> Iterator[Tape]:
    """A tape for this test: replays ``cassettes/<module>/<test>.jsonl`` by default.

    ``@pytest.mark.tape(path=..., mode=..., allow_loopback=True, strict=True)`` configures it.
    """
    item = request.node
    try:
        options = _marker_options(item)
        mode = options.pop("mode", None) or _suite_mode(request.config)
        options.pop("path", None)
        fork_at = request.config.getoption("tape_fork_at")
        if fork_at is not None and mode == "fork":
            options.setdefault("fork_at", fork_at)
        latency = request.config.getoption("tape_latency")
        if latency is not None:
            options.setdefault("replay_latency", latency)
        case = TapeCase(
            cassette_path(item),
            mode,
            allow_loopback=bool(options.pop("allow_loopback", False)),
            allow_hosts=options.pop("allow_hosts", ()),
            record_hint=_command(item, "record"),
            rewrite_hint=_command(item, "rewrite"),
            network_hint="let it reach loopback with @pytest.mark.tape(allow_loopback=True), or "
            f"re-record it live: {_command(item, 'rewrite')}",
            on_close=request.config.stash[_USAGE].note,
            **{"run_id": new_run_id(item.nodeid), **options},
        )
        opened = case.open()
    except (TapeError, OSError, ValueError) as exc:
        problem: str | None = str(exc)
    else:
        problem = None
    if problem is not None:
        # Outside the except block: the error is reported once, not chained to itself.
        pytest.fail(problem, pytrace=False)
    yield opened
    case.close(failed=item.stash.get(_CALL_FAILED, True))


@pytest.fixture(autouse=True)
def _tracetape_marker(request: pytest.FixtureRequest) -> None:
    """Open the ``tape`` fixture for a test that has the marker but does not ask for it."""
    if request.node.get_closest_marker("tape") is not None:
        request.getfixturevalue("tape")


# -- --tape-report --------------------------------------------------------------------------------

_COLLECTED = pytest.StashKey[dict[str, Path]]()
_RAN = pytest.StashKey[set[str]]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not (config.getoption("tape_report") or config.getoption("tape_report_json")):
        return
    # Every collected test's cassette, before -k / -m deselect some: theirs are not "unused".
    config.stash[_COLLECTED] = {item.nodeid: cassette_path(item) for item in items}
    config.stash[_RAN] = set()


@pytest.hookimpl(trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    ran = item.config.stash.get(_RAN, None)
    if ran is not None:
        ran.add(item.nodeid)


def _report(config: pytest.Config) -> dict[str, Any]:
    collected = config.stash.get(_COLLECTED, {})
    ran = config.stash.get(_RAN, set())
    folders = {path.parent for path in collected.values()}
    claimed = [path for nodeid, path in collected.items() if nodeid not in ran]
    return config.stash[_USAGE].report(folders, claimed)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    want_text = config.getoption("tape_report")
    json_path = config.getoption("tape_report_json")
    if not (want_text or json_path):
        return
    if getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):
        terminalreporter.write_line(
            "tracetape: --tape-report needs a run without pytest-xdist (-n): each worker sees "
            "only its own tests"
        )
        return
    data = _report(config)
    if json_path:
        Path(json_path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if not want_text:
        return
    write = terminalreporter.write_line
    terminalreporter.section("tracetape report")
    unused, unplayed = data["unused_cassettes"], data["unplayed_decisions"]
    write(f"cassettes no test used: {len(unused)}")
    for path in unused:
        write(f"  {_relative(path, config)}")
    write(f"recorded decisions no test played: {len(unplayed)}")
    for rec in unplayed:
        step = "-" if rec["step"] is None else rec["step"]
        write(
            f"  {_relative(rec['cassette'], config)}: #{rec['seq']} {rec['key']} "
            f"({rec['kind']}, step {step})"
        )


def _relative(path: str, config: pytest.Config) -> str:
    try:
        return str(Path(path).relative_to(config.rootpath))
    except ValueError:
        return path
