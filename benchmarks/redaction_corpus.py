"""False positives of the redactor on a corpus of benign text, as a count.

Every line of ten standard-library packages (their code, docstrings and comments: URLs, HTTP
headers, "password" and "token" in prose), the README and the design articles is redacted as a
string (shapes, secret-named fields of quoted JSON); each replacement is listed with its line,
so a false positive shows. Run: ``python benchmarks/redaction_corpus.py``.
"""

from __future__ import annotations

import collections
import re
import sysconfig
from pathlib import Path

from tracetape.redact import Redactor

PACKAGES = ("json", "email", "http", "urllib", "logging", "asyncio", "unittest", "xml",
            "concurrent", "importlib")  # fmt: skip
ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [p for pkg in PACKAGES for p in sorted((stdlib / pkg).rglob("*.py"))]
    files += sorted(ROOT.glob("*.md")) + sorted((ROOT.parent / "shared" / "seeds").glob("*.txt"))
    redactor = Redactor()
    lines, found = 0, collections.Counter[str]()
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            lines += 1
            out = redactor.redact_string(line)
            if out != line:
                for m in re.finditer(r"\[REDACTED:([a-z_]+):", out):
                    found[m.group(1)] += 1
                print(f"  {path.name}: {line.strip()[:110]}")
    print(f"{len(files)} files, {lines:,} lines: {sum(found.values())} replacements {dict(found)}")


if __name__ == "__main__":
    main()
