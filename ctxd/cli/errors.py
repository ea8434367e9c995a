"""How the command line fails: one line on stderr, a documented exit code, and with ``--json`` an
error object on stdout; never a traceback (``CTXD_DEBUG=1`` shows one for a bug).

Exit codes (README and ``ctxd --help`` list them):

    0   done
    1   ``ctxd check`` only: the file has findings
    2   the command cannot do what was asked: bad arguments, a file that is missing, a directory
        or not a regular file, a session file that cannot be used (bad header, unreadable), an
        unknown entry, nothing to compact, a compaction that failed
    70  an error ctxd did not expect (a bug): please report it
    130 interrupted (Ctrl-C)

With ``--json``: ``{"error": {"code", "message", "path", "line", "data"}}``, where ``code`` is the
JSON-RPC error code the daemon would answer with (docs/protocol.md), ``path`` and ``line`` say
where (or null).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from ctxd.errors import CtxdError
from ctxd.redact import redact, redact_json

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
EXIT_BUG = 70
EXIT_INTERRUPTED = 130
UNUSABLE_FILE = -31010
INTERNAL = -32603

HELP = f"""exit codes:
  {EXIT_OK}   done
  {EXIT_FINDINGS}   ctxd check only: the file has findings
  {EXIT_ERROR}   the command cannot do what was asked (bad arguments, a missing or unusable
      session file, an unknown entry, nothing to compact, a failed compaction)
  {EXIT_BUG}  an error ctxd did not expect: please report it (CTXD_DEBUG=1 shows the traceback)
  {EXIT_INTERRUPTED} interrupted
errors are one line on stderr; with --json, also {{"error": {{"code", "message", "path", "line"}}}}
on stdout."""


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line too (and as JSON with ``--json``)."""

    def error(self, message: str) -> NoReturn:
        if "--json" in sys.argv[1:]:
            from ctxd.cli.render import dump

            dump({"error": {"code": -32602, "message": message, "path": None, "line": None, "data": {}}})
        self.exit(EXIT_ERROR, f"ctxd: {message} (see {self.prog} --help)\n")


def count(least: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``least``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


def run(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``handler(args)``, every failure turned into one line and an exit code."""
    try:
        return int(handler(args))
    except BrokenPipeError:
        return EXIT_OK  # the reader went away (ctxd ... | head)
    except KeyboardInterrupt:
        print("ctxd: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CtxdError as exc:
        return _fail(args, exc.code, exc.message, exc.data.get("path"), exc.data.get("line"), exc.data)
    except OSError as exc:
        path = exc.filename if isinstance(exc.filename, str) else _file_of(args)
        reason = exc.strerror or str(exc)
        return _fail(args, UNUSABLE_FILE, f"{path}: {reason}" if path else reason, path, None, {})
    except (UnicodeError, RecursionError) as exc:
        # A session file the store could not make sense of (bad bytes, nesting beyond what the
        # parser goes): the input's fault, named by its file.
        path = _file_of(args)
        reason = "nested too deeply" if isinstance(exc, RecursionError) else f"cannot be read: {exc}"
        return _fail(args, UNUSABLE_FILE, f"{path}: {reason}" if path else reason, path, None, {})
    except Exception as exc:
        if os.environ.get("CTXD_DEBUG"):
            traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc} (a bug in ctxd: please report it)"
        _fail(args, INTERNAL, message, _file_of(args), None, {})
        return EXIT_BUG


def _file_of(args: argparse.Namespace) -> str | None:
    path = getattr(args, "file", None)
    return os.path.abspath(path) if isinstance(path, str) else None


def _fail(args: argparse.Namespace, code: int, message: str, path: Any, line: Any, data: dict[str, Any]) -> int:
    message = " ".join(redact(message).split())  # one line, never a secret
    if len(message) > 2000:
        message = message[:1999] + "…"
    if getattr(args, "json", False):
        from ctxd.cli.render import dump

        error = {"code": code, "message": message, "path": path, "line": line, "data": redact_json(data)}
        dump({"error": error})
    print(f"ctxd: {message}", file=sys.stderr)
    return EXIT_ERROR


__all__ = ["EXIT_BUG", "EXIT_ERROR", "EXIT_FINDINGS", "EXIT_INTERRUPTED", "EXIT_OK", "HELP", "run"]
