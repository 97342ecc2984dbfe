"""Span replay: one tool span of a failed run, replayed to a verdict.

A failed run is cheaper to diagnose as one span than as a whole re-run. Pull the span out
(``read_spans``, ``find_span``), run its tool live twice and once against the recording
(``replay``), and read the answer: the tool is nondeterministic, the world drifted, or the
tool behaved and the model chose badly (the decision layer), where a second model's answer
(``decide``) says whether the decision is robust. ``explain`` goes from a good run and a bad
run to that verdict in one call::

    >>> import sys
    >>> from tracetape import span
    >>> s = span.Span.from_dict({"span_id": "7f3c", "tool_call": {"argv": [sys.executable,
    ...     "-c", "print(2 + 2)"]}, "tool_result": {"exit_code": 0, "stdout": "4\\n",
    ...     "stderr": ""}})
    >>> result = span.replay(s, mode="both")
    >>> result.stable, result.drift, result.verdict
    (True, False, 'decision layer')
"""

from __future__ import annotations

from .decide import DIFFERENT, SAME, DecideResult, decide
from .explain import Explain, Story, explain
from .live import DEFAULT_TIMEOUT_S, Live, env_digest, load_callable
from .model import Span, emitted_calls, find_span, load_span, read_spans, span_of_trace
from .replay import (
    DECISION_LAYER,
    NONDETERMINISTIC,
    WORLD_DRIFTED,
    ReplayMode,
    ReplayResult,
    replay,
)

__all__ = [
    "DECISION_LAYER",
    "DEFAULT_TIMEOUT_S",
    "DIFFERENT",
    "NONDETERMINISTIC",
    "SAME",
    "WORLD_DRIFTED",
    "DecideResult",
    "Explain",
    "Live",
    "ReplayMode",
    "ReplayResult",
    "Span",
    "Story",
    "decide",
    "emitted_calls",
    "env_digest",
    "explain",
    "find_span",
    "load_callable",
    "load_span",
    "read_spans",
    "replay",
    "span_of_trace",
]
