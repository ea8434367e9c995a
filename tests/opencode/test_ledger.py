"""Five automatic compactions in one real opencode 1.18.33 session with ctxd's plugin, then a resume: the facts the
user planted before the first one (a path, a validation command, a hard constraint, an error; each in a message of
its own, after the goal) are in every compaction prompt and in the first request after every compaction, though
opencode's (fake) summary keeps only the path.

The first two turns run on other models of the same provider, a 16,000-token and a 200,000-token one (``--model``),
each reading a 20,000-character bash output: the plugin cuts it at a share of the model's window, which opencode's
provider config gives (30%: 19,200 characters for the small model; the fixed 30,000 for the large one).

opencode keeps no ledger: ctxd keeps one per session in its state folder (``<state>/opencode/<session id>.json``),
and rebuilds it from opencode's database when it is missing. The resume (``opencode run --session``, a new opencode
process and a new ctxd) runs without those notes: its first request, a sixth compaction's prompt and the request
after it still hold every fact.

The fake model's window is opencode's (20,000 tokens, ``tests/opencode/harness.py``): a response reporting 19,000
prompt tokens makes opencode compact before its next step, and its automatic "continue" after the summary gets
another such response, so one ``opencode run`` drives the five compactions.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from fakes.openai_server import Action, FakeOpenAIServer, reply, tool_call
from helpers.planted import ERROR, FACTS, GOAL, PLANTED

from .harness import LARGE, REPO, WINDOW, OpencodeHome, is_compaction_request, is_title_request, opencode_binary

PLUGIN = REPO / "integrations" / "opencode" / "src" / "index.ts"
SUMMARY = "## Objective\n- Work on the loader goes on; the manifest is deploy/zeta/manifest.toml."
"""The fake summary: it keeps only the path."""
NEAR_WINDOW = {"prompt_tokens": LARGE, "completion_tokens": 20, "total_tokens": LARGE + 20}
WINDOWS = {"fake-model": WINDOW, "small": 16_000, "large": 200_000}
"""The provider's models: the default one compacts (``LARGE`` is near its window), the others read a big output."""
BIG_OUTPUT = "seq -f '%049.0f' 1 400"
"""400 lines of 50 characters: 20,000 (opencode itself cuts a bash output at 2,000 lines)."""


class Looping:
    """Scripts the fake: a turn whose output is wanted runs :data:`BIG_OUTPUT` first; while compactions are
    wanted, each step runs bash and reports a prompt near the window (opencode compacts, then goes on by
    itself); then a short answer."""

    def __init__(self) -> None:
        self.compactions_left = 0
        self.big_output = False
        self.steps = 0

    def __call__(self, body: dict[str, Any], index: int) -> Action:
        if is_title_request(body):
            return reply("Zeta loader")
        if is_compaction_request(body):
            return reply(SUMMARY)
        self.steps += 1
        if self.big_output:
            self.big_output = False
            return tool_call("bash", {"command": BIG_OUTPUT, "description": "Count"})
        if self.compactions_left > 0:
            self.compactions_left -= 1
            call = tool_call("bash", {"command": f"echo check-{self.steps}", "description": "Check"})
            return attrs.evolve(call, usage=NEAR_WINDOW)
        return reply(f"Done (step {self.steps}).")


@attrs.define
class Conversation:
    home: OpencodeHome
    bodies: list[dict[str, Any]]
    resumed_from: int
    """The index of the resumed run's first request."""
    notes: Path
    kept: dict[str, Any] | None
    """ctxd's notes on the session after the five compactions (deleted before the resume)."""
    outputs: dict[str, str]
    """The big bash output as each model received it."""


def text(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages"), ensure_ascii=False).replace("\\n", "\n").replace('\\"', '"')


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conversation]:
    binary = opencode_binary()
    tmp = tmp_path_factory.mktemp("ledger")
    with FakeOpenAIServer() as server:
        looping = Looping()
        server.responder = looping
        env = {
            "CTXD_OPENCODE_COMMAND": f"{Path(sys.executable).parent / 'ctxd'} serve",
            "CTXD_CONFIG": str(tmp / "no-config.json"),
        }
        home = OpencodeHome(tmp / "oc", server, binary, plugins=[PLUGIN.as_uri()], extra_env=env, windows=WINDOWS)
        home.write_config()
        outputs: dict[str, str] = {}

        def run(*words: str, model: str = "fake-model") -> None:
            """One ``opencode run`` on ``model`` (a session goes on with the model of its last turn otherwise);
            on the small and the large model the turn reads the big output."""
            start = len(server.requests)
            looping.big_output = model != "fake-model"
            done = home.run("--model", f"fake/{model}", *words, timeout=240)
            assert done.returncode == 0, done.stderr[-3000:]
            if looping.big_output is False and model != "fake-model":
                # The newest tool result of the turn's last request (earlier turns' are in its history too).
                tools = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
                assert len(server.requests) > start and tools
                content = tools[-1]["content"]
                outputs[model] = content if isinstance(content, str) else json.dumps(content)

        # Words as a shell passes them (opencode quotes a single argument that holds spaces).
        run(*GOAL.split(), model="small")
        with sqlite3.connect(f"file:{home.database}?mode=ro", uri=True) as db:
            ((session,),) = db.execute("SELECT id FROM session").fetchall()
        run("--session", session, *PLANTED.split(), model="large")
        looping.compactions_left = 5
        run("--session", session, *ERROR.split())
        notes = home.root / "state" / "ctxd" / "opencode" / f"{session}.json"
        kept = json.loads(notes.read_text()) if notes.exists() else None
        notes.unlink(missing_ok=True)  # the resume rebuilds the ledger from opencode's database
        resumed_from = len(server.requests)
        looping.compactions_left = 1
        run("--session", session, "Go", "on.")
        yield Conversation(home, [r.body for r in server.requests], resumed_from, notes, kept, outputs)


def compactions(conversation: Conversation) -> list[tuple[int, int]]:
    """(the compaction request, the first request after it) for every compaction, by index."""
    bodies = conversation.bodies
    found = [i for i, body in enumerate(bodies) if is_compaction_request(body)]
    after = [next(j for j in range(i + 1, len(bodies)) if not is_title_request(bodies[j])) for i in found]
    return list(zip(found, after, strict=True))


def test_five_compactions_then_one_after_the_resume(conversation: Conversation) -> None:
    pairs = compactions(conversation)
    assert len(pairs) == 6, [text(b)[-120:] for b in conversation.bodies]
    assert sum(i < conversation.resumed_from for i, _ in pairs) == 5
    # ctxd kept the ledger in its notes, 0600, through the fifth compaction.
    assert conversation.kept is not None and conversation.kept["compactions"] == 5
    assert oct(conversation.notes.stat().st_mode & 0o777) == oct(0o600)


def test_every_fact_is_in_each_compaction_prompt_and_the_request_after_it(conversation: Conversation) -> None:
    bodies = conversation.bodies
    for number, (prompt, after) in enumerate(compactions(conversation), 1):
        asked = text(bodies[prompt])
        assert "## What this compaction must keep" in asked
        assert [f for f in FACTS if f not in asked] == [], f"compaction {number}'s prompt"
        sent = text(bodies[after])
        assert SUMMARY.split("\n")[1] in sent  # opencode's own summary, which keeps only the path
        assert [f for f in FACTS if f not in sent] == [], f"the request after compaction {number}"


def test_the_resumed_session_gets_its_facts_from_its_first_request(conversation: Conversation) -> None:
    first = conversation.bodies[conversation.resumed_from]
    assert not is_compaction_request(first)
    systems = [m["content"] for m in first["messages"] if m["role"] == "system"]
    injected = [s for s in systems if isinstance(s, str) and s.startswith("## Must keep (ctxd)")]
    assert injected, systems
    assert [f for f in FACTS if f not in injected[0] and f != FACTS[0]] == []  # the summary holds the path
    # The notes were rebuilt from the database, and taken the sixth compaction in.
    assert json.loads(conversation.notes.read_text())["compactions"] == 6


def test_the_goal_stays_the_first_request(conversation: Conversation) -> None:
    ledger = json.loads(conversation.notes.read_text())["ledger"]
    assert ledger["goal"] == GOAL
    requests = [f for f in ledger["facts"] if f["kind"] == "request" and f["status"] == "open"]
    assert [f["text"] for f in requests] == ["Go on."]  # opencode's "Continue if you have next steps" is not one


def test_an_output_is_cut_at_a_share_of_the_models_window(conversation: Conversation) -> None:
    small, large = conversation.outputs["small"], conversation.outputs["large"]
    assert "ctxd truncated this tool result" in small and len(small) <= 19_200  # 16,000 tokens x 0.3 x 4
    assert small.startswith("0" * 48 + "1\n")  # a log keeps its head (and its tail)
    assert large.startswith("0" * 48 + "1\n") and len(large) >= 20_000 and "ctxd truncated" not in large
