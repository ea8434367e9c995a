#!/usr/bin/env node
// pi_probe: pi 1.5.2's own answers for many session files, one JSON line each (tests/conformance).
//
// usage: node pi_probe.mjs < manifest.json     manifest: [{"file": PATH, "keep": keepRecentTokens}, ...]
//   PI_ORACLE_PI_DIR  the unpacked @earendil-works/pi-coding-agent 1.5.2 (default: ../shared/pi-oracle's copy)
//
// Needs Node >= 22.19 (pi's engines). Like ../shared/pi-oracle/pi-oracle.mjs it runs pi's published bundle,
// with the few functions compaction.ts defines but the bundle's index does not export (bench/pi_internals.mjs). Each file is opened
// from a private copy (SessionManager.open migrates v1/v2 files in place). No model is ever called.
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPi } from "../../bench/pi_internals.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const piDir = resolve(
	process.env.PI_ORACLE_PI_DIR ??
		join(here, "..", "..", "..", "shared", "pi-oracle", "node_modules", "@earendil-works", "pi-coding-agent"),
);
const { pi, internal } = await loadPi(piDir, [
	"prepareCompaction",
	"estimateContextTokens",
	"estimateProjectedContextTokens",
	"findProjectedCutPoint",
	"computeFileLists",
]);
const { SessionManager, estimateTokens, DEFAULT_COMPACTION_SETTINGS } = pi;
const { prepareCompaction, estimateContextTokens, estimateProjectedContextTokens, findProjectedCutPoint, computeFileLists } =
	internal;

function probe(file, keep) {
	const work = mkdtempSync(join(tmpdir(), "pi-probe-"));
	try {
		const copy = join(work, basename(file));
		copyFileSync(file, copy);
		const sm = SessionManager.open(copy, work);
		const entries = sm.getEntries();
		const fileIndex = new Map(entries.map((e, i) => [e.id, i]));
		const path = sm.getBranch();
		const projection = sm.buildSessionProjection();
		const messages = projection.entries.flatMap((pe) =>
			pe.messages.map((m) => ({
				role: m.role,
				entryId: pe.sourceEntry.id,
				fileIndex: fileIndex.get(pe.sourceEntry.id) ?? null,
				tokens: estimateTokens(m),
			})),
		);
		const at = (i) => {
			const e = i >= 0 ? projection.entries[i]?.sourceEntry : undefined;
			return e ? { id: e.id, fileIndex: fileIndex.get(e.id) ?? null } : null;
		};
		const prevCompaction = projection.entries.findIndex((pe) => pe.sourceEntry.type === "compaction" && pe.messages.length > 0);
		const start = prevCompaction >= 0 ? prevCompaction + 1 : 0;
		const cut = findProjectedCutPoint(projection.entries, start, projection.entries.length, keep);
		const prep = prepareCompaction(path, { ...DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: keep });
		return {
			file,
			keep,
			entries: entries.length,
			leaf: sm.getLeafId() ? { id: sm.getLeafId(), fileIndex: fileIndex.get(sm.getLeafId()) ?? null } : null,
			pathLength: path.length,
			messages,
			estimatedTokens: messages.reduce((s, m) => s + m.tokens, 0),
			estimateContextTokens: estimateContextTokens(projection.messages).tokens,
			projectedTokens: estimateProjectedContextTokens(projection, path).tokens,
			cut: {
				firstKept: at(cut.firstKeptEntryIndex),
				turnStart: at(cut.turnStartIndex),
				isSplitTurn: cut.isSplitTurn,
			},
			prepare: prep
				? {
						firstKept: { id: prep.firstKeptEntryId, fileIndex: fileIndex.get(prep.firstKeptEntryId) ?? null },
						isSplitTurn: prep.isSplitTurn,
						summarize: prep.messagesToSummarize.map((m) => m.role),
						turnPrefix: prep.turnPrefixMessages.map((m) => m.role),
						tokensBefore: prep.tokensBefore,
						previousSummary: prep.previousSummary ?? null,
						files: computeFileLists(prep.fileOps),
					}
				: null,
		};
	} catch (error) {
		return { file, keep, error: String(error?.stack ?? error) };
	} finally {
		rmSync(work, { recursive: true, force: true });
	}
}

const manifest = JSON.parse(readFileSync(0, "utf8"));
for (const { file, keep } of manifest) process.stdout.write(`${JSON.stringify(probe(resolve(file), keep ?? 20000))}\n`);
