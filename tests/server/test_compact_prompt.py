"""``compact/prompt`` through a real ``ctxd serve``: the summary's shape, ctxd's compaction prompt and the recall
sentence, the same texts the hooks and ``ctxd codex-prompt`` use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.summary_shape import assert_summary_shape

from ctxd.compaction.recall import RECALL_HINT
from ctxd.compaction.summary.prompts import SHAPE_INSTRUCTIONS, agent_prompt
from ctxd.service import protocol as p

from .harness import REPO, call, server_env, start_ctxd


async def test_compact_prompt_answers_the_shape_the_prompt_and_the_recall_sentence(tmp_path: Path) -> None:
    async with start_ctxd({"roots": [str(tmp_path)], "watch": False}) as client:
        answer = await call(client, p.COMPACT_PROMPT, {})
        assert answer == {"shape": SHAPE_INSTRUCTIONS, "prompt": agent_prompt(), "recall": RECALL_HINT}
        assert await call(client, p.COMPACT_PROMPT, None) == answer
    assert_summary_shape(answer["prompt"])
    printed = subprocess.run(
        [sys.executable, "-m", "ctxd", "codex-prompt"], env=server_env(), capture_output=True, text=True, cwd=REPO
    )
    assert printed.returncode == 0 and printed.stdout.strip() == answer["prompt"]
