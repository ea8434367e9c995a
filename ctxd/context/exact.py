"""Exact token counts for a named model, with litellm's bundled (offline) tokenizers.

pi's chars/4 estimate is the default everywhere; this is the opt-in, per call, when a client
wants the number its model will see.  litellm is imported on first use (it takes seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxd.context.openai import to_openai


def exact_tokens(messages: Sequence[Mapping[str, Any]], model: str) -> tuple[int, list[int]]:
    """(tokens of the whole request, tokens of each pi message on its own) for ``model``.

    Without litellm (the ``llm`` extra) there are no exact counts: :class:`ctxd.errors.CtxdError` says how to
    get them (an estimate under the name of an exact count would be a wrong answer)."""
    from ctxd.errors import CtxdError
    from ctxd.llm import MISSING, available, count_tokens

    if not available():
        raise CtxdError(f"exact token counts need litellm: {MISSING}", model=model)

    per_message = [count_tokens(model, to_openai([m])) if to_openai([m]) else 0 for m in messages]
    return count_tokens(model, to_openai(messages)), per_message
