#!/usr/bin/env node
// pi_bench: pi 1.5.2's own timings on one session file, measured in-process (bench/run.py runs it
// beside ctxd's bench, alternating).
//
// usage: node pi_bench.mjs SESSION.jsonl [--opens N] [--appends N]
//   PI_ORACLE_PI_DIR  the unpacked @earendil-works/pi-coding-agent 1.5.2 (bench/run.py passes it)
//
// Needs Node >= 22.19 (pi's engines). Like tests/conformance/pi_probe.mjs it runs pi's published bundle,
// with the few functions compaction.ts defines but the bundle's index does not export (pi_internals.mjs). The file is
// opened from a private copy and appends go to that copy. No model is ever called.
//
// What is timed, each as pi 1.5.2 runs it:
//   open          SessionManager.open (reads and parses the whole file), median of --opens
//   build         SessionManager.buildSessionContext(): first call (cold), then the median of 20
//   request       what AgentSession's prepareRequest does before every model call:
//                 buildSessionProjection() + estimateProjectedContextTokens(projection, getBranch())
//   plan          what AgentSession.compact() does before the model call:
//                 getBranch() + prepareCompaction(path, settings with keepRecentTokens 20000)
//   append        appendMessage() (one JSONL line written), then the request path again:
//                 --appends times, alternating an assistant tool call (with usage) and its result
// maxRSS after the first open is the peak of the process so far (Node, pi's bundle and the session).
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { loadPi } from "./pi_internals.mjs";

const piDir = resolve(process.env.PI_ORACLE_PI_DIR ?? "");
const { pi, internal, version } = await loadPi(piDir, ["prepareCompaction", "estimateProjectedContextTokens"]);
const { SessionManager, DEFAULT_COMPACTION_SETTINGS } = pi;
const { prepareCompaction, estimateProjectedContextTokens } = internal;

const args = process.argv.slice(2);
const file = resolve(args[0]);
const opt = (name, fallback) => {
	const i = args.indexOf(name);
	return i >= 0 ? Number(args[i + 1]) : fallback;
};
const opens = opt("--opens", 3);
const appends = opt("--appends", 200);

const now = () => performance.now();
const median = (xs) => {
	const s = [...xs].sort((a, b) => a - b);
	const n = s.length;
	return n === 0 ? null : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const pct = (xs, q) => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : null;
};
const settings = { ...DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: 20000 };

const work = mkdtempSync(join(tmpdir(), "pi-bench-"));
try {
	const copy = join(work, basename(file));
	copyFileSync(file, copy);
	const openTimes = [];
	let sm;
	let rssOpenMb = 0;
	for (let k = 0; k < opens; k++) {
		sm = undefined;
		const t = now();
		sm = SessionManager.open(copy, work);
		openTimes.push(now() - t);
		if (k === 0) rssOpenMb = process.resourceUsage().maxRSS / 1024;
	}
	const out = { pi: version, node: process.versions.node, file, entries: sm.getEntries().length };
	out.open_ms = median(openTimes);
	out.open_runs_ms = openTimes;
	out.rss_open_mb = rssOpenMb;

	let t = now();
	const ctx = sm.buildSessionContext();
	out.build_cold_ms = now() - t;
	out.context_messages = ctx.messages.length;
	const warm = [];
	for (let k = 0; k < 20; k++) {
		t = now();
		sm.buildSessionContext();
		warm.push(now() - t);
	}
	out.build_warm_ms = median(warm);

	const request = () => {
		const projection = sm.buildSessionProjection();
		return estimateProjectedContextTokens(projection, sm.getBranch()).tokens;
	};
	const req = [];
	for (let k = 0; k < 20; k++) {
		t = now();
		request();
		req.push(now() - t);
	}
	out.request_ms = median(req);

	const plan = () => prepareCompaction(sm.getBranch(), settings);
	t = now();
	const prep = plan();
	out.plan_cold_ms = now() - t;
	const plans = [];
	for (let k = 0; k < 20; k++) {
		t = now();
		plan();
		plans.push(now() - t);
	}
	out.plan_warm_ms = median(plans);
	out.plan_summarize = prep ? prep.messagesToSummarize.length : null;

	const appendTimes = [];
	const afterAppend = [];
	const text = "x".repeat(1800);
	for (let k = 0; k < appends; k++) {
		const message =
			k % 2 === 0
				? {
						role: "assistant",
						content: [{ type: "toolCall", id: `call_${k}`, name: "read", arguments: { path: `f${k}.ts` } }],
						api: "anthropic-messages",
						provider: "anthropic",
						model: "claude-sonnet-4-5",
						usage: { input: 10, output: 20, cacheRead: 500000 + k, cacheWrite: 100, totalTokens: 500130 + k },
						stopReason: "toolUse",
						timestamp: Date.now(),
					}
				: { role: "toolResult", toolCallId: `call_${k - 1}`, toolName: "read", content: [{ type: "text", text }], isError: false, timestamp: Date.now() };
		t = now();
		sm.appendMessage(message);
		appendTimes.push(now() - t);
		t = now();
		request();
		afterAppend.push(now() - t);
	}
	out.append_ms = median(appendTimes);
	out.after_append_p50_ms = pct(afterAppend, 0.5);
	out.after_append_p99_ms = pct(afterAppend, 0.99);
	out.rss_mb = process.resourceUsage().maxRSS / 1024;
	process.stdout.write(`${JSON.stringify(out)}\n`);
} finally {
	rmSync(work, { recursive: true, force: true });
}
