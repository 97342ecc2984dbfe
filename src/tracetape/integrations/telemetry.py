"""Telemetry and analytics hosts: what a run sends them is no decision of its agent.

Frameworks and SDKs report usage to their makers (crewai, agno), to product analytics
(PostHog, Segment), to error trackers (Sentry) and to tracing services (LangSmith, Langfuse,
Logfire …), each request with fresh ids and times. Taped as ``http`` decisions they would make
every replay miss; left to the network they are blocked in replay. So a request to a host of
this table is never a decision: in record it goes through unrecorded, in replay it is answered
at once with an empty success (``ANSWER``: 200, ``{}``; an empty body for protobuf), and the
run's report counts both (``HookState.telemetry``).

A host matches an entry equal to it or a domain it ends in (``ingest.sentry.io`` matches
``o1.ingest.sentry.io``). ``[tool.tracetape.telemetry]`` adds hosts (``add = [...]``) and
takes built-in ones back (``remove = [...]``: they are then taped like any host)::

    [tool.tracetape.telemetry]
    add = ["stats.internal.example"]
    remove = ["smith.langchain.com"]

    >>> is_telemetry("telemetry.crewai.com"), is_telemetry("o42.ingest.us.sentry.io")
    (True, True)
    >>> is_telemetry("api.openai.com"), is_telemetry("notposthog.com")
    (False, False)
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from ..config import find_pyproject, load_config
from ..errors import ConfigError

__all__ = ["HOSTS", "answer", "hosts", "is_telemetry"]

# Each entry is a host or a domain (its subdomains match too), with whose telemetry it is.
HOSTS: dict[str, str] = {
    "telemetry.crewai.com": "crewai",
    "os-api.agno.com": "agno",
    "posthog.com": "PostHog (chromadb, mem0, browser-use and others report there)",
    "api.segment.io": "Segment",
    "segmentapis.com": "Segment",
    "ingest.sentry.io": "Sentry",
    "ingest.us.sentry.io": "Sentry",
    "ingest.de.sentry.io": "Sentry",
    "api.smith.langchain.com": "LangSmith",
    "eu.api.smith.langchain.com": "LangSmith",
    "cloud.langfuse.com": "Langfuse",
    "logfire-api.pydantic.dev": "Logfire",
    "logfire-us.pydantic.dev": "Logfire",
    "logfire-eu.pydantic.dev": "Logfire",
    "trace.wandb.ai": "Weave",
    "api.agentops.ai": "AgentOps",
    "api.traceloop.com": "Traceloop",
    "otlp.arize.com": "Arize",
    "app.phoenix.arize.com": "Arize Phoenix",
    "scarf.sh": "Scarf (download analytics)",
}


def _names(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        where = find_pyproject() or "pyproject.toml"
        raise ConfigError(
            f"{where}: [tool.tracetape.telemetry] {field} must be a list of host names, "
            f"not {value!r}"
        )
    return [v.strip().lower().rstrip(".") for v in value]


@cache
def hosts() -> frozenset[str]:
    """The table as this project has it: the built-in hosts, with ``[tool.tracetape.telemetry]``
    ``add`` and ``remove`` applied."""
    table = load_config("telemetry")
    unknown = sorted(set(table) - {"add", "remove"})
    if unknown:
        raise ConfigError(
            f"{find_pyproject()}: [tool.tracetape.telemetry] has no field {unknown[0]!r}; "
            "use 'add' or 'remove'"
        )
    found = set(HOSTS) | set(_names(table.get("add", []), "add"))
    return frozenset(found - set(_names(table.get("remove", []), "remove")))


@lru_cache(maxsize=4096)  # bounded: a program may reach any number of hosts
def is_telemetry(host: str) -> bool:
    """Whether ``host`` is a telemetry host: an entry, or a subdomain of one."""
    table = hosts()
    name = host.lower().rstrip(".")
    while name:
        if name in table:
            return True
        _, _, name = name.partition(".")
    return False


def answer(content_type: str) -> dict[str, Any]:
    """The empty success a replay answers a telemetry request with, stored form: JSON ``{}``,
    or an empty body for a protobuf request (an OTLP exporter's: an empty message)."""
    if "protobuf" in content_type:
        return {"status": 200, "base64": "", "content_type": "application/x-protobuf"}
    return {"status": 200, "body": {}}
