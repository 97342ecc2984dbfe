"""Decision replay: ask a second model for the span's tool call and compare it.

The span's recorded prompt (``model_decision.messages``) and tool schema
(``model_decision.tools``, sent exactly as recorded: change the schema and you test the
schema) go to an OpenAI-compatible ``/chat/completions`` endpoint with the model named; the
recorded parameters (``tool_choice``, ``temperature``...) go too, except the model and
streaming. The first tool call of the reply with the recorded tool's name (else its first tool
call) is the emitted decision; its fingerprint (``{"tool_name", "args"}``, normalized) is
compared with the recorded decision's:

* ``same decision``: the decision is robust; the bug sits downstream of it;
* ``different decision``: the decision is model-dependent.

``repeat`` asks several times and reports the agreement rate; the verdict is ``same
decision`` only when every answer agrees. A reply with no tool call is a different decision
(its text is shown). A timeout, an error status or a reply that is not a chat completion is a
``SpanError`` that says so. The API key is read from ``OPENAI_API_KEY`` and never printed;
``httpx`` (the ``llm`` extra) is imported only here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .._version import install_command
from ..canonical import Normalizer, fingerprint
from ..config import load_config
from ..errors import SpanError
from ..redact import Redactor, RedactRules
from .model import Span, emitted_calls

__all__ = ["DIFFERENT", "SAME", "DecideResult", "decide"]

SAME = "same decision"
DIFFERENT = "different decision"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
_NOT_SENT = frozenset({"model", "stream", "stream_options", "n"})


@dataclass
class DecideResult:
    """The recorded decision and each answer of the second model.

    ``answers`` are ``{"tool_name", "args", "fingerprint", "same"}`` (``text`` instead of a
    call when the model answered without one); ``agreement`` is the share that agree.
    """

    span: Span
    model: str
    recorded: dict[str, Any]
    recorded_fp: str
    answers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        """The share of answers that made the recorded decision."""
        return sum(a["same"] for a in self.answers) / len(self.answers) if self.answers else 0.0

    @property
    def verdict(self) -> str:
        """``same decision`` when every answer agrees with the recording, else ``different
        decision``."""
        return SAME if self.answers and all(a["same"] for a in self.answers) else DIFFERENT

    def lines(self) -> list[str]:
        """The report, as ``tracetape span decide`` prints it."""
        rec = self.recorded
        out = [
            f"span {self.span.span_id}: recorded decision "
            f"{_call_text(rec['tool_name'], rec['args'])} fp={self.recorded_fp}"
        ]
        for n, a in enumerate(self.answers, 1):
            if "text" in a:
                shown = f"no tool call; answered {_cut(a['text'])!r}"
            else:
                shown = f"{_call_text(a['tool_name'], a['args'])} fp={a['fingerprint']}"
            out.append(f"{self.model} #{n}: {shown} same={a['same']}")
        if len(self.answers) > 1:
            same = sum(a["same"] for a in self.answers)
            out.append(f"agreement: {same}/{len(self.answers)} ({self.agreement:.0%})")
        meaning = (
            "the decision is robust; the bug sits downstream of it"
            if self.verdict == SAME
            else "the decision is model-dependent"
        )
        out.append(f"verdict: {self.verdict}: {meaning}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON data (``--format json``)."""
        return {
            "span_id": self.span.span_id,
            "model": self.model,
            "recorded": {**self.recorded, "fingerprint": self.recorded_fp},
            "answers": self.answers,
            "agreement": self.agreement,
            "verdict": self.verdict,
        }


def _cut(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _call_text(name: Any, args: Any) -> str:
    return f"{name}({_cut(json.dumps(args, ensure_ascii=False, default=str), 100)})"


def request_body(span: Span, model: str) -> dict[str, Any]:
    """The chat request for ``span``'s recorded prompt and tool schema, asked of ``model``.

    Raises ``SpanError`` when the span records no prompt or no OpenAI-shaped tool schema.
    """
    decision = span.model_decision or {}
    where = f"span {span.span_id}"
    messages = decision.get("messages")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise SpanError(
            f"{where} records no prompt (model_decision.messages): decide needs the messages "
            "the model saw; record the run through the tape or the SDK hooks"
        )
    tools = decision.get("tools")
    if not isinstance(tools, list) or not tools:
        raise SpanError(
            f"{where} records no tool schema (model_decision.tools): decide needs the tools "
            "the model was offered"
        )
    if not all(isinstance(t, dict) and t.get("type") == "function" for t in tools):
        found = type(tools[0]).__name__ if not isinstance(tools[0], dict) else "objects"
        raise SpanError(
            f"{where}: model_decision.tools is not OpenAI's function-tool schema (found "
            f"{found} without type 'function'); decide sends the schema as recorded to an "
            "OpenAI-compatible chat endpoint and does not rewrite it"
        )
    params = decision.get("params")
    params = params if isinstance(params, dict) else {}
    body = {k: v for k, v in params.items() if k not in _NOT_SENT}
    body.update(model=model, messages=messages, tools=tools)
    return body


def decide(
    span: Span,
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    repeat: int = 1,
    timeout: float = 60.0,
    normalizer: Normalizer | None = None,
) -> DecideResult:
    """Ask ``model`` for the span's tool call ``repeat`` times and compare with the recording.

    ``base_url`` defaults to ``OPENAI_BASE_URL``, then OpenAI's; ``api_key`` to
    ``OPENAI_API_KEY``. Raises ``SpanError`` for a span without prompt or schema, and for an
    endpoint that times out, fails or answers something that is not a chat completion.
    """
    if repeat < 1:
        raise SpanError(f"repeat must be at least 1, not {repeat}")
    body = request_body(span, model)
    decision = span.model_decision or {}
    recorded = {"tool_name": decision.get("tool_name") or span.tool, "args": decision.get("args")}
    if "args" not in decision:
        recorded["args"] = span.args
    result = DecideResult(span, model, recorded, fingerprint(recorded, normalizer))
    try:
        import httpx
    except ImportError:
        raise SpanError(f"decide needs httpx: {install_command('llm')}") from None
    base = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    url = base + "/chat/completions"
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    content = json.dumps(body, ensure_ascii=False).encode()
    headers["Content-Type"] = "application/json"
    redactor = Redactor(RedactRules.coerce(load_config("redact") or None))
    with httpx.Client(timeout=timeout) as client:
        for _ in range(repeat):
            try:
                response = client.post(url, content=content, headers=headers)
            except httpx.TimeoutException:
                raise SpanError(
                    f"{url} did not answer within {timeout:g} s; try again, or raise --timeout"
                ) from None
            except httpx.HTTPError as exc:
                raise SpanError(f"cannot reach {url}: {exc}") from None
            answer = _answer(response, url, recorded, result.recorded_fp, normalizer, redactor)
            result.answers.append(answer)
    return result


def _answer(  # noqa: PLR0917 - one call site
    response: Any,
    url: str,
    recorded: dict[str, Any],
    recorded_fp: str,
    norm: Normalizer | None,
    redactor: Redactor,
) -> dict[str, Any]:
    """One reply as an answer; what the model wrote is redacted before it is kept (it is
    printed), and compared after: a recorded decision is redacted too."""
    if response.status_code >= 400:
        text = redactor.redact_string(_error_text(response))
        raise SpanError(f"{url} answered HTTP {response.status_code}: {_cut(text, 200)}")
    try:
        reply = response.json()
        message = reply["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise SpanError(
            f"{url} answered something that is not a chat completion: "
            f"{_cut(redactor.redact_string(response.text), 200)!r}"
        ) from None
    calls = emitted_calls(redactor.redact_value(reply)[0])
    if not calls:
        content = message.get("content") if isinstance(message, dict) else None
        return {"text": redactor.redact_string(str(content or "")), "same": False}
    name, args = next(((n, a) for n, a in calls if n == recorded["tool_name"]), calls[0])
    fp = fingerprint({"tool_name": name, "args": args}, norm)
    return {"tool_name": name, "args": args, "fingerprint": fp, "same": fp == recorded_fp}


def _error_text(response: Any) -> str:
    try:
        data = response.json()
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    except ValueError:
        pass
    return str(response.text)
