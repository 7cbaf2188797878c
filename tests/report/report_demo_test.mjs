// The report of a demo-like run in a real browser: the example fleet of `make demo`
// (examples/fashion-mnist.yaml, its models, grid and epochs as they are) trained with
// `nnfleet train --report` on 2 workers, its data swapped for a tiny Fashion-MNIST-shaped set the
// test writes (48 training and 16 test images, [28,28,1] uint8), so that it runs in seconds.
// Checks in Debian's chromium (headless, driven by playwright-core): no console or page errors,
// leaderboard rows == the run's models (results.csv), one curve series per model in every curve
// chart, a chart per grid variable, one timeline lane per core (per worker). Writes a screenshot
// (demo.png) next to the run.
//   node report_demo_test.mjs NNFLEET_BINARY EXAMPLE_PLAN WORK_DIR PLAYWRIGHT_CORE_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { openPage } from "./open_page.mjs";
import { check, finish } from "./checks.mjs";

const [nnfleet, example, work, pwDir] = process.argv.slice(2);
const workers = 2;

// A uint8 .npy (C order) of `shape`.
function writeNpy(file, shape, data) {
  let header = `{'descr': '|u1', 'fortran_order': False, 'shape': (${shape.join(", ")}${shape.length === 1 ? "," : ""}), }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n";
  const head = Buffer.alloc(10);
  Buffer.from("\x93NUMPY", "latin1").copy(head);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, "latin1"), Buffer.from(data)]));
}
// n images of 10 classes in turn, each a fixed pattern shifted by its class; no randomness.
function writeImages(stem, n) {
  const x = new Uint8Array(n * 28 * 28), y = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    y[i] = i % 10;
    for (let p = 0; p < 28 * 28; p++) x[i * 784 + p] = (p * 7 + i * 31 + y[i] * 50) % 256;
  }
  writeNpy(path.join(work, stem + "_x.npy"), [n, 28, 28, 1], x);
  writeNpy(path.join(work, stem + "_y.npy"), [n], y);
}

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
writeImages("train", 48);
writeImages("test", 16);
// The example plan with its data block (Fashion-MNIST from Debian) replaced by the tiny set.
const text = fs.readFileSync(example, "utf8");
const data = `data:
  train: {x: ${path.join(work, "train_x.npy")}, y: ${path.join(work, "train_y.npy")}}
  test: {x: ${path.join(work, "test_x.npy")}, y: ${path.join(work, "test_y.npy")}}
  scale: 0.00392156862745098
`;
const plan = text.replace(/^data:\n(?:[ #].*\n)+/m, data);
check(plan !== text && !plan.includes("fashion-mnist:"), "the example plan's data block is replaced by the test's images");
fs.writeFileSync(path.join(work, "plan.yaml"), plan);

const run = path.join(work, "run");
const t0 = Date.now();
execFileSync(nnfleet, ["train", path.join(work, "plan.yaml"), "--out", run, "--workers", String(workers), "--report", "--quiet"], { encoding: "utf8" });
console.log(`trained the example fleet in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const results = fs.readFileSync(path.join(run, "results.csv"), "utf8").trim().split("\n").slice(1);
const models = results.map((l) => l.split(",")[0]);
check(models.length >= 8, `the run trained the example's models (${models.length}: ${models.join(" ")})`);
const html = path.join(run, "report.html");
check(fs.existsSync(html), "train --report wrote report.html");

const { chromium } = await import(pathToFileURL(path.join(pwDir, "index.mjs")).href);
const errors = [];
const { browser, page } = await openPage(chromium, pathToFileURL(html).href, "#board tbody tr", (p) => {
  errors.length = 0;
  p.on("console", (m) => m.type() === "error" && errors.push("console: " + m.text()));
  p.on("pageerror", (e) => errors.push("page: " + e.message));
});

const rows = await page.$$eval("#board tbody tr", (trs) => trs.map((t) => t.dataset.model));
check(rows.length === models.length && models.every((m) => rows.includes(m)), `leaderboard rows == models (${rows.length} rows, ${models.length} models)`);
const series = await page.evaluate(() => window.nnfleetReport.curves.map((u) => u.series.slice(1).map((s) => s.label)));
check(series.length >= 2, `a curve chart per metric (${series.length})`);
check(series.every((s) => s.length === models.length && models.every((m) => s.includes(m))), `one curve series per model in every chart (${series.map((s) => s.length).join(", ")})`);
const gridVars = await page.$$eval(".grid-chart", (g) => g.map((e) => e.dataset.var));
check(gridVars.length === 2, `a chart per variable of the example's grid (${gridVars.join(", ")})`);
const lanes = await page.$$eval("svg.timeline .lane", (l) => l.map((g) => g.dataset.core));
check(lanes.length === workers && new Set(lanes).size === workers, `one timeline lane per core (${lanes.length} lanes: cores ${lanes.join(", ")})`);
const bars = await page.$$eval("svg.timeline rect.job", (r) => r.map((e) => e.dataset.model));
check(models.every((m) => bars.includes(m)), `every model has a timeline bar (${bars.length} bars)`);

await page.screenshot({ path: path.join(work, "demo.png"), fullPage: true });
check(errors.length === 0, `no console or page errors${errors.length ? ": " + errors.join(" | ") : ""}`);
await browser.close();
console.log(`screenshot: ${path.join(work, "demo.png")}`);
finish();
