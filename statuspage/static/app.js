// infergate status page: polls the admin listener's JSON API every 2 s and
// redraws alerts, models, routes, releases and GPUs.
//
// Every string from the API reaches the DOM as text (el() below appends
// text nodes; attributes are set as properties or dataset): model names
// come from clients, and a name like "<script>" must show as itself, not
// run. Nothing here parses markup from a string (no HTML sinks);
// TestScriptWritesTextOnly checks that.
"use strict";

const REFRESH_MS = 2000;
// A fetch that takes longer than this counts as failed: a wedged listener
// shows as a stale page, not as a page that silently stops moving.
const TIMEOUT_MS = 5000;
// Longer strings are clipped on screen; the cell's title holds more.
// Evidence lines are sentences, so they get more room.
const CLIP = 120;
const CLIP_EVIDENCE = 600;

// Relative to the page (served at status/), so a path prefix added by a
// reverse proxy in front of the admin listener is kept.
const sources = {
  alerts: "../api/v1/alerts",
  models: "../api/v1/models",
  series: "../api/v1/series",
  routes: "../api/v1/routes",
  releases: "../api/v1/releases",
  endpoints: "../api/v1/endpoints",
  gpus: "../api/v1/gpus",
  cost: "../api/v1/cost",
};

// Sources a section can do without: the cost column shows "—" when
// /api/v1/cost cannot be read (an older proxy), without a stale banner.
const optionalSources = new Set(["cost"]);

// Which sources each section is drawn from, to grey it out when one fails.
const sectionSources = {
  alerts: ["alerts"],
  models: ["models", "series", "routes"],
  routes: ["routes"],
  releases: ["releases"],
  endpoints: ["endpoints"],
  gpus: ["gpus"],
};

// state[name]: {data, at (ms of the last good read), error (text or null)}.
const state = {};
for (const name of Object.keys(sources)) state[name] = { data: null, at: 0, error: null };

// slow[model]: the model's /api/v1/slow?window=1m answer, read for the
// models the series name (at most SLOW_MODELS, the busiest first).
const SLOW_MODELS = 8;
const SLOW_SHOWN = 5;
let slow = { at: 0, error: null, byModel: new Map() };

// Calls per second per model, from the change of the series' call counters
// between two reads of /api/v1/series.
let traffic = { at: 0, calls: new Map(), rates: new Map() };

async function fetchOne(name) {
  const st = state[name];
  try {
    const resp = await fetch(sources[name], {
      signal: AbortSignal.timeout(TIMEOUT_MS),
      headers: { Accept: "application/json" },
      cache: "no-store",
    });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    st.data = await resp.json();
    st.at = Date.now();
    st.error = null;
  } catch (e) {
    st.error = e && e.name === "TimeoutError" ? "timed out after " + TIMEOUT_MS / 1000 + " s" : String((e && e.message) || e);
  }
}

// fetchSlow reads the last minute's slowest calls of the busiest models
// the series name; a model without calls (404) is left out.
async function fetchSlow() {
  const calls = new Map();
  for (const s of state.series.data || []) {
    // The registry keeps no name longer than 4096 bytes (max_label_bytes'
    // limit): a longer one is not worth a URL the listener would refuse.
    if (!s.model || s.model === "other" || s.model === "(unknown)" || s.model.length > 4096) continue;
    calls.set(s.model, (calls.get(s.model) || 0) + (s.calls || 0));
  }
  const models = [...calls].sort((a, b) => b[1] - a[1]).slice(0, SLOW_MODELS).map(([m]) => m);
  const byModel = new Map();
  try {
    await Promise.all(models.map(async (m) => {
      const resp = await fetch("../api/v1/slow?window=1m&model=" + encodeURIComponent(m), {
        signal: AbortSignal.timeout(TIMEOUT_MS),
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
      if (resp.status === 404) return;
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      byModel.set(m, await resp.json());
    }));
    slow = { at: Date.now(), error: null, byModel };
  } catch (e) {
    slow.error = String((e && e.message) || e);
  }
}

// --- DOM helpers: text only --------------------------------------------

// el creates an element: props are set as DOM properties (className,
// title, colSpan) or, for "dataset", as data-* attributes; children that
// are not nodes are appended as text.
function el(tag, props, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null) continue;
    if (k === "dataset") Object.assign(n.dataset, v);
    else n[k] = v;
  }
  for (const k of kids) {
    if (k == null || k === "") continue;
    n.append(k instanceof Node ? k : String(k));
  }
  return n;
}

// txt is a span with s clipped to clip (CLIP) characters; the title
// keeps more.
function txt(s, className, clip = CLIP) {
  const full = String(s == null ? "" : s);
  if (full.length <= clip) return el("span", { className }, full);
  return el("span", { className, title: full.slice(0, 2000) }, full.slice(0, clip) + "…");
}

// cls turns an API word into a class name from a fixed set, so a value
// the page does not know styles nothing.
const known = new Set(["firing", "pending", "critical", "warning", "info", "open", "half-open", "closed",
  "primary", "fallback", "cascade", "ok", "bad", "warn", "up", "down", "ejected"]);
function cls(word) {
  const w = String(word || "").toLowerCase().replace("_", "-");
  return known.has(w) ? w : "";
}

// badge shows a state word; it does not wrap, so it is clipped shorter.
function badge(word) {
  const w = String(word || "?");
  return el("span", { className: "badge " + cls(word), title: w.length > 20 ? w.slice(0, 2000) : null },
    w.length > 20 ? w.slice(0, 20) + "…" : w);
}

function td(...kids) {
  return el("td", null, ...kids);
}

function num(content) {
  return el("td", { className: "num" }, content);
}

// --- formatting ----------------------------------------------------------

function isNum(v) {
  return typeof v === "number" && isFinite(v);
}

function dur(sec) {
  if (!isNum(sec)) return "—";
  if (sec === 0) return "0";
  if (sec < 1e-3) return (sec * 1e6).toFixed(0) + " µs";
  if (sec < 1) return (sec * 1e3).toFixed(sec < 0.01 ? 2 : 1) + " ms";
  return sec.toFixed(2) + " s";
}

function pct(ratio) {
  return isNum(ratio) ? (ratio * 100).toFixed(1) + "%" : "—";
}

function gib(bytes) {
  return isNum(bytes) ? (bytes / 2 ** 30).toFixed(1) : "?";
}

// ago says how long ago an RFC 3339 time was: "42s", "3m 5s", "2h 10m".
function ago(iso) {
  const t = Date.parse(iso || "");
  if (!isFinite(t) || t <= 0) return "—";
  let s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  s %= 60;
  if (m < 60) return m + "m " + s + "s";
  return Math.floor(m / 60) + "h " + (m % 60) + "m";
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

function shortGPU(uuid) {
  const u = String(uuid || "");
  return u.length > 16 ? u.slice(0, 16) + "…" : u;
}

// --- sections ------------------------------------------------------------

// show fills a section: the rows into its table's tbody (the table shown
// only when there are rows), or the empty text. table selects one of
// several tables in the section.
function show(id, rows, emptyText, table) {
  const sec = document.getElementById(id);
  const tab = sec.querySelector(table || "table");
  tab.tBodies[0].replaceChildren(...rows);
  tab.hidden = rows.length === 0;
  const empty = sec.querySelector(".empty");
  if (emptyText !== undefined) {
    empty.replaceChildren(...(Array.isArray(emptyText) ? emptyText : [emptyText]));
    empty.hidden = emptyText === "";
  }
}

function setCount(id, s) {
  document.querySelector("#" + id + " .count").textContent = s;
}

function neverLoaded(names) {
  const failed = names.filter((n) => !state[n].at && state[n].error);
  return failed.length ? "could not load " + failed.map((n) => sources[n]).join(", ") : "no data yet";
}

function renderAlerts() {
  const st = state.alerts;
  if (!st.at) {
    show("alerts", [], neverLoaded(["alerts"]));
    return;
  }
  const list = (st.data && st.data.alerts) || [];
  // Firing first, then pending, each in the API's order (name, fingerprint).
  const order = (a) => (a.state === "firing" ? 0 : 1);
  const sorted = list.slice().sort((a, b) => order(a) - order(b));
  const rows = [];
  for (const a of sorted) {
    const labels = a.labels || {};
    const subject = labels.model != null ? "model " + labels.model : labels.gpu != null ? "GPU " + labels.gpu : "";
    const summary = (a.annotations && a.annotations.summary) || "";
    const since = a.state === "firing" && a.firing_since ? a.firing_since : a.active_since;
    rows.push(el("tr", {
      className: a.state === "firing" ? "alert-firing" : "",
      dataset: { alert: String(a.name || ""), state: String(a.state || ""), model: String(labels.model || "") },
    },
      td(badge(a.state)),
      td(badge(a.severity)),
      td(txt(a.name), summary ? el("div", { className: "muted" }, txt(summary)) : null),
      td(txt(subject)),
      num(ago(since)),
      // Rule texts, not only numbers: these may wrap. The value is the
      // one that fired (the worst while the condition held), now the
      // same value at the last evaluation: the summary's words.
      td(txt(firedAt(a))),
      td(txt(a.threshold || "—")),
      td(txt(nowIs(a))),
    ));
    rows.push(el("tr", { className: "evidence" }, el("td", { colSpan: 8 }, evidence(a))));
  }
  const firing = list.filter((a) => a.state === "firing").length;
  setCount("alerts", list.length ? firing + " firing, " + (list.length - firing) + " pending" : "");
  show("alerts", rows, list.length ? "" : el("span", { className: "all-clear" }, "no alerts firing or pending"));
}

// firedAt is the value that fired and when: "31.2ms at 21:50:36".
function firedAt(a) {
  if (!a.value) return "—";
  const t = Date.parse(a.value_at || "");
  return isFinite(t) && t > 0 ? a.value + " at " + clock(t) : a.value;
}

// nowIs is the value now and, for an alert recovering, when it resolves.
function nowIs(a) {
  const t = Date.parse(a.resolves_at || "");
  const cur = a.current || "—";
  return isFinite(t) && t > 0 ? cur + ", resolves at " + clock(t) + " if it stays so" : cur;
}

// evidence lists why an alert is in its state: each condition's verdict,
// the baseline, the GPU, the cause hint, actions taken, and a mute.
function evidence(a) {
  const ev = a.evidence || {};
  const ul = el("ul");
  const li = (s, className) => el("li", { className }, txt(s, null, CLIP_EVIDENCE));
  for (const c of ev.conditions || []) {
    const parts = [c.kind + ": holds " + c.holds];
    if (c.value) parts.push("value " + c.value);
    if (c.threshold) parts.push("threshold " + c.threshold);
    if (isNum(c.calls)) parts.push(c.calls + " calls");
    if (c.note) parts.push(c.note);
    ul.append(li(parts.join(", ")));
  }
  if (ev.baseline) {
    const b = ev.baseline;
    const up = b.up_above_seconds || {};
    const med = b.median_seconds || {};
    const qs = Object.keys(up).sort().map((q) => q + " " + dur(med[q]) + " (up above " + dur(up[q]) + ")");
    ul.append(li("baseline (" + b.source + "): " + (qs.join(", ") || "no levels yet")));
  }
  if (ev.gpu) {
    const g = ev.gpu;
    let s = "GPU " + shortGPU(g.uuid) + ": util " + pct(g.utilization);
    if (isNum(g.temperature_celsius)) s += ", " + g.temperature_celsius.toFixed(0) + " °C";
    if (g.throttle_reasons && g.throttle_reasons.length) s += ", throttled (" + g.throttle_reasons.join(", ") + ")";
    ul.append(li(s));
  }
  if (ev.cause_hint && ev.cause_hint !== "none") ul.append(li("cause hint: " + ev.cause_hint));
  if (ev.slow_endpoint) ul.append(li(ev.slow_endpoint));
  if (ev.anomaly) {
    const an = ev.anomaly;
    let s = an.learning ? "anomaly: learning" : "anomaly score " + an.score.toFixed(3);
    if (an.pattern) s += " (" + an.pattern + ")";
    if (an.explanation) s += ": " + an.explanation;
    const top = (an.top || []).map((f) => f.label + " " + f.contribution_bits.toFixed(2) + " bits");
    if (top.length) s += "; features: " + top.join(", ");
    ul.append(li(s));
  }
  if (ev.recurring) ul.append(li("recurring: " + ev.recurring.note));
  for (const act of ev.actions || []) ul.append(li("action: " + act));
  if (a.muted) ul.append(li("muted: " + a.muted, "muted"));
  if (!ul.childElementCount) ul.append(li("no evidence recorded", "muted"));
  return ul;
}

// updateTraffic turns the series' call counters into calls per second.
// A counter that went down (its series was dropped for idleness) gives no
// rate this round rather than a negative one.
function updateTraffic() {
  const st = state.series;
  if (!st.at || st.at === traffic.at) return;
  const calls = new Map();
  for (const s of st.data || []) calls.set(s.model, (calls.get(s.model) || 0) + (s.calls || 0));
  const rates = new Map();
  const dt = (st.at - traffic.at) / 1000;
  if (traffic.at) {
    for (const [m, n] of calls) {
      const before = traffic.calls.get(m) || 0;
      if (n >= before && dt > 0) rates.set(m, (n - before) / dt);
    }
  }
  traffic = { at: st.at, calls, rates };
}

function renderModels() {
  const loaded = ["models", "series", "routes"].some((n) => state[n].at);
  if (!loaded) {
    show("models", [], neverLoaded(["models", "series", "routes"]));
    return;
  }
  const rows = new Map();
  const row = (name) => {
    if (!rows.has(name)) rows.set(name, { name, lat: null, route: null, n1m: 0, err1m: 0, client1m: 0 });
    return rows.get(name);
  };
  for (const m of state.models.data || []) row(m.model).lat = m;
  for (const s of state.series.data || []) {
    const r = row(s.model);
    const w = s.windows && s.windows["1m"] && s.windows["1m"].total;
    if (!w) continue;
    r.n1m += w.count || 0;
    if (s.code_class === "server_error") r.err1m += w.count || 0;
    if (s.code_class === "client_error") r.client1m += w.count || 0;
  }
  const routes = (state.routes.data && state.routes.data.routes) || [];
  for (const rt of routes) row(rt.model).route = rt;

  const out = [];
  for (const r of [...rows.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const m = r.lat || {};
    const rate = traffic.rates.get(r.name);
    let hint = "";
    if (m.latency_up) hint = "latency up (" + (m.up_reason || "baseline") + ")";
    if (m.cause_hint && m.cause_hint !== "none") hint += (hint ? "; " : "") + m.cause_hint;
    if (m.slow_endpoint) hint += (hint ? "; " : "") + m.slow_endpoint.note;
    // The anomaly detector's words for the model's last second, when it
    // had any (a score high enough to explain); "learning" stays quiet.
    if (m.anomaly && m.anomaly.explanation) hint += (hint ? "; " : "") + "anomaly " + m.anomaly.score.toFixed(2) + ": " + m.anomaly.explanation;
    // Recurring rises the baselines named: "recurring: every day at 10:00 ...".
    for (const p of m.recurring || []) hint += (hint ? "; " : "") + "recurring: " + p.note;
    const cost = costCell(r.name);
    const gpu = m.gpu_uuid ? shortGPU(m.gpu_uuid) + (isNum(m.gpu_utilization) ? " " + pct(m.gpu_utilization) : "") : "—";
    let route = "—";
    if (r.route) {
      route = el("span", null, badge(r.route.route));
      if (r.route.why) route.append(" ", txt(r.route.why, "muted"));
    }
    out.push(el("tr", { dataset: { model: String(r.name) } },
      td(txt(r.name)),
      num(dur(m.p50_seconds)),
      num(dur(m.p99_seconds)),
      num(dur(m.baseline_p99_seconds)),
      num(isNum(rate) ? rate.toFixed(1) : "…"),
      el("td", {
        className: "num " + (r.err1m > 0 ? "bad" : ""),
        title: r.client1m ? r.client1m + " client errors in the last minute (not counted)" : null,
      }, r.n1m ? pct(r.err1m / r.n1m) : "—"),
      td(route),
      num(gpu),
      cost,
      td(txt(hint || "—")),
      td(versions(m.versions)),
    ));
  }
  setCount("models", out.length ? String(out.length) : "");
  show("models", out, out.length ? "" : "no models yet: no calls seen since start");
}

// costCell is a model's GPU-seconds per 1,000 calls (and money, when
// priced), from /api/v1/cost; joules and the method in its title.
function costCell(model) {
  const d = state.cost.data;
  const cell = el("td", { className: "num" }, "—");
  if (!d) return cell;
  if (!d.available) {
    cell.title = d.reason || "no cost attribution";
    return cell;
  }
  const c = (d.models || []).find((x) => x.model === model);
  if (!c || !isNum(c.gpu_seconds_per_1k_calls)) return cell;
  cell.replaceChildren(c.gpu_seconds_per_1k_calls.toPrecision(3) + " GPU·s");
  // Money on a line of its own; a currency is a code, so a long one is
  // clipped (its title holds it whole).
  if (isNum(c.cost_per_1k_calls)) {
    cell.append(el("div", { className: "muted" }, c.cost_per_1k_calls.toPrecision(3) + " ", txt(d.currency || "", null, 6)));
  }
  cell.title = "per 1,000 calls: " + c.gpu_seconds_per_1k_calls.toPrecision(3) + " GPU-seconds, " +
    (isNum(c.joules_per_1k_calls) ? c.joules_per_1k_calls.toPrecision(3) + " J" : "? J") +
    "; split by " + (c.method === "compute_time" ? "the server's compute time" : "the proxy's upstream time") +
    " (" + c.calls + " calls since start)";
  return cell;
}

// versions is the version comparison of a model's row: the canary's p99
// against the baseline's in one line, each version's latency in its
// title; "—" for a model with one version.
function versions(v) {
  const c = v && v.comparison;
  if (!c || !c.summary) return "—";
  const s = txt(c.summary, c.verdict === "slower" ? "warn" : c.verdict === "too_few_calls" ? "muted" : "", 240);
  s.title = (v.versions || []).map((x) =>
    "version " + x.version + ": " + x.calls + " calls, p50 " + dur(x.p50_seconds) + ", p99 " + dur(x.p99_seconds)).join("\n") +
    "\n(successful calls of the last " + v.window + "; interval at " + pct(c.confidence_level) + ")";
  return s;
}

function renderRoutes() {
  const st = state.routes;
  if (!st.at) {
    show("routes", [], neverLoaded(["routes"]), "table.routes");
    return;
  }
  const routes = (st.data && st.data.routes) || [];
  const breakers = (st.data && st.data.breakers) || [];
  const rrows = routes.map((rt) => {
    const c = rt.calls || {};
    return el("tr", { dataset: { model: String(rt.model) } },
      td(txt(rt.model)),
      td(badge(rt.route)),
      td(txt([rt.why, rt.reason && "reason " + rt.reason, rt.forced && rt.forced !== "auto" ? "forced " + rt.forced : ""].filter(Boolean).join("; ") || "—")),
      td(txt(rt.primary_upstream || "—")),
      td(rt.primary_breaker ? badge(rt.primary_breaker) : "—"),
      td(txt(rt.fallback || "—")),
      num(rt.since ? ago(rt.since) + " ago" : "—"),
      num((c.primary || 0) + " / " + (c.fallback || 0)),
    );
  });
  const brows = breakers.map((b) => el("tr", { dataset: { upstream: String(b.upstream), model: String(b.model || "") } },
    td(txt(b.upstream)),
    td(txt(b.model || "all models (the way to it)")),
    td(badge(b.state)),
    num(b.calls), num(b.failures), num(b.consecutive_failures),
    num(b.open_until ? clock(Date.parse(b.open_until)) : "—"),
    num(b.times_opened),
  ));
  show("routes", rrows, routes.length || breakers.length ? "" :
    "no routed models: routes and breakers appear with --fallback or upstreams: in the config", "table.routes");
  show("routes", brows, undefined, "table.breakers");
}

// target names a release's target as the evidence does: "version 2",
// "model resnet50-trt", "upstream gpu-b".
function target(t) {
  t = t || {};
  if (t.version) return "version " + t.version;
  if (t.model) return "model " + t.model;
  if (t.upstream) return "upstream " + t.upstream;
  return "?";
}

// renderReleases draws each release: its targets, state, the candidate's
// weight and step, the evidence of the step so far, what the judgement
// says now (a hold says what it still needs) and the last decision that
// changed the release, in the judgement's own words.
function renderReleases() {
  const st = state.releases;
  if (!st.at) {
    show("releases", [], neverLoaded(["releases"]));
    return;
  }
  const rels = (st.data && st.data.releases) || [];
  const rows = rels.map((r) => {
    const spec = r.spec || {};
    const steps = spec.steps || [];
    const ev = r.evidence || {};
    let calls = 0;
    for (const c of ev.classes || []) calls += (c.calls || [0, 0])[1] || 0;
    const hist = r.history || [];
    const last = hist.length ? hist[hist.length - 1] : null;
    const weight = isNum(r.weight) ? r.weight + "%" : "—";
    return el("tr", { dataset: { model: String(spec.model), state: String(r.state) } },
      td(txt(spec.model)),
      td(txt(target(spec.stable) + " → " + target(spec.candidate))),
      td(badge(r.state)),
      num(weight),
      num(steps.length ? (r.step + 1) + " of " + steps.length + " (" + steps.map((w) => w + "%").join(", ") + ")" : "fixed"),
      num(String(calls)),
      td(txt((r.current && r.current.reason) || r.reset || "—", "evidence", CLIP_EVIDENCE)),
      td(txt(last ? clock(Date.parse(last.at)) + " " + last.kind + ": " + last.reason : "—", "evidence", CLIP_EVIDENCE)),
    );
  });
  setCount("releases", rels.length ? String(rels.length) : "");
  show("releases", rows, rels.length ? "" : "no releases: they appear with releases: in the config or POST /api/v1/releases");
}

// renderEndpoints draws each upstream's replicas: the picker's view of
// them (state and why, calls in flight, latency, models held).
function renderEndpoints() {
  const st = state.endpoints;
  if (!st.at) {
    show("endpoints", [], neverLoaded(["endpoints"]));
    return;
  }
  const eps = (st.data && st.data.endpoints) || [];
  const rows = eps.map((e) => el("tr", { dataset: { upstream: String(e.upstream), address: String(e.address) } },
    td(txt(e.upstream)),
    td(txt(e.address)),
    td(badge(e.state)),
    td(txt([e.why, e.ejected_until && "until " + clock(Date.parse(e.ejected_until))].filter(Boolean).join(", ") || "—")),
    num(e.in_flight),
    num(e.calls),
    num(e.failed),
    num(e.latency_seconds == null ? "—" : dur(e.latency_seconds)),
    num(e.ejections),
    td(txt(e.models == null ? "any (not listed)" : e.models.join(", ") || "none")),
    td(txt(modelLatency(e.model_latency))),
  ));
  show("endpoints", rows, rows.length ? "" : "no upstream");
}

// modelLatency is an endpoint's recent p50/p99 per model, on one line.
function modelLatency(ml) {
  const names = Object.keys(ml || {}).sort();
  if (!names.length) return "—";
  return names.map((m) => m + " " + dur(ml[m].p50_seconds) + " / " + dur(ml[m].p99_seconds)).join(", ");
}

function renderGPUs() {
  const st = state.gpus;
  const sec = document.getElementById("gpus");
  if (!st.at) {
    show("gpus", [], neverLoaded(["gpus"]));
    return;
  }
  const d = st.data || {};
  const onGPU = new Map();
  for (const [model, uuid] of Object.entries(d.models || {})) {
    if (!onGPU.has(uuid)) onGPU.set(uuid, []);
    onGPU.get(uuid).push(model);
  }
  const rows = (d.gpus || []).map((g) => {
    const mem = isNum(g.memory_used_bytes) || isNum(g.memory_total_bytes)
      ? gib(g.memory_used_bytes) + " / " + gib(g.memory_total_bytes) + " GiB" : pct(g.memory_utilization);
    const power = isNum(g.power_watts) ? g.power_watts.toFixed(0) + (isNum(g.power_limit_watts) ? " / " + g.power_limit_watts.toFixed(0) : "") + " W" : "—";
    const clk = isNum(g.sm_clock_hertz) ? (g.sm_clock_hertz / 1e6).toFixed(0) + (isNum(g.sm_clock_max_hertz) ? " / " + (g.sm_clock_max_hertz / 1e6).toFixed(0) : "") + " MHz" : "—";
    const reasons = (g.clock_event_reasons || []).join(", ");
    return el("tr", { dataset: { gpu: String(g.gpu_uuid) } },
      td(el("span", null, txt(g.name || "GPU"), el("div", { className: "muted" }, txt(g.gpu_uuid + " · " + g.source)))),
      td(txt((onGPU.get(g.gpu_uuid) || []).sort().join(", ") || "—")),
      num(pct(g.utilization)),
      num(mem),
      num(isNum(g.temperature_celsius) ? g.temperature_celsius.toFixed(0) + " °C" : "—"),
      num(power),
      num(clk),
      td(g.throttled ? el("span", { className: "bad" }, txt("yes" + (reasons ? ": " + reasons : ""))) : txt(reasons || "no")),
    );
  });
  const srcs = d.sources || [];
  sec.querySelector(".sources").replaceChildren(...(srcs.length ? [txt("sources: " + srcs.map((s) =>
    s.source + (s.up ? " up" : " down") + (s.errors ? ", " + s.errors + " errors" : "") + (s.last_error ? " (last: " + s.last_error + ")" : "")).join("; "))] : []));
  show("gpus", rows, rows.length ? "" : srcs.length ? "no GPU readings yet" : "no GPU source configured (--gpu-source)");
}

// renderBanner says, when any read failed this round, which and since
// when the page shows older data; sections drawn from a failed source are
// greyed out.
function renderBanner() {
  const failed = Object.keys(sources).filter((n) => state[n].error && !optionalSources.has(n));
  const banner = document.getElementById("stale");
  for (const [id, names] of Object.entries(sectionSources)) {
    document.getElementById(id).classList.toggle("stale", names.some((n) => state[n].error));
  }
  const updated = document.getElementById("updated");
  if (!failed.length) {
    banner.hidden = true;
    banner.replaceChildren();
    updated.textContent = "updated " + clock(Date.now());
    return;
  }
  // Grouped by error: a listener that is down fails every read alike.
  const byError = new Map();
  for (const n of failed) byError.set(state[n].error, [...(byError.get(state[n].error) || []), n]);
  const oldest = Math.min(...failed.map((n) => state[n].at || Infinity));
  let s = "Stale: could not refresh " + [...byError].map(([err, ns]) => ns.join(", ") + " (" + err + ")").join("; ") + ". ";
  s += isFinite(oldest) ? "Showing data read at " + clock(oldest) + ", " + Math.round((Date.now() - oldest) / 1000) + " s ago. " : "";
  s += "Retrying every " + REFRESH_MS / 1000 + " s.";
  // Built from the page's own words and fetch's error texts: shown whole.
  banner.textContent = s;
  banner.hidden = false;
  updated.textContent = "last tried " + clock(Date.now());
}

// renderSlow shows each model's slowest calls of the last minute (top
// SLOW_SHOWN) under a line saying how they differ from all its calls.
function renderSlow() {
  document.getElementById("slow").classList.toggle("stale", !!slow.error);
  if (!slow.at) {
    show("slow", [], slow.error ? "could not load api/v1/slow: " + slow.error : "no data yet");
    return;
  }
  const rows = [];
  let n = 0;
  for (const [model, docs] of [...slow.byModel].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    for (const d of docs || []) {
      const w = (d.windows || [])[0];
      if (!w || !(w.calls || []).length) continue;
      const name = model + (d.version ? " v" + d.version : "");
      rows.push(el("tr", { className: "slow-model", dataset: { model: model } },
        td(txt(name)),
        el("td", { colSpan: 8, className: "differs" }, txt((w.differs && w.differs.summary) || "", "", CLIP_EVIDENCE))));
      for (const c of w.calls.slice(0, SLOW_SHOWN)) {
        n++;
        rows.push(el("tr", { className: "slow-call", dataset: { model: model } },
          td(txt("")),
          num(dur(c.latency_seconds)),
          td(txt(c.inputs || "—")),
          num(c.request_bytes >= 1024 ? (c.request_bytes / 1024).toFixed(0) + " KiB" : c.request_bytes + " B"),
          td(txt(c.route || "—")),
          td(txt(c.upstream || "—")),
          td(badge(c.code || "—")),
          num(String(c.attempts || "—")),
          td(txt(c.trace_id || "—", "mono"))));
      }
    }
  }
  setCount("slow", n ? String(n) : "");
  show("slow", rows, rows.length ? "" : "no calls in the last minute");
}

function render() {
  updateTraffic();
  // One section's bad data must not keep the others from drawing.
  for (const f of [renderAlerts, renderModels, renderSlow, renderRoutes, renderReleases, renderEndpoints, renderGPUs, renderBanner]) {
    try {
      f();
    } catch (e) {
      console.error("status page: " + f.name + ": " + e);
    }
  }
}

// poll reads every source, draws, and schedules the next round after
// this one ends: a slow listener is polled less often, never by piling up
// requests.
async function poll() {
  try {
    await Promise.all(Object.keys(sources).map(fetchOne));
    // After the series: they say which models to ask for.
    await fetchSlow();
    render();
  } finally {
    setTimeout(poll, REFRESH_MS);
  }
}

poll();
