"""``ctxd search``: the history index from the command line, through the same method as the daemon's
``history/search`` (:data:`ctxd.service.methods.METHODS`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from ctxd.cli.render import dump
from ctxd.errors import TeamError
from ctxd.service import protocol as p
from ctxd.service.config import load_cli_config
from ctxd.service.history_text import search_text
from ctxd.service.methods import call
from ctxd.service.service import Service


async def _search(service: Service, params: p.HistorySearchParams) -> dict[str, Any]:
    try:
        return await call(service, p.HISTORY_SEARCH, params)  # type: ignore[no-any-return]
    finally:
        await service.close()


def cmd_search(args: argparse.Namespace) -> int:
    config, problems = load_cli_config()
    for problem in problems:
        print(f"ctxd: configuration: {problem}", file=sys.stderr)
    if args.root:
        config.roots = [os.path.abspath(r) for r in args.root]
    # Waits for the index to catch up (bounded): the user asked and is waiting for the answer.
    params = p.HistorySearchParams(args.query, args.session, args.limit, p.WAIT_LIMIT_MS)
    if args.team:
        params = p.HistorySearchParams(
            args.query, args.session, args.limit, 0, "team", args.project, args.agent, args.user, args.since, args.until
        )
    else:
        for flag in ("project", "agent", "user", "since", "until"):
            if getattr(args, flag) is not None:
                raise TeamError("config", f"--{flag} filters team searches: add --team")
    result = asyncio.run(_search(Service(config), params))
    if args.json:
        dump(result)
    else:
        print(search_text(result))
    return 0
