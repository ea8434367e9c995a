"""Summarisers for compaction and branch summaries: a model-backed one (litellm) and a deterministic offline one.

``create_summarizer(None)`` gives the offline summariser; with a model string it gives the litellm one. The
engine should fall back to the offline summariser when a model summariser raises :class:`SummarizerError`.
"""

from __future__ import annotations

from typing import Any

from ctxd.compaction.summarizers.base import (
    Progress,
    Summarizer,
    SummarizerError,
    SummaryKind,
    SummaryRequest,
    SummaryResult,
)
from ctxd.compaction.summarizers.litellm_summarizer import LiteLLMSummarizer
from ctxd.compaction.summarizers.offline import AbridgedLimits, OfflineSummarizer
from ctxd.compaction.summarizers.serialize import middle_truncate, serialize_conversation


def create_summarizer(model: str | None = None, **options: Any) -> Summarizer:
    """The offline summariser when ``model`` is None or empty, else a :class:`LiteLLMSummarizer` for it.

    ``options`` go to the chosen class (``api_base``, ``api_key``, ``max_output_tokens``, ``timeout``,
    ``retries``, ``context_window`` for the model one; ``limits`` or ``total_chars`` for the offline one).
    """
    if not model:
        return OfflineSummarizer(**options)
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
