// The report in a real browser: trains a small real run (a grid of MLPs and one model whose
// batches are split, so that the idle core helps it) with `nnfleet train --report` on 2 workers,
// then loads its report.html in Debian's chromium (headless, driven by playwright-core from
// report/node_modules) and checks: no console errors or page errors, the leaderboard lists every
// model, every curve chart has one series per model, the timeline has one lane per core with a
// bar per model and the helper's pieces marked, each grid variable has a chart, each model its
// layer table; sorting and filtering work. Writes a screenshot (report.png) next to the run.
//   node report_browser_test.mjs NNFLEET_BINARY WORK_DIR PLAYWRIGHT_CORE_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { openPage } from "./open_page.mjs";
import { check, finish } from "./checks.mjs";

const [nnfleet, work, pwDir] = process.argv.slice(2);

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
// Three classes of points around three centres, 4 features; fixed, no randomness.
let csv = "a,b,c,d,label\n";
for (let i = 0; i < 240; i++) {
  const k = i % 3, t = (i * 7919) % 97 / 97 - 0.5;
  csv += [k + t, -k + 0.5 * t, 0.3 * k - t, 1 - k * t, k].map((v) => +v.toFixed(4)).join(",") + "\n";
}
fs.writeFileSync(path.join(work, "points.csv"), csv);
const plan = `seed: 3
data:
  train: {csv: ${path.join(work, "points.csv")}, label: label}
  validation_split: 0.25
defaults:
  epochs: 3
  batch_size: 16
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: 0.01}}
  early_stopping: {monitor: val_loss, patience: 1}
models:
  - name: mlp-{units}-{lr}
    grid: {units: [4, 16], lr: [0.01, 0.1]}
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers:
      - Dense: {units: "{units}", activation: relu}
      - Dense: {units: 3, activation: softmax}
  - name: wide
    epochs: 60
    batch_split: 2
    early_stopping: null
    layers:
      - Dense: {units: 192, activation: relu}
      - Dense: {units: 192, activation: relu}
      - Dense: {units: 3, activation: softmax}
`;
fs.writeFileSync(path.join(work, "plan.yaml"), plan);
const run = path.join(work, "run");
const t0 = Date.now();
// The test hold "split_step" (src/platform/test_hold.h) makes the split model's first step wait
// until the idle core has claimed one of its pieces: help happens by construction, however fast
// or loaded the machine (it was once left to timing, and failed under load).
const env = { ...process.env, NNFLEET_TEST_HOLD: `split_step:${work}` };
const out = execFileSync(nnfleet, ["train", path.join(work, "plan.yaml"), "--out", run, "--workers", "2", "--report", "--quiet"], { encoding: "utf8", env });
console.log(`trained in ${((Date.now() - t0) / 1000).toFixed(1)} s ${out.trim()}`);
const html = path.join(run, "report.html");
check(fs.existsSync(html), "train --report wrote report.html");
// `nnfleet report` writes the same page from the folder alone.
execFileSync(nnfleet, ["report", run], { encoding: "utf8" });
const text = fs.readFileSync(html, "utf8");
check(!/(src|href)\s*=\s*["']?(https?:)?\/\//i.test(text), "the page loads nothing from the network");

const { chromium } = await import(pathToFileURL(path.join(pwDir, "index.mjs")).href);
const errors = [];
const requests = [];
const { browser, page } = await openPage(chromium, pathToFileURL(html).href, "#board tbody tr", (p) => {
  errors.length = 0;
  requests.length = 0;
  p.on("console", (m) => m.type() === "error" && errors.push("console: " + m.text()));
  p.on("pageerror", (e) => errors.push("page: " + e.message));
  p.on("request", (r) => !r.url().startsWith("file:") && !r.url().startsWith("data:") && requests.push(r.url()));
});

const data = await page.evaluate(() => window.nnfleetReport.data);
const names = data.models.map((m) => m.name);
check(names.length === 5, `the plan's 5 models are in the data (got ${names.length})`);
const rows = await page.$$eval("#board tbody tr", (trs) => trs.map((t) => t.dataset.model));
check(rows.length === names.length && names.every((n) => rows.includes(n)), `the leaderboard lists every model (${rows.length} rows)`);
const statuses = await page.$$eval("#board tbody .status", (s) => s.map((e) => e.textContent));
check(statuses.every((s) => s === "done"), `every model shows its status (${[...new Set(statuses)].join(",")})`);

const curves = await page.evaluate(() => window.nnfleetReport.curves.map((u) => ({ title: u.series.length - 1, cols: u.root.parentNode.dataset.column })));
const cols = curves.map((c) => c.cols).sort();
check(JSON.stringify(cols) === JSON.stringify(["accuracy", "loss", "val_accuracy", "val_loss"]), `a curve chart per metric, train and val (${cols.join(", ")})`);
check(curves.every((c) => c.title === names.length), `each curve chart has one series per model (${curves.map((c) => c.title).join(", ")})`);
const canvases = await page.$$eval("#curves canvas", (c) => c.length);
check(canvases === curves.length, `uPlot drew every curve chart (${canvases} canvases)`);

const lanes = await page.$$eval("svg.timeline .lane", (l) => l.map((g) => g.dataset.core));
check(lanes.length === 2, `the timeline has one lane per core (${lanes.length} lanes: cores ${lanes.join(", ")})`);
const bars = await page.$$eval("svg.timeline rect.job", (r) => r.map((e) => e.dataset.model));
check(bars.length === names.length && names.every((n) => bars.includes(n)), `a timeline bar per model (${bars.length})`);
const help = await page.$$eval("svg.timeline rect.help", (r) => r.map((e) => e.dataset.model));
check(help.length > 0 && help.every((m) => m === "wide"), `helper pieces are marked, all for the split model (${help.length} span(s))`);

const gridVars = await page.$$eval(".grid-chart", (g) => g.map((e) => e.dataset.var));
// The grid's vars as the run records them (units, lr), or as guessed from the names by a fleet
// that records none (the Dense layer's units, the optimizer's learning_rate).
const recorded = data.grid_source === "recorded";
const isUnits = (v) => (recorded ? v === "units" : v.endsWith("Dense.units"));
const isLr = (v) => (recorded ? v === "lr" : v.endsWith("learning_rate"));
check(gridVars.length === 2 && gridVars.some(isUnits) && gridVars.some(isLr), `a chart per grid variable (${data.grid_source}: ${gridVars.join(", ")})`);
// Layer tables are made when a model's details are opened, from one table per architecture in
// the data: the two mlp-4 models share theirs, as do the two mlp-16 ones.
const closed = await page.$$eval("details.model pre.summary", (p) => p.length);
check(closed === 0, `no layer table is made before its model is opened (${closed})`);
const tables = new Set(data.models.map((m) => m.layers));
check(tables.size === 3 && data.models.every((m) => typeof m.layers === "number"), `models of one architecture share one layer table in the data (${tables.size} tables for ${names.length} models)`);
await page.$$eval("details.model summary", (s) => s.forEach((e) => e.click()));
await page.waitForFunction((n) => document.querySelectorAll("details.model pre.summary").length === n, names.length);
const summaries = await page.$$eval("details.model pre.summary", (p) => p.map((e) => e.textContent));
check(summaries.length === names.length && summaries.every((s) => s.includes("Dense")), `every model has its layer table once opened (${summaries.length})`);
check(names.every((n) => summaries.some((s) => s.startsWith(`Model: "${n}"`))), "each layer table names its own model");
const wide = data.models.find((m) => m.name === "wide");
check(wide.flops > 0 && wide.samples_per_second > 0 && wide.stop_reason.startsWith("ran all 60"), `FLOPs, samples/s and why it stopped (${wide.stop_reason})`);

// Sorting by a column, filtering by name, isolating a model.
await page.click('#board th[data-key="name"]');
const sorted = await page.$$eval("#board tbody tr", (trs) => trs.map((t) => t.dataset.model));
check(JSON.stringify(sorted) === JSON.stringify([...names].sort()), "clicking a header sorts the leaderboard");
await page.fill("#filter", "mlp-16");
const filtered = await page.$$eval("#board tbody tr", (trs) => trs.map((t) => t.dataset.model));
check(filtered.length === 2 && filtered.every((n) => n.startsWith("mlp-16")), `the filter keeps matching models (${filtered.join(", ")})`);
await page.fill("#filter", "");
await page.click('#board tr[data-model="wide"] button.iso');
const shown = await page.evaluate(() => window.nnfleetReport.curves[0].series.slice(1).filter((s) => s.show).map((s) => s.label));
check(shown.length === 1 && shown[0] === "wide", `isolating a model leaves only its curves (${shown.join(", ")})`);
await page.click('#board tr[data-model="wide"] button.iso');
// Hovering a chart shows a value.
const box = await (await page.$("#curves .curve .u-over")).boundingBox();
await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
const tip = await page.$eval("#curves .curve .tip", (t) => t.style.display + " " + t.textContent);
check(tip.startsWith("block") && /epoch \d+: /.test(tip), `hovering shows a value (${tip.slice(6, 80)})`);

// Every chart fills its box and follows window resizes: two charts a row at 1280 px, one at 760.
async function layout() {
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  return page.evaluate(() => {
    const R = window.nnfleetReport;
    const charts = R.curves.concat(R.grids).map((u) => {
      const box = u.root.parentNode, cs = getComputedStyle(box);
      const r = box.getBoundingClientRect();
      return {
        plot: u.width,
        canvas: u.root.querySelector("canvas").getBoundingClientRect().width,
        content: box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
        cell: r.width, top: Math.round(r.top + window.scrollY), row: box.parentNode.clientWidth,
      };
    });
    const svg = document.querySelector("svg.timeline");
    return { charts, timelineBox: svg.parentNode.clientWidth, timeline: svg.getBoundingClientRect().width };
  });
}
function checkLayout(l, perRow, what) {
  const fits = l.charts.every((c) => Math.abs(c.plot - c.content) <= 1 && Math.abs(c.canvas - c.content) <= 1);
  check(fits, `${what}: every chart is as wide as its box (${l.charts.map((c) => c.canvas + "/" + c.content).join(", ")} px)`);
  const share = l.charts.every((c) => Math.abs(c.cell - (c.row - 12 * (perRow - 1)) / perRow) <= 1);
  const c0 = l.charts[0], c1 = l.charts[1];
  check(share && (perRow === 2) === (c0.top === c1.top), `${what}: ${perRow} chart(s) a row share its ${c0.row} px (cells ${c0.cell} px)`);
  check(Math.abs(l.timeline - l.timelineBox) <= 1, `${what}: the timeline is as wide as its box (${l.timeline}/${l.timelineBox} px)`);
}
checkLayout(await layout(), 2, "at 1280 px");
await page.setViewportSize({ width: 760, height: 900 });
checkLayout(await layout(), 1, "resized to 760 px");
await page.setViewportSize({ width: 1280, height: 900 });
checkLayout(await layout(), 2, "back at 1280 px");

await page.screenshot({ path: path.join(work, "report.png"), fullPage: true });
check(errors.length === 0, `no console or page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
check(requests.length === 0, `no network requests${requests.length ? ": " + requests.join(" ") : ""}`);
await browser.close();
console.log(`screenshot: ${path.join(work, "report.png")}`);
finish();
