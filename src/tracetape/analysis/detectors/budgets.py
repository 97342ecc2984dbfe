"""Budgets: a run's calls, tokens and steps against their bounds.

``call-budget``, ``token-budget``, ``step-budget``: more than ``max_calls``, ``max_tokens``,
``max_steps``; ``step-budget-hit``: exactly ``max_steps`` (the run probably ran out of
steps). A run's steps are the larger of its highest step number and its step segments.
"""

from __future__ import annotations

from . import Context

READS = ("runs",)
CREATES = ()
PATTERNS = ("call-budget", "token-budget", "step-budget", "step-budget-hit")

_STEPS = "greatest(max_step, steps)"


def find(ctx: Context) -> None:
    """Add the budget findings."""
    limits = ctx.config.limits
    db = ctx.calls
    checks = [
        ("call-budget", "calls", f"calls > {int(limits.max_calls)}"),
        ("token-budget", "tokens", f"tokens > {int(limits.max_tokens)}"),
        ("step-budget", _STEPS, f"{_STEPS} > {int(limits.max_steps)}"),
        ("step-budget-hit", _STEPS, f"{_STEPS} = {int(limits.max_steps)}"),
    ]
    for pattern, value, test in checks:
        (total,) = db.one(f"SELECT count(*) FROM runs WHERE {test}")
        ctx.count(pattern, total)
        if not total:
            continue
        rows = db.rows(
            f"SELECT run, {value} FROM runs WHERE {test} ORDER BY first LIMIT ?", [ctx.limit]
        )
        for run, n in rows:
            if pattern == "call-budget":
                message = f"call budget: {run} made {n} calls (max_calls {limits.max_calls})"
                # the call past the bound, in its run; a budget of tokens or steps is the
                # run's as a whole
                over = limits.max_calls + 1
                ctx.add(pattern, message, run, None, call=over, calls=n, bound=limits.max_calls)
            elif pattern == "token-budget":
                message = f"token budget: {run} used {n} tokens (max_tokens {limits.max_tokens})"
                ctx.add(pattern, message, run, None, tokens=n, bound=limits.max_tokens)
            elif pattern == "step-budget":
                message = f"step budget: {run} took {n} steps (max_steps {limits.max_steps})"
                ctx.add(pattern, message, run, None, steps=n, bound=limits.max_steps)
            else:
                message = f"step budget hit: {run} stopped at step {n} = max_steps"
                ctx.add(pattern, message, run, None, steps=n, bound=limits.max_steps)
