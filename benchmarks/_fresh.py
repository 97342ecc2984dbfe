"""What the fresh-process benchmarks share: start processes the way an installed tracetape runs.

An installed package has its bytecode compiled (pip writes the ``.pyc`` files); a source
checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (set on these machines) recompiles every
module edited since its ``.pyc`` was written, on every start: 10-20 ms that no user pays.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path


def installed_env() -> dict[str, str]:
    """Compile tracetape's bytecode and return the environment for timed processes, which
    may write bytecode as a user's Python does."""
    import tracetape

    compileall.compile_dir(Path(tracetape.__file__).parent, quiet=1)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env
