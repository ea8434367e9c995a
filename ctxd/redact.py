"""Secrets never leave the process: the one place that knows them and scrubs text of them.

The secrets are every API key ctxd was given (configuration, ``initializationOptions``, the
command line: :func:`add_secret`) and every environment value whose name looks like a credential
(``*_API_KEY``, ``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``AWS_ACCESS_KEY_ID``, ...) and
that is long enough to be one (short values such as ``1`` or ``true`` would be redacted from
every text).  Credential-looking substrings (``sk-...``, ``Bearer ...``, ``api_key=...``) go too,
known or not.

The boundaries call :func:`redact` (a string) or :func:`redact_json` (a JSON value): JSON-RPC
errors and the results that carry ctxd's own text (compaction, branch, ledger), notifications,
``window/logMessage``, the log formatter, the ``failures`` a compaction records on disk, and the
command line's output.  A session's own content (what an agent appended) is the agent's data and is
passed through untouched.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

MIN_SECRET = 8
"""Shorter values are not treated as secrets (they would be redacted from every text)."""
MASK = "***"

_CREDENTIAL_NAME = re.compile(
    r"API_?KEY|ACCESS_KEY|PRIVATE_KEY|_KEY$|^KEY$|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|^AWS_SESSION", re.IGNORECASE
)
_NOT_CREDENTIAL_NAME = re.compile(r"^TOKENIZERS_|_TOKENS?_(?:LIMIT|COUNT)$", re.IGNORECASE)
_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"\bBearer\s+[A-Za-z0-9._\-+/=]{6,}", re.IGNORECASE),
    re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization|token)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),
)


def _may_hold_credential(lowered: str) -> bool:
    """Whether lower-cased text holds what one of :data:`_PATTERNS` needs to match: text without any of it is
    not scanned by the patterns (publishing redacts every message; most hold no credential)."""
    return (
        "sk-" in lowered
        or "pk-" in lowered
        or "rk-" in lowered
        or "bearer" in lowered
        or "api" in lowered
        or "authorization" in lowered
        or "token" in lowered
        or "aiza" in lowered
    )


_configured: set[str] = set()
_cache: tuple[int, int, tuple[str, ...]] | None = None


def add_secret(value: object) -> None:
    """Remember a key ctxd was given, so that no text ever shows it."""
    global _cache
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET and value not in _configured:
        _configured.add(value.strip())
        _cache = None


def is_credential_name(name: str) -> bool:
    return bool(_CREDENTIAL_NAME.search(name)) and not _NOT_CREDENTIAL_NAME.search(name)


def secrets() -> tuple[str, ...]:
    """Every secret value known now, longest first (so that no part of one is left behind)."""
    global _cache
    env = os.environ
    fingerprint = (len(env), len(_configured))
    if _cache is not None and _cache[:2] == fingerprint:
        return _cache[2]
    found = set(_configured)
    for name, value in env.items():
        value = value.strip()
        if len(value) >= MIN_SECRET and not value.startswith(("/", "~")) and is_credential_name(name):
            found.add(value)
    ordered = tuple(sorted(found, key=len, reverse=True))
    _cache = (*fingerprint, ordered)
    return ordered


def redact(text: str) -> str:
    """``text`` with every known secret and credential-looking substring replaced by ``***``."""
    if not text:
        return text
    for secret in secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    if _may_hold_credential(text.lower()):
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.lastindex else "") + MASK, text)
    return text


def redact_json(value: Any) -> Any:
    """A JSON value (dicts, lists, strings, ...) with every known secret replaced in every string.

    Only exact secrets: the patterns are for free text, and would mangle a path or an id that
    merely looks like a key (``/tmp/sk-project/...``)."""
    if isinstance(value, str):
        for secret in secrets():
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {k: redact_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    return value


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines (message and traceback) never show a secret: its own format's, or
    those of the formatter it wraps (``inner``)."""

    def __init__(self, *args: Any, inner: logging.Formatter | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record) if self.inner is not None else super().format(record))


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Give every handler of ``logger`` (default: the root logger) a redacting formatter."""
    for handler in (logger or logging.getLogger()).handlers:
        current = handler.formatter
        if not isinstance(current, RedactingFormatter):
            handler.setFormatter(RedactingFormatter(inner=current))


__all__ = ["MASK", "RedactingFormatter", "add_secret", "redact", "redact_json", "redact_logs", "secrets"]
