"""Put on ``PYTHONPATH`` by ``tracetape run``: start the tape, then chain to the real one.

Python imports the first ``sitecustomize`` on ``sys.path`` before the program's main module, so
the tape is active from the program's first import. Any ``sitecustomize`` the environment had
(a distribution's, a venv's) runs right after, as if this one were not there.
"""

from __future__ import annotations

import gc
import importlib.machinery
import importlib.util
import os
import sys


def _start() -> None:
    try:
        from tracetape.integrations.runner import start_from_environment
    except ImportError as exc:
        sys.stderr.write(
            f"tracetape run: this Python ({sys.executable}) cannot import tracetape ({exc}); "
            "install tracetape in the environment that runs the program\n"
        )
        os._exit(2)
    try:
        start_from_environment()
    except Exception as exc:  # a bug of ours must not let the program run untaped
        sys.stderr.write(f"tracetape run: the tape could not start: {exc!r}\n")
        os._exit(2)


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]  # noqa: PTH100
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


# Only a process started by ``tracetape run`` has this folder on its path together with the
# variable (the first Python process removes both for its children); any other import of this
# file (a doctest collector, say) does nothing.
if os.environ.get("TRACETAPE_RUN"):
    _chain()
    # Starting is mostly importing tracetape: the cyclic collector is paused meanwhile, as
    # tracetape._lazy.collector_paused does (importing it would import tracetape first), and the
    # program starts with the collector as it was.
    if gc.isenabled():
        gc.disable()
        try:
            _start()
        finally:
            gc.enable()
    else:
        _start()
