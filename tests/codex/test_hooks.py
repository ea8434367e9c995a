"""ctxd's hooks inside real Codex (``ctxd hook --agent codex EVENT`` from ``$CODEX_HOME/hooks.json``,
trusted with ``--dangerously-bypass-hook-trust``): the facts the fake summaries leave out reach the first request
after each compaction, the rollout is archived, and ctxd's context still matches what Codex sent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fakes.responses_server import COMPACTION_MARK, Answer, FakeResponsesServer, RecordedRequest, call, reply
from helpers.codex_match import assert_context_matches_request, leaves_after_compactions
from helpers.summary_shape import assert_summary_shape

from ctxd.service.claude_hooks import ALL_FACTS_HEADING, FACTS_HEADING

from . import scenario
from .harness import REPO, Codex, ctxd_command

HOOKS = REPO / "integrations" / "codex" / "hooks.json"


def install_hooks(codex: Codex) -> None:
    """The hand install: integrations/codex/hooks.json as ``$CODEX_HOME/hooks.json``, ``ctxd`` on PATH."""
    codex.home.mkdir(parents=True, exist_ok=True)
    (codex.home / "hooks.json").write_bytes(HOOKS.read_bytes())
    codex.extra_path.append(str(Path(ctxd_command()).parent))


def test_facts_reach_the_request_after_each_compaction(codex: Codex, responses: FakeResponsesServer) -> None:
    responses.responder = scenario.responder(responses)
    install_hooks(codex)
    data, state = codex.base / "data", codex.base / "state"
    codex.extra_env.update(XDG_DATA_HOME=str(data), XDG_STATE_HOME=str(state))
    first = codex.exec(scenario.PROMPTS[0], "--dangerously-bypass-hook-trust")
    assert first.returncode == 0, first.stderr[-2000:]
    second = codex.exec(scenario.PROMPTS[1], "--dangerously-bypass-hook-trust", resume=True)
    assert second.returncode == 0, second.stderr[-2000:]
    assert first.seconds + second.seconds < 60

    assert_facts_after_each_compaction(codex, responses, data, state)


def assert_facts_after_each_compaction(codex: Codex, responses: FakeResponsesServer, data: Path, state: Path) -> None:
    """In the first request after each of the scenario's 3 compactions, a developer item right after the summary
    holds ctxd's facts with the constraint the summary left out; the rollout is archived; no hook error; ctxd's
    context still equals each request."""
    requests = responses.model_requests
    after = [r for i, r in enumerate(requests) if i and requests[i - 1].is_compaction and not r.is_compaction]
    assert len(after) == 3
    for n, request in enumerate(after, 1):
        texts = request.texts()
        summary = next(i for i, t in enumerate(texts) if scenario.summary_text(n)[:10] in t)
        assert scenario.CONSTRAINT not in texts[summary]  # the fake summary left it out
        facts = [i for i, t in enumerate(texts) if FACTS_HEADING in t or ALL_FACTS_HEADING in t]
        assert facts and facts[0] > summary, f"request {n}: no ctxd facts after the summary"
        fact_text = texts[facts[0]]
        assert scenario.CONSTRAINT in fact_text
        assert request.input[facts[0]]["role"] == "developer"

    [rollout] = codex.rollouts()
    log = (state / "ctxd" / "hooks.log").read_text()
    assert " error " not in log, log
    archived = list((data / "ctxd" / "archive" / "codex").rglob("rollout-*.jsonl"))
    assert [p.name for p in archived] == [rollout.name]
    copy = archived[0].read_bytes()
    assert copy and rollout.read_bytes().startswith(copy) and copy.count(b"\n") > 20

    meta = json.loads(rollout.read_text().splitlines()[0])["payload"]
    leaves = leaves_after_compactions(rollout)
    for leaf, request in zip(leaves, after, strict=True):
        assert_context_matches_request(rollout, leaf, request.input, meta["base_instructions"]["text"])
    Path(codex.base / "first-request-after-compaction.json").write_text(json.dumps(after[0].input, indent=1))


def test_ctxd_compact_prompt_replaces_codexs(codex: Codex, responses: FakeResponsesServer) -> None:
    """``ctxd codex-prompt`` written to a file that ``experimental_compact_prompt_file`` names: Codex's compaction
    request ends with ctxd's prompt instead of its own."""
    from ctxd.service.codex_hooks import COMPACT_PROMPT_HEAD, compact_prompt

    done = subprocess.run([ctxd_command(), "codex-prompt"], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == compact_prompt()
    prompt = codex.base / "ctxd-compact-prompt.md"
    prompt.write_text(done.stdout)
    codex.extra_config = f'experimental_compact_prompt_file = "{prompt}"\n'
    responses.compaction_marks = (COMPACT_PROMPT_HEAD,)
    responses.responder = scenario.responder(responses)
    run = codex.exec(scenario.PROMPTS[0])
    assert run.returncode == 0, run.stderr[-2000:]
    compactions = [r for r in responses.model_requests if r.is_compaction]
    assert len(compactions) == 2
    for request in compactions:
        assert request.texts()[-1].strip() == compact_prompt()
        assert_summary_shape(request.texts()[-1])
        assert not any(t.startswith(COMPACTION_MARK) for t in request.texts())


def test_a_session_resumed_after_a_compaction_still_gets_its_facts(
    codex: Codex, responses: FakeResponsesServer
) -> None:
    """``codex exec`` compacts once (its summary leaves the constraint out) and ends; ``codex exec resume --last``,
    a new Codex process with no compaction of its own, still sends the facts ctxd re-injected after the summary."""
    steps = [
        call("exec_command", {"cmd": "echo hello > notes.txt"}, "call_write", input_tokens=scenario.BIG),
        reply("notes.txt now says hello.", input_tokens=100),
        reply("Appended nothing yet: what line?", input_tokens=100),
    ]

    def answer(request: RecordedRequest, index: int) -> Answer:
        if request.is_compaction:
            return reply(scenario.summary_text(1), input_tokens=100)
        turn = sum(not r.is_compaction for r in responses.model_requests[:index])
        return steps[min(turn, len(steps) - 1)]

    responses.responder = answer
    install_hooks(codex)
    codex.extra_env.update(XDG_DATA_HOME=str(codex.base / "data"), XDG_STATE_HOME=str(codex.base / "state"))
    first = codex.exec(scenario.PROMPTS[0], "--dangerously-bypass-hook-trust")
    assert first.returncode == 0, first.stderr[-2000:]
    compactions = sum(r.is_compaction for r in responses.model_requests)
    assert compactions == 1
    resumed_from = len(responses.model_requests)
    second = codex.exec(scenario.PROMPTS[1], "--dangerously-bypass-hook-trust", resume=True)
    assert second.returncode == 0, second.stderr[-2000:]
    resumed = responses.model_requests[resumed_from:]
    assert resumed and not any(r.is_compaction for r in resumed)
    texts = resumed[0].texts()
    summary = next(i for i, t in enumerate(texts) if scenario.summary_text(1)[:10] in t)
    facts = [i for i, t in enumerate(texts) if FACTS_HEADING in t or ALL_FACTS_HEADING in t]
    assert facts and facts[0] > summary and scenario.CONSTRAINT in texts[facts[0]]
    assert resumed[0].input[facts[0]]["role"] == "developer"
    assert scenario.PROMPTS[1] in texts[-1]
