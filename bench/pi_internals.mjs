// pi_internals: loads pi 1.5.2's published bundle, plus functions its compaction code defines but the
// bundle's index does not export (bench/pi_bench.mjs and tests/conformance/pi_probe.mjs use it).
//
// A load hook appends one `export{...}` line to the chunk that defines them; their code is unchanged.
// Needs Node >= 22.19 (module.registerHooks). Call once per process, before anything else imports pi.
import { readdirSync, readFileSync } from "node:fs";
import * as nodeModule from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export async function loadPi(piDir, names) {
	const version = JSON.parse(readFileSync(join(piDir, "package.json"), "utf8")).version;
	if (version !== "1.5.2") throw new Error(`expected pi 1.5.2 at ${piDir}, found ${version}`);
	const chunks = join(piDir, "dist", "bundle", "chunks");
	const chunk = readdirSync(chunks)
		.map((f) => join(chunks, f))
		.find((f) => f.endsWith(".js") && readFileSync(f, "utf8").includes("function prepareCompaction(pathEntries"));
	if (!chunk) throw new Error(`pi 1.5.2's compaction chunk not found in ${chunks}`);
	const chunkUrl = pathToFileURL(chunk).href;
	nodeModule.registerHooks({
		load(url, context, nextLoad) {
			const r = nextLoad(url, context);
			if (url !== chunkUrl) return r;
			const src = typeof r.source === "string" ? r.source : Buffer.from(r.source).toString("utf8");
			return { ...r, format: "module", source: `${src}\nexport{${names.map((n) => `${n} as __ctxd_${n}`).join(",")}};\n` };
		},
	});
	const pi = await import(pathToFileURL(join(piDir, "dist", "bundle", "index.js")).href);
	const loaded = await import(chunkUrl);
	const internal = Object.fromEntries(names.map((n) => [n, loaded[`__ctxd_${n}`]]));
	for (const n of names) if (typeof internal[n] !== "function") throw new Error(`pi 1.5.2 has no ${n} in ${chunk}`);
	return { pi, internal, version };
}
