"""The scripted conversation the Codex tests (and the recorded ``tests/data/codex/rollout-0.169-compactions.jsonl``)
run: two user turns, commands through ``exec_command``, and usage large enough that Codex compacts twice inside
the first turn and once before the second. The fake summaries leave out the user's constraint on purpose."""

from __future__ import annotations

from fakes.responses_server import Answer, FakeResponsesServer, RecordedRequest, call, reply

PROMPTS = (
    "Create notes.txt with a greeting. Constraint: never edit README.md.",
    "Now append a second line to notes.txt.",
)
CONSTRAINT = "never edit README.md"
BIG = 5000
"""Input tokens the fake reports: above the compact limit (3000) the harness sets."""

STEPS = (
    call("exec_command", {"cmd": "echo hello > notes.txt"}, "call_write", input_tokens=BIG),
    call("exec_command", {"cmd": "cat notes.txt"}, "call_read", input_tokens=BIG),
    reply("notes.txt now says hello.", input_tokens=BIG),
    call("exec_command", {"cmd": "echo bye >> notes.txt"}, "call_append", input_tokens=1000),
    reply("Appended a second line.", input_tokens=1000),
)


def summary_text(n: int) -> str:
    return f"SUMMARY {n}: the user wants notes.txt with a greeting; it was created with echo."


def responder(server: FakeResponsesServer) -> object:
    """Answers compaction requests with a summary and the others with the next of :data:`STEPS`."""

    def answer(request: RecordedRequest, index: int) -> Answer:
        done = server.model_requests[:index]
        if request.is_compaction:
            return reply(summary_text(sum(r.is_compaction for r in done) + 1), input_tokens=500)
        turn = sum(not r.is_compaction for r in done)
        return STEPS[turn] if turn < len(STEPS) else reply("Nothing more to do.", input_tokens=100)

    return answer
