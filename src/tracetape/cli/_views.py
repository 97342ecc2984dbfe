"""Runs as conversations in a terminal (``show --view conversation``, ``diff --view
conversation``): the steps of ``views.read_steps`` through rich, the changed words coloured."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from ..formats import read_records
from ..record import Record
from ..views import StepView, word_diff

__all__ = ["WIDE", "default_view", "print_diff", "print_steps", "records_of"]

WIDE = 100  # columns: the conversation view is the default from this terminal width on
_KIND = {"llm": "magenta", "tool": "cyan", "env": "yellow"}


def default_view() -> str:
    """``conversation`` on a terminal at least ``WIDE`` columns wide, else ``table``."""
    if not sys.stdout.isatty():
        return "table"
    return "conversation" if shutil.get_terminal_size().columns >= WIDE else "table"


def _head(view: StepView) -> Text:
    head = Text(f"#{view.index} ", style="bold")
    head.append(view.kind, style=_KIND.get(view.kind, ""))
    head.append(f" {view.name}", style="bold")
    facts = [f"step {view.step}"] if view.step is not None else []
    if view.ms is not None:
        facts.append(f"{view.ms:.0f} ms")
    if view.tokens is not None:
        facts.append(f"{view.tokens_in or 0} → {view.tokens_out or 0} tokens")
    if view.kind == "llm":
        facts.append(f"${view.cost:.6f}" if view.cost is not None else f"cost {view.priced}")
    head.append("  " + " · ".join(facts), style="dim")
    return head


def _part(label: str, body: Text) -> Text:
    line = Text()
    line.append(f"  {label:>12}  ", style="dim")  # the label dim, the text as it is
    line.append_text(body)
    return line


def print_steps(console: Console, views: Sequence[StepView]) -> None:
    """Each decision as it reads: who said what, the answer, the calls, the results."""
    for view in views:
        console.print(_head(view))
        for label, text in view.texts():
            console.print(_part(label, Text(text)))


def _marked(before: str, after: str, side: str) -> Text:
    out = Text()
    for op, text in word_diff(before, after):
        if op == "=":
            out.append(text)
        elif op == "-" and side == "-":
            out.append(text, style="bold red strike")
        elif op == "+" and side == "+":
            out.append(text, style="bold green")
    return out


def print_diff(console: Console, va: Sequence[StepView], vb: Sequence[StepView]) -> None:
    """Two runs aligned call by call: unchanged calls counted, changed ones shown part by
    part, the removed words red and struck through, the added ones green."""
    same = 0
    for i in range(max(len(va), len(vb))):
        x = va[i] if i < len(va) else None
        y = vb[i] if i < len(vb) else None
        if x is not None and y is not None and x.texts() == y.texts():
            same += 1
            continue
        if same:
            console.print(Text(f"  … {same} unchanged call{'s' if same > 1 else ''}", style="dim"))
            same = 0
        console.print(_head(x or y))  # type: ignore[arg-type]
        ours = dict(x.texts()) if x else {}
        theirs = dict(y.texts()) if y else {}
        for label in dict.fromkeys([*ours, *theirs]):
            before, after = ours.get(label), theirs.get(label)
            if before == after and before is not None:
                console.print(_part(label, Text(before)))
                continue
            if before is not None:
                console.print(_part(f"- {label}", _marked(before, after or "", "-")))
            if after is not None:
                console.print(_part(f"+ {label}", _marked(before or "", after, "+")))
    if same:
        console.print(Text(f"  … {same} unchanged call{'s' if same > 1 else ''}", style="dim"))


def records_of(spec: str | Sequence[str], run: str | None = None) -> list[Record]:
    """The records of a side of a diff: a file or a glob pattern (or several), every run
    they hold, or only ``run``'s."""
    from ..analysis.api import expand

    return [r for path in expand(spec) for r in read_records(path) if run is None or r.run == run]
