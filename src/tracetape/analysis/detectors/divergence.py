"""Where the two compared runs part, why, and what follows from it (diff only).

The baseline run and the candidate run are aligned call by call (each run's calls in order).
A position *differs* where the two calls asked different things (kind, name, normalized args:
the signature), or asked the same and got another answer (the output's fingerprint; two
model answers that say the same, the same text and tool calls, are the same), or where one
run has no call left. The first such position is the **origin**; its side (``input``,
``output``, ``ending``) and cause follow ``causes``. The runs ending differently (a failed or
interrupted recording against a completed one) with every call alike is an origin too, at
the position after the last call.

Every later differing position is either **explained** by the root before it (a changed
answer changes the next request's conversation; the calls of a run that went another way
differ in kind, tool or arguments; a run that ended has no call left) or is a root of its own,
an independent change: the same call answered differently again, or a model request whose
system instructions, user turns or settings changed where no earlier root changed them.
The first ``WALK`` differing positions are looked at; the rest count as explained.

Each root is a finding: ``divergent-write`` when either call is a write or irreversible,
else ``divergence``, whose severity follows its effect on the runs (``rules.divergence``):
fatal where the candidate failed where the baseline did not, suspicious where the final
answer or the ending changed, expected where both stayed the same. ``ctx.divergence`` keeps
the first call whose *request* differs (the report's ``divergence``, as before).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..._enums import WRITES
from ...canonical import Change, changed_paths, normalize
from ...integrations.providers import answer_of
from ...record import Record, call_text
from ..causes import (
    CALL_IDS,
    CAUSES,
    PART_CAUSE,
    answer_changes,
    brief_value,
    change_row,
    input_causes,
    json_text,
    output_cause,
    part_of,
    request_parts,
    same_answer,
)
from ..outcome import outcome
from ..records import records_at
from ..report import Divergence, Origin
from ..rules import divergence_severity
from . import SIDE_A, SIDE_B, Context

READS = ("calls", "runs", "sigs")
CREATES = ()
PATTERNS = ("divergence", "divergent-write")
# The report puts these first among the findings of a severity, and the text report shows
# them in a section of their own (``render``), not among the findings.
LEADS = True
APART = True

# The differing positions looked at one by one; of them, the later model requests looked
# into for a change of their own (an independent root); and of a root's explained calls,
# those listed.
WALK = 256
INSPECT = 8
EXPLAINS = 50

# A run's calls are those of its first call (``rf``).
_RUN = "rf = (SELECT first FROM runs WHERE side = {} AND run = {})"
# The differing positions, the first ``WALK`` of them (with how many there are, and the first
# whose requests differ), in one pass over the two runs.
# A call's position in its run: its ord's offset from the run's first where the run is one
# stretch of its input (no window: no sort), else its row number in call order.
_PACKED = "ord - rf + 1"
_ORDERED = "row_number() OVER (ORDER BY ord)"
_WALKED = f"""
    WITH a AS (SELECT {{a}} AS pos, sid, out, ord, step, effect
               FROM calls WHERE {_RUN.format("$1", "$2")}),
         b AS (SELECT {{b}} AS pos, sid, out, ord, step, effect
               FROM calls WHERE {_RUN.format("$3", "$4")}),
         d AS (SELECT pos, a.sid AS sa, b.sid AS sb, a.out AS oa, b.out AS ob, a.ord AS da,
                      b.ord AS db, a.step AS ta, b.step AS tb, a.effect AS ea, b.effect AS eb,
                      count(*) OVER () AS n,
                      min(pos) FILTER (WHERE a.sid IS DISTINCT FROM b.sid) OVER () AS fi
               FROM a FULL JOIN b USING (pos)
               WHERE a.sid IS DISTINCT FROM b.sid OR a.out IS DISTINCT FROM b.out
               ORDER BY pos LIMIT $5)
    SELECT pos, sa, sb, oa, ob, da, db, ta, tb, ea, eb, sa_.kind, sa_.name, sb_.kind, sb_.name,
           sa <> sb AND sa_.kind = 'llm' AND sb_.kind = 'llm' AND sa_.name = sb_.name
               AND regexp_replace(sa_.args, $6, '""', 'g')
                   = regexp_replace(sb_.args, $6, '""', 'g') AS ids_only,
           n, fi
    FROM d LEFT JOIN sigs sa_ ON sa_.sid = sa LEFT JOIN sigs sb_ ON sb_.sid = sb
    ORDER BY pos
"""
# A tool call's id in a request's text (``causes.CALL_IDS``), as its value is cut out.
_IDS = r'"(?:' + "|".join(sorted(CALL_IDS)) + r')"\s*:\s*"(?:[^"\\]|\\.)*"'

_CALL = f"""
    SELECT c.step, c.ord, s.kind, s.name, c.sid, c.out, c.effect
    FROM (SELECT *, row_number() OVER (ORDER BY ord) AS pos FROM calls
          WHERE {_RUN.format("$1", "$2")}) c
    JOIN sigs s USING (sid) WHERE pos = $3
"""


class _Lazy:
    """Values fetched a pair at a time, when the walk needs them, and kept."""

    def __init__(self, fetch: Callable[[list[int]], dict[int, Any]]):
        self._fetch = fetch
        self._kept: dict[int, Any] = {}

    def get(self, a: int, b: int) -> tuple[Any, Any]:
        missing = [k for k in (a, b) if k not in self._kept]
        if missing:
            found = self._fetch(missing)
            self._kept.update({k: found.get(k) for k in missing})
        return self._kept[a], self._kept[b]


class _Pos:
    """One differing position of the walk, both sides (``a``, ``b``: None where the run has
    no call there)."""

    def __init__(self, row: tuple[Any, ...]):
        (self.pos, sa, sb, oa, ob, da, db, ta, tb, ea, eb, ka, na, kb, nb, ids_only) = row
        # two model requests that differ only in the ids of earlier tool calls (``_IDS``)
        self.ids_only = bool(ids_only)
        self.a = None if sa is None else {"sid": sa, "out": oa, "ord": da, "step": ta,
                                           "effect": ea, "kind": ka, "name": na}  # fmt: skip
        self.b = None if sb is None else {"sid": sb, "out": ob, "ord": db, "step": tb,
                                           "effect": eb, "kind": kb, "name": nb}  # fmt: skip

    @property
    def same_request(self) -> bool:
        return self.a is not None and self.b is not None and self.a["sid"] == self.b["sid"]

    @property
    def step(self) -> int | None:
        return (self.a or self.b or {}).get("step")

    @property
    def writes(self) -> bool:
        return any(c is not None and c["effect"] in WRITES for c in (self.a, self.b))


def find(ctx: Context) -> None:
    """Set ``ctx.divergence``, ``ctx.aligned``, ``ctx.roots`` (the origin first) and
    ``ctx.outcome``, and add a finding for each root."""
    if not ctx.compare:
        return
    db = ctx.calls
    a, b = (SIDE_A, ctx.baseline), (SIDE_B, ctx.candidate)
    # each run's calls, and whether they are one stretch of its input
    both = {
        side: (calls, packed)
        for side, calls, packed in db.rows(
            "SELECT side, calls, last - first + 1 = calls FROM runs "
            "WHERE (side = 1 AND run = $1) OR (side = 2 AND run = $2)",
            [ctx.baseline, ctx.candidate],
        )
    }
    pos = {s: _PACKED if both.get(s, (0, False))[1] else _ORDERED for s in (SIDE_A, SIDE_B)}
    rows = db.rows(_WALKED.format(a=pos[SIDE_A], b=pos[SIDE_B]), [*a, *b, WALK, _IDS])
    walked = [_Pos(row[:16]) for row in rows]
    differing, first_input = rows[0][16:] if rows else (0, None)
    calls_a = both.get(SIDE_A, (0, False))[0]
    ctx.aligned = (first_input - 1) if first_input is not None else calls_a
    if first_input is not None:
        at = next((p for p in walked if p.pos == first_input), None)
        ctx.divergence = _divergence(ctx, first_input, at)
    ctx.outcome = outcome(ctx)
    roots = _walk(ctx, walked, differing)
    if not roots:
        return
    ctx.roots = [root for root, _ in roots]
    for root, at in roots:
        pattern = "divergent-write" if at.writes else "divergence"
        ctx.count(pattern, 1)
        ctx.add(
            pattern,
            f"call #{root.call}{_at_step(root.step)}: {root.says} [cause: {root.cause}]",
            (ctx.candidate if at.b else ctx.baseline),
            root.step,
            call=root.call,
            severity=divergence_severity(ctx.config.rules, pattern, ctx.outcome),
            fix=CAUSES[root.cause].fix,
            evidence=root.to_dict(),
        )


def _at_step(step: int | None) -> str:
    return f" (step {step})" if step is not None else ""


def _walk(ctx: Context, walked: list[_Pos], differing: int) -> list[tuple[Origin, _Pos]]:
    """The roots among the differing positions, in order, each with the positions it explains
    (see the module docstring)."""
    db = ctx.calls
    records = _Lazy(partial(records_at, db))
    briefs = _Lazy(partial(records_at, db, brief=True))  # a record's api, not its texts
    args = _Lazy(db.sig_args)
    written = _Lazy(partial(db.sig_args, normalized=False))
    inspected = 0  # later model requests looked into for a change of their own
    roots: list[tuple[Origin, _Pos]] = []
    active: set[str] = set()
    quoted: list[tuple[str, str]] = []  # values of changed results a later request may quote
    current: Origin | None = None
    looked = 0
    for p in walked:
        looked += 1
        # The same request, or the same but for the tool calls' ids its earlier turns carry
        if p.same_request or p.ids_only:
            assert p.a is not None and p.b is not None
            if not p.same_request and p.a["out"] == p.b["out"]:
                continue
            ra, rb = records.get(p.a["ord"], p.b["ord"])
            if p.a["kind"] == "llm" and ra and rb and same_answer(ra, rb):
                continue  # the same answer in another envelope
            root = _output_root(ctx, p, ra, rb)
            quoted += _quotes(p.a["kind"], ra, rb, ctx)
        elif current is None:
            if not (p.a and p.b):
                root = _ending_root(ctx, p)
            else:
                ra, rb = records.get(p.a["ord"], p.b["ord"])
                root = _input_root(ctx, p, args.get(p.a["sid"], p.b["sid"]), ra, rb)
        else:
            root = None
            later = p.a and p.b and p.a["kind"] == p.b["kind"] == "llm"
            if later and p.a["name"] == p.b["name"] and inspected < INSPECT:  # type: ignore[index]
                assert p.a is not None and p.b is not None
                inspected += 1
                ra, rb = briefs.get(p.a["ord"], p.b["ord"])
                # as written first: parts equal as written are equal normalized
                fresh = _fresh(written.get(p.a["sid"], p.b["sid"]), ra, active, quoted)
                both = args.get(p.a["sid"], p.b["sid"]) if fresh else None
                fresh = _fresh(both, ra, active, quoted) if both else []
                if both and fresh:
                    ra, rb = records.get(p.a["ord"], p.b["ord"])
                    root = _input_root(ctx, p, both, ra, rb, fresh)
        if root is None:
            assert current is not None
            current.explained += 1
            if len(current.explains) < EXPLAINS:
                current.explains.append(p.pos)
            continue
        roots.append((root, p))
        active.update(root.causes)
        current = root
    if current is not None:
        current.explained += differing - looked  # past the walk: counted as explained
    elif ctx.outcome is not None and ctx.outcome.endings_differ:
        root = _ended_alike(ctx)
        roots.append((root, _Pos((root.call, *(None,) * 15))))
    return roots


def _fresh(
    args: tuple[Any, Any],
    rec: Any,
    active: set[str],
    quoted: list[tuple[str, str]],
) -> list[str]:
    """The causes of a later model request's difference that no root before it explains:
    not its earlier turns (the roots changed them), not a cause already at work, and not a
    part whose every change quotes a result a root changed (``quoted``). Parts are compared
    whole first: the changed paths are walked only in a part that differs."""
    api = rec.api if rec else None
    parts_a, parts_b = request_parts(args[0], api), request_parts(args[1], api)
    unexplained: set[str] = set()
    for part, cause in PART_CAUSE.items():
        if cause == "code" or cause in active or parts_a[part] == parts_b[part]:
            continue
        changes = changed_paths(parts_a[part], parts_b[part], limit=50)
        if not all(_quotes_a_result(c, quoted) for c in changes):
            unexplained.add(cause)
    return [c for c in CAUSES if c in unexplained]


def _quotes_a_result(change: Change, quoted: list[tuple[str, str]]) -> bool:
    """Whether a changed text holds a changed result's values, before and after."""
    before, after = json_text(change.before), json_text(change.after)
    return any(old in before and new in after for old, new in quoted)


def _quotes(kind: str, a: Record | None, b: Record | None, ctx: Context) -> list[tuple[str, str]]:
    """The values of a tool's or env read's changed result (texts, as a later request would
    quote them)."""
    if kind == "llm" or a is None or b is None:
        return []
    norm = ctx.config.normalizer
    return [
        (json_text(c.before), json_text(c.after))
        for c in changed_paths(normalize(a.out, norm), normalize(b.out, norm), limit=20)
        if c.before is not None and c.after is not None
    ]


def _output_root(ctx: Context, p: _Pos, ra: Record | None, rb: Record | None) -> Origin:
    assert p.a is not None and p.b is not None
    kind, name = p.a["kind"], p.a["name"]
    changes = answer_changes(kind, ra, rb, (p.a["out"], p.b["out"]), ctx.config.normalizer)
    cause = output_cause(kind)
    return Origin(
        p.pos, p.step, kind, name, "output", [cause], changes,
        a=_said(kind, name, ra, p.a["out"]), b=_said(kind, name, rb, p.b["out"]),
    )  # fmt: skip


def _input_root(  # noqa: PLR0917 - the position's parts, as the walk has them
    ctx: Context,
    p: _Pos,
    args: tuple[Any, Any],
    ra: Record | None,
    rb: Record | None,
    causes: list[str] | None = None,
) -> Origin:
    assert p.a is not None and p.b is not None
    ca, cb = p.a, p.b
    args_a, args_b = args
    if causes is None:
        causes = input_causes(
            (ca["kind"], ca["name"], args_a, ra.api if ra else None),
            (cb["kind"], cb["name"], args_b, rb.api if rb else None),
        )
    found = changed_paths(
        {"kind": ca["kind"], "name": ca["name"], **_as_dict(args_a)},
        {"kind": cb["kind"], "name": cb["name"], **_as_dict(args_b)},
        limit=50,
    )
    if ca["kind"] == cb["kind"] == "llm":  # the causes' parts first, each in table order
        api = ra.api if ra else None
        order = {c: i for i, c in enumerate(causes)}
        rank = {id(c): order.get(PART_CAUSE[part_of(c.path, args_a, api)], -1) for c in found}
        ranked = sorted((c for c in found if rank[id(c)] >= 0), key=lambda c: rank[id(c)])
        found = ranked or found
    changes = [change_row(c.path or "args", c.before, c.after) for c in found[:20]]
    said_a: str | None = _asked(ca, args_a)
    said_b: str | None = _asked(cb, args_b)
    if ca["kind"] == cb["kind"] == "llm" and changes:  # what each request said there
        first = changes[0]
        said_a = brief_value(f"{first['path']}: {first['before']}", 100)
        said_b = brief_value(f"{first['path']}: {first['after']}", 100)
    return Origin(
        p.pos, p.step, ca["kind"], ca["name"], "input", causes, changes, a=said_a, b=said_b
    )  # fmt: skip


def _ending_root(ctx: Context, p: _Pos) -> Origin:
    goes = p.a or p.b
    assert goes is not None and ctx.outcome is not None
    ends = ctx.outcome.endings_text()
    args = ctx.calls.sig_args([goes["sid"]]).get(goes["sid"])
    return Origin(
        p.pos, goes["step"], goes["kind"], goes["name"], "ending", ["ending"],
        [{"path": "ending", "before": ends[0], "after": ends[1]}],
        a=ends[0] if p.a is None else _asked(p.a, args),
        b=ends[1] if p.b is None else _asked(p.b, args), ended="A" if p.a is None else "B",
    )  # fmt: skip


def _ended_alike(ctx: Context) -> Origin:
    """Every call alike, the endings not: the origin is after the last call."""
    assert ctx.outcome is not None
    ends = ctx.outcome.endings_text()
    return Origin(
        ctx.outcome.calls[0] + 1, None, None, None, "ending", ["ending"],
        [{"path": "ending", "before": ends[0], "after": ends[1]}], a=ends[0], b=ends[1],
        ended="both",
    )  # fmt: skip


def _as_dict(args: Any) -> dict[str, Any]:
    return dict(args) if isinstance(args, dict) else {"args": args}


def _asked(call: dict[str, Any], args: Any) -> str:
    """A call as its run made it, in short: ``get_weather(city="Paris")``."""
    if call["kind"] == "llm":
        return f"model request to {call['name']}"
    text = call_text(call["name"] or call["kind"], args) if args is not None else call["name"]
    return brief_value(f"{call['kind']} {text}", 100) or ""


def _said(kind: str, name: str, rec: Record | None, digest: str | None) -> str | None:
    """What a call answered, in short: the tool calls a model asked for, or its final
    answer; a tool's result."""
    if rec is None or rec.out is None:
        return f"output {digest}" if digest else None
    if kind == "llm":
        text, calls = answer_of(rec.out, rec.api)
        if calls:
            return brief_value("; ".join(calls), 100)
        return brief_value(f'final answer "{text}"' if text else "no answer", 100)
    return brief_value(rec.out, 100)


def _divergence(ctx: Context, position: int, at: _Pos | None) -> Divergence:
    """The first position whose requests differ, both calls and their changed paths (the
    report's ``divergence``), from the walk's row where it has it."""
    db = ctx.calls
    a, b = (SIDE_A, ctx.baseline), (SIDE_B, ctx.candidate)
    if at is not None:
        rows = [
            [(c["step"], c["ord"], c["kind"], c["name"], c["sid"], c["out"], c["effect"])]
            if c is not None
            else []
            for c in (at.a, at.b)
        ]
    else:
        rows = [db.rows(_CALL, [*side, position]) for side in (a, b)]
    args = db.sig_args([row[0][4] for row in rows if row])
    lines = db.lines(row[0][1] for row in rows if row)

    def call(found: list[tuple[Any, ...]], run: str | None) -> dict[str, Any] | None:
        if not found:
            return None
        step, first, kind, name, sid, out, effect = found[0]
        return {
            "run": run,
            "step": step,
            "line": lines[first],
            "kind": kind,
            "name": name,
            "args": args[sid],
            "out": out,
            "effect": effect,
        }

    ca, cb = call(rows[0], ctx.baseline), call(rows[1], ctx.candidate)
    if ca and cb:
        before = {"kind": ca["kind"], "name": ca["name"], "args": ca["args"]}
        after = {"kind": cb["kind"], "name": cb["name"], "args": cb["args"]}
        changes = changed_paths(before, after, limit=20)
    else:
        changes = []
    return Divergence(position, ca, cb, changes)
