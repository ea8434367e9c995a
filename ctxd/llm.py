"""ctxd's single gateway to litellm: completions, model metadata, token counts and overflow detection.

This is the only module that imports litellm, and it does so lazily, on first use, because the import takes
seconds. Three rules hold for everything here:

* litellm never writes to stdout (which carries JSON-RPC): the import and every call run with ``sys.stdout``
  pointed at stderr (a reference-counted guard, so overlapping async calls restore it correctly);
* litellm works offline: the bundled model cost map is used (``LITELLM_LOCAL_MODEL_COST_MAP``) and no
  Hugging Face tokenizer is downloaded;
* API keys never reach ctxd's logs or the exceptions raised here: failures are re-raised as :class:`LLMError`
  whose message has been scrubbed of the key and of anything that looks like a credential.

:func:`is_overflow_text` is pure regex and never imports litellm.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, TextIO

import attrs

from ctxd.redact import add_secret
from ctxd.redact import redact as _redact

log = logging.getLogger(__name__)

ErrorKind = Literal[
    "overflow", "rate_limit", "server", "timeout", "connection", "auth", "bad_request", "not_found", "other"
]
RETRYABLE_KINDS: frozenset[str] = frozenset({"rate_limit", "server", "timeout", "connection"})


@attrs.frozen
class Completion:
    """One model answer: its text, the model that produced it, token usage and cost (when litellm knows it)."""

    text: str
    model: str
    usage: dict[str, int] | None = None
    cost: float | None = None


class LLMError(Exception):
    """A failed completion, classified. The message never contains an API key."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.message = message

    @property
    def retryable(self) -> bool:
        """Rate limits, server errors, timeouts and connection failures are worth retrying."""
        return self.kind in RETRYABLE_KINDS

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status else ""
        return f"{self.kind}{status}: {self.message}"


# --- stdout guard ---------------------------------------------------------------------------------------------

_guard_lock = threading.Lock()
_guard_depth = 0
_saved_stdout: TextIO | None = None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point ``sys.stdout`` at stderr while any guarded section is active (safe to nest and to overlap)."""
    global _guard_depth, _saved_stdout
    with _guard_lock:
        if _guard_depth == 0:
            _saved_stdout = sys.stdout
            sys.stdout = sys.stderr
        _guard_depth += 1
    try:
        yield
    finally:
        with _guard_lock:
            _guard_depth -= 1
            if _guard_depth == 0:
                if _saved_stdout is not None and sys.stdout is sys.stderr:
                    sys.stdout = _saved_stdout
                _saved_stdout = None


# --- lazy import ----------------------------------------------------------------------------------------------

_litellm: Any = None
_load_lock = threading.Lock()

MISSING = (
    "litellm is not installed: install ctxd with its llm extra (pip install 'ctxd[llm]'; "
    "with pipx: pipx inject ctxd litellm==1.106.2)"
)
"""What a call that needs litellm says when it is missing (ctxd installs without it; offline work needs none)."""


class LiteLLMMissingError(ImportError):
    """litellm is not installed (the ``llm`` extra); the message says how to get it."""


def available() -> bool:
    """Whether litellm can be imported, without importing it."""
    import importlib.util

    return _litellm is not None or importlib.util.find_spec("litellm") is not None


def _load() -> Any:
    """Import and configure litellm once; later calls return the module."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _load_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            if not available():
                raise LiteLLMMissingError(MISSING)
            with stdout_to_stderr():
                import litellm

                litellm.suppress_debug_info = True
                litellm.disable_hf_tokenizer_download = True
                litellm.drop_params = True  # providers reject unknown parameters; let litellm drop them
                with contextlib.suppress(Exception):
                    litellm.telemetry = False
            _litellm = litellm
    return _litellm


async def load_async() -> Any:
    """:func:`_load` off the event loop, so the multi-second first import does not stall other work."""
    if _litellm is not None:
        return _litellm
    return await asyncio.to_thread(_load)


# --- redaction ------------------------------------------------------------------------------------------------


def redact(text: str, api_key: str | None = None) -> str:
    """``text`` with ``api_key``, every other known secret and credential-looking substrings
    replaced by ``***`` (see :mod:`ctxd.redact`)."""
    add_secret(api_key)
    return _redact(text)


# --- overflow detection ---------------------------------------------------------------------------------------

_OVERFLOW_RE = re.compile(
    "|".join(
        (
            r"context[ _-]?length[ _-]?exceeded",
            r"context[ _-]?window[ _-]?exceeded",
            r"(?:maximum|max)\s+context\s+(?:length|window|size)",
            r"exceeds?\s+(?:the\s+)?(?:model'?s?\s+)?(?:maximum\s+)?context\s+(?:length|window|size|limit)",
            r"context\s+(?:window|length|size)\s+(?:is\s+|has\s+been\s+)?(?:exceeded|full)",
            r"greater\s+than\s+(?:the\s+)?(?:model'?s?\s+)?context\s+length",
            r"exceeds?\s+(?:the\s+)?available\s+context",
            r"prompt\s+is\s+too\s+long",
            r"input\s+is\s+too\s+long",
            r"too\s+many\s+(?:input\s+)?tokens",
            r"input\s+length\s+and\s+`?max_tokens`?\s+exceed",
            r"maximum\s+prompt\s+length",
            r"input\s+token\s+count.{0,80}exceeds",
            r"(?:exceed(?:s|ed)?\s+(?:the\s+)?|model\s+)token\s+limit",
            r"token\s+limit\s+(?:exceeded|reached)",
            r"reduce\s+the\s+length\s+of\s+the\s+(?:messages|prompt|input)",
            r"model_max_prompt_tokens_exceeded",
        )
    ),
    re.IGNORECASE,
)
_RATE_LIMIT_RE = re.compile(r"rate[ _-]?limit|per[ _-]minute|tokens per min|\bTPM\b|\bRPM\b|quota", re.IGNORECASE)


def is_overflow_text(text: str) -> bool:
    """True when an error text says the prompt did not fit the model's context window (no litellm needed)."""
    if not text:
        return False
    return bool(_OVERFLOW_RE.search(text)) and not _RATE_LIMIT_RE.search(text)


def is_context_overflow_error(exc: BaseException) -> bool:
    """True for litellm's ``ContextWindowExceededError``, an :class:`LLMError` of kind overflow, or any
    exception whose text matches :func:`is_overflow_text`."""
    if isinstance(exc, LLMError):
        return exc.kind == "overflow"
    if any(cls.__name__ == "ContextWindowExceededError" for cls in type(exc).__mro__):
        return True
    return is_overflow_text(str(exc))


def _classify(exc: BaseException) -> tuple[ErrorKind, int | None]:
    names = {cls.__name__ for cls in type(exc).__mro__}
    raw_status = getattr(exc, "status_code", None)
    status = raw_status if isinstance(raw_status, int) else None
    if is_context_overflow_error(exc):
        return "overflow", status
    if "Timeout" in names or "APITimeoutError" in names or isinstance(exc, TimeoutError):
        return "timeout", status
    if "RateLimitError" in names or status == 429:
        return "rate_limit", status
    if "AuthenticationError" in names or "PermissionDeniedError" in names or status in (401, 403):
        return "auth", status
    if "NotFoundError" in names or status == 404:
        return "not_found", status
    # litellm reports a refused or dropped connection as an InternalServerError whose text says so.
    if "APIConnectionError" in names or isinstance(exc, ConnectionError) or "Connection error" in str(exc):
        return "connection", None
    if names & {"InternalServerError", "ServiceUnavailableError", "BadGatewayError"} or (
        status is not None and status >= 500
    ):
        return "server", status
    if "BadRequestError" in names or status == 400:
        return "bad_request", status
    return "other", status


def to_llm_error(exc: BaseException, api_key: str | None = None) -> LLMError:
    """Classify ``exc`` and wrap it in an :class:`LLMError` with a scrubbed, bounded message."""
    if isinstance(exc, LLMError):
        return exc
    kind, status = _classify(exc)
    message = redact(f"{type(exc).__name__}: {exc}", api_key)
    if len(message) > 1000:
        message = message[:700] + " ... " + message[-250:]
    return LLMError(kind, message, status=status)


# --- public API -----------------------------------------------------------------------------------------------


def _usage_dict(usage: Any) -> dict[str, int] | None:
    if usage is None:
        return None
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump()
    if not isinstance(usage, Mapping):
        return None
    out = {k: int(v) for k, v in usage.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return out or None


def _response_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


async def complete(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    max_tokens: int | None = None,
    timeout: float | None = None,
) -> Completion:
    """One chat completion through litellm, with no retries of its own (callers decide on retrying).

    Raises :class:`LLMError` on any failure; ``asyncio.CancelledError`` propagates unchanged.
    """
    try:
        lm = await load_async()
    except LiteLLMMissingError as exc:
        raise LLMError("other", str(exc)) from None
    except Exception as exc:  # a broken install must fail the call, not the caller
        raise LLMError("other", f"litellm could not be loaded: {type(exc).__name__}: {exc}") from None
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "max_retries": 0,
        "num_retries": 0,
    }
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    if max_tokens:
        kwargs["max_tokens"] = int(max_tokens)
    if timeout:
        kwargs["timeout"] = float(timeout)
    with stdout_to_stderr():
        try:
            call = lm.acompletion(**kwargs)
            # litellm enforces ``timeout`` itself; this outer bound only catches a transport that ignores it.
            response = await (asyncio.wait_for(call, timeout * 1.5 + 2.0) if timeout else call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise to_llm_error(exc, api_key) from None
        cost: float | None = None
        try:
            raw_cost = lm.completion_cost(completion_response=response)
            cost = float(raw_cost) if raw_cost is not None else None
        except Exception:
            cost = None  # unknown models (local servers, fakes) have no price
    return Completion(
        text=_response_text(response),
        model=str(getattr(response, "model", None) or model),
        usage=_usage_dict(getattr(response, "usage", None)),
        cost=cost,
    )


@functools.lru_cache(maxsize=256)
def model_context_window(model: str) -> int | None:
    """The model's input window in tokens from litellm's bundled model map, or None when it is unknown."""
    with stdout_to_stderr():
        try:
            info = _load().get_model_info(model)
        except Exception:
            return None
    if not isinstance(info, Mapping):
        return None
    for key in ("max_input_tokens", "max_tokens"):
        value = info.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def count_tokens(model: str, messages_openai: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of OpenAI-format ``messages_openai`` for ``model`` with litellm's offline tokenizers.

    Falls back to characters / 4 if litellm cannot count them.
    """
    with stdout_to_stderr():
        try:
            return int(_load().token_counter(model=model, messages=[dict(m) for m in messages_openai]))
        except Exception as exc:
            log.debug("token_counter failed for %s: %s", model, type(exc).__name__)
    chars = 0
    for message in messages_openai:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(str(p.get("text", ""))) for p in content if isinstance(p, Mapping))
    return (chars + 3) // 4
