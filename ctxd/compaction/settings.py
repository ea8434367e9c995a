"""Compaction settings: one defaulted, typed tree (camelCase on the wire and in config files: :mod:`ctxd.options`)."""

from __future__ import annotations

import functools

import attrs

from ctxd.options import COUNT, NON_NEGATIVE, POSITIVE_INT, SECRET, SHARE

DEFAULT_CONTEXT_WINDOW = 200_000


@attrs.define
class CompactionSettings:
    """Read from the configuration's ``compaction`` object (camelCase keys: :mod:`ctxd.options`)."""

    enabled: bool = True
    """False means never: neither the threshold nor an overflow compacts (pi #6472)."""
    reserve_tokens: int = attrs.field(default=16_384, validator=COUNT)
    keep_recent_tokens: int = attrs.field(default=20_000, validator=COUNT)
    context_window: int | None = attrs.field(default=None, validator=POSITIVE_INT.or_null())
    """Explicit window; else the model's from litellm's bundled map; else DEFAULT_CONTEXT_WINDOW."""
    trigger_percent: float | None = attrs.field(default=None, validator=SHARE.or_null())
    """Optional: compact when the context exceeds this share of the window (seed 002: 0.75)."""
    target_percent: float | None = attrs.field(default=None, validator=SHARE.or_null())
    """Optional: with a trigger, keep about this share of the window verbatim (seed 002: 0.5)."""
    keep_last_turns: int = attrs.field(default=6, validator=POSITIVE_INT)
    """Fallback when summarising fails: keep the last N turns verbatim."""
    max_attempts: int = attrs.field(default=2, validator=POSITIVE_INT)
    """Summariser attempts before falling back."""
    model: str | None = None
    """Summariser model through litellm; None = the offline summariser."""
    api_base: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False, metadata={SECRET: True})
    timeout_seconds: float = attrs.field(default=120.0, validator=NON_NEGATIVE)
    max_output_tokens: int | None = attrs.field(default=None, validator=POSITIVE_INT.or_null())
    """Summary output limit; default 0.8 x reserve_tokens, as pi."""
    custom_instructions: str | None = None
    summary_max_tokens: int = attrs.field(default=5_000, validator=POSITIVE_INT)
    """The largest summary the offline summariser writes (what the agents' own summaries take); never more than
    :attr:`reserve_tokens` (see :meth:`summary_limit`)."""

    def summary_limit(self) -> int:
        """The offline summary's size limit in tokens: :attr:`summary_max_tokens`, at most the reserve."""
        return max(256, min(self.summary_max_tokens, self.reserve_tokens))

    def window(self, model_window: int | None = None) -> int:
        return self.context_window or model_window or DEFAULT_CONTEXT_WINDOW

    def resolved_window(self) -> int:
        """The explicit window, else the configured model's from litellm's bundled map, else the
        default (200k)."""
        if self.context_window or not self.model:
            return self.window()
        return self.window(_model_window(self.model))

    def threshold(self, window: int) -> int:
        """Context size above which compaction is due."""
        limit = window - self.reserve_tokens
        if self.trigger_percent:
            limit = min(limit, int(window * self.trigger_percent))
        return max(0, limit)

    def keep_recent(self, window: int) -> int:
        if self.target_percent:
            return max(1, int(window * self.target_percent))
        return self.keep_recent_tokens

    def output_limit(self) -> int:
        return self.max_output_tokens or max(256, int(0.8 * self.reserve_tokens))


@functools.lru_cache(maxsize=32)
def _model_window(model: str) -> int | None:
    from ctxd.llm import model_context_window

    return model_context_window(model)
