"""The keyer: a tape's decisions of one kind keyed incrementally, plain or under masks.

``key_of(kind, canonical_json(payload))`` is a decision's key by definition (``text``); a
replaying tape keys each payload of a stream (its decisions of one kind) at a cost that
follows what changed since the stream's last payload, not its size: ``StreamKey``, and
``MaskedKey`` where match rules mask strings (``matching`` parses the rules and gives the
mask). ``keyer`` picks the one a tape uses, once, when its rules are known; the fast path is
chosen there, not tested on every call.

    >>> new_keys = keyer(None)
    >>> text, key = new_keys("tool").key({"name": "add", "args": [1, 2], "step": 1})
    >>> key == key_of("tool", text.decode())
    True
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from .text import _orjson, _plain, _reference, common_prefix, key_of

__all__ = ["MaskedKey", "StreamKey", "keyer"]


# A model request's canonical text (``llm_payload``): its messages first, then its params.
_MESSAGES_FIRST = b'{"messages":['
_PARAMS_AFTER_MESSAGES = b'],"params":'
# Its step, after the params: a whole integer (followed by the next key or the end).
_STEP = re.compile(rb',"step":([0-9]+)[,}]')


class StreamKey:
    """The keys of one stream of payloads (a tape's decisions of one kind), computed
    incrementally: ``key_of(kind, canonical_json(payload))`` for each, at a cost that follows
    what changed since the stream's previous payload rather than its size.

    A conversation grows by appending, so each payload's canonical text extends a prefix of
    the previous one's. The stream keeps the SHA-256 state after the prefix its last text
    shared with the text before it; when the new text starts with that prefix (one memcmp),
    only the bytes after it are checked (``_plain``) and hashed, from a copy of the saved
    state. Anything else (a new conversation, an edited message, a text the fast encoder
    cannot write) is keyed whole: the key is always the full path's (property-tested).

    >>> keys = StreamKey("llm")
    >>> text, key = keys.key({"messages": ["hi"], "step": 1})
    >>> text, key == key_of("llm", text.decode())
    (b'{"messages":["hi"],"step":1}', True)
    """

    __slots__ = ("_head", "_last", "_prefix", "_rest", "_state", "kind")

    def __init__(self, kind: str):
        self.kind = kind
        self._last = b""  # the last text keyed on the fast path
        # its first bytes (a view: not copied), also a prefix of the text before it
        self._prefix: bytes | memoryview = b""
        self._state = hashlib.sha256()  # the state after hashing ``_prefix``
        # A model request's text after its messages, checked: up to its step number, and
        # after it (``None``: no such text kept). The next request's has the same params and
        # tools, most often, and a new step: then only that number is new.
        self._head: bytes | None = None
        self._rest = b""

    def key(self, payload: Any, *, finite: bool = False) -> tuple[bytes, str]:
        """The canonical text of ``payload`` (ASCII bytes) and its key."""
        raw = _orjson(payload)
        if raw is None:
            return self._whole(payload)
        prefix = self._prefix
        at = len(prefix) if raw.startswith(prefix) else 0
        # Save the state where the next text of a growing conversation will stop sharing
        # this one: a model request's messages end where its params start (one search from
        # the end), else the prefix this text shares with the last one. Any prefix of this
        # text is right; a longer shared one saves hashing.
        shared = raw.rfind(_PARAMS_AFTER_MESSAGES) if raw.startswith(_MESSAGES_FIRST) else -1
        # What follows the messages need not be checked again where only its step is new.
        end = shared if shared > at and self._same_after(raw, shared) else len(raw)
        if not _plain(raw[max(0, at - 32) : end], payload, finite, raw):
            return self._whole(payload)
        if shared <= at:
            shared = common_prefix(self._last, raw, at)
            self._head = None
        elif end != shared:
            self._keep_after(raw, shared)
        return raw, self._hash(raw, at, shared)

    def _hash(self, raw: bytes, at: int, shared: int) -> str:
        """The key of ``raw``, whose first ``at`` bytes the saved state hashed; the state is
        saved again after its first ``shared`` bytes."""
        state = self._state if at else hashlib.sha256()  # the saved state moves on
        view = memoryview(raw)
        state.update(view[at:shared])
        self._last, self._prefix, self._state = raw, view[:shared], state
        final = state.copy()
        final.update(view[shared:])
        return f"{self.kind}:{final.hexdigest()[:16]}"

    def _whole(self, payload: Any) -> tuple[bytes, str]:
        """The full path, for a text the fast encoder cannot write; the stream starts over."""
        self._last, self._prefix, self._state = b"", b"", hashlib.sha256()
        self._head = None
        text = _reference(payload)
        return text.encode(), key_of(self.kind, text)

    def _same_after(self, raw: bytes, shared: int) -> bool:
        """Whether ``raw`` after its messages is the text kept by ``_keep_after`` but for the
        step number: the kept head, digits, the kept rest (which starts where a number ends)."""
        head = self._head
        if head is None or not raw.startswith(head, shared) or not raw.endswith(self._rest):
            return False
        return raw[shared + len(head) : len(raw) - len(self._rest)].isdigit()

    def _keep_after(self, raw: bytes, shared: int) -> None:
        """Keep the checked text after the messages, split around its step number."""
        after = raw[shared:]
        found = _STEP.search(after)
        if found is None:
            self._head = None
        else:
            self._head, self._rest = after[: found.start(1)], after[found.end(1) :]


# A JSON string token of a compact canonical text (ASCII: a non-ASCII text is the reference's).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


class MaskedKey(StreamKey):
    """``StreamKey`` under masks: the key of each payload's canonical text with every string
    value masked by ``mask``, which is the canonical text of the masked payload
    (``matching.Match.keyed``; property-tested). The masking is incremental too: a
    payload's text shares a prefix with the one before, whose masked text is kept with a mark
    after each string token (its offset and how much masking moved the text by then); only
    the text after the last mark in the shared prefix is searched for strings, and only its
    values are masked.

    >>> keys = MaskedKey("llm", lambda text: text.replace("secret", "<s>"))
    >>> keys.key({"q": "a secret"})[0]
    b'{"q":"a <s>"}'
    """

    __slots__ = ("_marks", "_mask", "_raw", "_raw_head", "_text")

    def __init__(self, kind: str, mask: Callable[[str], str]):
        super().__init__(kind)
        self._mask = mask
        self._raw = b""  # the last payload's canonical text, before masking
        self._raw_head: bytes | memoryview = b""  # its messages (a model request's), a view
        self._text = bytearray()  # its masked text
        self._marks: list[tuple[int, int]] = [(0, 0)]  # (offset after a string, text - raw)

    def key(self, payload: Any, *, finite: bool = False) -> tuple[bytes, str]:
        raw = _orjson(payload)
        fast = raw is not None
        if raw is not None:
            same = self._shared(raw)
            fast = _plain(raw[max(0, same - 32) :], payload, finite, raw)
        if raw is None or not fast:
            raw = _reference(payload).encode()
            same = self._shared(raw)
        text = self._masked(raw, same, fast)
        prefix = self._prefix
        at = len(prefix) if text.startswith(prefix) else 0
        shared = text.rfind(_PARAMS_AFTER_MESSAGES) if text.startswith(_MESSAGES_FIRST) else -1
        if shared <= at:
            shared = common_prefix(self._last, text, at)
        return text, self._hash(text, at, shared)

    def _shared(self, raw: bytes) -> int:
        """How many first bytes ``raw`` shares with the last text: a conversation grows by
        appending, so most often all of the last one's messages (one memcmp)."""
        head = self._raw_head
        if head and raw.startswith(head):
            return len(head)
        return common_prefix(self._raw, raw)

    def _masked(self, raw: bytes, shared: int, fast: bool) -> bytes:
        """``raw`` with its string values masked, from the last mark before ``shared`` on (a
        mark strictly inside the shared prefix: the byte after its string decides whether
        that string was a key)."""
        marks = self._marks
        at = max(0, bisect.bisect_right(marks, (shared - 1, 1 << 62)) - 1)
        start, moved = marks[at]
        del marks[at + 1 :]
        text = self._text
        del text[start + moved :]
        pos = start
        for found in _STRING.finditer(raw, start):
            begin, end = found.span()
            if raw[end : end + 1] == b":":
                continue  # a mapping key: never masked
            token = found.group()
            masked = self._token(token, fast)
            if masked is not token:
                text += raw[pos:begin]
                text += masked
                moved += len(masked) - len(token)
                pos = end
            marks.append((end, moved))
        text += raw[pos:]
        split = raw.rfind(_PARAMS_AFTER_MESSAGES) if raw.startswith(_MESSAGES_FIRST) else -1
        self._raw, self._raw_head = raw, memoryview(raw)[: max(0, split)]
        return bytes(text)

    def _token(self, token: bytes, fast: bool) -> bytes:
        """A string token masked, encoded as the canonical text encodes it (``token`` itself
        when nothing in it is masked)."""
        value = json.loads(token) if b"\\" in token else token[1:-1].decode()
        masked = self._mask(value)
        if masked == value:
            return token
        return orjson.dumps(masked) if fast else _reference(masked).encode()


def keyer(mask: Callable[[str], str] | None) -> Callable[[str], StreamKey]:
    """The keys a tape makes for each kind: ``StreamKey``, or ``MaskedKey`` with ``mask``
    applied to every string value (None: no masks). Chosen once per tape.

    >>> keyer(None)("llm").key({"q": "a b"})[0], keyer(str.upper)("llm").key({"q": "a b"})[0]
    (b'{"q":"a b"}', b'{"q":"A B"}')
    """
    return StreamKey if mask is None else partial(MaskedKey, mask=mask)
