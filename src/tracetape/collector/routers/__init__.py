"""The collector's routes, one router per concern: ``health``, ``ingest`` (trace lines and
OTLP in), ``query`` (the JSON API: runs, events, checks and diffs) and ``pages`` (the web
pages). ``create_app`` includes them; each takes what it needs from ``deps``."""
