"""One decision as the pages show it: its head (kind, name, the step its record says, a tool's
effect, numbers), its parts once each, and the run's totals."""

from __future__ import annotations

from tracetape.collector.pages.steps import echoes, happened, head_cells, total_cost, totals
from tracetape.record import Record
from tracetape.views import read_steps

API = "openai.chat.completions"


def _answer(text: str) -> dict[str, object]:
    return {
        "status": 200,
        "body": {"choices": [{"message": {"role": "assistant", "content": text}}]},
    }


def _run(result: str) -> list[Record]:
    ask = [{"role": "user", "content": "run the tests"}]
    fed = [*ask, {"role": "assistant", "content": "ok"}, {"role": "tool", "content": result}]
    return [
        Record(kind="llm", name="gpt-4o-mini", step=1, api=API, effect="read",
               input={"messages": ask}, out=_answer("ok")),
        Record(kind="tool", name="pytest", step=1, effect="read", input={"args": {}}, out=result),
        Record(kind="env", name="HOME", out="/root"),
        Record(kind="llm", name="gpt-4o-mini", step=2, api=API, input={"messages": fed},
               out=_answer("done")),
    ]  # fmt: skip


LOG = "tests/test_a.py ....F   [ 80%]\ntests/test_b.py .....   [100%]\n"


def test_a_head_shows_the_step_the_record_says_and_a_tools_effect_only() -> None:
    """An env read with no step shows no step (never "step None"); a model call is a kind,
    not an effect ("read"); a tool call shows its effect."""
    views = read_steps(_run(LOG))
    model, tool, env = (head_cells(v) for v in views[:3])
    assert "step 1" in model and "read" not in model.split("</b>", 1)[1]
    assert "step 1 · read" in tool
    assert "step" not in env and "None" not in env
    assert "kind-llm'>llm<" in model and "kind-env'>env<" in env


def test_a_tools_result_fed_back_to_the_model_is_shown_once() -> None:
    """The tool call shows its result (monospace: a pytest log keeps its columns); the next
    model call links to it instead of repeating it."""
    views = read_steps(_run(LOG))
    fed = echoes(views)
    assert fed == {4: {"said (tool)": 2}}
    tool = happened(views[1], "r")
    assert "class='text mono'" in tool and "[100%]" in tool
    model = happened(views[3], "r", echoed=fed[4], anchor="p").split("<details class=raw")[0]
    assert "[100%]" not in model and "<a class=echo href='#p2'>↑ the result of #2</a>" in model


def test_a_fed_back_result_that_changed_is_shown_with_its_marks() -> None:
    """On the diff page, a fed-back result that differs from the other run's is shown (its
    changed words marked), not linked."""
    a, b = read_steps(_run(LOG)), read_steps(_run(LOG.replace("F", ".")))
    shown = happened(b[3], "r", a[3], "b", echoed=echoes(b)[4], anchor="p")
    assert "class=echo" not in shown and "<ins>" in shown


def test_totals_say_tokens_and_an_unknown_cost_for_a_seed_run() -> None:
    """Tool lines that carry tokens and name no model: their tokens, cost unknown (never
    $0); a run with neither tokens nor models: no cost at all."""
    seed = read_steps([Record(kind="tool", name="ls", tokens=812, ms=4.0),
                       Record(kind="tool", name="cat", tokens=4300, ms=6.0)])  # fmt: skip
    line = totals(seed)
    assert "<span class=total-tokens>5112</span>" in line and "unknown" in line
    assert "$0" not in line
    bare = read_steps([Record(kind="tool", name="ls")])
    assert "—" in total_cost(bare) and "$0" not in total_cost(bare)
