"""Serving the proxy (``proxy.ProxyApp``): on its own (``tracetape proxy``), or for one
program's lifetime (``tracetape run --proxy``).

``serving`` starts uvicorn on a socket bound before it starts (so the address is known, port
0 included) in a thread of its own, and stops it, the half-read answers recorded, when the
block ends. ``run_with_proxy`` runs a command of any language with the proxy in front: the
variables that point each known client at it are set in the program's environment (a variable
the user set is kept unless ``proxy_env="force"``), no hook is loaded into the program (a
Python program is taped by the proxy alone), and the run ends with ``tracetape run``'s report
and exit codes (3 on a miss, which the program got as the proxy's 400 answer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import TapeError
from ..tape import Mode, Tape, TapeOptions
from .proxy import ProxyApp, client_env
from .runner import (
    EXIT_SETUP,
    RunResult,
    _check_cassette,
    _judge,
    _miss_report,
    _rerun_hint,
    _spawn,
)
from .state import state_of

__all__ = ["is_loopback", "listen", "run_with_proxy", "serving"]

PROXY_ENV = ("keep", "force")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (the proxy binds one without a token)."""
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(1024)
    return sock


def address_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.contextmanager
def serving(app: ProxyApp, sock: socket.socket) -> Iterator[str]:
    """Serve ``app`` on ``sock`` in a thread for the block; yields the proxy's address."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="tracetape-proxy", daemon=True
    )
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.005)
    if not server.started:  # uvicorn said why on stderr
        sock.close()
        raise OSError(f"the proxy could not start on {address_of(sock)}")
    try:
        yield address_of(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def program_env(address: str, env: Mapping[str, str], proxy_env: str) -> dict[str, str]:
    """The program's environment: ``env`` with the clients pointed at the proxy."""
    if proxy_env not in PROXY_ENV:
        raise ValueError(f"--proxy-env {proxy_env!r}: use one of {', '.join(PROXY_ENV)}")
    out = dict(env)
    for name, value in client_env(address).items():
        if proxy_env == "force" or not out.get(name):
            out[name] = value
    return out


def run_with_proxy(
    command: Sequence[str],
    tape: str | os.PathLike[str],
    options: TapeOptions | None = None,
    *,
    upstreams: Mapping[str, str] | None = None,
    proxy_env: str = "keep",
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    host: str = "127.0.0.1",
) -> RunResult:
    """Run ``command`` with a proxy taping its model requests into ``tape`` (module doc)."""
    options = options or TapeOptions(mode=Mode.REPLAY)
    if not command:
        raise ValueError("no command to run; put it after --, e.g. -- node agent.js")
    path = Path(tape)
    problem = _check_cassette(path, options.mode, command, "proxy")
    if problem is not None:
        return RunResult(EXIT_SETUP, None, path, options.mode.value, {"state": "error"}, [problem])
    # every miss names the command line that records this run again
    options = dataclasses.replace(options, rerecord=_rerun_hint(path, command, "proxy"))
    try:
        taped = Tape(path, options=options)
    except (TapeError, ValueError, OSError) as exc:
        report = {"state": "error", "error": str(exc)}
        return _judge(command, path, options.mode, "proxy", code=EXIT_SETUP, report=report)
    app = ProxyApp(taped, upstreams=upstreams) if upstreams else ProxyApp(taped)
    code = EXIT_SETUP
    try:
        with serving(app, listen(host, 0)) as address:
            print(f"tracetape run: the proxy on {address}", file=sys.stderr)
            child = program_env(address, os.environ if env is None else env, proxy_env)
            code = _spawn(command, child, cwd)
    finally:
        report = _report(taped, app)
        try:
            taped.close(failed=bool(app.misses))
        except TapeError as exc:  # strict replay with decisions never played
            report["error"], report["error_type"] = str(exc), type(exc).__name__
    return _judge(command, path, options.mode, "proxy", code=code, report=report)


def _report(tape: Tape, app: ProxyApp) -> dict[str, Any]:
    """The run's report, in the form ``runner._judge`` reads."""
    report: dict[str, Any] = {"state": "finished", "mode": tape.mode.value, "warnings": []}
    if tape.replaying:
        report["recorded"] = len(tape.records)
        report["unplayed"] = [{"seq": r.seq, "key": r.key, "kind": r.kind} for r in tape.unplayed]
    else:
        report["written"] = tape.written
        report["ended"] = "completed"
    telemetry = state_of(tape).telemetry
    if telemetry:
        report["telemetry"] = dict(sorted(telemetry.items()))
    if app.misses:
        miss = _miss_report(app.misses[0], None)
        report["miss"] = {**miss, "fate": "answered", "caught": True}
    return report
