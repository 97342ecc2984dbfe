"""Render a ``Report`` as text (the seed's lines first), Markdown (a PR comment) or JSON data.

Evidence shown to people passes through the redactor first: a trace may hold secrets in its
args, and a report lands in CI logs and PR comments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..canonical import excerpt
from .detectors import apart, seed_order
from .report import Finding, Report, redacted

__all__ = ["render_markdown", "render_text", "skipped_line", "summary_lines"]


def _short(value: Any, width: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def skipped_line(count: int, examples: Sequence[str] = ()) -> str:
    """The line saying what was skipped: torn last lines of killed recordings (always
    skipped), or bad lines under ``--skip-bad-lines``."""
    lines = f"line{'s' if count != 1 else ''}"
    if examples and len(examples) == count and all("torn last line" in e for e in examples):
        return f"skipped {count} torn last {lines} (a recording killed mid-write)"
    return f"skipped {count} bad {lines} (--skip-bad-lines)"


def _replay_line(replay: dict[str, int]) -> str:
    n, m, u = replay["unique"], replay["mismatches"], replay["unrecorded"]
    line = (
        f"replay: {n} unique call{'s' if n != 1 else ''}, {m} mock mismatch{'es' if m != 1 else ''}"
    )
    return line + (f", {u} never recorded" if u else "")


def _call_line(side: str, call: dict[str, Any] | None, run: dict[str, Any] | None = None) -> str:
    if call is None:
        name = (run or {}).get("run", "the run")
        calls = (run or {}).get("calls")
        if calls is None:
            return f"  {side}: ({name} ended)"
        return f"  {side}: ({name} ended after {calls} call{'s' if calls != 1 else ''})"
    where = f"{call['run']} step {call['step']} line {call['line']}"
    effect = f" [{call['effect']}]" if call.get("effect") else ""
    return f"  {side}: {call['name']}{effect} {_short(call['args'])}  ({where})"


def _more(hidden: int, what: str, kept: int) -> list[str]:
    """The line that ends a capped list: how many more there are and where the count is."""
    if hidden <= 0:
        return []
    return [f"… and {hidden} more {what} (a report keeps the first {kept}; counts are exact)"]


def summary_lines(report: Report) -> list[str]:
    """The findings as the seed prints them: repeats, drift, replay, then the rest. A pattern
    with more findings than the report keeps ends with a line saying how many more."""
    by_pattern: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_pattern.setdefault(f.pattern, []).append(f)

    def group(pattern: str) -> list[str]:
        shown = by_pattern.get(pattern, [])
        hidden = report.counts.get(pattern, len(shown)) - len(shown)
        return messages.get(pattern, []) + _more(hidden, f"{pattern} findings", len(shown))

    messages: dict[str, list[str]] = redacted(
        {p: [f.message for f in shown] for p, shown in by_pattern.items()}
    )

    first = seed_order()
    lines = [line for p in first for line in group(p)]
    if report.replay is not None:
        lines.append(_replay_line(report.replay))
    skip = {*first, *apart()}
    lines += [line for p in by_pattern if p not in skip for line in group(p)]
    return lines


def _changed(before: Any, after: Any) -> str:
    """Two values of a changed path as the report shows them: two texts cut to where they
    differ, with context around (as a ``ReplayMiss`` shows them), anything else shortened."""
    if isinstance(before, str) and isinstance(after, str):
        b, a = excerpt(before, after, 20)
        return f"{b} -> {a}"
    return f"{_short(before, 40)} -> {_short(after, 40)}"


def _change_lines(changes: list[Any]) -> list[str]:
    lines = [
        f"  changed: {path}: {_changed(before, after)}" for path, before, after in changes[:10]
    ]
    if len(changes) > 10:
        lines.append(f"  … and {len(changes) - 10} more changed paths (--format json lists them)")
    return lines


def render_text(report: Report) -> str:
    """The report as plain text: finding lines, the first divergence, a severity table."""
    out = summary_lines(report)
    div = report.divergence
    if div is not None:
        out.append(
            f"first divergence: call #{div.position} "
            f"({report.aligned} call{'s agree' if report.aligned != 1 else ' agrees'} before it)"
        )
        a, b = redacted(div.a), redacted(div.b)
        out += [_call_line("A", a, report.baseline), _call_line("B", b, report.candidate)]
        out += _change_lines(redacted([list(c) for c in div.changes]))
    elif report.baseline is not None and report.candidate is not None:
        out.append(
            f"no divergence: {report.baseline.get('run')} and {report.candidate.get('run')} "
            f"agree on {report.aligned} call{'s' if report.aligned != 1 else ''}"
        )
    if report.skipped:
        out.append(skipped_line(report.skipped, report.skipped_examples))
    rows = report.table()
    if rows:
        width = max(len(r["pattern"]) for r in rows)
        out.append("")
        out.append(f"{'pattern':<{width}}  {'severity':<10}  {'count':>5}  fix")
        for r in rows:
            out.append(f"{r['pattern']:<{width}}  {r['severity']:<10}  {r['count']:>5}  {r['fix']}")
    else:
        out.append("no findings")
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """The report as Markdown fit for a pull-request comment."""
    worst = report.worst.value if report.worst else "none"
    out = [f"### tracetape diff: worst severity **{worst}**", ""]
    if report.baseline and report.candidate:
        out.append(
            f"Baseline `{report.baseline.get('run')}` vs candidate "
            f"`{report.candidate.get('run')}`, "
            f"{report.events} calls read."
        )
        out.append("")
    rows = report.table()
    if rows:
        out += ["| pattern | severity | count | suggested fix |", "|---|---|---:|---|"]
        out += [
            f"| `{r['pattern']}` | {r['severity']} | {r['count']} | {_md(r['fix'])} |" for r in rows
        ]
        out.append("")
    lines = summary_lines(report)
    if lines:
        out += [
            "<details><summary>Findings</summary>",
            "",
            "```text",
            *lines,
            "```",
            "",
            "</details>",
            "",
        ]
    div = report.divergence
    if div is not None:
        out += [f"**First divergence** at call #{div.position}:", "", "```text"]
        out += [
            _call_line("A", redacted(div.a), report.baseline),
            _call_line("B", redacted(div.b), report.candidate),
        ]
        out += _change_lines(redacted([list(c) for c in div.changes]))
        out += ["```", ""]
    if report.skipped:
        out.append(f"_{report.skipped} bad lines skipped._")
    return "\n".join(out).rstrip() + "\n"
