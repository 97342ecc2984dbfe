"""``python -m examples.agent --task "..." --tape runs/x.jsonl --mode record|replay|...``."""

from __future__ import annotations

import argparse
import sys
import time

from tracetape import Mode, ReplayMiss, Tape, TapeError

from . import ScriptedModel, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.agent", description=__doc__)
    parser.add_argument("--task", required=True)
    parser.add_argument("--tape", required=True, help="cassette path")
    parser.add_argument("--mode", default="record", choices=[m.value for m in Mode])
    args = parser.parse_args(argv)
    model = ScriptedModel()
    start = time.perf_counter()
    try:
        with Tape(args.tape, mode=args.mode) as tape:
            answer = run(args.task, tape, model)
    except ReplayMiss as miss:
        print(f"ReplayMiss: {miss}", file=sys.stderr)
        return 3
    except TapeError as exc:  # a missing cassette, or one that record must not overwrite
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ms = (time.perf_counter() - start) * 1000
    print(answer)
    print(f"[{tape.mode}] {model.calls} model calls, {ms:.0f} ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
