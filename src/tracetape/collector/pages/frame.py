"""The frame every page shares: its style sheet and script (named by hash in ``CSP``), HTML
escaping, the page around a body, times, severity badges; the API reference and error pages."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import struct
from typing import Any

from . import text, timeline
from .markup import esc

SEVERITY_ORDER = {"fatal": 3, "suspicious": 2, "expected": 1}

_BASE_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d232a;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:16px 20px}
table{border-collapse:collapse;background:#fff;width:100%;margin:8px 0 20px}
th,td{border-bottom:1px solid #e3e6ea;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f3;font-weight:600;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre{font:12px/1.4 ui-monospace,monospace}
pre{margin:0;white-space:pre-wrap;word-break:break-word}
.badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:12px;margin-right:3px}
.fatal{background:#fde2e1}.badge.fatal{background:#c62828;color:#fff}
.suspicious{background:#fff4d6}.badge.suspicious{background:#e6a100;color:#fff}
.expected{background:#e8f4ea}.badge.expected{background:#2e7d32;color:#fff}
tr.divergence td{border-top:3px solid #c62828}
tr.step td{background:#eef0f3;font-weight:600}
.kind-llm{color:#5b3cc4}.kind-tool{color:#0b6b8a}
.muted{color:#6b7580}
input[type=search]{padding:5px 8px;width:320px;max-width:100%;box-sizing:border-box}
.scroll{overflow-x:auto;max-width:100%}
#compare{margin:8px 0}
#runs td.final{min-width:10em;max-width:26em}
form#filters{display:flex;flex-wrap:wrap;gap:6px;align-items:center}
.badge.diverged{background:#c62828;color:#fff}
.pair .num .badge{display:table;margin-top:3px}
table.decisions td.head{width:15em}
.part{margin:0 0 6px;display:flex;gap:8px}
.part .label{flex:0 0 5.5em;font-size:12px;color:#6b7580;text-align:right;padding-top:1px}
.part .text{white-space:pre-wrap;word-break:break-word;flex:1;min-width:0}
.text.mono{font:12px/1.4 ui-monospace,monospace}
.part.echo .text{font-size:12px}
.who{display:none}
.part.answer .text{font-weight:500}
.role-tool .label{color:#0b6b8a}
del{background:#fde2e1;color:#8e1b1b}
ins{background:#d9f2dc;color:#1b5e20;text-decoration:none}
details.raw summary,details.unchanged summary{cursor:pointer;color:#6b7580;font-size:12px}
details.raw pre{max-height:30em}
details.unchanged{background:#eef0f3;padding:4px 8px;margin:4px 0}
#diff .pair{display:grid;grid-template-columns:5em 1fr 1fr;gap:8px;background:#fff;
padding:6px;border-bottom:1px solid #e3e6ea}
#diff .pair.heads{font-weight:600;background:#eef0f3}
#diff .pair.divergence{border-top:3px solid #c62828}
#final .pair{display:grid;grid-template-columns:1fr 1fr;gap:8px;background:#fff;padding:6px}
#final .who{display:block;font-size:12px;font-weight:600;color:#6b7580}
#summary{width:auto;min-width:50%}
#summary thead th{word-break:break-all}
#summary tbody th{white-space:nowrap}
.nums{font-size:12px;color:#6b7580}
.nums span{margin-right:6px}
svg.timeline{background:#fff;margin:6px 0 14px;max-width:900px;display:block}
@media (max-width:700px){
main{padding:10px}
table.decisions td{display:block;width:auto}
table.decisions td.head{width:auto;border-bottom:none}
#diff .pair,#final .pair{grid-template-columns:1fr}
#summary{width:100%}
#summary td,#summary th{padding:4px}
#summary td.delta{white-space:normal}
#diff .pair.heads{display:none}
.who{display:block;font-size:12px;font-weight:600;color:#6b7580;margin-bottom:2px}
.side.b{border-left:3px solid #5b3cc4;padding-left:6px}
.side.a{border-left:3px solid #9aa3ad;padding-left:6px}
.part{flex-direction:column;gap:0}
.part .label{text-align:left;flex:none}
.part .text{flex:none}
input[type=search]{width:100%}
}
"""

# The run list: the compare button waits for two ticked runs; typing in the filter asks the
# server the same question the form submits (one answer, typed or submitted) and shows its
# rows. Without JavaScript, both are plain GET forms.
_RUNS_SCRIPT = """
(()=>{const runs=document.getElementById('runs');if(!runs)return;
const go=document.getElementById('compare-button');
const sync=()=>{go.disabled=document.querySelectorAll('input.pick:checked').length!==2;};
document.addEventListener('change',e=>{if(e.target.classList.contains('pick'))sync();});
sync();
const form=document.getElementById('filters');let timer=0,asked=0;
document.getElementById('filter').addEventListener('input',()=>{
clearTimeout(timer);timer=setTimeout(async()=>{
const params=new URLSearchParams();
for(const [k,v] of new FormData(form))if(v)params.append(k,v);
const url='/?'+params.toString();const mine=++asked;
const answer=await fetch(url,{headers:{Accept:'text/html'}});
if(mine!==asked||!answer.ok)return;
const doc=new DOMParser().parseFromString(await answer.text(),'text/html');
if(mine!==asked)return;
const picked=new Set([...document.querySelectorAll('input.pick:checked')].map(x=>x.value));
runs.tHead.replaceWith(doc.querySelector('#runs thead'));
runs.tBodies[0].replaceWith(doc.querySelector('#runs tbody'));
document.getElementById('paging').replaceWith(doc.getElementById('paging'));
document.querySelectorAll('input.pick').forEach(x=>{x.checked=picked.has(x.value);});
history.replaceState(null,'',url);sync();},250);});})();
"""


# One style sheet and one script for every page: the base, then each part's own.
STYLE = _BASE_STYLE + text.STYLE + timeline.STYLE
SCRIPT = _RUNS_SCRIPT + text.SCRIPT


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The pages' Content-Security-Policy: nothing loads from anywhere, and the one style sheet and
# the one script run because their hashes are named (an injected script or style would not).
CSP = (
    f"default-src 'none'; script-src {_sha256(SCRIPT)}; style-src {_sha256(STYLE)}; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def page(title: str, body: str) -> str:
    """``body`` in the page frame, with the one style sheet and the one script."""
    js = f"<script>{SCRIPT}</script>"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        "<link rel=icon href='/favicon.ico'>"
        f"<title>{esc(title)} · tracetape</title><style>{STYLE}</style></head><body>"
        "<header><a href='/'>tracetape</a><span>collector</span></header>"
        f"<main>{body}</main>{js}</body></html>"
    )


def when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def badges(counts: dict[str, int]) -> str:
    parts = [
        f"<span class='badge {sev}'>{n} {sev}</span>"
        for sev, n in sorted(counts.items(), key=lambda kv: -SEVERITY_ORDER.get(kv[0], 0))
        if n
    ]
    return "".join(parts) or "<span class=muted>none</span>"


def docs_page(spec: dict[str, Any]) -> str:
    """The API reference from the OpenAPI ``spec``: each route, its parameters and summary
    (the spec itself is at ``/openapi.json``)."""
    rows = []
    for path, methods in sorted(spec.get("paths", {}).items()):
        for method, op in methods.items():
            params = ", ".join(
                f"{esc(p.get('name'))}{'' if p.get('required') else '?'}"
                for p in op.get("parameters", [])
                if p.get("in") == "query"
            )
            about = op.get("description") or op.get("summary") or ""
            rows.append(
                f"<tr><td><code>{esc(method.upper())}</code></td><td><code>{esc(path)}</code></td>"
                f"<td><code>{params}</code></td><td>{esc(about)}</td></tr>"
            )
    info = spec.get("info", {})
    body = (
        f"<h1>{esc(info.get('title', 'API'))} {esc(info.get('version', ''))}</h1>"
        "<p>Every <code>/v1</code> route needs <code>Authorization: Bearer TOKEN</code> when "
        "the collector has a token. The OpenAPI spec: <a href='/openapi.json'>openapi.json</a>."
        "</p><table id=routes><thead><tr><th>method</th><th>path</th><th>query</th>"
        "<th>what it does</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return page("API", body)


def _icon() -> bytes:
    """The pages' icon: a 16x16 cassette (two reels over a band), as a 32-bit ICO file."""
    dark, light, band = b"\x2a\x23\x1d\xff", b"\xff\xff\xff\xff", b"\xc4\x3c\x5b\xff"
    rows = []
    for y in range(16):  # top row first; an ICO's bitmap is stored bottom-up
        row = b""
        for x in range(16):
            reel = 4 <= y <= 8 and (3 <= x <= 6 or 9 <= x <= 12)
            row += light if reel else band if 11 <= y <= 12 and 2 <= x <= 13 else dark
        rows.append(row)
    pixels = b"".join(reversed(rows)) + bytes(16 * 4)  # and the AND mask: all shown
    header = struct.pack("<IiiHHIIiiII", 40, 16, 32, 1, 32, 0, len(pixels), 0, 0, 0, 0)
    image = header + pixels
    return (
        struct.pack("<HHH", 0, 1, 1)
        + struct.pack("<BBBBHHII", 16, 16, 0, 0, 1, 32, len(image), 22)
        + image
    )


FAVICON = _icon()


def error_page(status: int, message: str) -> str:
    """An error, as a page."""
    return page(
        str(status), f"<h1>{status}</h1><p>{esc(message)}</p><p><a href='/'>all runs</a></p>"
    )
