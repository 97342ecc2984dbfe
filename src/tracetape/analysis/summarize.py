"""One line per finding, ``pattern, severity, suggested fix``: by the rules or by a model.

``rule_summary`` reads the rule table. ``summarize_with_llm`` sends the (redacted) findings
to an OpenAI-compatible chat endpoint with the seed's strict prompt and validates the answer:
exactly one line per finding, each ``pattern, severity, fix`` with an allowed severity. Any
invalid answer, HTTP error or timeout falls back to the rule result, and ``fallback`` says why.
The model only labels; the rule table stays the reference (the seed: "the summarizer can
misclassify; review fatal labels before changing code").

``httpx`` (the ``llm`` extra) is imported only here and only when a model is asked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._version import install_command
from .report import redacted
from .rules import RULES, Severity

__all__ = ["PROMPT", "LLMSettings", "Summary", "SummaryLine", "rule_summary", "summarize_with_llm"]

PROMPT = (
    "You receive a list of tool-call diffs between two agent runs.\n"
    "Return one line per diff: pattern, severity, suggested fix.\n"
    "Allowed severities: expected, suspicious, fatal.\n"
    "Answer with exactly one line per diff, in the order given, and nothing else."
)
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+")


@dataclass(frozen=True)
class SummaryLine:
    """One summarized finding."""

    pattern: str
    severity: str
    fix: str

    def text(self) -> str:
        """The line as printed: ``pattern, severity, suggested fix``."""
        return f"{self.pattern}, {self.severity}, {self.fix}"


@dataclass
class Summary:
    """The summary lines, who wrote them (``rules`` or ``llm``) and why a fallback happened."""

    lines: list[SummaryLine]
    source: str = "rules"
    fallback: str | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON data."""
        return {
            "source": self.source,
            "model": self.model,
            "fallback": self.fallback,
            "lines": [
                {"pattern": x.pattern, "severity": x.severity, "fix": x.fix} for x in self.lines
            ],
        }


@dataclass(frozen=True)
class LLMSettings:
    """Where to ask: model, base URL (``.../v1``), API key, timeout in seconds."""

    model: str
    base_url: str
    api_key: str = ""
    timeout: float = 60.0


def rule_summary(findings: Sequence[Mapping[str, Any]]) -> Summary:
    """Summarize findings (``Finding.to_dict()`` data) with the rule table.

    >>> rule_summary([{"pattern": "fanout", "severity": "suspicious"}]).lines[0].text()
    'fanout, suspicious, Reduce available tools'
    """
    lines = []
    for f in findings:
        pattern = str(f.get("pattern", "?"))
        rule = RULES.get(pattern)
        fix = str(f.get("fix") or (rule.fix if rule else "review this finding"))
        severity = str(f.get("severity") or (rule.severity.value if rule else "suspicious"))
        lines.append(SummaryLine(pattern, severity, fix))
    return Summary(lines)


def _diff_lines(findings: Sequence[Mapping[str, Any]]) -> str:
    clean = redacted([{"pattern": f.get("pattern"), "message": f.get("message")} for f in findings])
    return "\n".join(f"{i}. {f['pattern']}: {f['message']}" for i, f in enumerate(clean, 1))


def validate_answer(text: str, expected: int) -> list[SummaryLine]:
    """Parse a model's answer; raise ``ValueError`` saying which line breaks the format."""
    lines = [_NUMBERED.sub("", ln).strip() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) != expected:
        raise ValueError(f"the model returned {len(lines)} lines for {expected} findings")
    allowed = {s.value for s in Severity}
    out = []
    for i, line in enumerate(lines, 1):
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"line {i} is not 'pattern, severity, suggested fix': {line!r}")
        if parts[1].lower() not in allowed:
            raise ValueError(
                f"line {i} has severity {parts[1]!r}, not one of {', '.join(sorted(allowed))}"
            )
        out.append(SummaryLine(parts[0], parts[1].lower(), parts[2]))
    return out


def summarize_with_llm(findings: Sequence[Mapping[str, Any]], settings: LLMSettings) -> Summary:
    """Ask the model for the summary; fall back to ``rule_summary`` on any invalid outcome."""
    rules = rule_summary(findings)
    if not findings:
        return rules
    if not settings.model:
        rules.fallback = "no model named (pass --model or set TRACETAPE_MODEL)"
        return rules
    try:
        import httpx
    except ImportError:
        rules.fallback = f"httpx is not installed ({install_command('llm')})"
        return rules
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    body = {
        "model": settings.model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": PROMPT},
            {"role": "user", "content": _diff_lines(findings)},
        ],
    }
    url = settings.base_url.rstrip("/") + "/chat/completions"
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=settings.timeout)
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise ValueError("the answer has no text content")
        lines = validate_answer(content, len(findings))
    except httpx.HTTPStatusError as exc:
        rules.fallback = f"the endpoint answered HTTP {exc.response.status_code}"
        return rules
    except httpx.HTTPError as exc:
        rules.fallback = f"the endpoint failed ({type(exc).__name__}: {exc})"
        return rules
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        rules.fallback = f"the model's answer is invalid ({exc})"
        return rules
    return Summary(lines, source="llm", model=settings.model)
