"""Compaction settings: one defaulted, typed tree (camelCase on the wire and in config files)."""

from __future__ import annotations

import functools
from typing import Any

import attrs

DEFAULT_CONTEXT_WINDOW = 200_000


@attrs.define
class CompactionSettings:
    enabled: bool = True
    """False means never: neither the threshold nor an overflow compacts (pi #6472)."""
    reserveTokens: int = 16_384
    keepRecentTokens: int = 20_000
    contextWindow: int | None = None
    """Explicit window; else the model's from litellm's bundled map; else DEFAULT_CONTEXT_WINDOW."""
    triggerPercent: float | None = None
    """Optional: compact when the context exceeds this share of the window (seed 002: 0.75)."""
    targetPercent: float | None = None
    """Optional: with a trigger, keep about this share of the window verbatim (seed 002: 0.5)."""
    keepLastTurns: int = 6
    """Fallback when summarising fails: keep the last N turns verbatim."""
    maxAttempts: int = 2
    """Summariser attempts before falling back."""
    model: str | None = None
    """Summariser model through litellm; None = the offline summariser."""
    apiBase: str | None = None
    apiKey: str | None = attrs.field(default=None, repr=False)
    timeoutSeconds: float = 120.0
    maxOutputTokens: int | None = None
    """Summary output limit; default 0.8 x reserveTokens, as pi."""
    customInstructions: str | None = None
    summaryMaxTokens: int = 5_000
    """The largest summary the offline summariser writes (what the agents' own summaries take); never more than
    :attr:`reserveTokens` (see :meth:`summary_limit`)."""

    def summary_limit(self) -> int:
        """The offline summary's size limit in tokens: :attr:`summaryMaxTokens`, at most the reserve."""
        return max(256, min(self.summaryMaxTokens, self.reserveTokens))

    def window(self, model_window: int | None = None) -> int:
        return self.contextWindow or model_window or DEFAULT_CONTEXT_WINDOW

    def resolved_window(self) -> int:
        """The explicit window, else the configured model's from litellm's bundled map, else the
        default (200k)."""
        if self.contextWindow or not self.model:
            return self.window()
        return self.window(_model_window(self.model))

    def threshold(self, window: int) -> int:
        """Context size above which compaction is due."""
        limit = window - self.reserveTokens
        if self.triggerPercent:
            limit = min(limit, int(window * self.triggerPercent))
        return max(0, limit)

    def keep_recent(self, window: int) -> int:
        if self.targetPercent:
            return max(1, int(window * self.targetPercent))
        return self.keepRecentTokens

    def output_limit(self) -> int:
        return self.maxOutputTokens or max(256, int(0.8 * self.reserveTokens))

    @classmethod
    def from_json(
        cls, data: dict[str, Any] | None, problems: list[str] | None = None, *, base: CompactionSettings | None = None
    ) -> CompactionSettings:
        """Settings from camelCase JSON over ``base``; invalid values are reported in ``problems``
        and left at their previous value."""
        out = attrs.evolve(base) if base is not None else cls()
        names = {field.name for field in attrs.fields(cls)}
        for key in data or {}:
            if key not in names and problems is not None:
                problems.append(f"compaction: unknown option {_show(key)} ignored")
        for field in attrs.fields(cls):
            if not data or field.name not in data:
                continue
            value = data[field.name]
            default = getattr(out, field.name)
            ok = (
                value is None
                or isinstance(value, type(default))
                or (isinstance(value, int | float) and isinstance(default, int | float) and not isinstance(value, bool))
            )
            if field.name in ("contextWindow", "triggerPercent", "targetPercent", "maxOutputTokens"):
                ok = value is None or (isinstance(value, int | float) and not isinstance(value, bool) and value > 0)
            elif field.name in ("model", "apiBase", "apiKey", "customInstructions"):
                ok = value is None or isinstance(value, str)
            elif isinstance(default, bool):
                ok = isinstance(value, bool)
            elif field.name in (
                "reserveTokens",
                "keepRecentTokens",
                "keepLastTurns",
                "maxAttempts",
                "timeoutSeconds",
                "summaryMaxTokens",
            ):
                ok = (
                    isinstance(value, int | float)
                    and not isinstance(value, bool)
                    and value >= (1 if field.name in ("maxAttempts", "keepLastTurns", "summaryMaxTokens") else 0)
                )
            if field.name in ("triggerPercent", "targetPercent") and ok and value is not None:
                ok = value <= 1  # a share of the window
            if field.name in _INTEGERS and ok and value is not None:
                ok = float(value).is_integer()
                value = int(value) if ok else value
            if ok:
                setattr(out, field.name, value)
            elif problems is not None:
                problems.append(f"compaction.{field.name}: invalid value {_show(value)}; using {default!r}")
        return out


_INTEGERS = (
    "reserveTokens",
    "keepRecentTokens",
    "contextWindow",
    "keepLastTurns",
    "maxAttempts",
    "maxOutputTokens",
    "summaryMaxTokens",
)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


@functools.lru_cache(maxsize=32)
def _model_window(model: str) -> int | None:
    from ctxd.llm import model_context_window

    return model_context_window(model)
