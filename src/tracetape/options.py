"""``TapeOptions``: every option of a ``Tape`` in one frozen value, validated once where built.

Each option is one field of ``TapeOptions``: its default, what it does (the class docstring),
how ``tracetape run`` spells it (``flag``), the ``[tool.tracetape]`` table or key or the
environment variable read when it is not given (``config``, ``env``), and the check that keeps
its value or raises its error (``OptionError``, a ``ValueError``; ``.flag_message`` says it in
flags).
``OPTIONS`` lists them. ``Tape(path, mode, **keywords)`` builds one from its keywords, or takes
one whole (``Tape(path, options=...)``); ``tracetape run`` builds one before the program starts
(a bad option exits 2 there) and hands it to the program's process whole, as JSON
(``to_builtins`` / ``from_builtins``).

    >>> options = TapeOptions(mode="fork", fork_at=3)
    >>> options.mode, options.fork_at, options.to_builtins()
    (<Mode.FORK: 'fork'>, 3, {'mode': 'fork', 'fork_at': 3})
    >>> TapeOptions.from_builtins(options.to_builtins()) == options
    True
    >>> TapeOptions(mode="replay", fork_at=3)
    Traceback (most recent call last):
    ...
    tracetape.errors.OptionError: fork_at and branch are options of mode 'fork'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict, Unpack

from ._enums import LoudEnum
from .config import find_pyproject, load_config
from .errors import ConfigError, OptionError
from .formats.cassette import MAX_RECORD_BYTES, RUN_ID
from .matching import Match
from .redact import RedactRules

__all__ = ["OPTIONS", "Mode", "Option", "TapeKeywords", "TapeOptions", "latency_factor"]


class Mode(LoudEnum):
    """What a tape does with its cassette: the one vocabulary of the API, ``tracetape run``
    and the pytest plugin (``--tape-mode``).

    ``replay`` returns recorded outputs and fails on a missing cassette; ``record`` runs live
    and writes a cassette that does not exist yet (an existing one is an error, never
    overwritten); ``auto`` (the default of ``Tape``) replays a cassette that exists and records
    one that does not; ``rewrite`` runs live and overwrites; ``fork`` replays while the run
    matches the cassette and goes live from its first decision that does not (or from step
    ``fork_at``), writing the whole run to a branch cassette and never changing the parent.
    """

    __test__ = False  # not a pytest test class, whatever a test module names it

    REPLAY = "replay"
    RECORD = "record"
    AUTO = "auto"
    REWRITE = "rewrite"
    FORK = "fork"


def latency_factor(value: str | float | None) -> float:
    """The factor of each replayed decision's recorded ``ms`` that replay waits: 0 (instant,
    the default: None, ``"instant"``), 1 (``"recorded"``) or a factor given as a number.

    >>> latency_factor("recorded"), latency_factor("0.5"), latency_factor(None)
    (1.0, 0.5, 0.0)
    """
    if value is None or value == "instant":
        return 0.0
    if value == "recorded":
        return 1.0
    try:
        factor = float(value)
    except (TypeError, ValueError):
        factor = -1.0
    if not 0 <= factor <= 1000:  # a NaN is not either
        raise ValueError(
            f"replay latency {value!r} is not 'instant', 'recorded' or a factor from 0 to 1000"
        )
    return factor


# -- the checks: each keeps a value given (in the form the tape uses) or raises its error --------


def _mode(value: str | Mode, options: TapeOptions) -> Mode:
    return Mode.parse(value)


def _rules(value: Any, options: TapeOptions) -> RedactRules | None:
    return None if value is None else RedactRules.coerce(value)


def _strings(value: Iterable[str | os.PathLike[str]], options: TapeOptions) -> tuple[str, ...]:
    return tuple(map(str, value))


def _run_id(value: str | None, options: TapeOptions) -> str | None:
    if value is not None and not RUN_ID.fullmatch(value):
        raise ValueError(
            f"run_id must be 1-200 letters, digits and ._:@+=-, starting with a letter or "
            f"digit, not {value!r}"
        )
    return value


def _match(value: Match | Mapping[str, Any] | None, options: TapeOptions) -> Match | None:
    return None if value is None else Match.coerce(value)


def _forking(option: str, options: TapeOptions) -> None:
    if options.mode is not Mode.FORK:
        flags = " and ".join(OPTIONS[name].flag or name for name in _FORK_OPTIONS)
        raise OptionError(
            f"{' and '.join(_FORK_OPTIONS)} are options of mode 'fork'",
            option=option,
            flag_message=f"{flags} need {OPTIONS['mode'].flag} fork",
        )


def _fork_at(value: int | None, options: TapeOptions) -> int | None:
    if value is None:
        return None
    _forking("fork_at", options)
    if type(value) is not int or value < 0:
        raise ValueError(f"fork_at must be a step number (0 or more), not {value!r}")
    return value


def _branch(value: str | os.PathLike[str] | None, options: TapeOptions) -> Path | None:
    if value is None:
        return None
    _forking("branch", options)
    return Path(value)


def _latency(value: str | float | None, options: TapeOptions) -> str | float | None:
    latency_factor(value)
    return value


def _trust(value: bool | None, options: TapeOptions) -> bool | None:
    if value is not None and type(value) is not bool:
        raise ValueError(f"trust_edits must be True or False, not {value!r}")
    return value


def _spelled(
    check: Callable[[Any, TapeOptions], Any] | None = None,
    *,
    flag: str | None = None,
    config: str | None = None,
    env: str | None = None,
) -> dict[str, Any]:
    """A field's metadata: its check and its spellings (see ``Option``)."""
    return {"check": check, "flag": flag, "config": config, "env": env}


_FORK_OPTIONS = ("fork_at", "branch")


class TapeKeywords(TypedDict, total=False):
    """The keywords ``Tape`` and ``TapeOptions`` take after ``mode``, as they may be given
    (``TapeOptions`` keeps each in one form: a tuple for an iterable, a ``Path``...)."""

    redact: RedactRules | Mapping[str, Any] | Iterable[str] | None
    redact_key: bytes | str | None
    env_allow: Iterable[str]
    harness_sha: str | None
    harness_paths: Iterable[str | os.PathLike[str]]
    strict: bool
    allow_irreversible: bool
    store_inputs: bool
    max_record_bytes: int
    rerecord: str | None
    push: str | None
    run_id: str | None
    match: Match | Mapping[str, Any] | None
    fork_at: int | None
    branch: str | os.PathLike[str] | None
    replay_latency: str | float | None
    allow_network: bool
    trust_edits: bool | None


@dataclass(frozen=True, init=False)
class TapeOptions:
    """Every option of a ``Tape`` (and ``tracetape run``'s of its tape), checked when built.

    ``mode`` (see ``Mode``) is ``"auto"`` by default. ``redact`` adds secret rules to the
    built-ins and ``[tool.tracetape.redact]``; ``redact_key`` keys the digests of redacted
    secrets (default: ``TRACETAPE_REDACT_KEY``, else a built-in one); ``env_allow`` names
    environment variables recorded as hashes; ``harness_sha`` is the harness's git SHA (default:
    HEAD's) and ``harness_paths`` the agent-loop files whose content is the harness instead;
    ``strict`` turns unplayed decisions and environment drift into errors;
    ``allow_irreversible`` runs irreversible tools for real while recording; ``store_inputs``
    keeps each decision's input in the cassette; ``max_record_bytes`` bounds a record;
    ``rerecord`` is how the caller records the tape again, named at the end of every miss;
    ``push`` is a collector's URL a recording also goes to, live; ``run_id`` names the
    recording (default: the cassette's name and 12 random hex digits). ``match`` (a ``Match``,
    or ``[tool.tracetape.match]``) says what a key ignores and masks. ``fork_at`` and
    ``branch`` are mode ``fork``'s: the step it goes live at (default: its first miss) and
    where the branch goes. ``replay_latency`` makes replay wait each decision's recorded time
    (``"recorded"``) or a factor of it. ``allow_network`` lets untaped connections through in
    replay. ``trust_edits`` replays a sealed cassette whose records were edited by hand (a
    ``TapeWarning`` names the lines) instead of refusing it (default: ``[tool.tracetape]
    trust_edits``, else refused; see ``trusting_edits``).

        >>> TapeOptions(replay_latency="slow")
        Traceback (most recent call last):
        ...
        tracetape.errors.OptionError: replay latency 'slow' is not 'instant', 'recorded' or a \
factor from 0 to 1000
    """

    # Each option as the tape keeps it: its default and its spellings (the values it may be
    # given as: ``TapeKeywords``).
    mode: Mode = field(default=Mode.AUTO, metadata=_spelled(_mode, flag="--mode"))
    redact: RedactRules | None = field(default=None, metadata=_spelled(_rules, config="redact"))
    redact_key: bytes | str | None = field(
        default=None, metadata=_spelled(env="TRACETAPE_REDACT_KEY")
    )
    env_allow: tuple[str, ...] = field(default=(), metadata=_spelled(_strings))
    harness_sha: str | None = field(default=None, metadata=_spelled())
    harness_paths: tuple[str, ...] = field(default=(), metadata=_spelled(_strings))
    strict: bool = field(default=False, metadata=_spelled(flag="--strict"))
    allow_irreversible: bool = field(default=False, metadata=_spelled())
    store_inputs: bool = field(default=True, metadata=_spelled())
    max_record_bytes: int = field(default=MAX_RECORD_BYTES, metadata=_spelled())
    rerecord: str | None = field(default=None, metadata=_spelled())
    push: str | None = field(default=None, metadata=_spelled())
    run_id: str | None = field(default=None, metadata=_spelled(_run_id))
    match: Match | None = field(default=None, metadata=_spelled(_match, config="match"))
    fork_at: int | None = field(default=None, metadata=_spelled(_fork_at, flag="--fork-at"))
    branch: Path | None = field(default=None, metadata=_spelled(_branch, flag="--branch"))
    replay_latency: str | float | None = field(
        default=None, metadata=_spelled(_latency, flag="--latency")
    )
    allow_network: bool = field(default=False, metadata=_spelled())
    trust_edits: bool | None = field(
        default=None, metadata=_spelled(_trust, flag="--trust-edits", config="trust_edits")
    )

    def __init__(self, *, mode: str | Mode = Mode.AUTO, **given: Unpack[TapeKeywords]) -> None:
        unknown = sorted(set(given) - set(OPTIONS))
        if unknown:
            raise TypeError(
                f"unexpected keyword argument {unknown[0]!r}; options: {', '.join(OPTIONS)}"
            )
        values: dict[str, Any] = {"mode": mode, **given}
        for option in OPTIONS.values():
            value = values.get(option.name, option.default)
            if option.check is not None:
                value = option.checked(value, self)
            object.__setattr__(self, option.name, value)

    @property
    def latency(self) -> float:
        """``replay_latency`` as the factor replay waits (see ``latency_factor``)."""
        return latency_factor(self.replay_latency)

    def redact_rules(self) -> RedactRules:
        """The project's ``[tool.tracetape.redact]`` rules, with ``redact`` added."""
        project = load_config(OPTIONS["redact"].config) or None
        return RedactRules.coerce(project).merged(self.redact or RedactRules())

    def match_rules(self) -> Match | None:
        """``match``, else the project's ``[tool.tracetape.match]``; None when neither says."""
        if self.match is not None:
            return self.match
        project = load_config(OPTIONS["match"].config) or None
        return None if project is None else Match.coerce(project)

    def trusting_edits(self) -> bool:
        """``trust_edits``, else the project's ``[tool.tracetape] trust_edits``; False when
        neither says (a cassette edited by hand is refused)."""
        if self.trust_edits is not None:
            return self.trust_edits
        key = OPTIONS["trust_edits"].config
        assert key is not None
        value = load_config().get(key, False)
        if type(value) is not bool:
            raise ConfigError(
                f"{find_pyproject()}: [tool.tracetape] {key} must be true or false, not {value!r}"
            )
        return value

    def to_builtins(self) -> dict[str, Any]:
        """The options that differ from their defaults, as JSON values (``from_builtins``
        reads them back): the form ``tracetape run`` hands to the program's process."""
        found: dict[str, Any] = {}
        for option in OPTIONS.values():
            value = getattr(self, option.name)
            if value != option.default:
                found[option.name] = _builtin(value)
        return found

    @classmethod
    def from_builtins(cls, data: Mapping[str, Any]) -> TapeOptions:
        """Options from their ``to_builtins`` form, checked as if given as keywords."""
        unknown = sorted(set(data) - set(OPTIONS))
        if unknown:
            raise OptionError(
                f"unknown option(s) {unknown}; options: {', '.join(OPTIONS)}", option=unknown[0]
            )
        given = dict(data)
        key = given.get("redact_key")
        if isinstance(key, Mapping):
            given["redact_key"] = bytes.fromhex(key["hex"])
        return cls(**given)


@dataclass(frozen=True)
class Option:
    """One option of ``TapeOptions``: its keyword, default and check, and its spellings
    outside Python (``tracetape run``'s flag, the ``[tool.tracetape]`` table or key, the
    environment variable), each None where there is none."""

    name: str
    default: Any
    check: Callable[[Any, TapeOptions], Any] | None
    flag: str | None
    config: str | None
    env: str | None

    def checked(self, value: Any, options: TapeOptions) -> Any:
        """``value`` as the tape keeps it, or this option's ``OptionError`` (the message as
        ``Tape(...)`` takes it; ``.flag_message`` in ``tracetape run``'s flag)."""
        assert self.check is not None
        try:
            return self.check(value, options)
        except OptionError:
            raise
        except ValueError as exc:
            said = str(exc)
            spelled = f"{self.flag}: {said}" if self.flag else said
            raise OptionError(said, option=self.name, flag_message=spelled) from None


OPTIONS: dict[str, Option] = {
    f.name: Option(f.name, f.default, **f.metadata) for f in fields(TapeOptions)
}
"""Every option of ``TapeOptions``, by keyword, in the order ``Tape`` takes them."""


def _builtin(value: Any) -> Any:
    """A JSON value for an option's value (``TapeOptions.to_builtins``)."""
    if isinstance(value, RedactRules):
        return {
            "fields": list(value.fields),
            "patterns": dict(value.patterns),
            "builtins": value.builtins,
        }
    if isinstance(value, Match):
        return {"ignore": list(value.ignore), "mask": list(value.mask), "keep": list(value.keep)}
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, Path | Mode):
        return str(value)
    return list(value) if isinstance(value, tuple) else value
