"""One line per finding, ``pattern, severity, suggested fix``: from the rule table, or from a
model behind an OpenAI-compatible endpoint (a real local server here), whose answer is
validated line by line and replaced by the rules' on any fault, saying why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli.test_diff import FakeChat
from tracetape.analysis.summarize import (
    PROMPT,
    LLMSettings,
    SummaryLine,
    rule_summary,
    summarize_with_llm,
    validate_answer,
)

SECRET = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
FINDINGS: list[dict[str, Any]] = [
    {
        "pattern": "duplicate-call",
        "severity": "suspicious",
        "message": "repeat: r step 1 == step 2",
    },
    {
        "pattern": "drift",
        "severity": "suspicious",
        "message": f"drift: fetch({SECRET}) -> 2 outputs",
    },
]


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    yield fake
    fake.close()


def _settings(chat: FakeChat, model: str = "judge-1") -> LLMSettings:
    return LLMSettings(model=model, base_url=chat.url, api_key="test-key", timeout=10)


def test_the_rules_give_a_line_per_finding() -> None:
    """The finding's own severity and fix where it has them, the rule table's otherwise, and
    an unknown pattern is to be reviewed."""
    summary = rule_summary(
        [{"pattern": "fanout"}, {"pattern": "drift", "severity": "fatal", "fix": "pin it"}, {}]
    )
    assert [line.text() for line in summary.lines] == [
        "fanout, suspicious, Reduce available tools",
        "drift, fatal, pin it",
        "?, suspicious, review this finding",
    ]
    assert (summary.source, summary.fallback) == ("rules", None)


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        pytest.param(
            "a, fatal, x\nb, Expected, y", [("a", "fatal", "x"), ("b", "expected", "y")], id="plain"
        ),
        pytest.param(
            "1. a, fatal, x\n\n2) b, fatal, y, z",
            [("a", "fatal", "x"), ("b", "fatal", "y, z")],
            id="numbered",
        ),
        pytest.param(
            "- a, fatal, x\n* b, suspicious, y",
            [("a", "fatal", "x"), ("b", "suspicious", "y")],
            id="bullets",
        ),
    ],
)
def test_an_answer_of_one_line_per_finding_is_read(
    text: str, lines: list[tuple[str, str, str]]
) -> None:
    """Numbers and bullets go, a severity is read in any case, a fix may hold commas."""
    assert validate_answer(text, 2) == [SummaryLine(*line) for line in lines]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param("a, fatal, x", "the model returned 1 lines for 2 findings", id="too-few"),
        pytest.param(
            "a, fatal, x\nb, critical, y", "line 2 has severity 'critical'", id="severity"
        ),
        pytest.param(
            "a, fatal, x\nno commas here",
            "line 2 is not 'pattern, severity, suggested fix'",
            id="format",
        ),
        pytest.param("a, fatal, x\nb, , y", "line 2 is not", id="empty-part"),
    ],
)
def test_an_answer_that_breaks_the_format_names_the_line(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=f"^{said}"):
        validate_answer(text, 2)


def test_a_valid_answer_is_the_summary_and_the_request_holds_no_secret(chat: FakeChat) -> None:
    """The model gets the strict prompt and the findings, numbered and redacted; its valid
    answer is the summary, said to be the model's."""
    chat.answer = "duplicate-call, fatal, cap calls\ndrift, expected, data is live"
    summary = summarize_with_llm(FINDINGS, _settings(chat))
    assert summary.to_dict() == {
        "source": "llm",
        "model": "judge-1",
        "fallback": None,
        "lines": [
            {"pattern": "duplicate-call", "severity": "fatal", "fix": "cap calls"},
            {"pattern": "drift", "severity": "expected", "fix": "data is live"},
        ],
    }
    (request,) = chat.requests
    assert request["auth"] == "Bearer test-key" and request["path"] == "/v1/chat/completions"
    system, user = request["body"]["messages"]
    assert system == {"role": "system", "content": PROMPT} and request["body"]["temperature"] == 0
    assert user["content"].startswith("1. duplicate-call: repeat: r step 1 == step 2\n2. drift: ")
    assert SECRET not in user["content"] and "[REDACTED:openai_key:" in user["content"]


@pytest.mark.parametrize(
    ("answer", "status", "said"),
    [
        pytest.param(
            "only one line, fatal, x",
            200,
            "the model's answer is invalid (the model returned 1",
            id="invalid",
        ),
        pytest.param("", 503, "the endpoint answered HTTP 503", id="http-error"),
    ],
)
def test_any_fault_falls_back_to_the_rules_saying_why(
    chat: FakeChat, answer: str, status: int, said: str
) -> None:
    chat.answer, chat.status = answer, status
    summary = summarize_with_llm(FINDINGS, _settings(chat))
    assert summary.source == "rules" and summary.fallback is not None
    assert summary.fallback.startswith(said)
    assert [line.pattern for line in summary.lines] == ["duplicate-call", "drift"]


def test_no_model_or_no_findings_asks_nobody(chat: FakeChat) -> None:
    """Without a model named the rules answer, saying how to name one; without findings there
    is nothing to ask."""
    unnamed = summarize_with_llm(FINDINGS, _settings(chat, model=""))
    assert unnamed.fallback == "no model named (pass --model or set TRACETAPE_MODEL)"
    assert summarize_with_llm([], _settings(chat)).lines == []
    assert chat.requests == []
