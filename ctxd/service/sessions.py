"""The sessions job: list, open, create, append to, read (tree, entry, stats), label, pin, fork and check
sessions. Appends go through the writer (:mod:`ctxd.service.writer`); new files are announced by the live part
(:mod:`ctxd.service.live`); both are given to it by the service that composes the jobs.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ctxd.context.live import live_context, size_of
from ctxd.context.pins import pin_entry
from ctxd.context.view import cap, project, run_rows
from ctxd.errors import InvalidEntryError, SessionNotFoundError
from ctxd.service import protocol as p
from ctxd.service.core import Core
from ctxd.service.listing import list_served
from ctxd.service.live import Live
from ctxd.service.registry import OpenSession, Registry, inside
from ctxd.service.writer import Appends
from ctxd.store.create import create_session
from ctxd.store.listing import cwd_dirname
from ctxd.tree.session import session_name


class Sessions:
    def __init__(self, core: Core, appends: Appends, live: Live) -> None:
        self.core = core
        self.config = core.config
        self.registry = core.registry
        self.appends = appends
        self.live = live

    # --- sessions -----------------------------------------------------------------------------

    async def session_list(self, params: p.SessionListParams) -> dict[str, Any]:
        roots = self.config.all_roots
        if params.roots:
            outside = [
                r
                for r in params.roots
                if not inside(r, self.config.all_roots) and r not in self.config.opencode_databases
            ]
            if outside:
                raise SessionNotFoundError(f"roots outside the configured roots: {outside}", roots=outside)
            roots = params.roots
        found = await asyncio.to_thread(list_served, self.config, params.roots, params.cwd)
        for s in found:
            if not s.archived:  # a session id names the live transcript, not ctxd's copy of it
                self.registry.remember(s.id, s.path)
        return {"roots": roots, "sessions": [p.capped_row(s.to_json()) for s in found]}

    async def session_open(self, params: p.SessionParams) -> dict[str, Any]:
        return await self.core.with_session(params.session, self._info)

    def _info(self, opened: OpenSession) -> dict[str, Any]:
        s = opened.session
        size = size_of(s)
        return {
            "path": s.path,
            "sessionId": s.file.session_id,
            "cwd": cap(s.file.cwd, p.NAME_LIMIT),
            "name": cap(session_name(s)),
            "version": s.file.version,
            "entries": len(s.file),
            "leafId": s.leaf_id(),
            "usage": p.to_json(self.core.usage(s, size.tokens)),
            "diagnostics": [d.to_json() for d in s.diagnostics()],
            "readOnly": s.file.read_only,
            "agent": s.file.header.get("agent", "pi"),
        }

    async def session_create(self, params: p.SessionCreateParams) -> dict[str, Any]:
        root = params.root or self.config.roots[0]
        if not inside(root, self.config.roots) and root not in self.config.roots:
            raise SessionNotFoundError(f"root {root!r} is not a configured session root", root=root)
        pi = Registry(self.config.roots)  # new sessions go under the pi roots only
        pi.check_destination(os.path.join(root, cwd_dirname(params.cwd)))
        path = await asyncio.to_thread(create_session, root, params.cwd)
        self.core.created_inside(pi, path)
        opened = await self.core.open(path)
        self.live.did_create(opened.session.path, opened.session.file.session_id)
        if params.name:
            await self.appends.append(opened, [{"type": "session_info", "name": params.name}], None, use_leaf=True)
        return await self.core.with_session(path, self._info)

    async def session_append(self, params: p.SessionAppendParams, *, explicit_parent: bool) -> dict[str, Any]:
        entries = list(params.entries)
        fields = [(f"entries[{i}]", f"entries[{i}].message") for i in range(len(entries))]
        for i, m in enumerate(params.messages):
            entries.append({"type": "message", "message": m})
            fields.append((f"messages[{i}]", f"messages[{i}]"))
        if not entries:
            raise InvalidEntryError("nothing to append: give entries or messages")
        for i, entry in enumerate(entries):
            # Names and labels are shown in every listing and tree: bounded, as session/create's.
            for field in ("name", "label"):
                text = entry.get(field) if entry.get("type") in ("session_info", "label") else None
                if isinstance(text, str) and len(text) > p.NAME_LIMIT:
                    at = f"entries[{i}].{field}"
                    raise InvalidEntryError(f"{at}: longer than {p.NAME_LIMIT} characters", index=i, field=at)
        opened = await self.core.open(params.session)
        return await self.appends.append(
            opened, entries, params.parentId, use_leaf=not explicit_parent, mode=params.durability, fields=fields
        )

    async def session_tree(self, params: p.SessionTreeParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            if params.fromId is not None:
                rows = run_rows(s, params.fromId, params.limit)
                total = len(rows)
            else:
                rows, total = project(s, collapse=params.collapse, offset=params.offset, limit=params.limit)
            size = size_of(s)
            return {
                "session": s.path,
                "sessionId": s.file.session_id,
                "name": cap(session_name(s)),
                "leafId": s.leaf_id(),
                "entries": len(s.file),
                "total": total,
                "offset": params.offset,
                "rows": [r.to_json() for r in rows],
                "usage": p.to_json(self.core.usage(s, size.tokens)),
                "readOnly": s.file.read_only,
                "diagnostics": [d.to_json() for d in s.diagnostics()],
            }

        return await self.core.with_session(params.session, work)

    async def session_entry(self, params: p.SessionEntryParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            i = s.file.require(params.entryId)
            from ctxd.context.view import node

            leaf = s.leaf()
            active = set(s.tree.path_to_root(leaf)) if leaf is not None else set()
            info = node(s, i, 0, active, leaf).to_json()
            info["entry"] = s.file.entry(i)
            info["children"] = [s.tree.id_of(c) for c in s.tree.child_ids(i)]
            return info

        return await self.core.with_session(params.session, work)

    async def session_label(self, params: p.SessionLabelParams) -> dict[str, Any]:
        opened = await self.core.open(params.session)
        await self.core.with_session(params.session, lambda o: o.session.file.require(params.entryId))
        entry: dict[str, Any] = {"type": "label", "targetId": params.entryId}
        if params.label:
            entry["label"] = params.label
        result = await self.appends.append(opened, [entry], None, use_leaf=True)
        return {"labelEntryId": result["ids"][0], "entryId": params.entryId, "label": params.label}

    async def session_pin(self, params: p.SessionPinParams) -> dict[str, Any]:
        """Pin or unpin a message: a ``ctxd.pin`` custom entry written at the leaf (see ctxd.context.pins)."""
        opened = await self.core.open(params.session)
        entry = await self.core.with_session(
            params.session, lambda o: pin_entry(o.session.file, params.entryId, params.pinned)
        )
        result = await self.appends.append(opened, [entry], None, use_leaf=True)
        return {"pinEntryId": result["ids"][0], "entryId": params.entryId, "pinned": params.pinned}

    async def session_fork(self, params: p.SessionEntryParams) -> dict[str, Any]:
        def work(o: OpenSession) -> str:
            # The fork goes next to its session: that folder must still lead inside the roots.
            self.registry.check_destination(os.path.dirname(o.session.path), params.session)
            return o.session.fork(params.entryId)

        path = await self.core.with_session(params.session, work)
        self.core.created_inside(self.registry, path)
        forked = await self.core.open(path)
        self.live.did_create(path, forked.session.file.session_id)
        return {
            "path": path,
            "sessionId": forked.session.file.session_id,
            "parentSession": self.registry.resolve(params.session),
        }

    async def session_stats(self, params: p.SessionParams) -> dict[str, Any]:
        def work(opened: OpenSession) -> dict[str, Any]:
            s = opened.session
            roles: dict[str, int] = {}
            types: dict[str, int] = {}
            for h in s.file.heads:
                kind = cap(h.type) or ""
                types[kind] = types.get(kind, 0) + 1
                if h.message is not None:
                    role = cap(h.message.role) or ""
                    roles[role] = roles.get(role, 0) + 1
            leaves = sum(1 for i in range(len(s.file)) if not s.tree.child_ids(i))
            ctx = live_context(s).context()
            return {
                "session": s.path,
                "entries": len(s.file),
                "bytes": os.path.getsize(s.path) if os.path.isfile(s.path) else 0,  # 0: a session in a database
                "types": types,
                "roles": roles,
                "leaves": leaves,
                "labels": len(s.tree.labels),
                "orphans": len(s.tree.orphans),
                "diagnostics": [d.to_json() for d in s.file.diagnostics],
                "contextMessages": len(ctx.messages),
                "usage": p.to_json(self.core.usage(s, ctx.contextTokens)),
            }

        return await self.core.with_session(params.session, work)

    async def session_check(self, params: p.SessionCheckParams) -> dict[str, Any]:
        """fsck: every finding in the session file (see ctxd.context.check); with ``repair``, the
        repairs that append or write a copy (ctxd.context.repair)."""

        def work(opened: OpenSession) -> dict[str, Any]:
            from ctxd.context.check import check_session
            from ctxd.context.repair import repair

            s = opened.session
            s.refresh()
            report = repair(s) if params.repair else check_session(s)
            return report.to_json()

        if params.repair:  # it may write: another process's write lock is waited for outside the session's
            repairing = await self.core.open(params.session)
            out = await self.core.locked_call(repairing, lambda: work(repairing))
        else:
            out = await self.core.with_session(params.session, work)
        appended = (out.get("repair") or {}).get("appended") or []
        if appended:
            opened = await self.core.open(params.session)
            s = opened.session
            self.core.emit(p.DID_CHANGE, p.DidChange(s.path, s.file.session_id, appended, s.leaf_id(), "ctxd"))
        return out
