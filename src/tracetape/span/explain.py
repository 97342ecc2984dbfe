"""``explain``: from a good run and a bad run to a cause, in one step.

1. The diff engine aligns the two runs call by call and finds their origin: the first call
   whose request, or whose answer to the same request, differs (``report.origin``, the same
   analysis ``tracetape diff`` prints, with its cause).
2. The tool span that fed it is picked from the bad run: the origin's call itself when it is
   a tool call; else the last tool call before it (its result is what the diverging model
   decision read), else, when the runs parted at their first decision, the tool call that
   decision asked for. The same span of the good run (the runs agree up to the origin)
   tells whether the two recordings of that call already differ.
3. The span is replayed live (determinism, then drift; stubs and refusals as in ``replay``).
4. The verdict: ``nondeterministic tool`` when two live runs disagree; ``world drifted`` when
   the stable tool gives a result other than the bad run's recording, or the two runs
   recorded different results for the same call; else ``decision layer``, and the decision
   replay is offered (or run, when a model is named).

The verdict becomes the story's ``cause``, in the diff's vocabulary: a nondeterministic tool
or a drifted world is ``tool`` (``env`` where the origin is an environment read), the decision
layer keeps the origin's own cause (``model``, ``input``, ``prompt``, ``config``, ``code``;
``model`` where the origin is a tool's). The ``Story`` prints as text, Markdown (for a PR
comment) or JSON.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..analysis import AnalysisConfig, diff_traces
from ..analysis.api import Traces
from ..analysis.report import redacted
from ..canonical import changed_paths, excerpt, fingerprint, normalize
from ..errors import SpanError
from .decide import DecideResult, decide
from .live import Live, load_callable
from .model import Span, read_spans
from .replay import DECISION_LAYER, NONDETERMINISTIC, WORLD_DRIFTED, ReplayResult, replay

__all__ = ["Story", "explain"]


@dataclass
class Story:
    """What ``explain`` found: where the runs parted, the span replayed, the verdict, and the
    commands to run next."""

    good: str
    bad: str
    divergence: dict[str, Any] | None
    span: Span | None = None
    origin: dict[str, Any] | None = None
    relation: str = ""
    good_span: Span | None = None
    recordings_differ: bool = False
    recording_changes: list[dict[str, Any]] = field(default_factory=list)
    replay: ReplayResult | None = None
    not_replayed: str | None = None
    decided: DecideResult | None = None
    verdict: str | None = None
    because: str = ""
    next: list[str] = field(default_factory=list)

    @property
    def cause(self) -> str | None:
        """The verdict in the diff's vocabulary of causes (see the module docstring)."""
        origin = self.origin
        if origin is None:
            return None
        if self.verdict in (NONDETERMINISTIC, WORLD_DRIFTED):
            return "env" if origin["cause"] == "env" else "tool"
        if self.verdict == DECISION_LAYER:
            return origin["cause"] if origin["cause"] not in ("tool", "env") else "model"
        return str(origin["cause"])

    def _parted(self) -> str:
        d, origin = self.divergence, self.origin
        if origin is not None and (d is None or origin["call"] != d["position"]):
            step = f" (step {origin['step']})" if origin["step"] is not None else ""
            return (
                f"The runs parted at call #{origin['call']}{step}: {origin['says']} "
                f"[cause: {origin['cause']}]."
            )
        if d is None:
            return "The runs never parted: they made the same decisions, call for call."
        a, b = d["a"], d["b"]
        if a is None or b is None:
            ended, other = (self.bad, self.good) if a else (self.good, self.bad)
            goes = a or b
            return (
                f"The runs parted at call #{d['position']}: {ended} ended there, {other} went "
                f"on with {goes['kind']} {goes['name']} (step {goes['step']})."
            )
        paths = ", ".join(c["path"] for c in d["changes"][:3]) or "the call"
        return (
            f"The runs parted at call #{d['position']}: {a['kind']} {a['name']} (step "
            f"{a['step']}) in the good run, {b['kind']} {b['name']} (step {b['step']}) in the "
            f"bad one; changed: {paths}."
        )

    def _span_line(self) -> str | None:
        s = self.span
        if s is None:
            return None
        text = f"Replayed span: {self.relation}, {s.span_id} ({s.tool}, step {s.step}"
        text += f", run {s.run})" if s.run else ")"
        if self.recordings_differ:
            paths = ", ".join(c["path"] for c in self.recording_changes[:3])
            text += f"; its recorded result differs between the runs ({paths})"
        return text + "."

    def lines(self) -> list[str]:
        """The story as plain text."""
        out = [self._parted()]
        span = self._span_line()
        if span:
            out.append(span)
        if self.replay is not None:
            replayed = self.replay.lines(head=False, verdict=False)
            out += ["Replayed live:", *(f"  {line}" for line in replayed)]
        if self.not_replayed:
            out.append(f"Not replayed: {self.not_replayed}")
        if self.decided is not None:
            out += ["Decision replayed:", *(f"  {line}" for line in self.decided.lines())]
        if self.verdict:
            out.append(f"Verdict: {self.verdict}: {self.because} [cause: {self.cause}]")
        out += [f"Next: {cmd}" for cmd in self.next]
        return out

    def markdown(self) -> str:
        """The story as Markdown, for a pull-request comment or a bug report."""
        title = f"**{self.verdict}**" if self.verdict else "no verdict"
        out = [f"### tracetape explain: {title}", "", self._parted()]
        span = self._span_line()
        if span:
            out += ["", span]
        if self.verdict:
            out += ["", f"**Verdict: {self.verdict}.** {self.because}"]
        if self.replay is not None:
            out += ["", "```text", *self.replay.lines(), "```"]
        if self.not_replayed:
            out += ["", f"Not replayed: {self.not_replayed}"]
        if self.decided is not None:
            out += ["", "```text", *self.decided.lines(), "```"]
        if self.next:
            out += ["", "Next:", "", "```console", *(f"$ {cmd}" for cmd in self.next), "```"]
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The story as JSON data."""
        return {
            "good": self.good,
            "bad": self.bad,
            "divergence": self.divergence,
            "origin": self.origin,
            "cause": self.cause,
            "span": self.span.to_dict() if self.span else None,
            "span_relation": self.relation or None,
            "recordings_differ": self.recordings_differ,
            "recording_changes": self.recording_changes,
            "replay": self.replay.to_dict() if self.replay else None,
            "not_replayed": self.not_replayed,
            "decision": self.decided.to_dict() if self.decided else None,
            "verdict": self.verdict,
            "because": self.because,
            "next": self.next,
        }


@dataclass
class Explain:
    """How ``explain`` replays: callables and stubs by tool name (functions, or
    ``"module:function"`` imported when that tool is replayed), the live options, and the model
    asked for the decision replay (none: the decision replay is offered, not run)."""

    calls: Mapping[str, Callable[..., Any] | str] = field(default_factory=dict)
    stubs: Mapping[str, Callable[..., Any] | str] = field(default_factory=dict)
    live: Live = field(default_factory=Live)
    model: str | None = None
    base_url: str | None = None
    repeat: int = 1


def _name(traces: Traces) -> str:
    if isinstance(traces, str | os.PathLike):
        return os.fspath(traces)
    return " ".join(os.fspath(t) for t in traces)


def explain(
    good: Traces,
    bad: Traces | None = None,
    *,
    runs: tuple[str, str] | None = None,
    options: Explain | None = None,
    config: AnalysisConfig | None = None,
) -> Story:
    """Explain why ``bad`` went another way than ``good``: two cassettes or traces, or one
    trace and ``runs=(GOOD_RUN, BAD_RUN)``. See the module docstring.

    Raises ``TraceError`` for bad input and ``SpanError`` for a trace without tool results.
    """
    options = options or Explain()
    config = config or AnalysisConfig.load()
    report = diff_traces(good, bad, runs=runs, config=config)
    good_name = runs[0] if runs else _name(good)
    bad_name = runs[1] if runs else _name(bad if bad is not None else good)
    d, origin = report.divergence, report.origin
    story = Story(good_name, bad_name, d.to_dict() if d else None)
    if origin is None:
        story.because = "nothing to explain"
        return story
    story.origin = redacted(origin.to_dict() | {"says": origin.says})
    bad_run = (report.candidate or {}).get("run")
    good_run = (report.baseline or {}).get("run")
    bad_spans = _run_spans(bad if bad is not None else good, bad_run)
    good_spans = _run_spans(good, good_run)
    at = None if origin.side == "ending" and origin.ended != "A" else {"kind": origin.kind}
    index, story.relation = _pick(bad_spans, at, origin.call)
    norm = config.normalizer
    if index is None:
        story.verdict = DECISION_LAYER
        story.because = (
            "the runs parted at a model decision before any tool ran: the prompt, the "
            "harness or the model changed; no tool to clear"
        )
        story.next.append(_diff_command(good, bad, runs))
        return story
    span = story.span = bad_spans[index]
    twin = good_spans[index] if index < len(good_spans) else None
    if twin is not None and _same_call(twin, span, norm):
        story.good_span = twin
        before, after = twin.tool_result, span.tool_result
        if fingerprint(before, norm) != fingerprint(after, norm):
            story.recordings_differ = True
            story.recording_changes = [
                {"path": c.path, "good": c.before, "bad": c.after}
                for c in changed_paths(normalize(before, norm), normalize(after, norm), limit=20)
            ]
    trace = span.source
    live = _live_for(span, options)
    try:
        story.replay = replay(span, live=live, normalizer=norm)
    except SpanError as exc:
        story.not_replayed = str(exc)
        story.next.append(_replay_command(trace, span, options))
        story.verdict = WORLD_DRIFTED if story.recordings_differ else None
        story.because = (
            "the two runs recorded different results for the same call (the tool was not "
            "replayed, so a nondeterministic tool is not ruled out)"
            if story.recordings_differ
            else "the tool could not be replayed, so the tool layer is not cleared"
        )
        return story
    _conclude(story, trace, options, norm)
    return story


def _conclude(story: Story, trace: str, options: Explain, norm: Any) -> None:
    result, span = story.replay, story.span
    assert result is not None and span is not None
    if result.verdict == NONDETERMINISTIC:
        story.verdict = NONDETERMINISTIC
        story.because = result.meaning
        story.next.append(_replay_command(trace, span, options, "determinism"))
        return
    good = story.good_span
    live_is_good = (
        good is not None
        and result.compared == "result"
        and fingerprint(good.tool_result, norm) == result.live
    )
    if result.drift or story.recordings_differ:
        story.verdict = WORLD_DRIFTED
        if story.recordings_differ and not result.drift:
            story.because = (
                "the tool is stable and today gives what the bad run recorded, but the good "
                "run recorded another result for the same call: the world it reads changed "
                "between the runs"
            )
        elif live_is_good:
            story.because = (
                "the tool is stable and today gives what the good run recorded: the bad run "
                "saw a world that has changed since (or changed back)"
            )
        else:
            story.because = result.meaning
        story.next.append(_replay_command(trace, span, options, "drift"))
        return
    story.verdict = DECISION_LAYER
    story.because = "the tool is stable and still gives the recorded result; " + _decided(story)
    if options.model:
        try:
            story.decided = decide(
                span,
                options.model,
                base_url=options.base_url,
                repeat=options.repeat,
                normalizer=norm,
            )
        except SpanError as exc:
            story.next.append(f"# decision replay failed: {exc}")
    if story.decided is None:
        story.next.append(
            f"tracetape span decide {shlex.quote(trace)} --id {span.span_id} --model MODEL"
        )


def _decided(story: Story) -> str:
    """What changed at the divergence, when the tool layer is cleared."""
    d = story.divergence or {}
    a, b, changes = d.get("a"), d.get("b"), d.get("changes") or []
    if not (a and b):
        return "one run stopped making decisions where the other went on: look at the model"
    first = changes[0] if changes else None
    where = ""
    if first is not None:
        before, after = first["before"], first["after"]
        if isinstance(before, str) and isinstance(after, str):
            before, after = excerpt(before, after)
        where = f" ({first['path']}: {before!r} -> {after!r})"
    if a["kind"] == "llm" and b["kind"] == "llm":
        return (
            f"what changed is the model's input{where}: the prompt, the harness or an "
            "earlier decision, not the tool's world"
        )
    return f"the model asked for a different call on the same input{where}: look at the model"


def _same_call(a: Span, b: Span, norm: Any) -> bool:
    return a.tool == b.tool and fingerprint(a.tool_call, norm) == fingerprint(b.tool_call, norm)


def _run_spans(traces: Traces, run: str | None) -> list[Span]:
    """The spans of one run, in order, from every file of ``traces``."""
    from ..analysis.api import expand

    spans: list[Span] = []
    for path in expand(traces):
        spans += [s for s in read_spans(path) if run is None or s.run == run]
    return spans


def _pick(spans: list[Span], call: dict[str, Any] | None, position: int) -> tuple[int | None, str]:
    """The index of the span to replay for the divergence at ``position`` of the bad run
    (``call`` there, ``None`` where the bad run had ended; see the module docstring), and how
    it relates to the divergence."""
    if not spans:
        return None, ""
    if call is None:
        return len(spans) - 1, "the last tool call of the bad run before it stopped"
    if call.get("kind") == "tool":
        same = [i for i, s in enumerate(spans) if s.position == position]
        if same:
            return same[0], "the divergent call"
    before = [i for i, s in enumerate(spans) if s.position < position]
    if before:
        return before[-1], "the tool call whose result fed the divergent decision"
    after = [i for i, s in enumerate(spans) if s.position > position]
    if after:
        return after[0], "the tool call the divergent decision asked for"
    return None, ""


def _resolved(named: Mapping[str, Callable[..., Any] | str], tool: str, what: str) -> Any:
    target = named.get(tool)
    return load_callable(target, what) if isinstance(target, str) else target


def _live_for(span: Span, options: Explain) -> Live:
    base = options.live
    return Live(
        call=_resolved(options.calls, span.tool, "--call"),
        stub=_resolved(options.stubs, span.tool, "--stub"),
        env=base.env,
        pure_env=base.pure_env,
        cwd=base.cwd,
        timeout_s=base.timeout_s,
        env_allow=base.env_allow,
        redactor=base.redactor,
    )


def _replay_command(trace: str, span: Span, options: Explain, mode: str | None = None) -> str:
    cmd = f"tracetape span replay {shlex.quote(trace)} --id {span.span_id}"
    if mode:
        cmd += f" --mode {mode}"
    named, flag = (options.stubs, "--stub") if span.writes else (options.calls, "--call")
    if span.writes or span.argv is None:
        spec = named.get(span.tool)
        cmd += f" {flag} {shlex.quote(spec) if isinstance(spec, str) else 'module:function'}"
    return cmd


def _diff_command(good: Traces, bad: Traces | None, runs: tuple[str, str] | None) -> str:
    names = [_name(good)] + ([_name(bad)] if bad is not None else [])
    cmd = "tracetape diff " + " ".join(shlex.quote(n) for n in names)
    if runs:
        cmd += f" --runs {shlex.quote(runs[0])} {shlex.quote(runs[1])}"
    return cmd
