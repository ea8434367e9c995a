"""What a search asks FTS5 for: the query as given when FTS5 takes it, else its plain words.

A user's or a model's query is FTS5 syntax when it is valid (``"a phrase"``, ``OR``, ``NOT``,
``prefix*``, ``text:word``). Anything FTS5 rejects (an unmatched quote, a lone ``*`` or ``(``, a
``word:`` that names no column, ``NEAR/3``) is searched as plain words: every word quoted, the form
FTS5 always takes. Whether FTS5 takes a query is asked of an empty table of the same shape in the
connection's private ``temp`` schema, so no error of the index itself (a busy or damaged database)
is ever taken for a bad query. Text SQLite cannot carry as it is (a NUL, which ends an FTS5 query
early, and lone surrogates) is replaced first.
"""

from __future__ import annotations

import sqlite3

from ctxd.errors import InvalidQueryError

__all__ = ["fts_match", "plain_words"]

_PROBE = "ctxd_query_probe"
SHOWN = 80
"""Characters of a query quoted back in an error."""


def plain_words(query: str) -> str:
    """``query`` with every whitespace-separated word quoted: the form that never is a syntax error."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in query.split())


def _carried(query: str) -> str:
    """``query`` as SQLite can carry it: NULs as spaces, lone surrogates as U+FFFD."""
    text = query.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _rejected(conn: sqlite3.Connection, match: str) -> str | None:
    """Why FTS5 rejects ``match`` as a query of the index's shape (one column, ``text``), or None."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PROBE} USING fts5(text)")
    try:
        conn.execute(f"SELECT rowid FROM temp.{_PROBE} WHERE {_PROBE} MATCH ?", (match,)).fetchall()
    except sqlite3.OperationalError as exc:
        return str(exc)
    return None


def fts_match(conn: sqlite3.Connection, query: str) -> str | None:
    """What to give FTS5's MATCH for ``query``: the query itself when FTS5 takes it, else its plain
    words; None when it holds no word (nothing to search). Raises :class:`InvalidQueryError` (-32602)
    naming the problem when FTS5 takes neither (it always takes plain words: a safeguard)."""
    text = _carried(query)
    if not text.strip():
        return None
    problem = _rejected(conn, text)
    if problem is None:
        return text
    words = plain_words(text)
    again = _rejected(conn, words)
    if again is None:
        return words
    shown = query if len(query) <= SHOWN else query[: SHOWN - 1] + "…"
    raise InvalidQueryError(f"cannot search for {shown!r}: {problem} (and as plain words: {again})", field="query")
