// A search's report in a real browser, from run folders the test writes itself as the search
// design says a search run leaves them (plan.yaml with `search:`, results.json with `parameters`
// per model and at the top, each trial's `rungs`, `search`, status "pruned"; jobs.log empty, its
// records being framed with a hash the test does not compute): 2,000 trials of successive
// halving, and a grid whose model names do not hold their values. `nnfleet report` writes each
// page; Debian's chromium (headless, playwright-core from report/node_modules) loads it and the
// test checks what the search view drew: a line per trial through its rungs (pruned grey,
// finished coloured, the best on top), a chart per parameter with its axis (log, linear or
// categories), the trials table (sorting, "show all", pruned@N), a tooltip, and no console or
// page errors. Screenshots: search.png (the search's charts) and grid.png in WORK_DIR.
//   node report_search_test.mjs NNFLEET_BINARY WORK_DIR PLAYWRIGHT_CORE_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { openPage } from "./open_page.mjs";
import { check, finish } from "./checks.mjs";

const [nnfleet, work, pwDir] = process.argv.slice(2);
fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });

// A fixed pseudo-random sequence (a 32-bit LCG): the same folders every time.
let seed = 12345;
const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296);

// ---- the search run ---------------------------------------------------------------------------
const kTrials = 2000;
const pad = (k) => String(k).padStart(String(kTrials - 1).length, "0");
const trials = [];
for (let k = 0; k < kTrials; k++) {
  const p = { family: rand() < 0.5 ? "mlp" : "cnn" };
  if (p.family === "mlp") {
    p.depth = 1 + Math.floor(rand() * 3);
    for (let i = 0; i < p.depth; i++) p["width_" + i] = Math.floor(Math.exp(Math.log(32) + rand() * (Math.log(513) - Math.log(32))));
  } else p.filters = 4 + Math.floor(rand() * 29);
  p.lr = +Math.exp(Math.log(1e-4) + rand() * (Math.log(1e-2) - Math.log(1e-4))).toPrecision(6);
  p.batch_size = [32, 64, 128][Math.floor(rand() * 3)];
  p.dropout = +(rand() * 0.5).toFixed(4);
  trials.push({ name: "trial-" + pad(k), p, skill: rand() });
}
// Successive halving over rungs 1, 3, 9 (reduction factor 3): the best third of each rung goes on.
// Trial 7 failed before its first rung.
const rungs = [1, 3, 9];
const value = (t, e) => +(0.5 + 0.4 * t.skill * (1 - 1 / (e + 1))).toFixed(6);
let alive = trials.filter((t, k) => k !== 7);
for (const t of alive) t.rungs = [];
let epochsTrained = 0;
rungs.forEach((e, j) => {
  for (const t of alive) t.rungs.push({ epochs: e, value: value(t, e), decision: "promoted" });
  epochsTrained += alive.length * (e - (j ? rungs[j - 1] : 0));
  alive.sort((a, b) => b.rungs[j].value - a.rungs[j].value);
  const keep = j === rungs.length - 1 ? alive.length : Math.floor(alive.length / 3);
  alive.forEach((t, r) => (t.rungs[j].decision = j === rungs.length - 1 ? "final" : r < keep ? "promoted" : "pruned"));
  alive = alive.slice(0, keep);
});
const best = alive[0];
function row(t, k) {
  const last = t.rungs ? t.rungs[t.rungs.length - 1] : null;
  const status = !t.rungs ? "failed" : last.decision === "final" ? "done" : "pruned";
  return {
    name: t.name, status, message: status === "failed" ? "failed to build the model: a test's failure" : "",
    epochs: last ? last.epochs : 0, params: 1000 + k, seconds: 0.01 * (last ? last.epochs : 0),
    samples_per_second: 5000, core: k % 2,
    metrics: last ? { val_accuracy: last.value, val_loss: +(1 - last.value).toFixed(6) } : {},
    best: null, parameters: t.p, rungs: t.rungs || [],
  };
}
const searchDir = path.join(work, "search");
fs.mkdirSync(searchDir);
let plan = `seed: 7
search:
  trials: ${kTrials}
  sampler: random
  space:
    family: {choice: [mlp, cnn]}
    depth: {int: [1, 3], when: {family: mlp}}
    width: {int: [32, 512], log: true, per: depth, when: {family: mlp}}
    filters: {int: [4, 32], when: {family: cnn}}
    lr: {loguniform: [1.0e-4, 1.0e-2]}
    batch_size: {choice: [32, 64, 128]}
    dropout: {uniform: [0.0, 0.5]}
  scheduler:
    successive_halving: {reduction_factor: 3, min_epochs: 1, max_epochs: 9}
  metric: val_accuracy
  mode: max
models:
`;
for (const t of trials) plan += `  - name: ${t.name}\n    epochs: 9\n    layers:\n      - Dense: {units: 10, activation: softmax}\n`;
fs.writeFileSync(path.join(searchDir, "plan.yaml"), plan);
fs.writeFileSync(path.join(searchDir, "jobs.log"), "");
const parameters = [
  { name: "family", kind: "choice", log: false }, { name: "depth", kind: "int", log: false },
  { name: "width", kind: "int", log: true }, { name: "filters", kind: "int", log: false },
  { name: "lr", kind: "float", log: true }, { name: "batch_size", kind: "choice", log: false },
  { name: "dropout", kind: "float", log: false },
];
const search = { metric: "val_accuracy", mode: "max", scheduler: "successive_halving", reduction_factor: 3, rungs, trials: kTrials, epochs_trained: epochsTrained, sampler: "random" };
fs.writeFileSync(path.join(searchDir, "results.json"), JSON.stringify({ plan: "search.yaml", seed: 7, workers: 2, rank_by: "val_accuracy", parameters, search, models: trials.map(row) }, null, 2));

// ---- a grid named without its values -----------------------------------------------------------
const gridDir = path.join(work, "grid");
fs.mkdirSync(gridDir);
const grid = [];
for (const units of [8, 64]) for (const lr of [0.001, 0.01, 0.1]) grid.push({ name: "g-" + grid.length, p: { units, lr } });
fs.writeFileSync(path.join(gridDir, "plan.yaml"), "models:\n" + grid.map((g) => `  - name: ${g.name}\n    layers:\n      - Dense: {units: ${g.p.units}}\n    optimizer: {Adam: {learning_rate: ${g.p.lr}}}\n`).join(""));
fs.writeFileSync(path.join(gridDir, "jobs.log"), "");
fs.writeFileSync(path.join(gridDir, "results.json"), JSON.stringify({
  rank_by: "val_loss", parameters: [{ name: "units", kind: "grid" }, { name: "lr", kind: "grid" }],
  models: grid.map((g, k) => ({ name: g.name, status: "done", message: "", epochs: 2, params: 10, seconds: 0.1, samples_per_second: 100, core: 0, metrics: { val_loss: 1 / (k + 1) }, best: null, parameters: g.p })),
}));

const { chromium } = await import(pathToFileURL(path.join(pwDir, "index.mjs")).href);
const errors = [], requests = [];
async function open(dir, selector) {
  execFileSync(nnfleet, ["report", dir], { encoding: "utf8" });
  const html = path.join(dir, "report.html");
  check(fs.existsSync(html), `nnfleet report wrote ${path.basename(dir)}/report.html (${(fs.statSync(html).size / 1e6).toFixed(1)} MB)`);
  return openPage(chromium, pathToFileURL(html).href, selector, (p) => {
    errors.length = 0;
    requests.length = 0;
    p.on("console", (m) => m.type() === "error" && errors.push("console: " + m.text()));
    p.on("pageerror", (e) => errors.push("page: " + e.message));
    p.on("request", (r) => !r.url().startsWith("file:") && !r.url().startsWith("data:") && requests.push(r.url()));
  });
}
function noErrors(what) {
  check(errors.length === 0, `${what}: no console or page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
  check(requests.length === 0, `${what}: no network requests${requests.length ? ": " + requests.join(" ") : ""}`);
}

// ---- the search's page ------------------------------------------------------------------------
{
  const { browser, page } = await open(searchDir, "#trials tbody tr");
  const nav = await page.$$eval("nav a", (a) => a.map((e) => e.getAttribute("href")));
  check(nav.includes("#search") && !nav.includes("#grid"), `the page leads to the search view (${nav.join(" ")})`);

  const withRungs = trials.filter((t) => t.rungs);
  const count = (s) => trials.map(row).filter((r) => r.status === s).length;
  const budget = await page.$eval(".search-budget", (b) => ({ trials: +b.dataset.trials, drawn: JSON.parse(b.dataset.drawn || "{}"), canvas: !!b.querySelector("canvas") }));
  const want = { pruned: count("pruned"), done: count("done") - 1, other: 0, best: 1 };
  check(budget.canvas && budget.trials === withRungs.length, `the budget chart has a line per trial that reached a rung (${budget.trials} of ${kTrials})`);
  check(JSON.stringify(budget.drawn) === JSON.stringify(want), `pruned lines grey, finished coloured, the best on top (drew ${JSON.stringify(budget.drawn)}, expected ${JSON.stringify(want)})`);

  const charts = await page.$$eval(".param-chart", (cs) => cs.map((c) => ({ v: c.dataset.var, axis: c.dataset.axis, points: +c.dataset.points, drawn: JSON.parse(c.dataset.drawn || "{}") })));
  const keys = ["family", "depth", "width_0", "width_1", "width_2", "filters", "lr", "batch_size", "dropout"];
  check(JSON.stringify(charts.map((c) => c.v)) === JSON.stringify(keys), `a chart per parameter, per-depth widths apart, in the space's order (${charts.map((c) => c.v).join(", ")})`);
  const axes = Object.fromEntries(charts.map((c) => [c.v, c.axis]));
  const wantAxes = { family: "categories", depth: "linear", width_0: "log", width_1: "log", width_2: "log", filters: "linear", lr: "log", batch_size: "categories", dropout: "linear" };
  check(JSON.stringify(axes) === JSON.stringify(wantAxes), `log parameters on log axes, choices as categories (${JSON.stringify(axes)})`);
  const pointsOk = charts.every((c) => {
    const have = withRungs.filter((t) => t.p[c.v] !== undefined).length;
    const drawn = c.drawn.pruned + c.drawn.done + c.drawn.other + c.drawn.best;
    return c.points === have && drawn === have && c.drawn.best === (best.p[c.v] !== undefined ? 1 : 0);
  });
  check(pointsOk, `each parameter chart draws a dot per trial that has it (${charts.map((c) => c.v + ":" + c.points).join(", ")})`);

  // The trials table: the best first, the first 300 rows until "show all".
  let rows = await page.$$eval("#trials tbody tr", (trs) => trs.map((t) => t.dataset.model));
  check(rows.length === 300 && rows[0] === best.name, `the trials table shows 300 rows, the best (${best.name}) first (${rows.length}, ${rows[0]})`);
  const header = await page.$$eval("#trials th", (th) => th.map((e) => e.textContent));
  check(["trial", "status", "rungs (epochs)", "val_accuracy", "lr", "width_2", "batch_size"].every((h) => header.includes(h)), `its columns: ${header.join(", ")}`);
  const prunedEarly = trials.find((t) => t.rungs && t.rungs.length === 1);
  await page.click("#trials-all");
  rows = await page.$$eval("#trials tbody tr", (trs) => trs.length);
  check(rows === kTrials, `"show all" lists every trial (${rows})`);
  const cells = await page.$eval(`#trials tr[data-model="${prunedEarly.name}"]`, (tr) => [...tr.children].map((td) => td.textContent));
  check(cells.includes("pruned@1") && cells.includes("1"), `a trial pruned at the first rung says pruned@1 (${cells.slice(0, 6).join(" | ")})`);
  const finalCells = await page.$eval(`#trials tr[data-model="${best.name}"]`, (tr) => [...tr.children].map((td) => td.textContent));
  check(finalCells.includes("1 → 3 → 9") && finalCells.includes("done"), `a finished trial shows its rungs (${finalCells.slice(0, 6).join(" | ")})`);
  await page.click('#trials th[data-key="metric"]');
  const worst = trials.map(row).filter((r) => r.metrics.val_accuracy !== undefined).sort((a, b) => a.metrics.val_accuracy - b.metrics.val_accuracy)[0];
  const first = await page.$eval("#trials tbody tr", (t) => t.dataset.model);
  check(first === worst.name, `clicking the metric's header sorts the trials by it (${first})`);
  await page.fill("#filter", prunedEarly.name); // the leaderboard shows a page of 50 rows
  const boardStatus = await page.$eval(`#board tr[data-model="${prunedEarly.name}"] .status`, (s) => s.textContent);
  check(boardStatus === "pruned@1", `the leaderboard marks pruned trials too (${boardStatus})`);

  // Hovering the best trial's last rung names it (the chart scrolled into the window first: the
  // leaderboard's 2,000 rows come before it).
  await page.$eval("#search", (s) => s.scrollIntoView());
  const at = await page.evaluate((v) => {
    const u = window.nnfleetReport.search[0], r = u.over.getBoundingClientRect();
    return { x: r.left + u.valToPos(9, "x"), y: r.top + u.valToPos(v, "y") };
  }, best.rungs[2].value);
  await page.mouse.move(at.x, at.y);
  const tip = await page.$eval(".search-budget .tip", (t) => t.style.display + " " + t.textContent);
  check(tip.startsWith("block") && tip.includes(best.name) && tip.includes("final"), `hovering a rung names its trial (${tip.slice(6, 100)})`);

  await (await page.$("#search .charts")).screenshot({ path: path.join(work, "search.png") });
  noErrors("search page");
  await browser.close();
}

// ---- the grid's page: recorded parameters, not the names ---------------------------------------
{
  const { browser, page } = await open(gridDir, "#board tbody tr");
  const charts = await page.$$eval(".grid-chart", (g) => g.map((e) => e.dataset.var + ":" + e.dataset.axis));
  check(JSON.stringify(charts) === JSON.stringify(["units:linear", "lr:log"]), `a chart per recorded grid variable (${charts.join(", ")})`);
  const title = await page.$eval("#grid h2", (h) => h.textContent);
  check(title === "Parameters", `the section says they are the run's parameters (${title})`);
  // Details are made when opened, by the details' toggle event, which the browser dispatches as
  // a task after the click: wait for the table rather than read it at once (a loaded CI machine
  // read before the event ran).
  await page.click("#model-g-5 summary");
  await page.waitForSelector("#model-g-5 table.kv");
  const kv = await page.$eval("#model-g-5 table.kv", (t) => t.textContent);
  check(kv.includes("parameter lr0.1") && kv.includes("parameter units64"), `a model's details list its parameters`);
  await page.screenshot({ path: path.join(work, "grid.png"), fullPage: true });
  noErrors("grid page");
  await browser.close();
}

finish();
