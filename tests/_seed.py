"""The seed's reference implementation (``tape.py`` of the design article), kept verbatim in
behaviour: the compatibility tests and the benchmarks measure tracetape against it."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any


class ReplayMiss(RuntimeError):
    """The run asked for a decision that was never recorded."""


def _key(kind: str, payload: dict[str, Any]) -> str:
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return f"{kind}:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


class Tape:
    def __init__(self, path: str, mode: str = "record") -> None:
        assert mode in ("record", "replay")
        self.mode, self.path = mode, path
        self.queues: dict[str, list[Any]] = {}
        if mode == "replay":
            with open(path) as fh:  # noqa: PTH123 - verbatim reference
                for line in fh:
                    rec = json.loads(line)
                    self.queues.setdefault(rec["key"], []).append(rec)
        else:
            self.fh = open(path, "a")  # noqa: PTH123, SIM115 - verbatim reference

    def call(self, kind: str, payload: dict[str, Any], do: Callable[[], Any]) -> Any:
        k = _key(kind, payload)
        if self.mode == "record":
            t0 = time.monotonic()
            out = do()
            self.fh.write(
                json.dumps(
                    {"key": k, "kind": kind, "ms": int((time.monotonic() - t0) * 1000), "out": out}
                )
                + "\n"
            )
            self.fh.flush()
            return out
        queue = self.queues.get(k)
        if not queue:
            raise ReplayMiss(f"{k} was never recorded — the run diverged here")
        return queue.pop(0)["out"]
