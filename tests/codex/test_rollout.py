"""Real Codex writes a rollout with compactions; ctxd reads it live and its context after each compaction
is what Codex sent in the request that followed."""

from __future__ import annotations

import json

from fakes.responses_server import FakeResponsesServer
from helpers.codex_match import assert_context_matches_request, leaves_after_compactions

from ctxd.tree.session import Session

from . import scenario
from .harness import Codex


def test_ctxd_reads_a_live_rollout_as_codex_sent_it(codex: Codex, responses: FakeResponsesServer) -> None:
    responses.responder = scenario.responder(responses)
    first = codex.exec(scenario.PROMPTS[0])
    assert first.returncode == 0, first.stderr[-2000:]
    [rollout] = codex.rollouts()
    session = Session.open(str(rollout))  # opened between the turns: the second one arrives as appends
    try:
        before = len(session.file)
        second = codex.exec(scenario.PROMPTS[1], resume=True)
        assert second.returncode == 0, second.stderr[-2000:]
        assert codex.rollouts() == [rollout]
        result, new = session.refresh()
        assert not result.reloaded and list(new) == list(range(before, len(session.file)))
        fresh = Session.open(str(rollout))
        assert session.tree.parent == fresh.tree.parent
        fresh.file.close()
    finally:
        session.file.close()

    requests = responses.model_requests
    assert sum(r.is_compaction for r in requests) == 3
    after = [r for i, r in enumerate(requests) if i and requests[i - 1].is_compaction and not r.is_compaction]
    leaves = leaves_after_compactions(rollout)
    assert len(leaves) == len(after) == 3
    meta = json.loads(rollout.read_text().splitlines()[0])["payload"]
    for leaf, request in zip(leaves, after, strict=True):
        assert_context_matches_request(rollout, leaf, request.input, meta["base_instructions"]["text"])
    assert first.seconds + second.seconds < 60
