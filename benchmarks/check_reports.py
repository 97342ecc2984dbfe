"""Prove that every user-visible ``tracetape`` report is byte-identical across a refactor.

* ``corpus DIR`` writes a deterministic corpus of inputs into DIR with the standard library
  only (tracetape is never imported, so every version gets the same bytes): seed JSONL traces,
  span records, OTLP/JSON, tracetape cassettes (format 1 recorded once with the baseline and
  embedded below, format 0, torn, corrupt, unknown version...) and two pyproject configs;
* ``run DIR --out MANIFEST`` runs every report command (``show``, ``verify``, ``export``,
  ``diff``, ``check``, ``summarize``; never ``run`` nor ``summarize --llm``) over it, each a
  fresh ``PY -m tracetape`` subprocess (cwd: a private copy of DIR, so that runs at the same
  time never share ``out/``; COLUMNS=120, NO_COLOR=1, TERM=dumb, stdin /dev/null, 2 at a
  time), and records exit code, stdout, stderr and any ``-o`` file;
* ``compare BEFORE AFTER`` prints each command whose results differ, with a unified diff, and
  exits 1 if any do.

Normalized before storing: the corpus path (``<DIR>``), the imported package's folder
(``<PKG>``), and the location line Python prints for a warning (``<PKG>/x.py:142: TapeWarning:
...`` plus the echoed source line), which names internals that a refactor moves.

    python benchmarks/check_reports.py corpus /tmp/corpus
    python benchmarks/check_reports.py run /tmp/corpus --pythonpath ../baseline/src --out before.json
    python benchmarks/check_reports.py run /tmp/corpus --out after.json
    python benchmarks/check_reports.py compare before.json after.json
"""
# ruff: noqa: E501 - the embedded cassette lines are kept verbatim

from __future__ import annotations

import argparse
import difflib
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_diff import generate  # the benchmark's trace generator (stdlib and orjson only)

# Recorded with the baseline's Tape(path, mode="record", harness_sha="fixed"), then "created"
# and every "ms" set to fixed values. Record 10 holds a beyond-64-bit int ("bigint": true).
CASSETTE_A = r"""{"tracetape":1,"version":"0.1.0","created":"2026-08-31T09:00:00Z","harness_sha":"fixed","redact_key_id":"adc29479b274"}
{"seq":1,"key":"env:d5d8f88885b6d708","kind":"env","ms":37.5,"effect":"read","out":{"TT_REGION":"eu-west-1"},"input":{"name":"TT_REGION"},"digests":{"name":"c150e1ebc4eb3639"}}
{"seq":2,"key":"llm:9cba5cbeb3a6ad25","kind":"llm","step":1,"ms":75.0,"effect":"read","out":{"content":"calling read_file","tool":"read_file","args":{"path":"tests/test_io.py"},"usage":{"prompt_tokens":102,"completion_tokens":21}},"input":{"messages":[{"content":"You fix CI.","role":"system"},{"content":"fix tests/test_io.py","role":"user"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":1,"tools":[{"name":"read_file"},{"name":"write_file"},{"name":"deploy"}]},"digests":{"messages":"117aa56aa180ca4c","messages[]":["30039c9e839bb6f6","c98615207b5eb3c0"],"params":"c780b50fb25bb895","step":"6b86b273ff34fce1","tools":"789b1c14f8248f59","tools[]":["246105683a6d3a9d","d4d40fe368f53ed6","e073292a2775c102"]}}
{"seq":3,"key":"tool:19ed1418f711d52d","kind":"tool","step":1,"ms":112.5,"effect":"read","out":{"text":"v1"},"input":{"args":{"path":"tests/test_io.py"},"name":"read_file","step":1},"digests":{"args":"1f990910f118a972","name":"6913ac2ef1d90958","step":"6b86b273ff34fce1"}}
{"seq":4,"key":"llm:55943ab562f959cd","kind":"llm","step":2,"ms":150.0,"effect":"read","out":{"content":"calling write_file","tool":"write_file","args":{"path":"tests/test_io.py","content":"patch-0"},"usage":{"prompt_tokens":204,"completion_tokens":22}},"input":{"messages":[{"content":"calling read_file","role":"assistant"},{"content":"{\"text\": \"v1\"}","name":"read_file","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":2,"tools":[]},"digests":{"messages":"f4f991ab1d2a868e","messages[]":["4da1c965bc7fab8c","5a332f6c306e713e"],"params":"c780b50fb25bb895","step":"d4735e3a265e16ee","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":2,"tools":3}}
{"seq":5,"key":"tool:f411a62c00d74c29","kind":"tool","step":2,"ms":187.5,"effect":"write","out":{"ok":true},"input":{"args":{"content":"patch-0","path":"tests/test_io.py"},"name":"write_file","step":2},"digests":{"args":"2523594b3b794467","name":"1377afcca6999f99","step":"d4735e3a265e16ee"}}
{"seq":6,"key":"llm:5dd902fb61f12a7d","kind":"llm","step":3,"ms":225.0,"effect":"read","out":{"content":"calling read_file","tool":"read_file","args":{"path":"tests/test_io.py"},"usage":{"prompt_tokens":306,"completion_tokens":23}},"input":{"messages":[{"content":"calling write_file","role":"assistant"},{"content":"{\"ok\": true}","name":"write_file","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":3,"tools":[]},"digests":{"messages":"0dda56ef5659d8cf","messages[]":["4a8a9645b2682e74","4b2895a38890f7c5"],"params":"c780b50fb25bb895","step":"4e07408562bedb8b","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":4,"tools":3}}
{"seq":7,"key":"tool:66ed01e61aa154f8","kind":"tool","step":3,"ms":262.5,"effect":"read","out":{"text":"v3"},"input":{"args":{"path":"tests/test_io.py"},"name":"read_file","step":3},"digests":{"args":"1f990910f118a972","name":"6913ac2ef1d90958","step":"4e07408562bedb8b"}}
{"seq":8,"key":"llm:4acbde23057bb57e","kind":"llm","step":4,"ms":300.0,"effect":"read","out":{"content":"calling deploy","tool":"deploy","args":{"env":"staging","id":7},"usage":{"prompt_tokens":408,"completion_tokens":24}},"input":{"messages":[{"content":"calling read_file","role":"assistant"},{"content":"{\"text\": \"v3\"}","name":"read_file","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":4,"tools":[]},"digests":{"messages":"91419810b8fac27c","messages[]":["4da1c965bc7fab8c","d64d3cb1911d118d"],"params":"c780b50fb25bb895","step":"4b227777d4dd1fc6","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":6,"tools":3}}
{"seq":9,"key":"tool:bba112a513bdf75d","kind":"tool","step":4,"ms":337.5,"effect":"irreversible","out":{"deployed":false},"input":{"args":{"env":"staging","id":7},"name":"deploy","step":4},"digests":{"args":"73d37e9960e084b6","name":"7572c9a4c20287d2","step":"4b227777d4dd1fc6"}}
{"seq": 10, "key": "tool:bb72ac3ec2acdf52", "kind": "tool", "step": 5, "ms": 375.0, "effect": "read", "out": {"rows": 1180591620717411303424}, "input": {"args": {"table": "events"}, "name": "count_rows", "step": 5}, "digests": {"args": "eb73880d16389ff2", "name": "3a1310623a11540f", "step": "ef2d127de37b942b"}, "bigint": true}
{"seq":11,"key":"llm:0b161be2e696e5f2","kind":"llm","step":5,"ms":412.5,"effect":"read","out":{"content":"done","tool":null,"usage":{"input_tokens":900,"output_tokens":12}},"input":{"messages":[{"content":"calling deploy","role":"assistant"},{"content":"{\"deployed\": false}","name":"deploy","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":5,"tools":[]},"digests":{"messages":"248b190f0767c2a0","messages[]":["d2b059cbe4f848e0","602a12022b82f2d8"],"params":"c780b50fb25bb895","step":"ef2d127de37b942b","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":8,"tools":3}}
"""
CASSETTE_B = r"""{"tracetape":1,"version":"0.1.0","created":"2026-08-31T09:00:00Z","harness_sha":"fixed","redact_key_id":"adc29479b274"}
{"seq":1,"key":"env:d5d8f88885b6d708","kind":"env","ms":37.5,"effect":"read","out":{"TT_REGION":"eu-west-1"},"input":{"name":"TT_REGION"},"digests":{"name":"c150e1ebc4eb3639"}}
{"seq":2,"key":"llm:9cba5cbeb3a6ad25","kind":"llm","step":1,"ms":75.0,"effect":"read","out":{"content":"calling read_file","tool":"read_file","args":{"path":"tests/test_io.py"},"usage":{"prompt_tokens":102,"completion_tokens":21}},"input":{"messages":[{"content":"You fix CI.","role":"system"},{"content":"fix tests/test_io.py","role":"user"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":1,"tools":[{"name":"read_file"},{"name":"write_file"},{"name":"deploy"}]},"digests":{"messages":"117aa56aa180ca4c","messages[]":["30039c9e839bb6f6","c98615207b5eb3c0"],"params":"c780b50fb25bb895","step":"6b86b273ff34fce1","tools":"789b1c14f8248f59","tools[]":["246105683a6d3a9d","d4d40fe368f53ed6","e073292a2775c102"]}}
{"seq":3,"key":"tool:19ed1418f711d52d","kind":"tool","step":1,"ms":112.5,"effect":"read","out":{"text":"v2"},"input":{"args":{"path":"tests/test_io.py"},"name":"read_file","step":1},"digests":{"args":"1f990910f118a972","name":"6913ac2ef1d90958","step":"6b86b273ff34fce1"}}
{"seq":4,"key":"llm:502e30b64e321e9e","kind":"llm","step":2,"ms":150.0,"effect":"read","out":{"content":"calling write_file","tool":"write_file","args":{"path":"tests/test_io.py","content":"patch-1"},"usage":{"prompt_tokens":204,"completion_tokens":22}},"input":{"messages":[{"content":"calling read_file","role":"assistant"},{"content":"{\"text\": \"v2\"}","name":"read_file","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":2,"tools":[]},"digests":{"messages":"7810adde8beb0a5c","messages[]":["4da1c965bc7fab8c","02d8ad9861b633d4"],"params":"c780b50fb25bb895","step":"d4735e3a265e16ee","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":2,"tools":3}}
{"seq":5,"key":"tool:b17007cb18a17a39","kind":"tool","step":2,"ms":187.5,"effect":"write","out":{"ok":true},"input":{"args":{"content":"patch-1","path":"tests/test_io.py"},"name":"write_file","step":2},"digests":{"args":"95510129ee60fd3c","name":"1377afcca6999f99","step":"d4735e3a265e16ee"}}
{"seq":6,"key":"llm:835db429a1807f4f","kind":"llm","step":3,"ms":225.0,"effect":"read","out":{"content":"calling read_file","tool":"read_file","args":{"path":"tests/test_io.py"},"usage":{"prompt_tokens":306,"completion_tokens":23}},"input":{"messages":[{"content":"calling write_file","role":"assistant"},{"content":"{\"ok\": true}","name":"write_file","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":3,"tools":[]},"digests":{"messages":"9e8cfd52d8ad8ac4","messages[]":["4a8a9645b2682e74","4b2895a38890f7c5"],"params":"c780b50fb25bb895","step":"4e07408562bedb8b","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":4,"tools":3}}
{"seq":7,"key":"tool:66ed01e61aa154f8","kind":"tool","step":3,"ms":262.5,"effect":"read","out":{"text":"v4"},"input":{"args":{"path":"tests/test_io.py"},"name":"read_file","step":3},"digests":{"args":"1f990910f118a972","name":"6913ac2ef1d90958","step":"4e07408562bedb8b"}}
{"seq":8,"key":"llm:20c201d8d5b52bcb","kind":"llm","step":4,"ms":300.0,"effect":"read","out":{"content":"calling deploy","tool":"deploy","args":{"env":"staging","id":7},"usage":{"prompt_tokens":408,"completion_tokens":24}},"input":{"messages":[{"content":"calling read_file","role":"assistant"},{"content":"{\"text\": \"v4\"}","name":"read_file","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":4,"tools":[]},"digests":{"messages":"e103f6a88c378c09","messages[]":["4da1c965bc7fab8c","087d51f2e3420820"],"params":"c780b50fb25bb895","step":"4b227777d4dd1fc6","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":6,"tools":3}}
{"seq":9,"key":"tool:bba112a513bdf75d","kind":"tool","step":4,"ms":337.5,"effect":"irreversible","out":{"deployed":false},"input":{"args":{"env":"staging","id":7},"name":"deploy","step":4},"digests":{"args":"73d37e9960e084b6","name":"7572c9a4c20287d2","step":"4b227777d4dd1fc6"}}
{"seq": 10, "key": "tool:bb72ac3ec2acdf52", "kind": "tool", "step": 5, "ms": 375.0, "effect": "read", "out": {"rows": 1180591620717411303425}, "input": {"args": {"table": "events"}, "name": "count_rows", "step": 5}, "digests": {"args": "eb73880d16389ff2", "name": "3a1310623a11540f", "step": "ef2d127de37b942b"}, "bigint": true}
{"seq":11,"key":"llm:12654eefd8bf66ec","kind":"llm","step":5,"ms":412.5,"effect":"read","out":{"content":"done","tool":null,"usage":{"input_tokens":900,"output_tokens":12}},"input":{"messages":[{"content":"calling deploy","role":"assistant"},{"content":"{\"deployed\": false}","name":"deploy","role":"tool"}],"params":{"model":"gpt-4o-mini","temperature":0},"step":5,"tools":[]},"digests":{"messages":"f1c6891d767f778d","messages[]":["d2b059cbe4f848e0","602a12022b82f2d8"],"params":"c780b50fb25bb895","step":"ef2d127de37b942b","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":8,"tools":3}}
"""
CASSETTE_NOINPUT = r"""{"tracetape":1,"version":"0.1.0","created":"2026-08-31T09:00:00Z","harness_sha":"fixed","redact_key_id":"adc29479b274"}
{"seq":1,"key":"env:d5d8f88885b6d708","kind":"env","ms":37.5,"effect":"read","out":{"TT_REGION":"eu-west-1"},"digests":{"name":"c150e1ebc4eb3639"}}
{"seq":2,"key":"llm:9cba5cbeb3a6ad25","kind":"llm","step":1,"ms":75.0,"effect":"read","out":{"content":"calling read_file","tool":"read_file","args":{"path":"tests/test_io.py"},"usage":{"prompt_tokens":102,"completion_tokens":21}},"digests":{"messages":"117aa56aa180ca4c","messages[]":["30039c9e839bb6f6","c98615207b5eb3c0"],"params":"c780b50fb25bb895","step":"6b86b273ff34fce1","tools":"789b1c14f8248f59","tools[]":["246105683a6d3a9d","d4d40fe368f53ed6","e073292a2775c102"]}}
{"seq":3,"key":"tool:19ed1418f711d52d","kind":"tool","step":1,"ms":112.5,"effect":"read","out":{"text":"v1"},"digests":{"args":"1f990910f118a972","name":"6913ac2ef1d90958","step":"6b86b273ff34fce1"}}
{"seq":4,"key":"llm:55943ab562f959cd","kind":"llm","step":2,"ms":150.0,"effect":"read","out":{"content":"calling write_file","tool":"write_file","args":{"path":"tests/test_io.py","content":"patch-0"},"usage":{"prompt_tokens":204,"completion_tokens":22}},"digests":{"messages":"f4f991ab1d2a868e","messages[]":["4da1c965bc7fab8c","5a332f6c306e713e"],"params":"c780b50fb25bb895","step":"d4735e3a265e16ee","tools":"789b1c14f8248f59","tools[]":[]},"base":{"messages":2,"tools":3}}
{"seq":5,"key":"tool:f411a62c00d74c29","kind":"tool","step":2,"ms":187.5,"effect":"write","out":{"ok":true},"digests":{"args":"2523594b3b794467","name":"1377afcca6999f99","step":"d4735e3a265e16ee"}}
"""  # store_inputs=False: digests, no input

Record = dict[str, Any]
Args = tuple[str, ...]
Cmd = tuple[str, Args]  # (cwd below DIR, the arguments after "-m tracetape")
TS = "2026-08-31T09:{:02d}:{:02d}Z"


def _jsonl(records: list[Record]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _caller() -> Callable[..., Record]:
    """A seed-JSONL record maker with its own clock for ``ts`` and ``tokens``."""
    clock = itertools.count(1)

    def call(run: str, step: int, tool: str, args: Any, out: str, **extra: Any) -> Record:
        n = next(clock)
        rec = {"run_id": run, "step": step, "tool": tool, "args": args, "output_sha": out}
        rec["tokens"] = extra.pop("tokens", 100 + n % 50)
        return {**rec, "ts": TS.format(n // 60 % 60, n % 60), **extra}

    return call


def _big(lines: int, seed: int, prefix: str) -> list[str]:
    """Many runs over a shared pool of calls: ``bench_diff.py``'s generator, smaller."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        generate(path, lines, seed, prefix)
        return path.read_text().splitlines(keepends=True)


def _value(v: Any) -> Record:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": v if isinstance(v, str) else json.dumps(v)}


def _span(trace: str, sid: str, start: int, ms: int, attrs: Record) -> Record:
    t0 = 1788166800_000_000_000 + start * 1_000_000
    return {"traceId": trace * 16, "spanId": f"{sid:0>16}", "parentSpanId": "00000000000000aa",
            "name": attrs.get("gen_ai.operation.name", "span"), "kind": 1, "startTimeUnixNano": str(t0),
            "endTimeUnixNano": str(t0 + ms * 1_000_000),
            "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()]}  # fmt: skip


def _chat(trace: str, sid: str, start: int, msgs: list[Any], out: Any) -> Record:
    return _span(trace, sid, start, 300, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                 "gen_ai.conversation.id": "conv-1", "gen_ai.input.messages": json.dumps(msgs), "gen_ai.output.messages": json.dumps(out),
                 "gen_ai.usage.input_tokens": 40 * len(msgs), "gen_ai.usage.output_tokens": 9})  # fmt: skip


def _tool(trace: str, sid: str, start: int, call: tuple[str, Any, Any, str]) -> Record:
    name, args, result, effect = call
    return _span(trace, sid, start, 50, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                 "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result,
                 "tracetape.effect": effect, "tracetape.retry": False, "tracetape.tags": ["ci", 2]})  # fmt: skip


def _otlp(spans: list[Record]) -> Record:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def _seed0(kind: str, payload: Any, ms: float, out: Any) -> Record:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    key = f"{kind}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    return {"key": key, "kind": kind, "ms": ms, "out": out}


# fmt: off
def corpus_files() -> dict[str, str]:
    """Every corpus file by name; the same text whatever is installed."""
    c, f = _caller(), {}
    q = {"q": "broken:true", "page": 1}
    f["run_0042.jsonl"] = _jsonl([
        c("run_0042", 1, "search_issues", q, "a1b2c3", tokens=812), c("run_0042", 2, "search_issues", q, "a1b2c3", tokens=812),
        c("run_0042", 3, "read_file", {"path": "src/app.py"}, "f00d01", effect="read"),
        c("run_0042", 3, "write_file", {"path": "src/app.py", "content": "fix"}, "w1", effect="write"),
        c("run_0042", 4, "run_tests", {"target": "tests/"}, "t1", effect="read", ms=812.5)])
    f["run_0043.jsonl"] = _jsonl([
        c("run_0043", 1, "search_issues", q, "d4e5f6", tokens=817),
        c("run_0043", 2, "read_file", {"path": "src/app.py"}, "f00d01", effect="read"),
        c("run_0043", 2, "write_file", {"path": "src/app.py", "content": "other"}, "w2", effect="write"),
        c("run_0043", 3, "read_file", {"path": "src/app.py"}, "f00d02", effect="read"),
        c("run_0043", 4, "run_tests", {"target": "tests/"}, "t2", effect="read", span_id="s5", parent_id="s0")])
    plan = [("ls", {"path": "."}), ("read_file", {"path": "setup.cfg"}), ("grep", {"pattern": "TODO"}),
            ("read_file", {"path": "src/x.py"}), ("write_file", {"path": "src/x.py", "content": "y"}), ("run_tests", {"k": "x"})]
    runs = [[c(r, i // 2 + 1, t, {"path": "src/z.py"} if (r, i) == ("r2", 3) else a, f"o{i}" if r != "r3" or i < 4 else f"o{i}x")
             for i, (t, a) in enumerate(plan)] for r in ("r1", "r2", "r3")]
    f["runs.jsonl"] = _jsonl([run[i] for i in range(len(plan)) for run in runs])  # interleaved line by line
    vol = []
    for r, n in (("v1", 1), ("v2", 2)):
        rid = str(uuid.UUID(int=n * 7919))
        vol += [c(r, 1, "fetch", {"url": "https://api.example.com/items", "request_id": rid, "ts": f"2026-08-31T10:0{n}:00Z"}, "i1"),
                c(r, 1, "save", {"path": f"/tmp/tmp{n}x8q/out.txt", "note": f"req {rid} done", "nonce": n * 17}, "s1", effect="write"),
                c(r, 2, "auth", {"api_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789", "headers": {"Authorization": "Bearer eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl"}}, "k1"),
                c(r, 3, "lookup", {"session": f"sess-{n:04x}ab", "user": "ann" if n == 1 else "bob", "token": f"ghp_{'a' * 36}"}, "l1")]
    f["volatile.jsonl"] = _jsonl(vol)
    pat = [c("p1", 1, "read_file", {"path": "a.txt"}, "o1", effect="read")] * 2
    pat += [c("p1", 2, "fetch_url", {"url": "https://x/status"}, o, effect="read") for o in ("u1", "u2")]
    pat += [c("p1", 3, "write_file", {"path": "a.txt", "content": "x"}, "wa", effect="write"), c("p1", 3, "read_file", {"path": "a.txt"}, "o2", effect="read")]
    pat += [c("p1", 4, "send_email", {"to": "ops", "id": "m1"}, "e1", effect="irreversible")] * 2
    pat += [c("p1", 5, "update_db", {"sql": "UPDATE t SET x=1"}, "d1", effect="write")]
    pat += [c("p1", 5, "query_db", {"sql": "SELECT x FROM t"}, o, effect="read") for o in ("q1", "q2")]
    pat += [c("p1", 6, "list_dir", {"path": f"dir{i}"}, f"ls{i}", effect="read") for i in range(12)]
    pat += [c("p1", 7, "search", {"q": f"term {i}"}, f"h{i}") for i in range(5)]
    pat += [c("p1", 8, "read_file", {"path": "a.txt"}, "o2", effect="read"), c("p2", 1, "read_file", {"path": "a.txt"}, "o9", effect="read"),
            c("p2", 2, "fetch_url", {"url": "https://x/status"}, "u3", effect="read"), c("p2", 2, "lookup", {"id": 1}, "l1"), c("p2", 3, "lookup", {"id": 1}, "l2")]
    f["patterns.jsonl"] = _jsonl(pat)
    bud = [c("b1", i + 1, "summarize", {"doc": i}, f"s{i}", tokens=90_000) for i in range(3)]
    bud += [c("b2", i + 1, "step", {"n": i}, f"x{i}") for i in range(52)] + [c("b3", i + 1, "step", {"n": i}, f"x{i}") for i in range(50)]
    bud += [c("b4", i // 10 + 1, f"t{i % 10}", {"n": i}, "y") for i in range(501)] + [c("b5", i + 1, "poll", {"job": 7}, "pending") for i in range(4)]
    f["budget.jsonl"] = _jsonl(bud)
    big = _big(36_000, 7, "big")  # over 8 MiB, many runs
    f["big.jsonl"] = "".join(big)
    bad = list(big)
    bad[14_999], bad[20_000] = big[14_999][:40] + "\n", big[20_000].replace('"step":', '"step":"x","was":', 1)
    f["big_bad.jsonl"] = "".join(bad)
    good = f["run_0042.jsonl"].splitlines(keepends=True)
    f["bad.jsonl"] = "".join([*good[:2], '{"run_id": "run_0042", "step": 3, "tool"\n', '{"run_id": "run_0042", "step": 3, "tool": "x", "args": {}}\n',
                              good[2], '{"run_id": "run_0042", "step": "4", "tool": "x", "args": {}, "output_sha": "z"}\n',
                              '{"run_id": "run_0042", "step": 4, "tool": "x", "args": {}, "output_sha": "z", "effect": "delete"}\n', "[1, 2]\n", "\n", *good[3:]])
    f["mixed.jsonl"] = good[0] + '{"span_id": "s1", "tool_call": {"argv": ["ls"]}}\n' + good[1]
    f["pyrepr.jsonl"], f["unknown.jsonl"] = "{'run_id': 'run_0042', 'step': 1}\n", '{"event": "start", "at": 1}\n'
    f["empty.jsonl"], f["blank.jsonl"] = "", "\n\n"
    for name, n in (("spans_a.jsonl", 0), ("spans_b.jsonl", 1)):
        f[name] = _jsonl([
            {"span_id": "s1", "tool_call": {"argv": ["ls", "-la", f"/tmp/tmpq{n}w2e3"], "env_digest": "e1", "timeout": 30},
             "tool_result": {"stdout": "a\nb", "exit": 0}, "model_decision": {"tool_name": "shell", "reason": "look"}},
            {"span_id": "s2", "tool_call": {"argv": ["cat", "setup.cfg"]}, "tool_result": {"stdout": f"v{n}"}, "step": 2, "effect": "read"},
            {"span_id": 3, "model_decision": {"tool_name": "search", "args": {"q": "flaky"}}, "tool_result": None},
            {"span_id": "s4", "tool_call": {"name": "write", "args": {"path": "x"}}, "tool_result": "ok", "effect": "write", "tokens": 55, "ms": 3.5},
            {"span_id": "s5", "run_id": "sp-9", "tool_call": {"argv": ["make", "test" if n == 0 else "lint"]}, "tool_result": {"exit": n}},
            {"span_id": "s6", "trace_id": "t-9", "parent_id": "s5", "tool_call": {"argv": ["git", "status"]}, "tool_result": "clean", "step": 1}])
    msgs = [{"role": "user", "parts": [{"type": "text", "content": "fix the build"}]}]
    reply = [{"role": "assistant", "parts": [{"type": "tool_call", "name": "read_file"}]}]
    read, write = ("read_file", {"path": "setup.cfg"}, {"text": "v1"}, "read"), ("write_file", {"path": "setup.cfg"}, {"ok": True}, "write")
    doc = [_span("ab", "aa", 0, 900, {"gen_ai.operation.name": "invoke_agent"}), _chat("ab", "1", 1, msgs, reply),
           _tool("ab", "2", 310, read), _chat("ab", "3", 400, [*msgs, *reply], "done"), _tool("ab", "4", 720, write),
           _tool("cd", "5", 800, ("ping", {"host": "db"}, "pong", "read"))]
    f["otlp.json"] = json.dumps(_otlp(doc), indent=2) + "\n"
    lines = [_otlp([_chat("ef", "11", 1, msgs, reply), _tool("ef", "12", 310, (*read[:2], {"text": "v2"}, "read"))]),
             _otlp([_tool("ef", "13", 720, write)])]  # one document a line; spans ordered across them
    f["otlp_lines.jsonl"] = _jsonl(lines)
    f["otlp_bad.jsonl"] = _jsonl(lines[:1]) + "{not json\n" + _jsonl([_otlp([{"traceId": "ef" * 16, "name": "no span id"}]), lines[1]])
    a = CASSETTE_A.splitlines(keepends=True)
    f["cas_a.jsonl"], f["cas_b.jsonl"], f["cas_noinput.jsonl"] = CASSETTE_A, CASSETTE_B, CASSETTE_NOINPUT
    f["cas_torn.jsonl"] = "".join(a[:-1]) + a[-1][: len(a[-1]) // 2]
    f["cas_corrupt.jsonl"] = "".join([*a[:4], a[4][:60] + "\n", *a[5:]])
    f["cas_badbase.jsonl"] = "".join([*a[:4], *a[5:]])  # an llm record gone: the next one's base is wrong
    f["cas_reordered.jsonl"] = "".join([*a[:3], a[5], a[4], a[3], *a[6:]])
    f["cas_header_only.jsonl"] = a[0]
    f["cas_v9.jsonl"] = a[0].replace('"tracetape":1', '"tracetape":9').replace("0.1.0", "9.0.0") + "".join(a[1:])
    f["cas_badheader.jsonl"] = a[0].replace('"tracetape":1', '"tracetape":"1"') + "".join(a[1:])
    f["cas_notrecord.jsonl"] = a[0] + a[1] + '["not", "a", "record"]\n{"seq": 9, "kind": "tool", "out": 1}\n'
    hi, ls = [{"role": "user", "content": "hi"}], {"name": "ls", "args": {"path": "."}}
    f["cas_seed0.jsonl"] = _jsonl([
        _seed0("llm", {"messages": hi, "step": 1}, 812.4, {"content": "ls", "usage": {"total_tokens": 50}}),
        _seed0("tool", {**ls, "step": 1}, 3.2, ["a", "b"]),
        _seed0("llm", {"messages": [*hi, {"role": "tool", "content": "a b"}], "step": 2}, 640.0, {"content": "done"}),
        _seed0("tool", {**ls, "step": 2}, 2.9, ["a", "b", "c"])])
    f["cfg/pyproject.toml"] = (
        '[tool.tracetape.normalize]\nextra_volatile_keys = ["nonce"]\nmasks = { "sess-[0-9a-f]+" = "<session>" }\n\n'
        '[tool.tracetape.check]\nmax_repeats = 1\nmax_calls_per_step = 4\nexploration = 2\nresource_keys = ["path"]\n\n'
        '[tool.tracetape.severity]\nduplicate-call = "fatal"\nexternal-drift = "expected"\n')
    f["cfg_bad/pyproject.toml"] = '[tool.tracetape.severity]\nduplicate-call = "catastrophic"\n'
    return f


JSONL = ["run_0042.jsonl", "run_0043.jsonl", "runs.jsonl", "volatile.jsonl", "patterns.jsonl", "budget.jsonl", "big.jsonl"]
GOOD_CASSETTES = ["cas_a.jsonl", "cas_b.jsonl", "cas_noinput.jsonl", "cas_seed0.jsonl", "cas_torn.jsonl", "cas_reordered.jsonl"]
BAD_CASSETTES = ["cas_corrupt.jsonl", "cas_badbase.jsonl", "cas_header_only.jsonl", "cas_v9.jsonl", "cas_badheader.jsonl", "cas_notrecord.jsonl"]
OTHER = ["spans_a.jsonl", "spans_b.jsonl", "otlp.json", "otlp_lines.jsonl"]
BAD = ["big_bad.jsonl", "bad.jsonl", "mixed.jsonl", "otlp_bad.jsonl", "cas_corrupt.jsonl", "cas_notrecord.jsonl"]  # --skip-bad-lines reads them
ERRORS = ["pyrepr.jsonl", "unknown.jsonl", "empty.jsonl", "blank.jsonl", "missing.jsonl", "cas_badbase.jsonl", "cas_v9.jsonl", "cas_badheader.jsonl", "cas_header_only.jsonl"]
DIFFS: list[Args] = [
    ("run_0042.jsonl", "run_0043.jsonl"), ("run_0043.jsonl", "run_0042.jsonl"), ("runs.jsonl",), ("runs.jsonl", "--runs", "r1", "r3"),
    ("runs.jsonl", "--runs", "r2", "r1"), ("runs.jsonl", "runs.jsonl"), ("volatile.jsonl",), ("patterns.jsonl",),
    ("budget.jsonl", "--runs", "b2", "b3"), ("patterns.jsonl", "budget.jsonl"), ("big.jsonl", "--runs", "big_000001", "big_000002"),
    ("big.jsonl", "run_0042.jsonl"), ("spans_a.jsonl", "spans_b.jsonl"), ("otlp.json", "otlp_lines.jsonl"), ("cas_a.jsonl", "cas_b.jsonl"),
    ("cas_b.jsonl", "cas_a.jsonl"), ("cas_a.jsonl", "cas_noinput.jsonl"), ("cas_seed0.jsonl", "cas_a.jsonl"), ("cas_torn.jsonl", "cas_b.jsonl"),
    ("cas_a.jsonl", "run_0042.jsonl"), ("spans_a.jsonl", "otlp.json"), ("run_0042.jsonl", "spans_a.jsonl"),
    ("run_0042.jsonl", "run_0043.jsonl", "--input-format", "jsonl"), ("cas_a.jsonl", "cas_b.jsonl", "--input-format", "cassette")]
DIFF_ERRORS: list[Args] = [  # bad input: exit 2 (but BAD files read with --skip-bad-lines)
    ("bad.jsonl", "run_0042.jsonl"), ("big_bad.jsonl", "--runs", "big_000001", "big_000300"), ("mixed.jsonl", "run_0043.jsonl"),
    ("otlp_bad.jsonl", "otlp.json"), ("cas_corrupt.jsonl", "cas_b.jsonl"), ("cas_notrecord.jsonl", "cas_a.jsonl"),
    ("cas_badbase.jsonl", "cas_a.jsonl"), ("cas_v9.jsonl", "cas_a.jsonl"), ("cas_badheader.jsonl", "cas_a.jsonl"),
    ("cas_header_only.jsonl", "cas_a.jsonl"), ("missing.jsonl", "run_0042.jsonl"), ("run_0042.jsonl", "missing.jsonl"),
    ("empty.jsonl", "run_0042.jsonl"), ("blank.jsonl", "run_0042.jsonl"), ("pyrepr.jsonl", "run_0042.jsonl"),
    ("unknown.jsonl", "run_0042.jsonl"), ("runs.jsonl", "--runs", "r1", "nope"), ("run_0042.jsonl",),
    ("run_0042.jsonl", "run_0043.jsonl", "--input-format", "spans"), ("cas_a.jsonl", "cas_b.jsonl", "--input-format", "otlp"),
    ("run_0042.jsonl", "run_0043.jsonl", "--fail-on", "bogus"), ("runs.jsonl", "--runs", "r1"), ("run_0042.jsonl", "run_0043.jsonl", "-o", "nodir/x.txt")]
LIMITS = ["--max-repeats 0", "--max-calls-per-step 3", "--max-tokens 1000", "--max-steps 3", "--max-calls 5", "--max-repeats 1 --max-steps 60 --max-calls 600"]
# fmt: on


def commands() -> list[list[Cmd]]:
    """Every command, in two stages: the second reads the ``out/`` files the first wrote."""
    one: list[Args] = []
    two: list[Args] = []
    json_fmt = ("--format", "json")
    for cas in [*GOOD_CASSETTES, *BAD_CASSETTES, "run_0042.jsonl", "empty.jsonl", "missing.jsonl"]:
        stem = cas.split(".")[0]
        one += [(cmd, cas, *f) for cmd in ("show", "verify") for f in ((), json_fmt)]
        one += [("export", "--otel", cas), ("export", "--otel", cas, "-o", f"out/{stem}.otlp.json")]
    one += [("export", "--otel", "cas_a.jsonl", "--service-name", "ci"), ("export", "cas_a.jsonl")]
    for trace in [*JSONL, *GOOD_CASSETTES, *OTHER, *BAD, *ERRORS]:
        if trace in BAD or trace in ERRORS:  # the error, once per format
            one += [("check", trace), ("check", trace, *json_fmt)]
        if trace not in ERRORS:
            skip = ("--skip-bad-lines",) if trace in BAD else ()
            one += [("check", trace, *skip, *f) for f in ((), json_fmt)]
    for trace in ("patterns.jsonl", "budget.jsonl", "spans_a.jsonl", "cas_a.jsonl"):
        one += [("check", trace, *lim.split(), *f) for lim in LIMITS for f in ((), json_fmt)]
    for trace, fmt in (("run_0042.jsonl", "spans"), ("spans_a.jsonl", "spans"), ("otlp.json", "otlp"),
                       ("cas_a.jsonl", "jsonl"), ("cas_a.jsonl", "cassette"), ("otlp_lines.jsonl", "jsonl")):  # fmt: skip
        one.append(("check", trace, "--input-format", fmt))
    for bad in ("--max-repeats -1", "--input-format csv", "--format markdown"):
        one.append(("check", "run_0042.jsonl", *bad.split()))
    skipped = [(*s, "--skip-bad-lines") for s in DIFF_ERRORS if set(s) & set(BAD)]
    for i, spec in enumerate(DIFFS + skipped):
        md = f"out/diff{i}.md"
        one += [("diff", *spec, "--format", f) for f in ("text", "json", "markdown")]
        one += [("diff", *spec, "--fail-on", f) for f in ("suspicious", "never", "fatal")]
        one += [("diff", *spec, "--format", "json", "-o", f"out/diff{i}.json")]
        one += [("diff", *spec, "--format", "markdown", "--fail-on", "suspicious", "-o", md)]
        one += [("diff", *spec, "-o", f"out/diff{i}.txt")]
        two += [("summarize", f"out/diff{i}.json"), ("summarize", f"out/diff{i}.json", *json_fmt)]
    for spec in DIFF_ERRORS:
        one += [("diff", *spec), ("diff", *spec, *json_fmt)]
    one.append(("diff",))
    for other in ("cas_a.jsonl", "out/cas_b.otlp.json", "run_0042.jsonl"):
        two += [("diff", "out/cas_a.otlp.json", other, "--format", f) for f in ("text", "json")]
    two += [("check", "out/cas_seed0.otlp.json"), ("check", "out/cas_torn.otlp.json", *json_fmt)]
    for bad in ("missing.json", "run_0042.jsonl", "otlp.json", "empty.jsonl", "out/diff0.md"):
        two += [("summarize", bad), ("summarize", bad, *json_fmt)]
    cfg = [("check", "../patterns.jsonl"), ("check", "../volatile.jsonl", *json_fmt),
           ("diff", "../volatile.jsonl"), ("diff", "../volatile.jsonl", *json_fmt),
           ("diff", "../patterns.jsonl", "--format", "markdown"), ("diff", "../run_0042.jsonl", "../run_0043.jsonl")]  # fmt: skip
    configured = [(sub, args) for sub in ("cfg", "cfg_bad") for args in cfg]
    return [[("", args) for args in one] + configured, [("", args) for args in two]]


def _label(cmd: Cmd) -> str:
    return (f"(cd {cmd[0]}) " if cmd[0] else "") + shlex.join(cmd[1])


_WARNING = re.compile(r"^<PKG>/\S+:\d+: (\w+Warning: .*)\n(  .*\n)?", re.MULTILINE)


def run_all(corpus: Path, python: str, pythonpath: str | None) -> dict[str, Record]:
    """Run every command and return its normalized result by label.

    The commands run in a private copy of the corpus (beside it), so that runs going on at
    the same time never see each other's ``out/`` files, and the corpus is never written.
    """
    parent = corpus.absolute().parent
    with tempfile.TemporaryDirectory(prefix=f".{corpus.name}-", dir=parent) as tmp:
        root = Path(tmp) / "corpus"
        shutil.copytree(corpus, root, ignore=shutil.ignore_patterns("out"))
        (root / "out").mkdir()
        dirs = [str(corpus.resolve()), str(corpus.absolute()), tmp]
        return _run_in(root, dirs, python, pythonpath)


def _run_in(root: Path, dirs: list[str], python: str, pythonpath: str | None) -> dict[str, Record]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "TMPDIR") if k in os.environ}
    env |= {"COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb", "LANG": "C.UTF-8"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    probe = "import tracetape, pathlib; print(pathlib.Path(tracetape.__file__).parent)"
    pkg = subprocess.run([python, "-c", probe], env=env, capture_output=True, check=True).stdout
    subs = [(d, "<DIR>") for d in (str(root.resolve()), str(root), *dirs)]
    subs.append((pkg.decode().strip(), "<PKG>"))

    def clean(data: bytes) -> str:
        text = data.decode(errors="backslashreplace")
        for old, new in subs:
            text = text.replace(old, new)
        return _WARNING.sub(r"<warning> \1\n", text)

    def one(cmd: Cmd) -> tuple[str, Record]:
        cwd, args = root / cmd[0], cmd[1]
        out = cwd / args[args.index("-o") + 1] if "-o" in args else None
        if out is not None:
            out.unlink(missing_ok=True)
        done = subprocess.run([python, "-m", "tracetape", *args], cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, check=False)  # fmt: skip
        rec: Record = {"exit": done.returncode}
        rec |= {"stdout": clean(done.stdout), "stderr": clean(done.stderr)}
        if out is not None:
            rec["file"] = clean(out.read_bytes()) if out.exists() else None
        return _label(cmd), rec

    results: dict[str, Record] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for stage in commands():
            results.update(pool.map(one, stage))
    return results


def compare(before: dict[str, Record], after: dict[str, Record]) -> int:
    """Print every command whose results differ, with a short diff; return how many."""
    differ = 0
    for label in [*before, *(k for k in after if k not in before)]:
        a, b = before.get(label), after.get(label)
        if a == b:
            continue
        differ += 1
        print(f"DIFFERS: tracetape {label}")
        if a is None or b is None:
            print("  only in", "after" if a is None else "before")
            continue
        for field in ("exit", "stdout", "stderr", "file"):
            x, y = a.get(field), b.get(field)
            if x == y:
                continue
            if not isinstance(x, str) or not isinstance(y, str):
                print(f"  {field}: {x!r} -> {y!r}")
                continue
            old, new = x.splitlines(), y.splitlines()
            lines = list(difflib.unified_diff(old, new, "before", "after", n=1, lineterm=""))
            print("\n".join("  " + line for line in lines[:40]))
            if len(lines) > 40:
                print(f"  ... {len(lines) - 40} more diff lines")
    return differ


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("corpus", help="write the corpus into DIR").add_argument("dir", type=Path)
    run = sub.add_parser("run", help="run every command over the corpus in DIR")
    run.add_argument("dir", type=Path)
    run.add_argument("--out", type=Path, required=True, help="the manifest to write")
    run.add_argument("--python", default=sys.executable, help="the interpreter to run")
    run.add_argument("--pythonpath", help="PYTHONPATH for the commands (e.g. a baseline's src)")
    cmp = sub.add_parser("compare", help="compare two manifests; exit 1 if any command differs")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "corpus":
        files = corpus_files()
        for name, text in files.items():
            (args.dir / name).parent.mkdir(parents=True, exist_ok=True)
            (args.dir / name).write_bytes(text.encode())
        print(f"wrote {len(files)} files to {args.dir}")
        return 0
    if args.cmd == "run":
        start = time.monotonic()
        results = run_all(args.dir, args.python, args.pythonpath)
        seconds = time.monotonic() - start
        meta = {"python": args.python, "pythonpath": args.pythonpath, "seconds": round(seconds, 1)}
        manifest = {"meta": meta, "commands": results}
        args.out.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        codes: dict[int, int] = {}
        for rec in results.values():
            codes[rec["exit"]] = codes.get(rec["exit"], 0) + 1
        print(f"{len(results)} commands in {seconds:.0f}s, exits {dict(sorted(codes.items()))}")
        return 0
    before = json.loads(args.before.read_text())["commands"]
    differ = compare(before, json.loads(args.after.read_text())["commands"])
    if differ:
        print(f"{differ} of {len(before)} commands differ")
        return 1
    print(f"{len(before)} commands, all identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
