"""How the suite runs (a pytest plugin, named in ``tests/conftest.py``).

* Hypothesis profiles: ``ci`` (``make test``, the default) and ``deep`` (``make test-deep``,
  ``HYPOTHESIS_PROFILE=deep``). A slow property test says both of its example counts with
  ``bounded(deep=N, ci=M)``: ``make test`` runs M examples, ``make test-deep`` (which
  ``.ci/run`` runs too) N, the count it ran before there were profiles. It is marked ``deep``,
  so ``make test-deep`` runs those tests alone.
* ``pytest.mark.slow``: a test that runs a whole program in child processes that import an
  agent framework or an SDK beyond OpenAI's afresh (under ``tracetape run``: 2-15 s a test).
  ``make test`` leaves them out (their in-process tests stay in it, and so do the OpenAI
  agent's runs under ``tracetape run``); ``make test-deep`` runs them, and so does
  ``.ci/run``.
* Under pytest-xdist (``make test``), a progress line per test module, printed when its last
  test is done (its tests run on several workers): its counts, the seconds from its first
  test's start to its last's end, and how far the whole run is. The dots are not printed; a
  failure is reported in full at the end as usual.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import pytest
from hypothesis import settings

F = TypeVar("F", bound=Callable[..., Any])

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# Hypothesis registers a profile named ``ci`` of its own and loads it when CI is set; ours
# replaces it, so it keeps what that one does under CI: the same examples on every run, no
# example database left behind.
_UNDER_CI = bool(os.environ.get("CI"))
for _name in ("ci", "deep"):
    settings.register_profile(
        _name,
        deadline=None,
        print_blob=True,
        derandomize=_UNDER_CI,
        database=None if _UNDER_CI else settings.default.database,
    )
if PROFILE not in ("ci", "deep"):
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE={PROFILE!r}: use 'ci' (make test) or 'deep'")
settings.load_profile(PROFILE)


def bounded(*, deep: int, ci: int, **more: Any) -> Callable[[F], F]:
    """Hypothesis settings of a slow property test: ``ci`` examples under ``make test``,
    ``deep`` under ``make test-deep``; ``more`` are further settings."""
    if ci > deep:
        raise ValueError(f"bounded(deep={deep}, ci={ci}): ci runs at most what deep runs")

    def apply(test: F) -> F:
        chosen = settings(max_examples=deep if PROFILE == "deep" else ci, deadline=None, **more)
        marked: F = pytest.mark.deep(chosen(test))
        return marked

    return apply


def pytest_configure(config: pytest.Config) -> None:
    # Under pytest-xdist the dots come in no order and name no file: the controller says a
    # line per module instead (alone, pytest's own line per file says as much).
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(ModuleProgress(config), "tracetape-module-progress")


class ModuleProgress:
    """Prints a line per test module when its last test has finished (see the docstring)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.total: Counter[str] = Counter()
        self.outcomes: dict[str, Counter[str]] = {}
        self.started: dict[str, float] = {}
        self.done = 0
        self.all = 0
        self.width = 0

    @staticmethod
    def _module(nodeid: str) -> str:
        return nodeid.split("::", 1)[0]

    def _expect(self, nodeids: list[str]) -> None:
        if self.total:  # every xdist worker collects the same tests
            return
        self.total.update(self._module(n) for n in nodeids)
        self.all = len(nodeids)
        self.width = max(map(len, self.total), default=0)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self._expect(ids)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> Generator[None, tuple[str, str, Any], tuple[str, str, Any]]:
        category, _letter, word = yield
        if self.config.get_verbosity() > 0:
            return category, _letter, word
        return category, "", word  # no dot: the module's line says it

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = self._module(report.nodeid)
        self.started.setdefault(module, time.monotonic() - report.duration)
        counts = self.outcomes.setdefault(module, Counter())
        if report.when == "call" or (report.when == "setup" and not report.passed):
            counts[
                "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
            ] += 1
        elif report.when == "teardown" and report.failed:
            counts["error"] += 1
        if report.when != "teardown":
            return
        counts["finished"] += 1
        self.done += 1
        if counts["finished"] == self.total.get(module, -1):
            self._line(module, counts)

    def _line(self, module: str, counts: Counter[str]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() > 0:
            return
        said = ", ".join(
            f"{counts[what]} {what}"
            for what in ("passed", "failed", "error", "skipped", "xfailed")
            if counts[what]
        )
        seconds = time.monotonic() - self.started[module]
        share = self.done * 100 // max(self.all, 1)
        red = bool(counts["failed"] or counts["error"])
        reporter.ensure_newline()
        reporter.write_line(
            f"{module:<{self.width}}  {said:<28} {seconds:6.1f} s  [{share:3d}%]", red=red
        )
