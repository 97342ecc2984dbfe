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
from .report import Finding, Origin, Outcome, Report, redacted

__all__ = [
    "outcome_line",
    "render_markdown",
    "render_text",
    "skipped_line",
    "summary_lines",
    "verdict_lines",
    "verdict_text",
]


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


def _where(root: Origin) -> str:
    return (
        f"step {root.step} (call #{root.call})" if root.step is not None else f"call #{root.call}"
    )


def _calls_list(calls: list[int], outcome: Outcome | None) -> str:
    """Explained calls as the verdict lists them: ``#4 (A only), #5 (A only)``."""

    def one(pos: int) -> str:
        if outcome is not None and pos > outcome.calls[1]:
            return f"#{pos} (A only)"
        if outcome is not None and pos > outcome.calls[0]:
            return f"#{pos} (B only)"
        return f"#{pos}"

    return ", ".join(one(pos) for pos in calls)


def _explains(root: Origin, outcome: Outcome | None) -> list[str]:
    if not root.explained:
        return []
    shown = root.explains[:10]
    more = root.explained - len(shown)
    text = f"call{'s' if root.explained != 1 else ''} {_calls_list(shown, outcome)}"
    return [f"  this explains {text}" + (f" and {more} more" if more > 0 else "")]


def _money(value: float | None) -> str:
    if value is None:
        return "unpriced"
    return f"${value:.2f}" if value >= 1 else f"${value:.6f}".rstrip("0").rstrip(".")


def _time(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms" if ms >= 1 else f"{ms:.2f} ms"


def outcome_line(outcome: Outcome) -> str:
    """The two runs' outcomes in one line: ``B: 3 calls (A 4), 216 tokens (A 328), final
    answer changed``."""
    (ca, cb), (ta, tb) = outcome.calls, outcome.tokens
    parts = [f"{cb} call{'s' if cb != 1 else ''} (A {ca})", f"{tb} tokens (A {ta})"]
    if outcome.cost != (None, None):
        parts.append(f"{_money(outcome.cost[1])} (A {_money(outcome.cost[0])})")
    da, db = outcome.duration_ms
    if da is not None and db is not None:
        parts.append(f"{_time(db)} (A {_time(da)})")
    if outcome.endings_differ:
        parts.append(f"ended {outcome.ending[1]} (A {outcome.ending[0]})")
    changed = outcome.final_changed
    if changed is not None:
        parts.append("final answer changed" if changed else "same final answer")
    return "B: " + ", ".join(parts)


def verdict_lines(report: Report) -> list[str]:
    """The verdict a person reads first: where B diverged from A, why, what it explains,
    every independent change, and what each run came to. Empty where the runs agree."""
    origin, outcome = report.origin, report.outcome
    if origin is None:
        return []
    out: list[str] = []
    for i, root in enumerate(report.roots):
        head = "B diverged from A at" if i == 0 else "also, independently, at"
        out.append(f"{head} {_where(root)}: {root.says}  [cause: {root.cause}]")
        if root.cause == "ending":
            out += [f"  A: {root.a}", f"  B: {root.b}"]
        else:
            out += [f"  A: {root.a or '-'}", f"  B: {root.b or '-'}"]
            out += _change_lines([[c["path"], c["before"], c["after"]] for c in root.changes])
        out += _explains(root, outcome)
    if outcome is not None:
        out.append("  " + outcome_line(outcome))
    if report.baseline and report.candidate:
        out.append(f"  (A is {report.baseline.get('run')}, B is {report.candidate.get('run')})")
    lines: list[str] = redacted(out)
    return lines


def verdict_text(report: Report) -> str:
    """A diff in two lines, as a list of runs shows it: where B diverged from A and why (or
    that it did not), and what each run came to."""
    lines = verdict_lines(report)
    first = lines[0] if lines else "B does not diverge from A"
    outcome = outcome_line(report.outcome) if report.outcome is not None else ""
    text: str = redacted(f"{first}\n{outcome}".rstrip())
    return text


def _alike(report: Report, position: int) -> str:
    """The line of two runs whose requests differ from ``position`` on only in what says
    nothing (the ids of earlier tool calls), and whose calls and answers agree."""
    a, b = (report.baseline or {}).get("run"), (report.candidate or {}).get("run")
    return (
        f"no divergence: {a} and {b} ask and answer alike on every call; from call "
        f"#{position} their requests differ only in the ids of earlier tool calls"
    )


def render_text(report: Report) -> str:
    """The report as plain text: the verdict, finding lines, the first divergence, a
    severity table."""
    verdict = verdict_lines(report)
    out = verdict + summary_lines(report)
    div = report.divergence
    if verdict:
        pass
    elif div is not None:  # requests unlike only where no call's meaning changed
        out.append(_alike(report, div.position))
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


def _cell(value: Any) -> str:
    return "—" if value is None else _md(str(value))


def _origin_markdown(report: Report) -> list[str]:
    """The verdict as a PR comment shows it: a table of each root, a table of the two runs'
    outcomes, and the changed paths folded away."""
    outcome = report.outcome
    roots = redacted([r.to_dict() | {"says": r.says} for r in report.roots])
    out = [
        "| | call | step | cause | what happened | A | B | explains |",
        "|---|---:|---:|---|---|---|---|---|",
    ]
    for i, root in enumerate(roots):
        explains = _calls_list(root["explains"][:10], outcome)
        if root["explained"] > len(root["explains"][:10]):
            explains += f" and {root['explained'] - len(root['explains'][:10])} more"
        out.append(
            f"| {'origin' if i == 0 else 'also'} | #{root['call']} | {_cell(root['step'])} | "
            f"`{root['cause']}` | {_md(root['says'])} | {_cell(root['a'])} | "
            f"{_cell(root['b'])} | {explains or '—'} |"
        )
    out.append("")
    if outcome is not None:
        summary = redacted(outcome.to_dict())
        final = summary["final"]
        rows = [
            ("calls", *summary["calls"]),
            ("steps", *summary["steps"]),
            ("tokens", *summary["tokens"]),
            ("cost (USD)", *(summary["cost"] or (None, None))),
            ("duration (ms)", *(summary["duration_ms"] or (None, None))),
            ("ending", *summary["ending"]),
            ("final answer", final["before"], final["after"]),
        ]
        out += ["| | A (baseline) | B (candidate) |", "|---|---|---|"]
        out += [f"| {name} | {_cell(a)} | {_cell(b)} |" for name, a, b in rows]
        out.append("")
    changes = [
        line
        for root in roots
        for line in _change_lines([[c["path"], c["before"], c["after"]] for c in root["changes"]])
    ]
    if changes:
        out += ["<details><summary>What changed</summary>", "", "```text", *changes, "```"]
        out += ["", "</details>", ""]
    return out


def render_markdown(report: Report) -> str:
    """The report as Markdown fit for a pull-request comment: the verdict first (a table of
    where the runs part and why, a table of what each run came to), then the findings."""
    worst = report.worst.value if report.worst else "none"
    origin = report.origin
    if origin is not None:
        title = (
            f"### tracetape diff: B diverged from A at {_where(origin)}, cause "
            f"**{origin.cause}**; worst severity **{worst}**"
        )
    else:
        title = f"### tracetape diff: worst severity **{worst}**"
    out = [title, ""]
    if report.baseline and report.candidate:
        out.append(
            f"Baseline `{report.baseline.get('run')}` vs candidate "
            f"`{report.candidate.get('run')}`, "
            f"{report.events} calls read."
        )
        out.append("")
    if origin is not None:
        out += _origin_markdown(report)
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
    if div is not None and origin is None:
        out += [_md(_alike(report, div.position)), "", "```text"]
        out += _change_lines(redacted([list(c) for c in div.changes]))
        out += ["```", ""]
    if report.skipped:
        out.append(f"_{report.skipped} bad lines skipped._")
    return "\n".join(out).rstrip() + "\n"
