"""``tracetape run``: run any Python program with a tape active from its first import.

Like ``opentelemetry-instrument``, the program is not changed. ``run_program`` checks the
tape's options (``TapeOptions``: a bad one stops it before the program starts) and starts the
command with the ``bootstrap/`` folder first on ``PYTHONPATH`` and the run in one variable,
``TRACETAPE_RUN`` (JSON: the cassette, the tape's options, the hooks, the network policy);
the ``sitecustomize`` there runs in the first Python process before its main module, calls
``start_from_environment`` (opens a ``Tape`` with those options, enters it, patches the SDKs,
makes threads inherit it) and chains to any other ``sitecustomize`` on the path. When the
program ends, an ``atexit`` hook closes the tape and writes a small JSON report to a file
named by the parent (``TRACETAPE_RUN_REPORT``), which turns it into an exit code:

* the program's own exit code, when the tape ran clean;
* ``EXIT_SETUP`` (2): the tape could not start (a missing or corrupt cassette, a bad option);
* ``EXIT_REPLAY_MISS`` (3): replay met a decision never recorded; the diagnosis is printed on
  stderr, and this holds even when the program caught the ``ReplayMiss`` and went on;
* ``EXIT_UNPLAYED`` (4): ``strict`` replay ended with recorded decisions never played;
* ``EXIT_NETWORK`` (5): replay tried to reach the network (blocked, see ``network``).

In replay the network is blocked (``integrations.network.block_network``, loopback included) unless
``network`` is ``"loopback"`` (loopback allowed) or ``"allow"``: what the hooks do not tape
must not silently go live.

Only the first Python process claims the tape (an exclusive file next to the report): it removes
the variables from its environment, so Python subprocesses it starts run untaped, and a sibling
started by a shell wrapper finds the claim taken and runs untaped too, instead of clobbering the
cassette.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import ReplayMiss, TapeError, TapeWarning
from ..options import Mode, TapeOptions

# Each process imports only its side, and each start pays for its imports: the parent
# (``run_program``) checks options and a cassette and never opens a tape, so ``Tape`` and the
# hooks are imported by the child (``start_from_environment``); ``tempfile`` by the parent,
# ``traceback`` where a miss stopped the program.
if TYPE_CHECKING:
    import traceback

__all__ = [
    "BOOTSTRAP_DIR",
    "EXIT_NETWORK",
    "EXIT_REPLAY_MISS",
    "EXIT_SETUP",
    "EXIT_UNPLAYED",
    "HOOKS",
    "RunResult",
    "run_program",
    "start_from_environment",
]

BOOTSTRAP_DIR = Path(__file__).with_name("bootstrap")
EXIT_SETUP = 2
EXIT_REPLAY_MISS = 3
EXIT_UNPLAYED = 4
EXIT_NETWORK = 5

# The fixes a warning of untaped traffic gives (``network.untaped_traffic``).
HOOK_FIX = "tape them with --hook http (every request) or @tracetape.tool around the call"
UNHOOKED_FIX = (
    "no hook of tracetape hears that client (raw sockets, or an HTTP library it does not "
    "patch): put the call in a @tracetape.tool, or give the framework an httpx, aiohttp or "
    "requests engine (dspy and others: their litellm engine)"
)
HOOKS = ("auto", "sdk", "http", "none")
NETWORK = ("block", "loopback", "allow")

# The run, as JSON: ``tape`` (the cassette), ``options`` (``TapeOptions.to_builtins``),
# ``hook``, ``network`` and ``traceback``; and the report file the parent reads (its claim
# beside it), named by the parent.
ENV_RUN = "TRACETAPE_RUN"
ENV_REPORT = "TRACETAPE_RUN_REPORT"
_ENV_NAMES = (ENV_RUN, ENV_REPORT)


# -- the child: started by bootstrap/sitecustomize.py ----------------------------------------------


def _write_report(path: str, report: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:  # noqa: PTH123 - hot start-up path, no pathlib
        json.dump(report, fh)
    os.replace(tmp, path)  # noqa: PTH105


def _turned_into(miss: ReplayMiss, stopped: BaseException) -> bool:
    """Whether the error that stopped the program was raised while handling ``miss`` (a
    framework wrapped it into its own) or from it."""
    seen: set[int] = set()
    link: BaseException | None = stopped
    while link is not None and id(link) not in seen:
        if miss.same(link):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _miss_report(miss: ReplayMiss, stopped: BaseException | None) -> dict[str, Any]:
    """The first miss, and what the program did with it: ``stopped`` at it (uncaught, or a
    copy of it raised as an SDK's error), ``turned`` it into the error that stopped it, or
    ``caught`` it and went on."""
    if stopped is not None and miss.same(stopped):
        fate, turned = "stopped", None
    elif stopped is not None and _turned_into(miss, stopped):
        fate, turned = "turned", type(stopped).__name__
    else:
        fate, turned = "caught", None
    return {
        "key": miss.key,
        "kind": miss.kind,
        "step": miss.step,
        "changes": miss.changes,
        "message": str(miss),
        "caught": fate != "stopped",
        "fate": fate,
        "turned_into": turned,
    }


def _program_frame(frames: list[traceback.FrameSummary]) -> traceback.FrameSummary:
    """The frame to name where a miss stopped the program: its own innermost one, not a
    library's (an SDK raises the miss from deep in its client), else the innermost."""
    import sysconfig

    paths = sysconfig.get_paths()
    libraries = tuple({paths["stdlib"], paths["purelib"], paths["platlib"]})
    own = [f for f in frames if not f.filename.startswith(libraries)]
    return (own or frames)[-1]


def _inherit_context_in_threads() -> None:
    """Make threads started from now on run in a copy of their starter's context (the tape)."""
    start = threading.Thread.start

    def start_in_context(self: threading.Thread) -> None:
        context = contextvars.copy_context()
        run = self.run
        self.run = lambda: context.run(run)  # type: ignore[method-assign]
        start(self)

    threading.Thread.start = start_in_context  # type: ignore[method-assign]


def _scrub_environment() -> None:
    """Drop our variables and PYTHONPATH entry so Python subprocesses run untaped."""
    for name in _ENV_NAMES:
        os.environ.pop(name, None)
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    kept = [p for p in parts if p and Path(p) != BOOTSTRAP_DIR]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)


def _enter_hooks(tape: Any, hook: str, stack: contextlib.ExitStack) -> None:
    """``sdk``: every provider's SDK hooks and the model routes at every transport; ``http``:
    every request of the transports; ``auto``: both, the SDK level first (a call it tapes
    passes the HTTP level untouched) and the HTTP level for every other request."""
    if hook in ("auto", "sdk"):
        from .sdk import patch_sdks

        stack.enter_context(patch_sdks(tape))
    if hook in ("auto", "http"):
        from .http import patch_http

        stack.enter_context(patch_http(tape))


def start_from_environment() -> None:
    """Open the tape ``TRACETAPE_RUN`` describes for the rest of this process (child side).

    Called by the bootstrap ``sitecustomize``; does nothing when the variables are unset.
    """
    run = os.environ.get(ENV_RUN)
    report_path = os.environ.get(ENV_REPORT)
    if not run or not report_path:
        return
    given: dict[str, Any] = json.loads(run)
    hook, network, show_traceback = given["hook"], given["network"], given["traceback"]
    _scrub_environment()
    try:
        os.close(os.open(f"{report_path}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        # A sibling Python process (``sh -c "python a.py && python b.py"``) claimed it first.
        print(
            f"tracetape run: the tape is taken by an earlier Python process of this command; "
            f"this one (pid {os.getpid()}) runs untaped",
            file=sys.stderr,
        )
        return

    from ..tape import Tape

    report: dict[str, Any] = {"state": "started", "pid": os.getpid()}
    hooks = contextlib.ExitStack()
    try:
        with warnings.catch_warnings(record=True) as opening:  # said in the run's report
            warnings.simplefilter("always", TapeWarning)
            tape = Tape(given["tape"], options=TapeOptions.from_builtins(given["options"]))
        report["opening_warnings"] = [str(w.message) for w in opening]
        report["mode"] = tape.requested_mode.value if tape.branch else tape.mode.value
        if tape.branch is not None:
            report["branch"] = str(tape.branch)
        tape.__enter__()
        _enter_hooks(tape, hook, hooks)
        guard = watcher = None
        if not tape.replaying or tape.branch is not None:
            from .capture import hearing
            from .network import untaped_traffic, watch_network

            watcher = hooks.enter_context(watch_network(hearing))
        elif network != "allow":
            from .network import block_network

            guard = hooks.enter_context(
                block_network(
                    allow_loopback=network == "loopback",
                    hint="pass --network loopback or --network allow to tracetape run to let it",
                )
            )
    except (TapeError, ValueError, OSError) as exc:
        hooks.close()
        _write_report(report_path, {"state": "error", "error": str(exc)})
        os._exit(EXIT_SETUP)
    _write_report(report_path, report)
    _inherit_context_in_threads()
    failed: list[BaseException] = []
    previous_hook = sys.excepthook

    def excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        failed.append(exc)
        if isinstance(exc, ReplayMiss):
            import traceback

            # The parent prints the diagnosis once; here only where the program was.
            ours = str(Path(__file__).resolve().parent.parent)
            frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith(ours)]
            if show_traceback:
                sys.stderr.write("Traceback (most recent call last):\n")
                sys.stderr.write("".join(traceback.format_list(frames)))
                sys.stderr.write(f"tracetape.ReplayMiss: {exc.key} (diagnosis below)\n")
            elif frames:
                where = _program_frame(frames)
                sys.stderr.write(
                    f"ReplayMiss at {where.filename}:{where.lineno} in {where.name} "
                    "(--traceback shows the whole traceback; diagnosis below)\n"
                )
            return
        previous_hook(kind, exc, tb)

    sys.excepthook = excepthook

    def finish() -> None:
        sys.excepthook = previous_hook
        final: dict[str, Any] = {**report, "state": "closed"}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                hooks.close()
            except Exception as exc:  # a hook failing to unpatch must not lose the report
                final["warnings_extra"] = [f"unpatching the hooks failed: {exc!r}"]
            try:
                tape.close(
                    failed=bool(failed) or bool(tape.misses),
                    ended=tape.ending(failed[0] if failed else None),
                )
            except TapeError as exc:
                final["error"] = str(exc)
                final["error_type"] = type(exc).__name__
        final["warnings"] = (
            final.pop("opening_warnings", [])
            + [str(w.message) for w in caught]
            + final.pop("warnings_extra", [])
        )
        if watcher is not None and watcher.seen:
            final["warnings"].append(untaped_traffic(watcher, HOOK_FIX, UNHOOKED_FIX))
        from .state import state_of

        telemetry = state_of(tape).telemetry
        if telemetry:
            final["telemetry"] = dict(sorted(telemetry.items()))
        if not tape.replaying:
            final["written"] = tape.written
            final["ended"] = tape.ending(failed[0] if failed else None)
            if tape.write_failure is not None:
                final["write_failure"] = str(tape.write_failure)
        if tape.fork_point is not None:
            final["fork"] = tape.fork_point
        if tape.replaying:
            final["recorded"] = len(tape.records)
            final["unplayed"] = [
                {"seq": r.seq, "key": r.key, "kind": r.kind} for r in tape.unplayed
            ]
        if guard is not None and guard.attempts:
            final["network"] = [str(error) for error in guard.attempts]
        if tape.misses:
            first = tape.misses[0]
            final["miss"] = _miss_report(first, failed[0] if failed else None)
        _write_report(report_path, final)

    atexit.register(finish)


# -- the parent: ``tracetape run`` -----------------------------------------------------------------


@dataclass
class RunResult:
    """What ``run_program`` saw: the exit code to use, the program's own, and the tape's report."""

    exit_code: int
    program_exit_code: int | None
    tape: Path
    mode: str | None
    report: dict[str, Any] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def as_json(self, command: Sequence[str]) -> dict[str, Any]:
        """The JSON form printed by ``tracetape run --format json``."""
        miss = self.report.get("miss")
        return {
            "command": _shown(command),
            "tape": str(self.tape),
            "mode": self.mode,
            "exit_code": self.exit_code,
            "program_exit_code": self.program_exit_code,
            "state": self.report.get("state", "not-started"),
            "recorded": self.report.get("recorded"),
            "written": self.report.get("written"),
            "unplayed": self.report.get("unplayed", []),
            "miss": miss,
            "error": self.report.get("error"),
            "network": self.report.get("network", []),
            "ended": self.report.get("ended"),
            "branch": self.report.get("branch"),
            "fork": self.report.get("fork"),
            "warnings": self.report.get("warnings", []),
            "telemetry": self.report.get("telemetry", {}),
            "messages": self.messages,
        }


def _shown(command: Sequence[str]) -> str:
    """The command line as printed: secrets on it (an ``--api-key sk-...``) are redacted."""
    import shlex

    from ..redact import Redactor

    return Redactor().redact_text(shlex.join(command))


def _rerun_hint(tape: Path, command: Sequence[str], hook: str, mode: str = "rewrite") -> str:
    import shlex

    hook_option = {"auto": "", "proxy": " --proxy"}.get(hook, f" --hook {hook}")
    return (
        f"tracetape run --tape {shlex.quote(str(tape))} --mode {mode}{hook_option} -- "
        f"{_shown(command)}"
    )


def _check_cassette(tape: Path, mode: Mode, command: Sequence[str], hook: str) -> str | None:
    """Refuse to start a replay whose cassette is missing or corrupt, or a record that would
    overwrite a cassette; return the message."""
    if mode is Mode.RECORD and tape.exists():
        return (
            f"{tape}: a cassette is already recorded here and --mode record never overwrites "
            f"one; replay it, or re-record it on purpose:\n  {_rerun_hint(tape, command, hook)}"
        )
    if mode in (Mode.RECORD, Mode.REWRITE) or (mode is Mode.AUTO and not tape.exists()):
        return None
    from ..formats.cassette import read_cassette

    if not tape.exists():
        hint = _rerun_hint(tape, command, hook, "record")
        return f"{tape}: no such cassette to replay; record it first:\n  {hint}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_cassette(tape)
    except TapeError as exc:
        return str(exc)
    return None


def run_program(
    command: Sequence[str],
    tape: str | os.PathLike[str],
    options: TapeOptions | None = None,
    *,
    hook: str = "auto",
    network: str = "block",
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    show_traceback: bool = False,
) -> RunResult:
    """Run ``command`` with ``tape`` active in its (first) Python process; see the module doc.

    ``options`` are the tape's (default: mode ``replay``); its ``rerecord`` is this command
    line's, and the network policy guards it instead of the tape's guard. ``network`` is the
    replay network policy: ``"block"``, ``"loopback"`` or ``"allow"``. ``env`` replaces
    ``os.environ`` for the program (our variables are added to it). Signals SIGTERM and
    SIGHUP are passed on to the program; Ctrl-C reaches it from the terminal. An uncaught
    ``ReplayMiss`` prints one line saying where it was raised, then the diagnosis;
    ``show_traceback`` prints the program's traceback (tracetape's frames left out) instead.
    """
    options = options or TapeOptions(mode=Mode.REPLAY)
    parsed = options.mode
    if hook not in HOOKS:
        raise ValueError(f"{hook!r} is not a valid hook; use one of {', '.join(HOOKS)}")
    if network not in NETWORK:
        raise ValueError(
            f"{network!r} is not a valid network policy; use one of {', '.join(NETWORK)}"
        )
    if not command:
        raise ValueError("no command to run; put it after --, e.g. -- python -m agent")
    path = Path(tape)
    problem = _check_cassette(path, parsed, command, hook)
    if problem is not None:
        return RunResult(EXIT_SETUP, None, path, parsed.value, {"state": "error"}, [problem])
    import tempfile

    fd, report_name = tempfile.mkstemp(prefix="tracetape-run-", suffix=".json")
    os.close(fd)
    report_file = Path(report_name)
    child_env = dict(os.environ if env is None else env)
    python_path = child_env.get("PYTHONPATH")
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BOOTSTRAP_DIR), python_path]))
    options = dataclasses.replace(
        options,
        # every miss names the command line that records this run again
        rerecord=_rerun_hint(path, command, hook),
        branch=None if options.branch is None else options.branch.resolve(),
        allow_network=True,  # the network policy (``network``) guards it
    )
    run = {
        "tape": str(path.resolve()),
        "options": options.to_builtins(),
        "hook": hook,
        "network": network,
        "traceback": show_traceback,
    }
    child_env.update({ENV_RUN: json.dumps(run), ENV_REPORT: report_name})
    try:
        code = _spawn(command, child_env, cwd)
        try:
            text = report_file.read_text(encoding="utf-8")
            report: dict[str, Any] = json.loads(text) if text else {}
        except (OSError, ValueError):
            report = {}
    finally:
        report_file.unlink(missing_ok=True)
        Path(f"{report_name}.claim").unlink(missing_ok=True)
    return _judge(command, path, parsed, hook, code=code, report=report)


def _spawn(command: Sequence[str], env: dict[str, str], cwd: str | os.PathLike[str] | None) -> int:
    try:
        proc = subprocess.Popen(list(command), env=env, cwd=cwd)
    except FileNotFoundError:
        raise FileNotFoundError(f"command not found: {command[0]}") from None
    except PermissionError:
        raise PermissionError(f"command is not executable: {command[0]}") from None

    def forward(signum: int, frame: FrameType | None) -> None:
        proc.send_signal(signum)

    handlers: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None] = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            handlers[signum] = signal.signal(signum, forward)
        # The terminal sends Ctrl-C to the program too; we wait for it to finish its exit.
        handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = proc.wait()
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def _judge(
    command: Sequence[str],
    path: Path,
    mode: Mode,
    hook: str,
    *,
    code: int,
    report: dict[str, Any],
) -> RunResult:
    state = report.get("state")
    result = RunResult(code, code, path, report.get("mode", mode.value), report)
    say = result.messages.append
    if state is None:
        say(
            "the tape never started: the command ran no Python, or its Python ignored "
            "PYTHONPATH (-E, -I) or cannot import tracetape (install it in that environment)"
        )
        if mode is Mode.REPLAY:
            say("nothing was replayed; the program may have made live calls")
            result.exit_code = EXIT_SETUP
        return result
    if state == "error":
        say(f"the tape could not start: {report.get('error')}")
        result.exit_code = EXIT_SETUP
        return result
    if state == "started":
        recording = result.mode in ("record", "rewrite")
        where = f": the recording stays in {path}.partial" if recording else ""
        say(f"the program ended without closing the tape (os._exit or a signal){where}")
        return result
    miss = report.get("miss")
    if miss is not None:
        fate = miss.get("fate")
        if fate == "stopped":
            say(f"the program stopped at the miss (it exited {code}):")
        elif fate == "answered":
            say(
                "the proxy answered the miss with a 400 error, its diagnosis the message (the "
                f"program exited {code}); the run diverged from the recording:"
            )
        elif fate == "turned":
            say(
                f"the program turned the ReplayMiss into {miss.get('turned_into')} and stopped "
                f"(it exited {code}); the run diverged from the recording:"
            )
        else:
            say(
                f"the program caught the ReplayMiss and went on (it exited {code}); the run "
                "still diverged from the recording:"
            )
        say(str(miss["message"]))  # it ends with this command line's re-record advice
        result.exit_code = EXIT_REPLAY_MISS
        return result
    if report.get("network"):
        attempts = report["network"]
        say(f"replay tried to reach the network {len(attempts)} time(s); the first:")
        say(attempts[0])
        result.exit_code = EXIT_NETWORK
        return result
    if report.get("error"):
        say(str(report["error"]))
        result.exit_code = EXIT_UNPLAYED
        return result
    if report.get("write_failure"):
        say(
            f"the recording stopped: {report['write_failure']}; {path} holds the "
            f"{report['written']} decision(s) written before it"
        )
        result.exit_code = EXIT_SETUP
        return result
    for warning in report.get("warnings", []):
        say(f"warning: {warning}")
    telemetry = report.get("telemetry")
    if telemetry:
        how = "answered here with an empty success" if "recorded" in report else "sent unrecorded"
        hosts = ", ".join(f"{host} ({n})" for host, n in telemetry.items())
        say(f"{sum(telemetry.values())} telemetry request(s) {how}, never decisions: {hosts}")
    fork = report.get("fork")
    if fork is not None:
        where = f"decision {fork.get('seq')}" + (
            f" (step {fork['step']})" if fork.get("step") is not None else ""
        )
        say(
            f"forked {path} at {where}, {fork.get('reason')}: {report['written']} decision(s) "
            f"(the replayed ones and the live rest) written to the branch {report.get('branch')}"
        )
    elif "written" in report:
        say(f"recorded {report['written']} decision(s) to {path}")
    if report.get("ended") not in (None, "completed"):
        say(f"the recording ended {report['ended']}; its trailer says so")
    elif "recorded" in report:
        played = report["recorded"] - len(report.get("unplayed", []))
        say(f"replayed {played} of {report['recorded']} recorded decision(s) from {path}")
    return result
