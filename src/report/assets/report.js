// nnfleet's report page: builds the leaderboard (a page of rows at a time), a per-group view when
// the run groups its models, a search's view (its trials through their rungs, each parameter
// against the metric, the trials table), learning curves (uPlot: the best models and a band for
// the rest), grid charts (uPlot), per-core timeline (SVG) and model details (built when opened)
// from the JSON in #report-data. No network: every script is inlined by nnfleet.
// window.nnfleetReport exposes the charts for the browser tests.
"use strict";
(function () {
  // The models come as rows of one key list, their history, metrics and grid too
  // (report_html.cpp, page_data): made objects again here.
  function unpack(row, keys) {
    const absent = row.length > keys.length ? new Set(row[keys.length].absent) : null;
    const o = {};
    keys.forEach((k, i) => absent && absent.has(i) ? null : (o[k] = row[i]));
    return o;
  }
  const D = JSON.parse(document.getElementById("report-data").textContent);
  if (!Array.isArray(D.models)) {
    const P = D.models;
    D.models = P.rows.map((r) => {
      const m = unpack(r, P.keys);
      for (const [f, keys] of Object.entries(P.nested)) if (Array.isArray(m[f])) m[f] = unpack(m[f], keys);
      return m;
    });
  }
  const models = D.models;
  const app = document.getElementById("app");
  const store = window.sessionStorage;
  const state = {
    sort: load("sort", { key: "rank", asc: true }),
    filter: load("filter", ""),
    isolated: load("isolated", null),
    page: load("page", 0),
    added: load("added", []), // models drawn in the curves on request, besides the top ones
  };
  const R = (window.nnfleetReport = { curves: [], grids: [], search: [], data: D });
  const S = D.search || null;

  function load(k, dflt) {
    try {
      const v = store.getItem("nnfleet:" + D.dir + ":" + k);
      return v === null ? dflt : JSON.parse(v);
    } catch (e) {
      return dflt;
    }
  }
  function save(k, v) {
    try {
      store.setItem("nnfleet:" + D.dir + ":" + k, JSON.stringify(v));
    } catch (e) {
      /* storage off (file:// in some browsers): state just is not kept across reloads */
    }
  }
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of kids) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of kids) e.append(c);
    return e;
  }
  function color(i) {
    return "hsl(" + ((i * 137.508) % 360).toFixed(1) + ",65%,42%)";
  }
  const { fmt, human } = nnfleetFormat; // format.js
  const modelIndex = new Map(models.map((m, i) => [m.name, i]));
  // A pruned trial says at which budget its scheduler stopped it (its last rung's epochs).
  function prunedAt(m) {
    return m.rungs && m.rungs.length ? m.rungs[m.rungs.length - 1].epochs : m.epochs;
  }
  function statusText(m) {
    return m.status === "pruned" ? "pruned@" + prunedAt(m) : m.status;
  }

  // The ranking: done models with the figure first, best first; the others after, in plan order.
  const rankValue = (m) => (m.metrics ? m.metrics[D.rank_by] : undefined);
  const hasRank = (m) => m.status === "done" && typeof rankValue(m) === "number";
  const betterFirst = (x, y) => (D.higher_is_better ? y - x : x - y);
  const ranked = models
    .map((m, i) => ({ m, i }))
    .sort((a, b) => {
      const xa = hasRank(a.m), ya = hasRank(b.m);
      if (xa !== ya) return xa ? -1 : 1;
      if (!xa) return a.i - b.i;
      return betterFirst(rankValue(a.m), rankValue(b.m));
    });
  ranked.forEach((r, k) => (r.m.rank = k + 1));

  // ---- header -------------------------------------------------------------------------------
  function header() {
    const counts = {};
    for (const m of models) counts[m.status] = (counts[m.status] || 0) + 1;
    const parts = Object.entries(counts).map(([s, n]) => fmt(n) + " " + s);
    const when = new Date(D.generated * 1000).toLocaleString();
    const sections = ["leaderboard", D.group_by ? "groups" : null, S ? "search" : null, "curves", S ? null : "grid", "timeline", "models"];
    return el(
      "header",
      {},
      el("h1", {}, D.title),
      el(
        "p",
        { class: "summary" },
        el("span", { id: "model-count" }, fmt(models.length) + " models"),
        ": " + parts.join(", ") + " · ranked by ",
        el("b", {}, D.rank_by + (D.higher_is_better ? " (higher is better)" : " (lower is better)")),
        " · written " + when + " · ",
        D.live
          ? el("span", { class: "live", id: "live" }, "LIVE: this page reloads every few seconds")
          : el("span", { class: "final" }, "run ended")
      ),
      el("nav", {}, ...sections.filter((s) => s).map((s) => el("a", { href: "#" + s }, s[0].toUpperCase() + s.slice(1))))
    );
  }

  // ---- leaderboard ---------------------------------------------------------------------------
  // A page of kPageRows rows: 10,000 rows of a dozen cells took seconds to lay out, and sorting
  // and filtering go over every model all the same.
  const kPageRows = 50;
  const metricKeys = [];
  for (const m of models)
    for (const k of Object.keys(m.metrics || {})) if (!metricKeys.includes(k)) metricKeys.push(k);
  metricKeys.sort((a, b) => (a === D.rank_by ? -1 : b === D.rank_by ? 1 : 0));
  const gridWord = D.grid_source === "recorded" ? "parameter " : "grid ";
  const columns = [
    { key: "rank", label: "#", get: (m) => m.rank },
    { key: "name", label: "model", get: (m) => m.name },
    { key: "status", label: "status", get: (m) => statusText(m) },
    ...metricKeys.map((k) => ({ key: "m:" + k, label: k, get: (m) => (m.metrics || {})[k] })),
    ...D.grid_vars.map((v) => ({ key: "g:" + v, label: v, title: gridWord + v, get: (m) => (m.grid || {})[v] })),
    { key: "epochs", label: "epochs", get: (m) => m.epochs },
    { key: "best", label: "best epoch", get: (m) => (m.best ? m.best.epoch : null) },
    { key: "params", label: "params", get: (m) => m.params },
    { key: "flops", label: "FLOPs/sample", get: (m) => m.flops, show: (v) => human(v, "") },
    { key: "sps", label: "samples/s", get: (m) => m.samples_per_second, show: (v) => human(v, "") },
    { key: "seconds", label: "seconds", get: (m) => m.seconds },
    { key: "stop", label: "why it stopped", get: (m) => m.stop_reason },
  ];
  function matches(name) {
    const f = state.filter.trim();
    if (!f) return true;
    if (f.length > 2 && f.startsWith("/") && f.endsWith("/")) {
      try {
        return new RegExp(f.slice(1, -1)).test(name);
      } catch (e) {
        return false;
      }
    }
    return name.toLowerCase().includes(f.toLowerCase());
  }
  function boardRow(m) {
    const tr = el("tr", { "data-model": m.name, class: m.name === state.isolated ? "isolated" : "" });
    const drawn = curveModels().includes(modelIndex.get(m.name));
    for (const c of columns) {
      const v = c.get(m);
      if (c.key === "name") {
        tr.append(
          el(
            "td",
            { class: "name" },
            el("span", { class: "swatch", style: "background:" + color(modelIndex.get(m.name)) }),
            el("a", { href: "#model-" + m.name, title: "details", onclick: () => openModel(m.name) }, m.name),
            " ",
            el("button", { class: "iso", title: "show only this model in the charts", onclick: () => isolate(m.name) }, m.name === state.isolated ? "show all" : "isolate"),
            " ",
            el("button", { class: "iso plot", title: drawn ? "take its curves out of the charts" : "draw its curves in the charts", onclick: () => plotModel(m.name, !drawn) }, drawn ? "unplot" : "plot")
          )
        );
      } else if (c.key === "status") {
        tr.append(el("td", {}, el("span", { class: "status " + m.status, title: m.message || "" }, statusText(m))));
      } else {
        tr.append(el("td", { class: typeof v === "number" ? "num" : "" }, c.show ? c.show(v) : fmt(v)));
      }
    }
    return tr;
  }
  function leaderboard() {
    const filter = el("input", { type: "search", id: "filter", placeholder: "filter models by name (text or /regex/)", value: state.filter });
    const tbody = el("tbody");
    const hr = el("tr");
    for (const c of columns) {
      const th = el("th", { "data-key": c.key, title: "sort by " + (c.title || c.label) }, c.label);
      th.addEventListener("click", () => {
        state.sort = { key: c.key, asc: state.sort.key === c.key ? !state.sort.asc : true };
        save("sort", state.sort);
        goPage(0);
      });
      hr.append(th);
    }
    const table = el("table", { class: "board", id: "board" }, el("thead", {}, hr), tbody);
    const info = el("span", { id: "page-info" });
    const button = (id, text, to) => el("button", { class: "iso", id, onclick: () => goPage(to()) }, text);
    let pages = 1;
    const pager = el(
      "div",
      { class: "tools pager", id: "pager" },
      button("page-first", "« first", () => 0),
      button("page-prev", "‹ previous", () => state.page - 1),
      info,
      button("page-next", "next ›", () => state.page + 1),
      button("page-last", "last »", () => pages - 1)
    );
    function goPage(p) {
      state.page = p;
      fill();
    }
    function fill() {
      const col = columns.find((c) => c.key === state.sort.key) || columns[0];
      const rows = models.filter((m) => matches(m.name)).map((m) => ({ m, v: col.get(m) }));
      rows.sort((a, b) => {
        const xn = a.v === null || a.v === undefined, yn = b.v === null || b.v === undefined;
        if (xn || yn) return xn === yn ? a.m.rank - b.m.rank : xn ? 1 : -1;
        const c = typeof a.v === "number" && typeof b.v === "number" ? a.v - b.v : String(a.v).localeCompare(String(b.v));
        return (state.sort.asc ? c : -c) || a.m.rank - b.m.rank;
      });
      pages = Math.max(1, Math.ceil(rows.length / kPageRows));
      state.page = Math.min(Math.max(0, state.page | 0), pages - 1);
      save("page", state.page);
      for (const th of hr.children) th.className = th.dataset.key === col.key ? (state.sort.asc ? "asc" : "desc") : "";
      const first = state.page * kPageRows;
      const shown = rows.slice(first, first + kPageRows);
      tbody.replaceChildren(...shown.map((r) => boardRow(r.m)));
      listModels(shown.map((r) => r.m.name));
      info.textContent = "page " + fmt(state.page + 1) + " of " + fmt(pages);
      pager.style.display = pages > 1 ? "" : "none";
      for (const id of ["page-first", "page-prev"]) pager.querySelector("#" + id).disabled = state.page === 0;
      for (const id of ["page-next", "page-last"]) pager.querySelector("#" + id).disabled = state.page === pages - 1;
      const note = document.getElementById("shown");
      if (note)
        note.textContent = rows.length
          ? "rows " + fmt(first + 1) + "–" + fmt(first + shown.length) + " of " + fmt(rows.length) + (rows.length < models.length ? " matching (" + fmt(models.length) + " models)" : " models")
          : "no model matches (" + fmt(models.length) + " models)";
    }
    filter.addEventListener("input", () => {
      state.filter = filter.value;
      save("filter", state.filter);
      goPage(0);
    });
    R.fillBoard = fill;
    R.goPage = goPage;
    return el("section", { id: "leaderboard" }, el("h2", {}, "Leaderboard"), el("div", { class: "tools" }, filter, el("span", { id: "shown" })), pager, el("div", { class: "scroll" }, table));
  }

  // ---- groups: the models ranked within each value of the run's group_by ---------------------
  // A model's architecture is its name with the group's value taken out ("lstm-{k}" of lstm-3):
  // the plan entry it came from. The value stands in the name as a whole token (not inside a
  // longer number); a name that does not spell it is its own architecture.
  function architecture(name, g, value) {
    const text = String(value);
    const part = (c) => c !== undefined && /[0-9.]/.test(c);
    for (let at = name.indexOf(text); at >= 0 && text; at = name.indexOf(text, at + 1)) {
      const end = at + text.length;
      if (!part(name[at - 1]) && !part(name[end])) return name.slice(0, at) + "{" + g + "}" + name.slice(end);
    }
    return name;
  }
  function groupStats() {
    const g = D.group_by, byValue = new Map();
    for (const m of models) {
      const v = m.grid ? m.grid[g] : undefined;
      if (v === undefined || v === null) continue;
      const key = JSON.stringify(v);
      if (!byValue.has(key)) byValue.set(key, { value: v, members: [] });
      byValue.get(key).members.push(m);
    }
    const groups = [...byValue.values()];
    const numeric = groups.every((x) => typeof x.value === "number");
    groups.sort((a, b) => (numeric ? a.value - b.value : String(a.value).localeCompare(String(b.value))));
    const wins = new Map();
    for (const x of groups) {
      x.members.sort((a, b) => a.rank - b.rank);
      x.winner = hasRank(x.members[0]) ? x.members[0] : null;
      for (const m of x.members) {
        const arch = architecture(m.name, g, x.value);
        if (!wins.has(arch)) wins.set(arch, { arch, wins: 0, groups: 0 });
        wins.get(arch).groups++;
      }
      if (x.winner) wins.get((x.arch = architecture(x.winner.name, g, x.value))).wins++;
    }
    return { groups, wins: [...wins.values()].sort((a, b) => b.wins - a.wins || a.arch.localeCompare(b.arch)) };
  }
  function groupsView() {
    const g = D.group_by, { groups, wins } = groupStats();
    const sec = el("section", { id: "groups" }, el("h2", {}, "Groups by " + g));
    if (!groups.length) {
      sec.append(el("p", { class: "empty" }, "No model records " + g + " yet."));
      return sec;
    }
    sec.append(el("p", { class: "hint" }, fmt(groups.length) + " groups; in each the models ranked by " + D.rank_by + ", and the architecture (the model's name without its " + g + ") of the best one"));
    const winRows = wins.map((w) => el("tr", { "data-arch": w.arch }, el("td", {}, w.arch), el("td", { class: "num" }, fmt(w.wins)), el("td", { class: "num" }, fmt(w.groups))));
    sec.append(el("h3", {}, "Wins per architecture"), el("table", { class: "board", id: "group-wins" }, el("thead", {}, el("tr", {}, el("th", {}, "architecture"), el("th", {}, "groups won"), el("th", {}, "groups entered"))), el("tbody", {}, ...winRows)));
    const kRanking = 5; // names in a group's ranking cell; its size says the rest
    const rows = groups.map((x) => {
      const w = x.winner;
      const ranking = x.members.slice(0, kRanking).map((m, k) => k + 1 + ". " + m.name + (hasRank(m) ? " (" + fmt(rankValue(m), 4) + ")" : " (" + statusText(m) + ")"));
      if (x.members.length > kRanking) ranking.push("+" + fmt(x.members.length - kRanking) + " more");
      return el(
        "tr",
        { "data-group": String(x.value), "data-winner": w ? w.name : "", "data-arch": w ? x.arch : "" },
        el("td", {}, fmt(x.value)),
        el("td", { class: "num" }, fmt(x.members.length)),
        el("td", {}, w ? el("a", { href: "#model-" + w.name, onclick: () => openModel(w.name) }, w.name) : "none finished"),
        el("td", {}, w ? x.arch : ""),
        el("td", { class: "num" }, w ? fmt(rankValue(w), 5) : ""),
        el("td", { class: "ranking" }, ranking.join("  "))
      );
    });
    const head = el("tr", {}, ...[g, "models", "best model", "architecture", D.rank_by, "ranking"].map((h) => el("th", {}, h)));
    sec.append(el("h3", {}, "Each group's ranking"), el("div", { class: "scroll" }, el("table", { class: "board", id: "group-table" }, el("thead", {}, head), el("tbody", {}, ...rows))));
    return sec;
  }

  // ---- isolating a model ---------------------------------------------------------------------
  function isolate(name) {
    state.isolated = state.isolated === name || name === null ? null : name;
    save("isolated", state.isolated);
    // A model not drawn is added to the curves first: isolating it shows its curves.
    if (state.isolated !== null && !curveModels().includes(modelIndex.get(state.isolated))) plotModel(state.isolated, true);
    else applyIsolation();
  }
  function applyIsolation() {
    for (const u of R.curves)
      u.batch(() => {
        for (let s = 1; s < u.series.length; s++)
          u.setSeries(s, { show: state.isolated === null || u.series[s].label === state.isolated });
      });
    const note = document.getElementById("isolated-note");
    if (note) note.textContent = state.isolated ? "showing only " + state.isolated + " (click the chart again to show all)" : "click a curve to show only its model";
    R.fillBoard && R.fillBoard();
  }

  // ---- learning curves -----------------------------------------------------------------------
  function tooltipFor(u, box, names, extra) {
    const tip = el("div", { class: "tip" });
    box.append(tip);
    let nearest = null;
    return {
      tip,
      nearest: () => nearest,
      update(u) {
        const idx = u.cursor.idx;
        if (idx === null || idx === undefined || u.cursor.left < 0) {
          tip.style.display = "none";
          nearest = null;
          return;
        }
        let best = null, bestD = Infinity;
        for (let s = 1; s < u.series.length; s++) {
          if (!u.series[s].show) continue;
          const v = u.data[s][idx];
          if (v === null || v === undefined) continue;
          const d = Math.abs(u.valToPos(v, "y") - u.cursor.top);
          if (d < bestD) {
            bestD = d;
            best = s;
          }
        }
        nearest = best;
        if (best === null) {
          tip.style.display = "none";
          return;
        }
        tip.style.display = "block";
        tip.replaceChildren(el("b", {}, names(best, idx)), el("br"), extra(best, idx));
        const left = u.cursor.left + u.over.offsetLeft + 12;
        tip.style.left = Math.min(left, box.clientWidth - 220) + "px";
        tip.style.top = u.cursor.top + u.over.offsetTop + 12 + "px";
      },
    };
  }

  // Keeps a uPlot chart as wide as its box's content: once the page is laid out (the chart is
  // made before its box is in the page) and whenever the box changes width (a window resize).
  function fitWidth(u, box) {
    new ResizeObserver(() => {
      const cs = getComputedStyle(box);
      const w = Math.floor(box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight));
      if (w > 0 && w !== u.width) u.setSize({ width: w, height: u.height });
    }).observe(box);
  }

  // Which models' curves are drawn: the best kTopCurves by the ranking metric, the ones added on
  // request (a leaderboard row's "plot", the box above the charts), and a band (median and
  // quartiles per epoch) for all but the best. 2,000 overlaid curves were one grey mass; a fleet
  // of up to 2 * kTopCurves models is drawn whole (a band of fewer than kTopCurves models says
  // less than their curves).
  const kTopCurves = 10;
  const allCurves = models.length <= 2 * kTopCurves;
  const topCurves = new Set(ranked.slice(0, kTopCurves).map((r) => r.i));
  const restCurves = allCurves ? [] : ranked.slice(kTopCurves).map((r) => r.i);
  let drawnCache = null;
  function curveModels() {
    if (!drawnCache) {
      const set = allCurves ? new Set(models.keys()) : new Set(topCurves);
      for (const n of state.added) if (modelIndex.has(n)) set.add(modelIndex.get(n));
      drawnCache = [...set].sort((a, b) => a - b);
    }
    return drawnCache;
  }
  function plotModel(name, on) {
    if (!modelIndex.has(name) || allCurves || topCurves.has(modelIndex.get(name))) return;
    state.added = state.added.filter((n) => n !== name);
    if (on) state.added.push(name);
    else if (state.isolated === name) state.isolated = null;
    save("added", state.added);
    save("isolated", state.isolated);
    drawnCache = null;
    if (R.drawCurves) R.drawCurves();
    applyIsolation();
  }
  // The band's figures per epoch of `col` over the models not among the best: lower quartile,
  // median, upper quartile (linear between ranks), null where none of them has the epoch.
  const bandCache = new Map();
  function band(col, xs) {
    if (bandCache.has(col)) return bandCache.get(col);
    const cols = xs.map(() => []);
    for (const i of restCurves) {
      const h = models[i].history;
      if (h[col]) h.epoch.forEach((e, k) => typeof h[col][k] === "number" && cols[e - 1] && cols[e - 1].push(h[col][k]));
    }
    const q = (v, p) => {
      const at = (v.length - 1) * p, lo = Math.floor(at), hi = Math.ceil(at);
      return v[lo] + (v[hi] - v[lo]) * (at - lo);
    };
    const out = { q1: [], median: [], q3: [], n: [] };
    for (const v of cols) {
      v.sort((a, b) => a - b);
      out.q1.push(v.length ? q(v, 0.25) : null);
      out.median.push(v.length ? q(v, 0.5) : null);
      out.q3.push(v.length ? q(v, 0.75) : null);
      out.n.push(v.length);
    }
    bandCache.set(col, out);
    return out;
  }
  let maxEpoch = 0;
  for (const m of models) for (const e of m.history.epoch) maxEpoch = Math.max(maxEpoch, e);

  // The best epoch of each shown model among the `drawn` (series 1..drawn.length): a ring on
  // its curve.
  function bestRings(drawn) {
    return (u) => {
      const ctx = u.ctx;
      ctx.save();
      ctx.lineWidth = 2 * devicePixelRatio;
      for (let s = 1; s <= drawn.length; s++) {
        const m = models[drawn[s - 1]];
        if (!u.series[s].show || !m.best || !m.best.epoch) continue;
        const v = u.data[s][m.best.epoch - 1];
        if (v === null || v === undefined) continue;
        const x = u.valToPos(m.best.epoch, "x", true), y = u.valToPos(v, "y", true);
        ctx.strokeStyle = color(drawn[s - 1]);
        ctx.beginPath();
        ctx.arc(x, y, 5 * devicePixelRatio, 0, 2 * Math.PI);
        ctx.stroke();
      }
      ctx.restore();
    };
  }

  function curveChart(col, width) {
    const xs = [];
    for (let e = 1; e <= Math.max(maxEpoch, 1); e++) xs.push(e);
    const drawn = curveModels();
    const data = [xs];
    for (const i of drawn) {
      const ys = xs.map(() => null);
      const h = models[i].history;
      if (h[col]) h.epoch.forEach((e, k) => (ys[e - 1] = h[col][k]));
      data.push(ys);
    }
    const b = restCurves.length ? band(col, xs) : null;
    const bandSeries = [];
    if (b) {
      data.push(b.q3, b.median, b.q1);
      const grey = "rgba(75,85,99,0.55)";
      bandSeries.push(
        { label: "upper quartile of the rest", stroke: grey, width: 1, points: { show: false } },
        { label: "median of the rest", stroke: "#4b5563", width: 2, dash: [6, 4], points: { show: false } },
        { label: "lower quartile of the rest", stroke: grey, width: 1, points: { show: false } }
      );
    }
    const modelOf = (s) => (s <= drawn.length ? models[drawn[s - 1]] : null);
    const box = el("div", { class: "curve", "data-column": col, "data-band": String(restCurves.length) });
    const few = xs.length <= 40;
    let tt;
    const opts = {
      width,
      height: 260,
      title: col,
      scales: { x: { time: false } },
      legend: { show: false },
      cursor: { points: { size: 7 }, drag: { x: true, y: false } },
      series: [
        { label: "epoch" },
        ...drawn.map((i) => ({
          label: models[i].name,
          stroke: color(i),
          width: 1.5,
          spanGaps: false,
          points: { show: few, size: 4 },
          show: state.isolated === null || state.isolated === models[i].name,
        })),
        ...bandSeries.map((s) => Object.assign(s, { show: state.isolated === null })),
      ],
      bands: b ? [{ series: [drawn.length + 1, drawn.length + 3], fill: "rgba(107,114,128,0.16)" }] : [],
      axes: [{ label: "epoch", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, { label: col, size: 60 }],
      hooks: {
        setCursor: [(u) => tt && tt.update(u)],
        draw: [bestRings(drawn)],
      },
    };
    const u = new uPlot(opts, data, box);
    tt = tooltipFor(
      u,
      box,
      (s) => (modelOf(s) ? modelOf(s).name : u.series[s].label + " (" + fmt(restCurves.length) + " models)"),
      (s, idx) => {
        const m = modelOf(s);
        const best = m && m.best && m.best.epoch === idx + 1 ? " (best epoch: " + m.best.monitor + ")" : "";
        const n = m ? "" : ", of " + fmt(b.n[idx]) + " with the epoch";
        return "epoch " + (idx + 1) + ": " + col + " = " + fmt(u.data[s][idx], 5) + best + n;
      }
    );
    u.over.addEventListener("click", () => {
      const s = tt.nearest();
      const m = s === null ? null : modelOf(s);
      isolate(state.isolated !== null ? null : m ? m.name : null);
    });
    box.dataset.series = String(drawn.length);
    fitWidth(u, box);
    R.curves.push(u);
    return box;
  }

  // The box that adds a model to the curves by name: the name itself, or the one model whose name
  // holds the text.
  function curveAdder() {
    const input = el("input", { type: "search", id: "curve-add", placeholder: "add a model's curves by name" });
    const note = el("span", { id: "curve-add-note", class: "hint" });
    const add = () => {
      const text = input.value.trim();
      if (!text) return;
      let name = modelIndex.has(text) ? text : null;
      if (!name) {
        const hits = models.filter((m) => m.name.includes(text));
        if (hits.length === 1) name = hits[0].name;
        else note.textContent = hits.length ? fmt(hits.length) + " models match '" + text + "'; type more of the name" : "no model is named '" + text + "'";
      }
      if (!name) return;
      note.textContent = "";
      input.value = "";
      plotModel(name, true);
    };
    input.addEventListener("keydown", (e) => e.key === "Enter" && add());
    return el("div", { class: "tools" }, input, el("button", { class: "iso", id: "curve-add-button", onclick: add }, "add"), note);
  }

  function curves(width) {
    const sec = el("section", { id: "curves" }, el("h2", {}, "Learning curves"));
    const cols = D.columns.filter((c) => c !== "seconds");
    if (!cols.length) {
      sec.append(el("p", { class: "empty" }, "No epoch has finished yet."));
      return sec;
    }
    if (!allCurves)
      sec.append(
        el("p", { class: "hint", id: "curves-about" }, "the best " + kTopCurves + " models by " + D.rank_by + " drawn, and the other " + fmt(restCurves.length) + " as a band: their median (dashed) and quartiles (shaded) per epoch; draw any model with its “plot” button in the leaderboard or here:"),
        curveAdder()
      );
    sec.append(el("p", { class: "hint", id: "isolated-note" }, "hover to read a value; click a curve to show only its model; rings mark each model's best epoch; drag to zoom, double-click to reset"));
    // Training and validation figures of one metric side by side.
    const base = cols.filter((c) => !c.startsWith("val_"));
    const grid = el("div", { class: "charts" });
    R.drawCurves = () => {
      for (const u of R.curves) u.destroy();
      R.curves.length = 0;
      const boxes = [];
      for (const b of base) {
        boxes.push(curveChart(b, width));
        if (cols.includes("val_" + b)) boxes.push(curveChart("val_" + b, width));
      }
      for (const c of cols) if (c.startsWith("val_") && !base.includes(c.slice(4))) boxes.push(curveChart(c, width));
      grid.replaceChildren(...boxes);
    };
    R.drawCurves();
    sec.append(grid);
    return sec;
  }

  // ---- grid variables against the ranking metric ---------------------------------------------
  function paramInfo(v) {
    return (D.param_info || {})[v] || {};
  }
  // A parameter's axis is logarithmic when the run says it was drawn so; a grid's values (which
  // say nothing of their scale) or a guessed grid's when they span two decades or more.
  function logAxis(info, lo, hi) {
    if (!(lo > 0) || !(hi > lo)) return false;
    if (info.log === true) return true;
    if (info.kind && info.kind !== "grid") return false;
    return hi / lo >= 100;
  }
  // The distinct values of a categorical axis as its labels: numbers in numeric order (a choice
  // of batch sizes), others in text order.
  function categories(values) {
    const byText = new Map(values.map((x) => [String(x), x]));
    const all = [...byText.values()];
    const numbers = all.every((x) => typeof x === "number");
    all.sort((a, b) => (numbers ? a - b : String(a).localeCompare(String(b))));
    return all.map(String);
  }
  function gridChart(v, width) {
    const pts = [];
    for (const m of models) {
      const x = m.grid ? m.grid[v] : undefined;
      const y = rankValue(m);
      if (x === undefined || m.status !== "done" || typeof y !== "number") continue;
      pts.push({ m, x, y });
    }
    const info = paramInfo(v);
    const numeric = info.kind !== "choice" && pts.every((p) => typeof p.x === "number");
    let cats = [];
    if (!numeric) {
      cats = categories(pts.map((p) => p.x));
      for (const p of pts) p.xv = cats.indexOf(String(p.x));
    } else for (const p of pts) p.xv = p.x;
    pts.sort((a, b) => a.xv - b.xv);
    const xs = pts.map((p) => p.xv);
    const logx = numeric && xs.length > 1 && logAxis(info, xs[0], xs[xs.length - 1]);
    const box = el("div", { class: "curve grid-chart", "data-var": v, "data-axis": numeric ? (logx ? "log" : "linear") : "categories" });
    let tt;
    const u = new uPlot(
      {
        width,
        height: 240,
        title: v + " against " + D.rank_by,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          x: numeric ? { time: false, distr: logx ? 3 : 1 } : { time: false, range: [-0.5, cats.length - 0.5] },
        },
        series: [{ label: v }, { label: D.rank_by, stroke: "#2563eb", fill: "#2563eb", paths: () => null, points: { show: true, size: 9, fill: "#2563eb" } }],
        axes: [
          numeric
            ? { label: v }
            : { label: v, splits: () => cats.map((_, i) => i), values: (u, splits) => splits.map((s) => cats[s] ?? "") },
          { label: D.rank_by, size: 60 },
        ],
        hooks: { setCursor: [(u) => tt && tt.update(u)] },
      },
      [xs, pts.map((p) => p.y)],
      box
    );
    tt = tooltipFor(
      u,
      box,
      (s, idx) => pts[idx].m.name,
      (s, idx) => v + " = " + fmt(pts[idx].x) + ", " + D.rank_by + " = " + fmt(pts[idx].y, 5)
    );
    fitWidth(u, box);
    R.grids.push(u);
    return box;
  }

  function grids(width) {
    const sec = el("section", { id: "grid" }, el("h2", {}, D.grid_source === "recorded" ? "Parameters" : "Grid variables"));
    if (!D.grid_vars.length) {
      sec.append(el("p", { class: "empty" }, "This plan has no grid."));
      return sec;
    }
    sec.append(el("p", { class: "hint" }, "each finished model of a grid: its value of the variable against " + D.rank_by));
    sec.append(el("div", { class: "charts" }, ...D.grid_vars.map((v) => gridChart(v, width))));
    return sec;
  }

  // ---- a search: trials through their rungs, parameters against the metric, the trials -------
  // A search may hold thousands of trials: its charts are one uPlot each whose marks the page
  // paints itself in one pass over the canvas (as uPlot series, each trial would bring a DOM
  // cursor point and a series' upkeep), and its table shows the first rows until asked for all.
  const searchHigher = S ? (S.mode === "max" ? true : S.mode === "min" ? false : /acc/.test(S.metric || "")) : false;
  // The trial's value of the search metric: its final figure, else its last rung's.
  function trialValue(m) {
    const v = m.metrics ? m.metrics[S.metric] : undefined;
    if (typeof v === "number" && isFinite(v)) return v;
    const r = m.rungs && m.rungs.length ? m.rungs[m.rungs.length - 1].value : null;
    return typeof r === "number" && isFinite(r) ? r : null;
  }
  const better = (a, b) => (searchHigher ? a > b : a < b);
  // Trials ranked as the leaderboard ranks a search: finished ones by the metric, then pruned
  // ones (the longest-trained first, then by the value where they stopped), then the others.
  function rankTrials() {
    const group = (m) => (m.status === "done" ? 0 : m.status === "pruned" ? 1 : 2);
    const order = models
      .map((m, i) => ({ m, i, v: trialValue(m) }))
      .sort((a, b) => {
        const ga = group(a.m), gb = group(b.m);
        if (ga !== gb) return ga - gb;
        if (ga === 1 && prunedAt(a.m) !== prunedAt(b.m)) return prunedAt(b.m) - prunedAt(a.m);
        if ((a.v === null) !== (b.v === null)) return a.v === null ? 1 : -1;
        if (a.v !== null && a.v !== b.v) return better(a.v, b.v) ? -1 : 1;
        return a.i - b.i;
      });
    const rank = new Array(models.length);
    order.forEach((t, k) => (rank[t.i] = k + 1));
    return { rank, best: order.length && order[0].m.status === "done" && order[0].v !== null ? order[0].i : -1 };
  }
  const trialRank = S ? rankTrials() : null;
  const failed = (m) => m.status === "failed" || m.status === "diverged";
  const markColor = (i) => (models[i].status === "done" ? color(i) : failed(models[i]) ? "rgba(220,38,38,0.45)" : "rgba(156,163,175,0.55)");
  // Paint order: pruned and failed trials under finished ones, the best on top.
  function paintOrder(idx) {
    const layer = (i) => (i === trialRank.best ? 3 : models[i].status === "done" ? 2 : models[i].status === "pruned" ? 0 : 1);
    return idx.slice().sort((a, b) => layer(a) - layer(b) || a - b);
  }

  // A chart drawn by `paint(u, ctx, mark)`, which calls mark(x, y, text) (canvas pixels) for each
  // point a hover may name; uPlot gives the axes, the fixed scales `xRange`, `yRange` and the cursor.
  // `text` is a function making the tooltip's nodes, called only for the point hovered.
  function paintedChart(o) {
    const box = el("div", Object.assign({ class: "curve " + o.cls }, o.attrs || {}));
    const tip = el("div", { class: "tip" });
    box.append(tip);
    let marks = [];
    const pxr = () => window.devicePixelRatio || 1;
    const u = new uPlot(
      {
        width: o.width,
        height: o.height || 260,
        title: o.title,
        legend: { show: false },
        cursor: { drag: { x: false, y: false }, points: { show: false } },
        scales: {
          x: { time: false, distr: o.xLog ? 3 : 1, range: () => o.xRange.slice() },
          y: { distr: 1, range: () => o.yRange.slice() },
        },
        series: [{ label: o.xLabel }, { label: o.yLabel, paths: () => null, points: { show: false } }],
        axes: [Object.assign({ label: o.xLabel }, o.xAxis || {}), { label: o.yLabel, size: 60 }],
        hooks: {
          draw: [
            (u) => {
              marks = [];
              const ctx = u.ctx;
              ctx.save();
              ctx.beginPath();
              ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
              ctx.clip();
              o.paint(u, ctx, (x, y, text) => marks.push([(x - u.bbox.left) / pxr(), (y - u.bbox.top) / pxr(), text]));
              ctx.restore();
            },
          ],
          setCursor: [
            (u) => {
              const cx = u.cursor.left, cy = u.cursor.top;
              let best = null, bestD = 400; // within 20 px
              if (cx >= 0)
                for (const mk of marks) {
                  const d = (mk[0] - cx) ** 2 + (mk[1] - cy) ** 2;
                  if (d <= bestD) { // ties: the mark painted last, on top
                    bestD = d;
                    best = mk;
                  }
                }
              if (!best) {
                tip.style.display = "none";
                return;
              }
              tip.style.display = "block";
              tip.replaceChildren(...best[2]());
              tip.style.left = Math.min(best[0] + u.over.offsetLeft + 12, box.clientWidth - 220) + "px";
              tip.style.top = best[1] + u.over.offsetTop + 12 + "px";
            },
          ],
        },
      },
      [o.xRange.slice(), o.yRange.slice()],
      box
    );
    fitWidth(u, box);
    R.search.push(u);
    return box;
  }
  // [lo, hi] of `values` with a margin, for a fixed scale (log: a factor, else a share).
  function span(values, log) {
    if (!values.length) return [0, 1];
    const lo = Math.min(...values), hi = Math.max(...values);
    if (log) return [lo / 1.2, hi * 1.2];
    const pad = hi > lo ? (hi - lo) * 0.06 : Math.abs(hi) * 0.1 || 1;
    return [lo - pad, hi + pad];
  }
  // Axis options for a parameter's or a budget's values: on a log scale, ticks at 1, 2 and 5 of
  // each decade (fewer when crowded) with every one labelled (uPlot's own log labels keep only
  // some, none at all on a range like 32..512); integers only for int parameters.
  function logTicks(lo, hi) {
    const out = [];
    for (const ms of [[1, 2, 5], [1, 3], [1]]) {
      out.length = 0;
      for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++)
        for (const m of ms) {
          const t = +(m * 10 ** p).toPrecision(6);
          if (t >= lo && t <= hi) out.push(t);
        }
      if (out.length <= 8) break;
    }
    return out;
  }
  function valueAxis(log, range, integer) {
    const show = (u, sp) => sp.map((v) => fmt(v));
    // A tick of a log axis as its shortest text: 0.0001, not 1.000e-4.
    const short = (u, sp) => sp.map((v) => String(+v.toPrecision(3)));
    if (log) return { splits: () => logTicks(range[0], range[1]), filter: (u, sp) => sp, values: short };
    return integer ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000], values: show } : {};
  }
  const trialTip = (i, line) => [el("b", {}, models[i].name + " (" + statusText(models[i]) + ")"), el("br"), line];

  // What a painted chart drew, for the browser tests: marks by kind on the chart's box.
  function noteDrawn(u, drawn) {
    if (u.root.parentNode) u.root.parentNode.dataset.drawn = JSON.stringify(drawn);
  }
  const markKind = (i) => (i === trialRank.best ? "best" : models[i].status === "done" ? "done" : models[i].status === "pruned" ? "pruned" : "other");
  const goodRungs = (m) => (m.rungs || []).filter((r) => typeof r.value === "number" && isFinite(r.value) && r.epochs > 0);

  // (a) The metric against the budget: a line per trial through its rungs.
  function budgetChart(width) {
    const idx = [], xv = [], yv = [];
    models.forEach((m, i) => {
      const rs = goodRungs(m);
      if (!rs.length) return;
      idx.push(i);
      for (const r of rs) {
        xv.push(r.epochs);
        yv.push(r.value);
      }
    });
    if (!idx.length) return el("p", { class: "empty" }, "No trial has reached a rung yet.");
    // Successive halving's rungs grow by its reduction factor (1, 3, 9): even steps on a log axis.
    const xLog = S.scheduler === "successive_halving" && Math.max(...xv) / Math.min(...xv) >= 3;
    const ticks = [...new Set(xv)].sort((a, b) => a - b);
    const order = paintOrder(idx);
    return paintedChart({
      cls: "search-budget",
      attrs: { "data-trials": String(idx.length) },
      title: S.metric + " at each rung",
      width,
      xLabel: "epochs",
      yLabel: S.metric,
      xLog,
      xRange: span(xv, xLog),
      yRange: span(yv, false),
      xAxis: { splits: () => ticks, filter: (u, sp) => sp, values: (u, sp) => sp.map((v) => fmt(v)) },
      paint(u, ctx, mark) {
        const drawn = { pruned: 0, done: 0, other: 0, best: 0 };
        const pr = window.devicePixelRatio || 1;
        for (const i of order) {
          const best = i === trialRank.best;
          ctx.strokeStyle = ctx.fillStyle = best ? "#111827" : markColor(i);
          ctx.lineWidth = (best ? 3 : 1.25) * pr;
          ctx.beginPath();
          const rs = goodRungs(models[i]);
          rs.forEach((r, k) => {
            const x = u.valToPos(r.epochs, "x", true), y = u.valToPos(r.value, "y", true);
            if (k) ctx.lineTo(x, y);
            else ctx.moveTo(x, y);
            mark(x, y, () => trialTip(i, "at " + r.epochs + " epoch(s): " + S.metric + " = " + fmt(r.value, 5) + " (" + r.decision + ")"));
          });
          ctx.stroke();
          for (const r of rs) ctx.fillRect(u.valToPos(r.epochs, "x", true) - 2 * pr, u.valToPos(r.value, "y", true) - 2 * pr, 4 * pr, 4 * pr);
          drawn[markKind(i)]++;
        }
        noteDrawn(u, drawn);
      },
    });
  }

  // (b) A parameter against the metric: a dot per trial that has the parameter (conditional ones
  // are absent from the others); numbers on their axis (log when drawn so), choices as
  // categories, each trial's dot spread a little across its category so that many stay apart.
  function paramChart(v, width) {
    const info = paramInfo(v);
    const pts = [];
    models.forEach((m, i) => {
      const x = m.grid ? m.grid[v] : undefined, y = trialValue(m);
      if (x !== undefined && x !== null && y !== null) pts.push({ i, x, y });
    });
    const numeric = info.kind !== "choice" && pts.every((p) => typeof p.x === "number");
    let cats = [];
    if (numeric) for (const p of pts) p.xv = p.x;
    else {
      cats = categories(pts.map((p) => p.x));
      // A fixed spread per trial (the golden ratio's fractions), not a random one: the same page
      // draws the same dots.
      for (const p of pts) p.xv = cats.indexOf(String(p.x)) + (((p.i * 0.6180339887) % 1) - 0.5) * 0.5;
    }
    const xs = pts.map((p) => p.xv);
    const xLog = numeric && pts.length > 0 && logAxis(info, Math.min(...xs), Math.max(...xs));
    const xRange = numeric ? span(xs, xLog) : [-0.5, Math.max(cats.length, 1) - 0.5];
    const byIndex = new Map(pts.map((p) => [p.i, p]));
    const order = paintOrder(pts.map((p) => p.i));
    return paintedChart({
      cls: "param-chart",
      attrs: { "data-var": v, "data-points": String(pts.length), "data-axis": numeric ? (xLog ? "log" : "linear") : "categories" },
      title: v + " against " + S.metric,
      width,
      height: 240,
      xLabel: v,
      yLabel: S.metric,
      xLog,
      xRange,
      yRange: span(pts.map((p) => p.y), false),
      xAxis: numeric ? valueAxis(xLog, xRange, info.kind === "int") : { splits: () => cats.map((_, k) => k), values: (u, sp) => sp.map((k) => cats[k] ?? "") },
      paint(u, ctx, mark) {
        const drawn = { pruned: 0, done: 0, other: 0, best: 0 };
        const pr = window.devicePixelRatio || 1;
        for (const i of order) {
          const p = byIndex.get(i), best = i === trialRank.best;
          const x = u.valToPos(p.xv, "x", true), y = u.valToPos(p.y, "y", true);
          ctx.fillStyle = markColor(i);
          ctx.beginPath();
          ctx.arc(x, y, (best ? 5 : 3) * pr, 0, 2 * Math.PI);
          ctx.fill();
          if (best) {
            ctx.strokeStyle = "#111827";
            ctx.lineWidth = 2 * pr;
            ctx.stroke();
          }
          mark(x, y, () => trialTip(i, v + " = " + fmt(p.x) + ", " + S.metric + " = " + fmt(p.y, 5)));
          drawn[markKind(i)]++;
        }
        noteDrawn(u, drawn);
      },
    });
  }

  // (c) The trials: sortable like the leaderboard; the first kTrialRows rows of the order until
  // "show all" (thousands of rows of a dozen cells each are slow to lay out).
  const kTrialRows = 300;
  function trialsTable() {
    const cols = [
      { key: "rank", label: "#", get: (m, i) => trialRank.rank[i] },
      { key: "trial", label: "trial", get: (m, i) => (typeof m.trial === "number" ? m.trial : i) },
      { key: "name", label: "name", get: (m) => m.name },
      { key: "status", label: "status", get: (m) => statusText(m) },
      { key: "rungs", label: "rungs (epochs)", get: (m) => (m.rungs && m.rungs.length ? prunedAt(m) : null), show: (v, m) => (m.rungs || []).map((r) => r.epochs).join(" → ") },
      { key: "metric", label: S.metric, get: (m) => trialValue(m), show: (v) => fmt(v, 5) },
      ...D.grid_vars.map((v) => ({ key: "p:" + v, label: v, get: (m) => (m.grid ? m.grid[v] : undefined) })),
    ];
    let sort = load("trialSort", { key: "rank", asc: true });
    let all = false;
    const thead = el("thead"), tbody = el("tbody");
    const table = el("table", { class: "board", id: "trials" }, thead, tbody);
    const more = el("button", { class: "iso", id: "trials-all" }, "");
    const hr = el("tr");
    for (const c of cols) {
      const th = el("th", { "data-key": c.key, title: "sort by " + c.label }, c.label);
      th.addEventListener("click", () => {
        sort = { key: c.key, asc: sort.key === c.key ? !sort.asc : true };
        save("trialSort", sort);
        fill();
      });
      hr.append(th);
    }
    thead.append(hr);
    more.addEventListener("click", () => {
      all = !all;
      fill();
    });
    function fill() {
      const col = cols.find((c) => c.key === sort.key) || cols[0];
      const rows = models.map((m, i) => ({ m, i, v: col.get(m, i) }));
      rows.sort((a, b) => {
        const xn = a.v === null || a.v === undefined, yn = b.v === null || b.v === undefined;
        if (xn || yn) return xn === yn ? a.i - b.i : xn ? 1 : -1;
        const c = typeof a.v === "number" && typeof b.v === "number" ? a.v - b.v : String(a.v).localeCompare(String(b.v));
        return (sort.asc ? c : -c) || a.i - b.i;
      });
      for (const th of hr.children) th.className = th.dataset.key === col.key ? (sort.asc ? "asc" : "desc") : "";
      const shown = all ? rows : rows.slice(0, kTrialRows);
      tbody.replaceChildren(
        ...shown.map(({ m, i }) => {
          const tr = el("tr", { "data-model": m.name, class: i === trialRank.best ? "isolated" : "" });
          for (const c of cols) {
            const v = c.get(m, i);
            if (c.key === "status") tr.append(el("td", {}, el("span", { class: "status " + m.status, title: m.message || "" }, v)));
            else tr.append(el("td", { class: typeof v === "number" ? "num" : "" }, c.show ? c.show(v, m) : fmt(v)));
          }
          return tr;
        })
      );
      more.textContent = all ? "show the first " + kTrialRows : "show all " + rows.length;
      more.style.display = rows.length > kTrialRows ? "" : "none";
      const note = document.getElementById("trials-shown");
      if (note) note.textContent = shown.length + " of " + rows.length + " trials shown";
    }
    R.fillTrials = fill;
    return [el("div", { class: "tools" }, el("span", { id: "trials-shown" }), more), el("div", { class: "scroll" }, table)];
  }

  function search(width, chartW) {
    const counts = {};
    for (const m of models) counts[m.status] = (counts[m.status] || 0) + 1;
    const best = trialRank.best >= 0 ? models[trialRank.best] : null;
    const about = [
      (S.trials || models.length) + " trials",
      S.sampler ? "sampled " + S.sampler : "",
      S.scheduler ? "scheduler " + S.scheduler + (S.reduction_factor ? " (reduction factor " + S.reduction_factor + ")" : "") : "",
      S.rungs && S.rungs.length ? "rungs at " + S.rungs.join(", ") : "",
      S.epochs_trained !== undefined ? S.epochs_trained + " epochs trained" : "",
      Object.entries(counts).map(([s, n]) => n + " " + s).join(", "),
    ].filter((x) => x);
    const sec = el(
      "section",
      { id: "search" },
      el("h2", {}, "Search: " + S.metric + " (" + (searchHigher ? "higher" : "lower") + " is better)"),
      el("p", { class: "summary" }, about.join(" · ")),
      el("p", { class: "summary", id: "search-best" }, best ? "best trial: " + best.name + ", " + S.metric + " = " + fmt(trialValue(best), 5) : "no trial has finished yet"),
      el("p", { class: "hint" }, "finished trials in colour, the best in black; pruned trials grey (stopped at a rung), failed or diverged ones red; hover to read a trial"),
      el("div", { class: "charts" }, budgetChart(chartW), ...D.grid_vars.map((v) => paramChart(v, chartW))),
      el("h3", {}, "Trials"),
      ...trialsTable()
    );
    return sec;
  }

  // ---- per-core timeline ---------------------------------------------------------------------
  // The timeline's SVG, `width` pixels wide (its border included).
  function timelineSvg(T, width) {
    let t0 = Infinity, t1 = -Infinity;
    for (const s of T.sessions) {
      t0 = Math.min(t0, s.start);
      t1 = Math.max(t1, s.end || s.start);
    }
    for (const b of T.jobs.concat(T.help)) {
      t0 = Math.min(t0, b.start);
      t1 = Math.max(t1, b.end);
    }
    const span = Math.max(t1 - t0, 1e-3);
    const multiRank = new Set(T.lanes.map((l) => l.rank)).size > 1;
    const labelW = multiRank ? 190 : 90, laneH = 26, top = 8, axisH = 28;
    const plotW = Math.max(width - 2 - labelW - 20, 200);
    const H = top + T.lanes.length * laneH + axisH;
    const X = (t) => labelW + ((t - t0) / span) * plotW;
    const root = svg("svg", { class: "timeline", width: labelW + plotW + 20, height: H, viewBox: "0 0 " + (labelW + plotW + 20) + " " + H });
    root.append(
      svg("defs", {}, svg("pattern", { id: "help-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, svg("rect", { width: 6, height: 6, fill: "#f59e0b" }), svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#92400e", "stroke-width": 2 })))
    );
    // Time between sessions (the run was stopped): shaded.
    const sess = T.sessions.slice().sort((a, b) => a.start - b.start);
    for (let i = 1; i < sess.length; i++) {
      const a = sess[i - 1].end || sess[i - 1].start, b = sess[i].start;
      if (b > a)
        root.append(svg("rect", { class: "stopped", x: X(a), y: top, width: Math.max(X(b) - X(a), 1), height: T.lanes.length * laneH }, svg("title", {}, "not running (stopped, resumed " + ((b - a) | 0) + " s later)")));
    }
    T.lanes.forEach((l, i) => {
      const y = top + i * laneH;
      const g = svg("g", { class: "lane", "data-lane": i, "data-core": l.core, "data-rank": l.rank });
      g.append(svg("rect", { class: "lane-bg", x: labelW, y, width: plotW, height: laneH - 2 }));
      const label = (multiRank ? "rank " + l.rank + " " + l.host + " " : "") + "core " + l.core;
      const t = svg("text", { x: labelW - 6, y: y + laneH / 2 + 4, "text-anchor": "end", class: "lane-label" });
      t.textContent = label;
      g.append(t, svg("title", {}, label + " (worker " + l.worker + (l.host ? " on " + l.host : "") + ")"));
      root.append(g);
    });
    function bar(b, cls, fill, h, dy, tip) {
      const y = top + b.lane * laneH + dy;
      const w = Math.max(X(b.end) - X(b.start), 1.5);
      const r = svg("rect", { class: cls, x: X(b.start), y, width: w, height: h, fill, "data-model": b.model }, svg("title", {}, tip));
      r.addEventListener("click", () => {
        openModel(b.model);
        const d = document.getElementById("model-" + b.model);
        if (d) d.scrollIntoView({ behavior: "smooth" });
      });
      root.append(r);
      if (w > 40 && cls === "job") {
        const t = svg("text", { x: X(b.start) + 4, y: y + h / 2 + 4, class: "bar-label" });
        t.textContent = b.model.length * 7 > w - 8 ? b.model.slice(0, Math.max(1, ((w - 8) / 7) | 0)) : b.model;
        t.setAttribute("pointer-events", "none");
        root.append(t);
      }
    }
    const statusColor = { done: null, diverged: "#dc2626", failed: "#7f1d1d", cancelled: "#9ca3af", interrupted: "#9ca3af", pruned: "#9ca3af", running: null };
    for (const b of T.jobs) {
      const i = modelIndex.has(b.model) ? modelIndex.get(b.model) : 0;
      const fill = statusColor[b.status] || color(i);
      bar(b, "job" + (b.status === "running" ? " running" : ""), fill, laneH - 6, 2, b.model + ": " + b.status + ", " + fmt(b.end - b.start, 3) + " s (from " + fmt(b.start - t0, 3) + " s to " + fmt(b.end - t0, 3) + " s)");
    }
    for (const b of T.help)
      bar(b, "help", "url(#help-hatch)", 10, laneH - 14, "helped " + b.model + ": " + b.pieces + " batch piece(s), " + fmt(b.end - b.start, 3) + " s");
    // The time axis.
    const ay = top + T.lanes.length * laneH + 4;
    root.append(svg("line", { x1: labelW, y1: ay, x2: labelW + plotW, y2: ay, class: "axis" }));
    const steps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];
    const step = steps.find((s) => span / s <= 10) || 86400;
    for (let s = 0; s <= span + 1e-9; s += step) {
      const x = X(t0 + s);
      root.append(svg("line", { x1: x, y1: ay, x2: x, y2: ay + 5, class: "axis" }));
      const t = svg("text", { x, y: ay + 17, "text-anchor": "middle", class: "tick" });
      t.textContent = fmt(+s.toFixed(2)) + " s";
      root.append(t);
    }
    return root;
  }

  function timeline(width) {
    const T = D.timeline;
    const sec = el("section", { id: "timeline" }, el("h2", {}, "Timeline: one lane per core"));
    if (!T.lanes.length) {
      sec.append(el("p", { class: "empty" }, "No timeline.jsonl in this run folder (written by nnfleet runs since the report was added)."));
      return sec;
    }
    // Idle share per lane, from the bars.
    let busy = 0;
    for (const b of T.jobs.concat(T.help)) busy += b.end - b.start;
    let running = 0;
    for (const s of T.sessions) running += (s.end || s.start) - s.start;
    const capacity = running * T.lanes.length;
    // Drawn again at its box's width whenever that changes (laid out, window resized).
    const box = el("div", { class: "timeline-box" }, timelineSvg(T, width));
    let drawn = width;
    new ResizeObserver(() => {
      const w = box.clientWidth;
      if (w > 0 && w !== drawn) {
        drawn = w;
        box.replaceChildren(timelineSvg(T, w));
      }
    }).observe(box);
    sec.append(
      el("p", { class: "hint" }, "a bar per model from its start to its end on the core that trained it; hatched: batch pieces an idle core computed for another model; grey: not running. " + (capacity > 0 ? "Cores busy " + Math.min(100, (100 * busy) / capacity).toFixed(0) + "% of the run's time." : "")),
      box
    );
    return sec;
  }

  // ---- models --------------------------------------------------------------------------------
  // Each model's figures and layer table are made when its details are opened: every model's
  // table in the page made 29,916 rows for 2,000 models. Models of one architecture share one
  // table in the data (layer_tables); its first lines name the model and its file.
  const tableUsers = new Map();
  for (const m of models) if (typeof m.layers === "number") tableUsers.set(m.layers, (tableUsers.get(m.layers) || 0) + 1);
  function modelBody(m) {
    const kv = [
      ["status", m.status],
      ["why it stopped", m.stop_reason],
      ["epochs", m.epochs + (m.planned_epochs ? " of " + m.planned_epochs : "")],
      ["best epoch", m.best ? m.best.epoch + " (" + m.best.monitor + " = " + fmt(m.best.value, 5) + ")" : ""],
      ["parameters", fmt(m.params)],
      ["FLOPs per sample (forward)", m.flops ? human(m.flops, "FLOP") : ""],
      ["samples/s", m.samples_per_second ? human(m.samples_per_second, "") : ""],
      ["training seconds", fmt(m.seconds)],
      ["core", m.core !== undefined && m.core >= 0 ? m.core : ""],
    ];
    for (const [k, v] of Object.entries(m.grid || {})) kv.push([gridWord + k, fmt(v)]);
    for (const [k, v] of Object.entries(m.metrics || {})) kv.push([k, fmt(v, 6)]);
    const users = tableUsers.get(m.layers) || 0;
    if (users > 1) kv.push(["architecture", "the same layers as " + fmt(users - 1) + " other model(s)"]);
    const table = typeof m.layers === "number" ? D.layer_tables[m.layers] + (typeof m.notes === "number" ? D.layer_tables[m.notes] : "") : null;
    const head = 'Model: "' + m.name + '"\nFile: ' + (m.model_file || "") + "\n";
    return [
      el("table", { class: "kv" }, ...kv.filter((r) => r[1] !== "" && r[1] !== undefined).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, String(v))))),
      table !== null ? el("pre", { class: "summary" }, head + table) : el("p", { class: "empty" }, "No saved model file (yet) to describe."),
    ];
  }
  function buildModel(d) {
    if (d.dataset.built) return;
    d.dataset.built = "1";
    d.append(...modelBody(models[modelIndex.get(d.dataset.model)]));
  }
  // The Models section holds the details of the leaderboard's page (10,000 of them took most of
  // a second to make) and of every model opened from a link, a chart or a timeline bar.
  function modelDetails(m) {
    const d = el(
      "details",
      { id: "model-" + m.name, class: "model", "data-model": m.name },
      el("summary", {}, el("span", { class: "swatch", style: "background:" + color(modelIndex.get(m.name)) }), m.name + " ", el("span", { class: "status " + m.status }, m.status), " " + (m.rank ? "#" + m.rank : ""))
    );
    d.addEventListener("toggle", () => d.open && buildModel(d));
    return d;
  }
  const modelList = el("div", { id: "model-list" });
  // The details of `names`: kept ones (opened) first, then the others in the given order.
  function listModels(names) {
    const keep = [...modelList.children].filter((d) => d.open);
    const have = new Set(keep.map((d) => d.dataset.model));
    const fresh = names.filter((n) => !have.has(n)).map((n) => document.getElementById("model-" + n) || modelDetails(models[modelIndex.get(n)]));
    modelList.replaceChildren(...keep, ...fresh);
  }
  // Opens a model's details (made now if need be), as its link in the leaderboard does.
  function openModel(name) {
    if (!modelIndex.has(name)) return;
    let d = document.getElementById("model-" + name);
    if (!d) {
      d = modelDetails(models[modelIndex.get(name)]);
      modelList.prepend(d);
    }
    buildModel(d);
    d.open = true;
  }
  R.openModel = openModel;
  function details() {
    return el("section", { id: "models" }, el("h2", {}, "Models"), el("p", { class: "hint" }, "the models of the leaderboard's page and those opened from a link; open one for its figures and layer table"), modelList);
  }

  function render() {
    // First guesses of the widths (the page is not laid out yet): every chart then fits its box.
    const width = Math.max(Math.min(app.clientWidth ? app.clientWidth - 40 : 1100, 1360), 300);
    const chartW = width >= 2 * 460 + 12 ? Math.floor((width - 12) / 2) - 10 : width - 10;
    // A search's view shows each parameter against its metric, pruned trials included: it
    // stands in for the grid charts.
    // Each section's time to build (ms), for the browser tests' measures.
    const timed = (name, f) => {
      const t0 = performance.now();
      const out = f();
      R.timings[name] = Math.round(performance.now() - t0);
      return out;
    };
    R.timings = {};
    const params = timed(S ? "search" : "grid", () => (S ? search(width, chartW) : grids(chartW)));
    const groups = D.group_by ? [timed("groups", groupsView)] : [];
    const board = timed("leaderboard", leaderboard), curveSec = timed("curves", () => curves(chartW));
    const sections = [header(), board, ...groups, ...(S ? [params, curveSec] : [curveSec, params]), timed("timeline", () => timeline(width)), timed("models", details)];
    timed("layout", () => app.replaceChildren(...sections));
    timed("fill", () => R.fillBoard());
    if (R.fillTrials) R.fillTrials();
    if (state.isolated !== null && !modelIndex.has(state.isolated)) isolate(null);
    else applyIsolation();
    // A link to a model (#model-NAME) opens its details.
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("model-")) openModel(hash.slice(6));
    const y = load("scroll", 0);
    if (D.live && y) window.scrollTo(0, y);
  }
  window.addEventListener("beforeunload", () => save("scroll", window.scrollY));
  render();
})();
