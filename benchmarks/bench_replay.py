"""Replay overhead per decision and cassette load time, as ratios against baselines run here.

1. A 200-step agent run whose message list grows each step (~350 bytes a step, five tool
   schemas), replayed with the seed's reference ``Tape`` and with tracetape's. Target: tracetape's
   tape time per decision at most 1.2x the reference's, while redacting and keeping digests.
2. A 100,000-record cassette loaded by ``Tape(mode="replay")`` against a bare JSONL parse of the
   same file with orjson. Target: at most 1.5x.
3. Record-mode keying of a conversation growing to ~70 KB against the seed's keying (reported).
4. Match rules: the per-call key cost (replay's and a recording's) of a 50-step conversation
   whose prompts carry a UUID and a timestamp, under three masks (``uuid``, ``ts``,
   ``hex-id``) against no rules, on the same payloads in the same run. Target: at most 1.3x.

Run: ``python benchmarks/bench_replay.py``. Figures are medians of repeated runs.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._seed import Tape as SeedTape
from tests._seed import _key as seed_key

from tracetape import Tape
from tracetape.canonical import canonical_json
from tracetape.formats.cassette import new_header
from tracetape.stores.file import CassetteWriter

STEPS = 200
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"Tool {i}: looks things up in the issue tracker and returns rows.",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}, "page": {"type": "integer"}},
                "required": ["q"],
            },
        },
    }
    for i in range(5)
]


def agent(tape: Any) -> int:
    """The seed's loop shape: an llm call on the growing conversation, then a tool call."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Find the flaky tests. " * 4}]
    calls = 0
    for step in range(1, STEPS + 1):
        decision = tape.call(
            "llm",
            {
                "messages": msgs,
                "tools": TOOLS,
                "params": {"model": "m", "temperature": 0},
                "step": step,
            },
            lambda step=step: {
                "content": f"Looking at page {step} of the results now.",
                "tool": "tool_1",
                "args": {"q": "flaky", "page": step},
            },
        )
        result = tape.call(
            "tool",
            {"name": decision["tool"], "args": decision["args"], "step": step},
            lambda step=step: {"rows": [f"test_{step}_{j} failed 3 of 10 runs" for j in range(5)]},
        )
        msgs = [
            *msgs,
            {"role": "assistant", "content": decision["content"]},
            {"role": "tool", "name": decision["tool"], "content": orjson.dumps(result).decode()},
        ]
        calls += 2
    return calls


class NoTape:
    def call(self, kind: str, payload: Any, do: Callable[[], Any]) -> Any:
        return do()


def timed(fn: Callable[[Any], Any], repeat: int, setup: Callable[[], Any] = lambda: None) -> float:
    """Median wall time of ``fn(setup())`` over ``repeat`` runs, ``setup`` left out."""
    times = []
    for _ in range(repeat):
        arg = setup()
        gc.collect()
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_replay(folder: Path, repeat: int = 15) -> dict[str, float]:
    seed_path, ours_path = folder / "seed.jsonl", folder / "ours.jsonl"
    agent(SeedTape(str(seed_path), "record"))
    with Tape(ours_path, mode="record") as tape:
        agent(tape)
    decisions = 2 * STEPS
    # Interleave the three so drift in machine load hits them alike; loading is left out.
    bare_t: list[float] = []
    seed_t: list[float] = []
    ours_t: list[float] = []
    for _ in range(repeat):
        bare_t.append(timed(agent, 1, NoTape))
        seed_t.append(timed(agent, 1, lambda: SeedTape(str(seed_path), "replay")))
        ours_t.append(timed(agent, 1, lambda: Tape(ours_path, mode="replay")))
    bare, seed, ours = (statistics.median(t) for t in (bare_t, seed_t, ours_t))
    return {
        "seed_us_per_decision": (seed - bare) / decisions * 1e6,
        "ours_us_per_decision": (ours - bare) / decisions * 1e6,
        "ratio": (ours - bare) / (seed - bare),
        "cassette_kb": ours_path.stat().st_size / 1024,
    }


def bench_load(folder: Path, records: int = 100_000, repeat: int = 7) -> dict[str, float]:
    path = folder / "big.jsonl"
    writer = CassetteWriter(path, new_header())
    for i in range(records):
        step = i // 2
        writer.write(
            {
                "key": f"tool:{i:016x}",
                "kind": "tool",
                "step": step,
                "ms": 1.25,
                "effect": "read",
                "out": {"rows": [f"row {i}", "ok"], "total": i},
                "input": {"name": "search", "args": {"q": f"query {i}", "page": 1}, "step": step},
                "digests": {"args": "0" * 16, "name": "1" * 16, "step": "2" * 16},
            }
        )
    writer.close()

    def bare(_: None) -> None:
        data = path.read_bytes()
        [orjson.loads(line) for line in data.split(b"\n") if line]

    bare_s = timed(bare, repeat)
    ours_s = timed(lambda _: Tape(path, mode="replay"), repeat)
    return {"bare_ms": bare_s * 1e3, "ours_ms": ours_s * 1e3, "ratio": ours_s / bare_s}


def bench_record_keying(steps: int = 50, size: int = 1400, repeat: int = 7) -> dict[str, float]:
    """Keying in record mode (redaction included) of a conversation growing to ~70 KB, mean
    per call, against the seed's keying (json.dumps + SHA-256, no redaction) of the same
    payloads. The prompts say "token" and the params hold max_tokens, so the redactor cannot
    skip them by a cheap test: every string is walked (each distinct one scanned once)."""

    def payloads() -> list[dict[str, Any]]:
        messages: list[dict[str, str]] = [{"role": "system", "content": "You are careful."}]
        out = []
        for i in range(steps):
            out.append({"messages": messages, "tools": [{"name": "search"}],
                        "params": {"model": "m", "max_tokens": 256}, "step": i + 1})  # fmt: skip
            observation = (f"observation {i}: " + "log line token " * 200)[:size]
            messages = [*messages, {"role": "assistant", "content": f"thought {i}"},
                        {"role": "user", "content": observation}]  # fmt: skip
        return out

    batch = payloads()
    seed_t, ours_t = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        for p in batch:
            seed_key("llm", p)
        seed_t.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            tape = Tape(Path(tmp) / "r.jsonl", mode="record")
            start = time.perf_counter()
            for p in batch:
                tape.prepare("llm", p, finite=True)
            ours_t.append(time.perf_counter() - start)
            tape.close()
    seed, ours = statistics.median(seed_t) / steps, statistics.median(ours_t) / steps
    kb = len(canonical_json(batch[-1])) / 1024
    return {"seed_us": seed * 1e6, "ours_us": ours * 1e6, "ratio": ours / seed, "kb": kb}


def bench_match_rules(steps: int = 50, repeat: int = 9) -> dict[str, float]:
    """Per-call keying with three masks against none, replay's path and a recording's."""
    from tracetape import Match

    def payloads() -> list[dict[str, Any]]:
        messages: list[dict[str, str]] = [{"role": "system", "content": "You are careful."}]
        out = []
        for i in range(steps):
            stamp = f"request {uuid.UUID(int=i)} at 2026-12-04T20:{i % 60:02d}:00.{i:06d}"
            messages = [*messages, {"role": "user", "content": f"{stamp}: " + "look " * 60},
                        {"role": "assistant", "content": f"thought {i} " + "ok " * 40}]  # fmt: skip
            out.append({"messages": messages, "tools": [{"name": "search"}],
                        "params": {"model": "m", "temperature": 0}, "step": i + 1})  # fmt: skip
        return out

    batch = payloads()
    rules = Match(mask=["uuid", "ts", "hex-id"])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, match in (("plain", None), ("masked", rules)):
            with Tape(folder / f"{name}.jsonl", mode="record", match=match) as tape:
                for p in batch:
                    tape.call("llm", p, lambda: "ok")
        times: dict[str, list[float]] = {}
        for _ in range(repeat):  # interleaved, so that load drift hits all alike
            for name in ("plain", "masked"):
                for mode in ("replay", "record"):
                    path = folder / f"{name}.jsonl"
                    target = path if mode == "replay" else folder / f"{name}-again.jsonl"
                    match = rules if name == "masked" else None
                    tape = Tape(target, mode="replay" if mode == "replay" else "rewrite",
                                match=match)  # fmt: skip
                    start = time.perf_counter()
                    for p in batch:
                        tape.prepare("llm", p, finite=True)
                    times.setdefault(f"{name}_{mode}", []).append(time.perf_counter() - start)
                    tape.close(failed=True)
    us = {k: statistics.median(v) / steps * 1e6 for k, v in times.items()}
    return {
        **us,
        "replay_ratio": us["masked_replay"] / us["plain_replay"],
        "record_ratio": us["masked_record"] / us["plain_record"],
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        r = bench_replay(folder)
        print(
            f"replay, 200-step growing run: reference {r['seed_us_per_decision']:.1f} us/decision, "
            f"tracetape {r['ours_us_per_decision']:.1f} us/decision -> ratio {r['ratio']:.2f}x "
            f"(target <= 1.20x; cassette {r['cassette_kb']:.0f} KB)"
        )
        lo = bench_load(folder)
        print(
            f"load, 100k records: bare orjson parse {lo['bare_ms']:.0f} ms, "
            f"Tape(mode='replay') {lo['ours_ms']:.0f} ms -> ratio {lo['ratio']:.2f}x "
            "(target <= 1.50x)"
        )
        k = bench_record_keying()
        print(
            f"record-mode keying, conversation growing to {k['kb']:.0f} KB: seed (no redaction) "
            f"{k['seed_us']:.0f} us/call, tracetape (redacting) {k['ours_us']:.0f} us/call -> "
            f"ratio {k['ratio']:.2f}x (reported)"
        )
        m = bench_match_rules()
        print(
            f"match rules, 50-step conversation, three masks against none: replay keying "
            f"{m['plain_replay']:.0f} -> {m['masked_replay']:.0f} us/call (ratio "
            f"{m['replay_ratio']:.2f}x), record keying {m['plain_record']:.0f} -> "
            f"{m['masked_record']:.0f} us/call (ratio {m['record_ratio']:.2f}x) (target <= 1.30x)"
        )


if __name__ == "__main__":
    main()
