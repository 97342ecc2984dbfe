"""The collector's web pages: plain server-rendered HTML (and a few lines of JS).

* ``/``: the runs, newest first: when, steps, calls, tokens, cost, findings by severity, the
  final answer and the verdict against the run before; a filter, and a compare form (plain
  GET: it works without JavaScript);
* ``/runs/{id}``: one run's timeline, step by step: each model call and tool call with its
  effect, time, tokens, arguments and output;
* ``/diff?a=&b=``: two runs side by side under their verdict, aligned call by call, the
  origin marked, and the calls behind each finding highlighted by severity.

Every value is HTML-escaped (``frame.esc``), and ``CSP`` lets only the pages' own style sheet
and script run (named by their hashes). With a token set, a page opened with ``?token=...``
sets a session cookie (same-site, HTTP-only, signed: not the token), and later pages read it.

One module per page (``runs``, ``run``, ``diff``) over the parts they share: ``frame`` (the
page, escaping, style and script), ``steps`` (a decision's head and parts), ``text`` (marked
and folded texts) and ``timeline``.
"""

from __future__ import annotations

from .diff import diff_page
from .frame import CSP, FAVICON, SEVERITY_ORDER, docs_page, error_page
from .run import run_page
from .runs import RunsPaging, runs_page
from .steps import raw_record
from .timeline import timeline_svg

__all__ = [
    "CSP",
    "FAVICON",
    "SEVERITY_ORDER",
    "RunsPaging",
    "diff_page",
    "docs_page",
    "error_page",
    "raw_record",
    "run_page",
    "runs_page",
    "timeline_svg",
]
