"""Diff runs, not logs: read traces of any supported format, find and classify what changed.

The data flow is one-directional: **formats -> records -> findings -> classification ->
report**.

* ``tracetape.formats`` reads every trace format (tracetape cassettes, the seed's JSONL
  traces, span records, OTLP/JSON with the GenAI conventions) as ``Record`` s;
* ``engine``: the calls of every input in one DuckDB table (seed JSONL straight through
  DuckDB's JSON reader), signed on their normalized arguments, with the ordered facts of each
  run computed by window functions;
* ``detectors``: one small query per finding (the origin of a divergence and the changes
  after it, repeats, drift, write echoes, exploration, fanout, budgets, mock replay);
  ``causes`` names why two calls differ (model, tool, env, input, prompt, config, code,
  ending) and ``outcome`` what each compared run came to (calls, tokens, cost, ending, final
  answer);
* ``rules``: the rule table giving every pattern a severity and a suggested fix;
* ``render`` and ``summarize``: text, Markdown and JSON reports, and the one-line summary
  (by the rules, or by a model behind an OpenAI-compatible endpoint).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> line = '{{"run_id":"{}","step":1,"tool":"search","args":{{"q":"x"}},"output_sha":"{}"}}\\n'
    >>> _ = (d / "a.jsonl").write_text(line.format("run_1", "aa") * 2)
    >>> _ = (d / "b.jsonl").write_text(line.format("run_2", "bb"))
    >>> report = diff_traces(d / "a.jsonl", d / "b.jsonl")
    >>> report.origin.cause, report.origin.call
    ('tool', 1)
    >>> for text in summary_lines(report): print(text)
    repeat: run_1 step 1 == step 1 (same args, same output)
    drift: search -> 2 distinct outputs (step 1, call #1)
    replay: 1 unique call, 1 mock mismatch
"""

from __future__ import annotations

from ..errors import TraceError
from ..formats import TraceFormat, detect_format, read_records
from .api import check_records, check_trace, diff_records, diff_traces, export_parquet
from .causes import CAUSES
from .config import AnalysisConfig, Limits
from .render import render_markdown, render_text, summary_lines
from .report import Divergence, Finding, Origin, Outcome, Report
from .rules import RULES, Rule, Severity

__all__ = [
    "CAUSES",
    "RULES",
    "AnalysisConfig",
    "Divergence",
    "Finding",
    "Limits",
    "Origin",
    "Outcome",
    "Report",
    "Rule",
    "Severity",
    "TraceError",
    "TraceFormat",
    "check_records",
    "check_trace",
    "detect_format",
    "diff_records",
    "diff_traces",
    "export_parquet",
    "read_records",
    "render_markdown",
    "render_text",
    "summary_lines",
]
