"""Reading a ledger without cattrs (the hooks' start-up) gives what cattrs gives, for every item, well-formed or
not; writing one gives what cattrs gave."""

from __future__ import annotations

from typing import Any

import cattrs
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxd.compaction.ledger import Ledger, LedgerFact, _converter

ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=3))
SEEN = st.one_of(
    ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "compaction": st.one_of(st.integers(0, 9), ODD),
            "entryId": st.one_of(st.none(), st.text(max_size=8), ODD),
            "line": st.one_of(st.none(), st.integers(1, 99), ODD),
            "time": st.one_of(st.none(), st.text(max_size=8), ODD),
            "extra": ODD,
        },
    ),
)
ITEM = st.one_of(
    ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "kind": st.one_of(st.sampled_from(["goal", "error", "constraint"]), ODD),
            "text": st.one_of(st.text(max_size=10), ODD),
            "probes": st.one_of(st.lists(st.text(min_size=1, max_size=5), max_size=3), st.lists(ODD, max_size=2), ODD),
            "firstSeen": SEEN,
            "lastSeen": SEEN,
            "status": st.one_of(st.sampled_from(["open", "resolved", "superseded"]), ODD),
            "why": st.one_of(st.none(), st.text(max_size=5), ODD),
            "key": st.one_of(st.none(), st.text(max_size=5), ODD),
        },
    ),
)


def by_cattrs(item: Any) -> LedgerFact | None:
    try:
        return _converter().structure(item, LedgerFact)  # type: ignore[no-any-return]
    except (cattrs.BaseValidationError, TypeError, ValueError, AttributeError):
        return None


@settings(max_examples=400, deadline=None)
@given(st.lists(ITEM, max_size=4), st.one_of(st.none(), st.text(max_size=5)), st.integers(0, 5))
def test_a_ledger_reads_as_cattrs_reads_it(items: list[Any], goal: str | None, compactions: int) -> None:
    ledger = Ledger.from_json({"goal": goal, "compactions": compactions, "facts": items})
    assert ledger is not None
    expected = [f for f in map(by_cattrs, items) if f is not None]
    expected = [f for f in expected if f.status in ("open", "resolved", "superseded") and f.probes]
    expected = [f for f in expected if all(isinstance(p, str) and p for p in f.probes)]
    assert ledger.facts == expected
    for fact in ledger.facts:
        assert [type(p) for p in fact.probes] == [str] * len(fact.probes)
        assert type(fact.firstSeen.compaction) is int and type(fact.lastSeen.compaction) is int


@settings(max_examples=200, deadline=None)
@given(st.lists(ITEM, max_size=4))
def test_a_ledger_writes_as_cattrs_wrote_it(items: list[Any]) -> None:
    ledger = Ledger.from_json({"goal": "g", "compactions": 2, "facts": items})
    assert ledger is not None
    assert ledger.to_json() == _converter().unstructure(ledger)
    assert list(ledger.to_json()) == list(_converter().unstructure(ledger))
