// The report at scale, in a real browser: a run folder of 10,000 models the test writes itself
// as a grid run leaves it (plan.yaml with `group_by: k`, results.json with the grid's `parameters`
// listed and per model; jobs.log empty, its records being framed with a hash the test does not
// compute): two entries lstm-{k}-{units}-{lr} and gru-{k}-{units}-{lr} over k (100 series), units
// and lr. `nnfleet report` writes the page; Debian's chromium (headless, playwright-core) loads it
// and the test checks the leaderboard's pages, the curves' top 10 and band (its median checked
// against the test's own), models added to the curves on request, the number formatter, the grid
// columns and axes, the per-group view, and no console or page errors. It MEASURES the page's
// size (asserted under 5 MB: a size, not a timing) and its load time (printed, not asserted).
// Then a W4-like run trained for real (lstm-{k}, gru-{k} over 3 series of data, `group_by: k`)
// shows which architecture wins each series. Screenshot: scale.png in WORK_DIR.
//   node report_scale_test.mjs NNFLEET_BINARY WORK_DIR PLAYWRIGHT_CORE_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { openPage } from "./open_page.mjs";
import { check, finish } from "./checks.mjs";

const [nnfleet, work, pwDir] = process.argv.slice(2);
fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });

// A fixed pseudo-random sequence (a 32-bit LCG): the same folder every time.
let seed = 4242;
const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296);
const round6 = (v) => +v.toPrecision(6);

// ---- 10,000 models: 2 architectures x 100 series x 5 widths x 10 learning rates ---------------
const kEpochs = 5;
const ks = [...Array(100).keys()], unitsList = [8, 16, 32, 64, 128];
const lrs = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1];
const runs = [];
for (const arch of ["lstm", "gru"])
  for (const k of ks)
    for (const units of unitsList)
      for (const lr of lrs) runs.push({ name: `${arch}-${k}-${units}-${lr}`, arch, p: { k, units, lr }, skill: rand() + (arch === "lstm" ? 0.05 : 0) });
const kModels = runs.length;
function row(r, i) {
  const history = [];
  for (let e = 1; e <= kEpochs; e++) {
    const loss = 2 / (1 + r.skill * e) + 0.01 * rand(), val = loss * (1.05 + 0.1 * rand());
    history.push({ epoch: e, seconds: 0.01 + 0.001 * rand(), loss, accuracy: 1 - loss / 3, val_loss: val, val_accuracy: 1 - val / 3 });
  }
  const last = history[kEpochs - 1];
  return {
    name: r.name, status: "done", message: "", epochs: kEpochs, params: 100 + r.p.units * 10, seconds: 0.05,
    samples_per_second: 150000 + Math.floor(rand() * 1000), core: i % 2,
    metrics: { loss: last.loss, accuracy: last.accuracy, val_loss: last.val_loss, val_accuracy: last.val_accuracy },
    best: { epoch: kEpochs, monitor: "val_loss", value: last.val_loss }, history,
    metric_order: ["loss", "accuracy", "val_loss", "val_accuracy"], history_order: ["loss", "accuracy", "val_loss", "val_accuracy"],
    parameters: r.p, parameter_order: ["k", "units", "lr"],
  };
}
const rows = runs.map(row);
const byLoss = rows.slice().sort((a, b) => a.metrics.val_loss - b.metrics.val_loss);
byLoss[0].samples_per_second = 199704; // the formatter once showed it as "2 K"
const dir = path.join(work, "run");
fs.mkdirSync(dir);
fs.writeFileSync(path.join(dir, "plan.yaml"), "seed: 1\ngroup_by: k\nmodels:\n" + runs.map((r) => `  - name: ${r.name}\n    epochs: ${kEpochs}\n    layers:\n      - Dense: {units: ${r.p.units}}\n    optimizer: {Adam: {learning_rate: ${r.p.lr}}}\n`).join(""));
fs.writeFileSync(path.join(dir, "jobs.log"), "");
const parameters = ["k", "units", "lr"].map((name) => ({ name, kind: "grid", log: false }));
fs.writeFileSync(path.join(dir, "results.json"), JSON.stringify({ plan: "w4.yaml", seed: 1, workers: 2, rank_by: "val_loss", parameters, models: rows }));

execFileSync(nnfleet, ["report", dir], { encoding: "utf8" });
const html = path.join(dir, "report.html");
const bytes = fs.statSync(html).size;
console.log(`MEASURED ${kModels} models: page ${(bytes / 1e6).toFixed(2)} MB`);
check(bytes < 5e6, `the page of ${kModels} models is under 5 MB (${(bytes / 1e6).toFixed(2)} MB)`);

const { chromium } = await import(pathToFileURL(path.join(pwDir, "index.mjs")).href);
const errors = [];
function setup(p) {
  errors.length = 0;
  p.on("console", (m) => m.type() === "error" && errors.push("console: " + m.text()));
  p.on("pageerror", (e) => errors.push("page: " + e.message));
}
const { browser, page } = await openPage(chromium, pathToFileURL(html).href, "#board tbody tr", setup);
// From the start of navigation to the end of the load event: the inline scripts (parsing the
// data, drawing every section) run before it ends.
const loadMs = await page.evaluate(() => { const n = performance.getEntriesByType("navigation")[0]; return n.loadEventEnd - n.startTime; });
console.log(`  time per section (ms): ${JSON.stringify(await page.evaluate(() => window.nnfleetReport.timings))}`);
console.log(`MEASURED ${kModels} models: loaded in ${(loadMs / 1000).toFixed(2)} s (navigation start to load end; printed, not asserted)`);

// The leaderboard: a page of 50 rows, the count on top, pages over every model.
const count = await page.$eval("#model-count", (e) => e.textContent);
check(count === "10,000 models", `the top of the page gives the count (${count})`);
const names = () => page.$$eval("#board tbody tr", (trs) => trs.map((t) => t.dataset.model));
let shown = await names();
check(shown.length === 50 && shown[0] === byLoss[0].name, `the leaderboard's first page: 50 rows, the best first (${shown.length}, ${shown[0]})`);
const info = () => page.$eval("#page-info", (e) => e.textContent);
check((await info()) === "page 1 of 200", `page controls (${await info()})`);
await page.click("#page-next");
shown = await names();
check(JSON.stringify(shown) === JSON.stringify(byLoss.slice(50, 100).map((r) => r.name)) && (await info()) === "page 2 of 200", `"next" shows ranks 51 to 100 (${shown[0]} .. ${shown[49]})`);
await page.click("#page-last");
shown = await names();
check(shown.length === 50 && shown[49] === byLoss[kModels - 1].name, `"last" ends with the worst model (${shown[49]})`);
await page.click('#board th[data-key="name"]');
shown = await names();
const sortedNames = rows.map((r) => r.name).sort((a, b) => a.localeCompare(b));
check(shown[0] === sortedNames[0] && (await info()) === "page 1 of 200", `sorting goes over every model and back to page 1 (${shown[0]})`);
await page.fill("#filter", "gru-7-");
shown = await names();
const gru7 = rows.filter((r) => r.name.includes("gru-7-")).length;
const note = await page.$eval("#shown", (e) => e.textContent);
check(shown.length === 50 && shown.every((n) => n.startsWith("gru-7-")) && note.includes(`of ${gru7} matching`), `the filter goes over every model (${note})`);
await page.fill("#filter", "");
await page.click('#board th[data-key="rank"]');

// The formatter: 199,704 samples/s shows as "200 K", never "2 K".
const spsCol = await page.$$eval("#board th", (th) => th.findIndex((e) => e.dataset.key === "sps"));
const sps = await page.$eval("#board tbody tr", (tr, c) => tr.children[c].textContent, spsCol);
check(sps === "200 K", `samples/s of the best model: "${sps}" (199,704)`);
const fmts = await page.evaluate(() => [nnfleetFormat.fmt(199704), nnfleetFormat.human(199704, ""), nnfleetFormat.fmt(0.0000123456)]);
check(JSON.stringify(fmts) === JSON.stringify(["199,704", "200 K", "1.235e-5"]), `the page's formatter (${fmts.join(", ")})`);

// The grid's columns in the leaderboard and the grid charts' axes (lr spans 3 decades: log).
const head = await page.$$eval("#board th", (th) => th.map((e) => e.dataset.key));
check(["g:k", "g:units", "g:lr"].every((k) => head.includes(k)), `the grid variables are leaderboard columns (${head.join(", ")})`);
const cells = await page.$eval("#board tbody tr", (tr, cols) => cols.map((c) => tr.children[c].textContent), ["g:k", "g:units", "g:lr"].map((k) => head.indexOf(k)));
const p0 = byLoss[0].parameters;
check(JSON.stringify(cells) === JSON.stringify([String(p0.k), String(p0.units), String(p0.lr)]), `the best model's grid cells (${cells.join(", ")})`);
const axes = await page.$$eval(".grid-chart", (g) => g.map((e) => e.dataset.var + ":" + e.dataset.axis));
check(JSON.stringify(axes) === JSON.stringify(["k:linear", "units:linear", "lr:log"]), `a grid chart per variable, lr on a log axis (${axes.join(", ")})`);

// The curves: the best 10 drawn, the other 9,990 as a band whose median is the test's own.
const curves = await page.$$eval("#curves .curve", (c) => c.map((b) => ({ col: b.dataset.column, series: +b.dataset.series, band: +b.dataset.band })));
check(curves.length === 4 && curves.every((c) => c.series === 10 && c.band === kModels - 10), `each curve chart draws 10 models and a band of the other ${kModels - 10} (${JSON.stringify(curves[0])})`);
const top10 = byLoss.slice(0, 10).map((r) => r.name).sort();
const labels = await page.evaluate(() => window.nnfleetReport.curves.map((u) => u.series.slice(1).map((s) => s.label)));
check(labels.every((l) => JSON.stringify(l.slice(0, 10).slice().sort()) === JSON.stringify(top10) && l.slice(10).join("|") === "upper quartile of the rest|median of the rest|lower quartile of the rest"), `the drawn models are the best 10 by val_loss, then the band (${labels[0].slice(10).join(", ")})`);
const rest = new Set(byLoss.slice(10).map((r) => r.name));
const quantile = (v, p) => { const at = (v.length - 1) * p, lo = Math.floor(at), hi = Math.ceil(at); return v[lo] + (v[hi] - v[lo]) * (at - lo); };
const want = [0, 2, 4].map((e) => { const v = rows.filter((r) => rest.has(r.name)).map((r) => round6(r.history[e].val_loss)).sort((a, b) => a - b); return [quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75)]; });
const got = await page.evaluate(() => { const u = window.nnfleetReport.curves.find((c) => c.root.parentNode.dataset.column === "val_loss"); const n = u.series.length; return [0, 2, 4].map((e) => [u.data[n - 1][e], u.data[n - 2][e], u.data[n - 3][e]]); });
const close = got.every((g, e) => g.every((v, j) => Math.abs(v - want[e][j]) < 1e-9));
check(close, `the band's quartiles and median of val_loss at epochs 1, 3, 5 (${JSON.stringify(got[0])} vs ${JSON.stringify(want[0])})`);

// Any model on request: a leaderboard row's "plot", then the box by name; isolating one.
await page.click("#page-next");
const pick = byLoss[60].name;
await page.click(`#board tr[data-model="${pick}"] button.plot`);
let drawn = await page.$$eval("#curves .curve", (c) => c.map((b) => +b.dataset.series));
check(drawn.every((n) => n === 11), `"plot" adds a model to every curve chart (${drawn.join(", ")})`);
const far = byLoss[kModels - 3].name;
await page.fill("#curve-add", far);
await page.press("#curve-add", "Enter");
drawn = await page.$$eval("#curves .curve", (c) => c.map((b) => +b.dataset.series));
const has = await page.evaluate((n) => window.nnfleetReport.curves[0].series.some((s) => s.label === n), far);
check(drawn.every((n) => n === 12) && has, `the box adds a model by name (${far}: ${drawn.join(", ")})`);
await page.fill("#filter", byLoss[kModels - 1].name);
await page.click(`#board tr[data-model="${byLoss[kModels - 1].name}"] button.iso`);
let showing = await page.evaluate(() => window.nnfleetReport.curves[0].series.slice(1).filter((s) => s.show).map((s) => s.label));
check(showing.length === 1 && showing[0] === byLoss[kModels - 1].name, `isolating a model not drawn draws it alone (${showing.join(", ")})`);
await page.click(`#board tr[data-model="${byLoss[kModels - 1].name}"] button.iso`);
showing = await page.evaluate(() => window.nnfleetReport.curves[0].series.slice(1).filter((s) => s.show).length);
check(showing === 13 + 3, `"show all" shows the drawn models and the band again (${showing} series)`);
await page.fill("#filter", "");

// The groups: one per series k, each won by its best model, wins summed per architecture.
const groups = await page.$$eval("#group-table tbody tr", (trs) => trs.map((t) => ({ k: t.dataset.group, winner: t.dataset.winner, arch: t.dataset.arch })));
const bestOf = new Map();
for (const r of byLoss) if (!bestOf.has(r.parameters.k)) bestOf.set(r.parameters.k, r);
const groupsOk = groups.length === 100 && groups.every((g) => bestOf.get(+g.k).name === g.winner && g.arch === g.winner.replace(/^(\w+)-\d+-/, "$1-{k}-"));
check(groupsOk, `a group per k, each won by its best model (${groups.length} groups; k=${groups[0].k}: ${groups[0].winner} as ${groups[0].arch})`);
const wins = await page.$$eval("#group-wins tbody tr", (trs) => trs.map((t) => [t.dataset.arch, +t.children[1].textContent.replace(/,/g, "")]));
check(wins.reduce((s, w) => s + w[1], 0) === 100 && wins[0][1] >= wins[wins.length - 1][1], `the wins per architecture add up to the groups (${wins.slice(0, 3).map((w) => w.join(": ")).join(", ")})`);

await page.screenshot({ path: path.join(work, "scale.png") });
check(errors.length === 0, `no console or page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
await browser.close();

// ---- a W4-like run, trained: lstm-{k} and gru-{k} over 3 series, grouped by k ---------------
{
  const w4 = path.join(work, "w4");
  fs.mkdirSync(w4);
  for (const k of [1, 2, 3]) {
    let csv = "a,b,label\n";
    for (let i = 0; i < 120; i++) {
      const c = i % 2, t = ((i * 7919) % 89) / 89 - 0.5;
      csv += [c + t * k, -c + 0.5 * t * k, c].map((v) => +v.toFixed(4)).join(",") + "\n";
    }
    fs.writeFileSync(path.join(w4, `series_${k}.csv`), csv);
  }
  const entry = (arch, units) => `  - name: ${arch}-{k}
    grid: {k: [1, 2, 3]}
    data: {train: {csv: "series_{k}.csv", label: label}, validation_split: 0.25}
    layers:
      - Dense: {units: ${units}, activation: relu}
      - Dense: {units: 2, activation: softmax}
`;
  fs.writeFileSync(path.join(w4, "w4.yaml"), `seed: 5
group_by: k
defaults:
  epochs: 3
  batch_size: 16
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: 0.02}}
models:
${entry("lstm", 16)}${entry("gru", 2)}`);
  const out = path.join(w4, "run");
  execFileSync(nnfleet, ["train", path.join(w4, "w4.yaml"), "--out", out, "--workers", "2", "--quiet"], { encoding: "utf8" });
  check(/^group_by: k$/m.test(fs.readFileSync(path.join(out, "plan.yaml"), "utf8")), "the run folder's plan copy keeps group_by");
  let refused = "";
  try {
    execFileSync(nnfleet, ["report", out, "--group-by", "series"], { encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    refused = String(e.stderr);
  }
  check(refused.includes("failed to group the report by 'series'") && refused.includes("(k)"), `report --group-by refuses a name the run does not record (${refused.trim().split("\n")[0]})`);
  execFileSync(nnfleet, ["report", out, "--group-by", "k"], { encoding: "utf8" });
  const results = JSON.parse(fs.readFileSync(path.join(out, "results.json"), "utf8"));
  const best = new Map(), by = results.rank_by, higher = /acc/.test(by); // as the leaderboard ranks
  for (const m of results.models) {
    const k = m.parameters.k, b = best.get(k);
    if (m.status === "done" && (!b || (higher ? m.metrics[by] > b.metrics[by] : m.metrics[by] < b.metrics[by]))) best.set(k, m);
  }
  const { browser: b2, page: p2 } = await openPage(chromium, pathToFileURL(path.join(out, "report.html")).href, "#group-table tbody tr", setup);
  const g = await p2.$$eval("#group-table tbody tr", (trs) => trs.map((t) => [t.dataset.group, t.dataset.winner, t.dataset.arch]));
  const ok = g.length === 3 && g.every(([k, w, a]) => best.get(+k).name === w && a === w.replace(/-\d+$/, "-{k}"));
  check(ok, `each series' best architecture (${g.map((x) => x.join(" ")).join("; ")})`);
  const wins = await p2.$$eval("#group-wins tbody tr", (trs) => trs.map((t) => t.dataset.arch + ":" + t.children[1].textContent));
  const want = ["lstm-{k}", "gru-{k}"].map((a) => [a, [...best.values()].filter((m) => m.name.startsWith(a.slice(0, -3))).length]).sort((x, y) => y[1] - x[1] || x[0].localeCompare(y[0]));
  check(JSON.stringify(wins) === JSON.stringify(want.map((w) => w.join(":"))), `wins per architecture (${wins.join(", ")})`);
  await (await p2.$("#groups")).screenshot({ path: path.join(work, "groups.png") });
  check(errors.length === 0, `W4 page: no console or page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
  await b2.close();
}
finish();
