"""The installed tracetape version, and how to install it again with an extra.

tracetape is not on a public index, so an install command names where this copy came from:
the checkout or the wheel pip recorded (PEP 610's ``direct_url.json``), else the checkout
this module sits in.
"""

from __future__ import annotations

__version__ = "0.1.0"


def install_command(extra: str | None = None, *, upgrade: bool = False) -> str:
    """The ``pip install`` line that installs this tracetape (with ``extra``), as it can be
    run here: ``pip install '/path/to/checkout[server]'`` or ``pip install
    '/path/to/tracetape-0.1.0-py3-none-any.whl[server]'``."""
    where = _installed_from()
    if where is None:
        where = "/path/to/tracetape"  # no record of the source: the README's install section
    target = f"{where}[{extra}]" if extra else where
    return f"pip install {'-U ' if upgrade else ''}'{target}'"


def _installed_from() -> str | None:
    import json
    from importlib import metadata
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    try:
        text = metadata.distribution("tracetape").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    if text:
        url = json.loads(text).get("url", "")
        if url.startswith("file://"):
            return unquote(urlparse(url).path)
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "src" / "tracetape").is_dir():
        return str(root)
    return None
