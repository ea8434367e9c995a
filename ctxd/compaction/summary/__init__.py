"""Summarisers for compaction and branch summaries: a model-backed one (litellm) and a deterministic offline one.

``create_summarizer(None)`` gives the offline summariser; with a model string it gives the litellm one. The
engine should fall back to the offline summariser when a model summariser raises :class:`SummarizerError`.

The names are loaded on first use, so that importing one submodule (the facts scanner, for
:mod:`ctxd.compaction.ledger.mustkeep`) does not import the others (asyncio, the model client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxd.compaction.summary.base import (
        Progress,
        Summarizer,
        SummarizerError,
        SummaryKind,
        SummaryRequest,
        SummaryResult,
    )
    from ctxd.compaction.summary.litellm_summarizer import LiteLLMSummarizer
    from ctxd.compaction.summary.offline import AbridgedLimits, OfflineSummarizer
    from ctxd.compaction.summary.serialize import middle_truncate, serialize_conversation

_HOMES = {
    "Progress": "base",
    "Summarizer": "base",
    "SummarizerError": "base",
    "SummaryKind": "base",
    "SummaryRequest": "base",
    "SummaryResult": "base",
    "LiteLLMSummarizer": "litellm_summarizer",
    "AbridgedLimits": "offline",
    "OfflineSummarizer": "offline",
    "middle_truncate": "serialize",
    "serialize_conversation": "serialize",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def create_summarizer(model: str | None = None, **options: Any) -> Summarizer:
    """The offline summariser when ``model`` is None or empty, else a :class:`LiteLLMSummarizer` for it.

    ``options`` go to the chosen class (``api_base``, ``api_key``, ``max_output_tokens``, ``timeout``,
    ``retries``, ``context_window`` for the model one; ``limits`` or ``total_chars`` for the offline one).
    """
    if not model:
        from ctxd.compaction.summary.offline import OfflineSummarizer

        return OfflineSummarizer(**options)
    from ctxd.compaction.summary.litellm_summarizer import LiteLLMSummarizer

    return LiteLLMSummarizer(model, **options)


__all__ = [
    "AbridgedLimits",
    "LiteLLMSummarizer",
    "OfflineSummarizer",
    "Progress",
    "Summarizer",
    "SummarizerError",
    "SummaryKind",
    "SummaryRequest",
    "SummaryResult",
    "create_summarizer",
    "middle_truncate",
    "serialize_conversation",
]
