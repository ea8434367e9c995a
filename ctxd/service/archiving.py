"""``session/archive``: keep a copy of an opencode session in ctxd's archive (:mod:`ctxd.store.opencode_archive`).

opencode's plugin asks for it on the session's events (after a compaction, when the session goes idle), so a
session the user later deletes from opencode stays readable in ctxd, listed with ``archived: true``.
"""

from __future__ import annotations

from typing import Any

from ctxd.errors import SessionError
from ctxd.service import protocol as p
from ctxd.service.base import ServiceBase
from ctxd.service.registry import OpenSession
from ctxd.store.dirs import archive_root
from ctxd.store.opencode import OpencodeFile
from ctxd.store.opencode_archive import archive_opencode_session


class Archiving(ServiceBase):
    async def session_archive(self, params: p.SessionParams) -> dict[str, Any]:
        root = archive_root()
        if root not in self.config.archive_roots:  # listed (and readable) from now on
            self.config.archive_roots.append(root)

        def work(opened: OpenSession) -> dict[str, Any]:
            file = opened.session.file
            if not isinstance(file, OpencodeFile):
                raise SessionError("session/archive keeps opencode sessions only", path=opened.session.path)
            try:
                done = archive_opencode_session(file.db, file.opencode_id, root)
            except (OSError, ValueError) as exc:
                raise SessionError(f"cannot archive the session: {exc}", path=opened.session.path) from exc
            return {"session": opened.session.path, "path": done.path, "copied": done.copied, "rotated": done.rotated}

        return await self._with(params.session, work)
