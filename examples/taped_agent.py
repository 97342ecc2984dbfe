"""A tiny tool-using agent that knows nothing of tapes, for ``tracetape run`` (offline, no SDK).

    $ tracetape run --tape runs/demo.jsonl --mode record --hook none -- \\
        python examples/taped_agent.py --task flaky-test
    $ tracetape run --tape runs/demo.jsonl --hook none -- \\
        python examples/taped_agent.py --task flaky-test

The second run replays: no tool runs ("calling the issue tracker" is not printed) and the
answer is the recorded one. ``--task other`` in replay exits 3 with the changed argument.
"""

from __future__ import annotations

import argparse
import sys

import tracetape


@tracetape.tool(effect="read")
def search_issues(query: str, limit: int = 5) -> list[dict[str, object]]:
    """Search the issue tracker (a real agent would call an API here)."""
    print("calling the issue tracker", file=sys.stderr)
    return [{"id": 412, "title": f"CI fails on {query}"}][:limit]


@tracetape.tool(effect="write")
def comment(issue: int, text: str) -> str:
    """Post a comment on an issue."""
    print(f"posting to #{issue}", file=sys.stderr)
    return f"commented on #{issue}: {text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", required=True)
    args = parser.parse_args()
    region = tracetape.env("AGENT_REGION", "eu")
    hits = search_issues(args.task)
    print(comment(int(str(hits[0]["id"])), f"[{region}] looking into {args.task}"))


if __name__ == "__main__":
    main()
