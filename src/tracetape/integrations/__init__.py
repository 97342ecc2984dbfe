"""Hooks that put a tape under code that does not know about it: SDKs, HTTP, tools, ``run``."""
