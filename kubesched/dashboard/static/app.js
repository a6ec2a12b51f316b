// kubesched dashboard: plain JS, no framework, nothing fetched from the internet.
// The server aggregates; this file only draws what /api/stream (Server-Sent Events) sends, and asks
// /api/pods/.../explain and /api/whatif on demand. Text from the cluster is set with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { snapshot: null, selectedPod: null, knownPods: new Set(), heatCell: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const cores = (milli) => String(parseFloat((milli / 1000).toFixed(milli < 10000 ? 2 : 1)));
function bytes(n) {
  const units = ["B", "Ki", "Mi", "Gi", "Ti"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (n >= 100 || Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1)) + units[i];
}
const pct = (a, b) => (b > 0 ? Math.round((100 * a) / b) : 0);
function ago(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 90) return `${Math.round(seconds)}s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)}m`;
  return `${(seconds / 3600).toFixed(1)}h`;
}

// ---- summary and nodes -------------------------------------------------------------------------------------

function renderSummary(s) {
  const box = $("summary");
  box.replaceChildren(
    el("span", { class: "chip" }, el("b", { text: `${s.readyNodes}/${s.nodes}` }), " nodes ready"),
    el("span", { class: "chip" }, el("b", { text: String(s.boundPods) }), " pods on nodes"),
    el("span", { class: "chip", id: "summary-pending" }, el("b", { text: String(s.pending) }), " pending"),
    el("span", { class: "chip" }, "CPU ", el("b", { text: `${pct(s.cpu[0], s.cpu[1])}%` }),
      ` requested (${cores(s.cpu[0])}/${cores(s.cpu[1])})`),
    el("span", { class: "chip" }, "memory ", el("b", { text: `${pct(s.memory[0], s.memory[1])}%` }),
      ` requested (${bytes(s.memory[0])}/${bytes(s.memory[1])})`),
  );
}

function meter(label, used, total, fmt, usage) {
  const ratio = total > 0 ? used / total : 0;
  const track = el("div", { class: "track" },
    el("div", { class: "fill" + (ratio >= 1 ? " full" : ""), style: `width:${Math.min(100, ratio * 100)}%` }));
  if (usage) {
    const mark = el("div", { class: "usage" + (usage.fresh ? "" : " stale"),
      title: `real usage ${(usage.value * 100).toFixed(1)}% (${ago(usage.ageSeconds)} old${usage.fresh ? "" : ", stale"})` });
    mark.style.left = `calc(${Math.min(100, usage.value * 100)}% - 1px)`;
    track.append(mark);
  }
  return el("div", { class: "meter" },
    el("div", { class: "label" }, el("span", { text: label }),
      el("span", { text: `${fmt(used)} / ${fmt(total)} (${pct(used, total)}%)` })),
    track);
}

function podChip(key, phase) {
  const name = key.split("/").slice(1).join("/");
  const chip = el("span", { class: "pod-chip", "data-pod": key, "data-phase": phase, title: `${key} (${phase})`,
    text: name, onclick: (e) => { e.stopPropagation(); explain(key); } });
  if (state.selectedPod === key) chip.classList.add("selected");
  if (state.knownPods.size && !state.knownPods.has(key)) chip.classList.add("new");
  return chip;
}

function tile(n) {
  const classes = ["node-tile"];
  if (!n.ready) classes.push("not-ready");
  if (n.unschedulable) classes.push("cordoned");
  const usage = n.usage || {};
  const box = el("div", { class: classes.join(" "), "data-node": n.name },
    el("div", { class: "title" }, el("span", { class: "name", text: n.name }),
      el("span", { class: "zone", text: [n.zone, n.ready ? "" : "NotReady", n.unschedulable ? "cordoned" : ""].filter(Boolean).join(" · ") })),
    meter("CPU", n.cpu[0], n.cpu[1], cores, usage.cpu),
    meter("memory", n.memory[0], n.memory[1], bytes, usage.memory),
  );
  if (n.usage) {
    const parts = [];
    for (const [k, u] of Object.entries(n.usage)) parts.push(`${k} ${(u.value * 100).toFixed(0)}% ${u.fresh ? "" : "stale "}(${ago(u.ageSeconds)} ago)`);
    box.append(el("div", { class: "usage-note", text: "usage: " + parts.join(", ") }));
  }
  const pods = el("div", { class: "pods" });
  for (const [key, phase] of n.podList) pods.append(podChip(key, phase));
  if (n.pods[0] > n.podList.length) pods.append(el("span", { class: "more", text: `+${n.pods[0] - n.podList.length} more` }));
  box.append(el("div", { class: "meter" }, el("div", { class: "label" },
    el("span", { text: "pods" }), el("span", { class: "pod-count", text: `${n.pods[0]} / ${n.pods[1]}` }))), pods);
  return box;
}

function heatColor(v) {
  if (v === null || v === undefined) return "#e3e7eb";
  const x = Math.max(0, Math.min(1, v));
  // green (low) -> amber -> red (full)
  const hue = 130 - 130 * x;
  return `hsl(${hue}, 65%, ${55 - 12 * x}%)`;
}

function renderHeatmap(snap) {
  const hm = snap.heatmap;
  const metric = $("heat-metric").value;
  const idx = hm.fields.indexOf(metric);
  const f = (name) => hm.fields.indexOf(name);
  const cells = hm.cells.map((c) => {
    const title = `${c[f("first")]} … ${c[f("last")]} (${c[f("nodes")]} nodes)\nCPU requested avg ${(c[f("cpuAvg")] * 100).toFixed(0)}% max ${(c[f("cpuMax")] * 100).toFixed(0)}%\nmemory avg ${(c[f("memAvg")] * 100).toFixed(0)}%\npods ${c[f("pods")]}` +
      (c[f("usageCpuAvg")] !== null ? `\nCPU usage avg ${(c[f("usageCpuAvg")] * 100).toFixed(0)}%` : "") +
      (c[f("notReady")] ? `\n${c[f("notReady")]} not ready/cordoned` : "");
    const cell = el("div", { class: "heat-cell" + (c[f("notReady")] ? " bad" : ""), title,
      "data-first": c[f("first")], "data-last": c[f("last")], onclick: () => drill(c[f("first")], c[f("last")]) });
    cell.style.background = heatColor(c[idx]);
    if (state.heatCell === c[f("first")]) cell.classList.add("selected");
    return cell;
  });
  $("heatmap").replaceChildren(...cells);
  $("heat-note").textContent = `${snap.summary.nodes} nodes in ${hm.cells.length} cells of ${hm.nodesPerCell}; click a cell for its nodes. Busiest nodes below.`;
}

async function drill(first, last) {
  state.heatCell = first;
  const r = await fetch(`/api/nodes?first=${encodeURIComponent(first)}&last=${encodeURIComponent(last)}`);
  const data = await r.json();
  const box = $("drill");
  box.hidden = false;
  box.replaceChildren(...data.nodes.map(tile));
}

function renderNodes(snap) {
  const heat = snap.mode === "heatmap";
  $("heatmap").hidden = !heat;
  $("heat-note").hidden = !heat;
  $("heat-metric-label").hidden = !heat;
  if (heat) {
    renderHeatmap(snap);
    $("nodes").replaceChildren(el("h3", { text: "Busiest nodes" }), ...snap.hottest.map(tile));
  } else {
    $("drill").hidden = true;
    $("nodes").replaceChildren(...snap.nodes.map(tile));
  }
}

// ---- pending pods, leases ----------------------------------------------------------------------------------

function renderPending(snap) {
  $("pending-count").textContent = `(${snap.summary.pending})`;
  const items = snap.pending.map((p) => el("li", { "data-pod": p.pod, onclick: () => explain(p.pod) },
    el("span", { class: "pod", text: p.pod }), " ",
    el("span", { class: "note", text: `${p.scheduler}, waiting ${ago(p.ageSeconds)}` }),
    el("span", { class: "msg" + (p.message ? "" : " none"), text: p.message || "no FailedScheduling event yet" })));
  if (!items.length) items.push(el("li", { class: "note", text: "none" }));
  if (snap.summary.pending > snap.pending.length) items.push(el("li", { class: "note", text: `… and ${snap.summary.pending - snap.pending.length} more` }));
  $("pending").replaceChildren(...items);
  // Keep the what-if pod list in step with the pending pods (the current choice survives).
  const sel = $("whatif-pod");
  const current = sel.value;
  const options = [el("option", { value: "", text: "paste a manifest below" })];
  for (const p of snap.pending) options.push(el("option", { value: p.pod, text: p.pod }));
  sel.replaceChildren(...options);
  if (snap.pending.some((p) => p.pod === current)) sel.value = current;
}

function renderLeases(snap) {
  const rows = [el("tr", {}, ...["lease", "holder", "leading since", "renewed", "profiles"].map((h) => el("th", { text: h })))];
  for (const l of snap.leases) {
    rows.push(el("tr", { "data-lease": l.lease },
      el("td", { text: l.lease }),
      el("td", { class: l.expired ? "expired" : "", text: l.holder ? l.holder + (l.expired ? " (expired)" : "") : "nobody" }),
      el("td", { text: l.since }), el("td", { text: l.renewed }),
      el("td", { text: l.profiles.length ? l.profiles.join(", ") : "—" })));
  }
  if (snap.leases.length === 0) rows.push(el("tr", {}, el("td", { colspan: 5, class: "note", text: "no leader-election leases" })));
  $("leases").replaceChildren(...rows);
}

function render(snap) {
  state.snapshot = snap;
  renderSummary(snap.summary);
  renderNodes(snap);
  renderPending(snap);
  renderLeases(snap);
  const keys = new Set();
  for (const n of snap.nodes || snap.hottest || []) for (const [k] of n.podList) keys.add(k);
  state.knownPods = keys;
  document.body.dataset.generation = String(snap.generation);
}

// ---- explanations ------------------------------------------------------------------------------------------

function renderPlacement(box, r) {
  const parts = [];
  parts.push(el("div", { class: "verdict" }, el("span", { text: `${r.pod} → ` }),
    r.node ? el("b", { class: "node", "data-chosen": r.node, text: r.node }) : el("b", { class: "none", text: "fits nowhere" }),
    el("span", { class: "note", text: ` (profile ${r.profile}, ${r.nodesConsidered} nodes)` })));
  if (r.boundTo !== undefined) {
    parts.push(el("div", { class: "sub", text: r.boundTo
      ? `Bound to ${r.boundTo}. Simulated as if it were scheduled now, taken off its node; other pending pods left out.`
      : "Pending. Simulated on the cluster as it is now; other pending pods left out." }));
  }
  if (r.recorded) {
    parts.push(el("div", { class: "sub", text: `The live scheduler (--explain) placed it on ${r.recorded.node || "no node"} at the time.` }));
  }
  if (!r.node && r.message) parts.push(el("div", { class: "error", text: r.message }));
  if (r.nominatedNode) parts.push(el("div", { class: "sub", text: `nominated to ${r.nominatedNode} by preemption` }));
  if (r.preempted && r.preempted.length) parts.push(el("div", { class: "sub", text: `would preempt ${r.preempted.join(", ")}` }));

  const nodes = Object.entries(r.scores || {});
  if (nodes.length) {
    const plugins = [];
    for (const [, s] of nodes) for (const k of Object.keys(s)) if (k !== "total" && !plugins.includes(k)) plugins.push(k);
    nodes.sort((a, b) => (b[1].total ?? 0) - (a[1].total ?? 0) || a[0].localeCompare(b[0]));
    const limit = 50;
    const head = el("tr", {}, el("th", { text: "node" }), ...plugins.map((p) => el("th", { class: "num", title: p, text: p.replace(/([a-z])([A-Z])/g, "$1\u200b$2") })), el("th", { class: "num", text: "total" }));
    const rows = nodes.slice(0, limit).map(([node, s]) => el("tr", { class: node === r.node ? "chosen" : "", "data-node": node },
      el("td", { class: "node", text: node }),
      ...plugins.map((p) => el("td", { class: "num", "data-plugin": p, text: s[p] === undefined ? "" : String(s[p]) })),
      el("td", { class: "num", "data-plugin": "total", text: String(s.total ?? "") })));
    parts.push(el("h3", { text: "Scores per plugin (normalized score × weight)" }),
      el("div", { class: "scroll" }, el("table", { class: "grid scores" }, head, ...rows)));
    if (nodes.length > limit) parts.push(el("div", { class: "note", text: `… ${nodes.length - limit} more feasible nodes` }));
  } else if (r.node) {
    parts.push(el("div", { class: "sub", text: "the only feasible node (or its nominated node): not scored" }));
  }
  const filtered = Object.entries(r.filtered || {});
  if (filtered.length) {
    const limit = 50;
    parts.push(el("h3", { text: `Filtered out (${filtered.length})` }),
      el("div", { class: "scroll" }, el("table", { class: "grid filtered" },
        el("tr", {}, el("th", { text: "node" }), el("th", { text: "reasons" })),
        ...filtered.slice(0, limit).map(([node, reasons]) => el("tr", { "data-node": node }, el("td", { text: node }), el("td", { text: reasons.join("; ") }))))));
  }
  box.replaceChildren(...parts);
}

async function explain(key) {
  state.selectedPod = key;
  document.querySelectorAll(".pod-chip.selected").forEach((c) => c.classList.remove("selected"));
  document.querySelectorAll(`.pod-chip[data-pod="${CSS.escape(key)}"]`).forEach((c) => c.classList.add("selected"));
  const box = $("explain");
  box.dataset.pod = key;
  box.dataset.loading = "1";
  box.replaceChildren(el("p", { class: "note", text: `simulating ${key}…` }));
  try {
    const r = await fetch(`/api/pods/${key.split("/").map(encodeURIComponent).join("/")}/explain`);
    const data = await r.json();
    if (state.selectedPod !== key) return;
    if (!r.ok) box.replaceChildren(el("div", { class: "error", text: data.error || `error ${r.status}` }));
    else renderPlacement(box, data);
  } catch (e) {
    box.replaceChildren(el("div", { class: "error", text: `cannot reach the dashboard: ${e}` }));
  } finally {
    delete box.dataset.loading;
  }
}

// ---- what-if -----------------------------------------------------------------------------------------------

async function loadProfiles() {
  const r = await fetch("/api/profiles");
  const data = await r.json();
  $("whatif-profile").replaceChildren(...data.profiles.map((p) => el("option", { value: p, text: p })));
}

async function whatIf(ev) {
  ev.preventDefault();
  const err = $("whatif-error");
  const out = $("whatif-result");
  err.hidden = true;
  out.replaceChildren();
  const pod = $("whatif-pod").value;
  const body = { profile: $("whatif-profile").value || null };
  if (pod) body.pod = pod; else body.manifest = $("whatif-manifest").value;
  $("whatif-run").disabled = true;
  try {
    const r = await fetch("/api/whatif", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    let data;
    try { data = await r.json(); } catch { data = { error: `the dashboard answered ${r.status}` }; }
    if (!r.ok) { err.textContent = data.error || `error ${r.status}`; err.hidden = false; return; }
    renderPlacement(out, data);
  } catch (e) {
    err.textContent = `cannot reach the dashboard: ${e}`;
    err.hidden = false;
  } finally {
    $("whatif-run").disabled = false;
  }
}

// ---- the live scheduler ------------------------------------------------------------------------------------

function spark(values, cls, label) {
  const w = 400, h = 46;
  const nums = values.map((v) => (v === null || v === undefined ? 0 : v));
  const max = Math.max(...nums, 1e-9);
  const pts = nums.map((v, i) => `${nums.length > 1 ? (i * w) / (nums.length - 1) : 0},${h - 3 - (v / max) * (h - 8)}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("class", "spark " + cls);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", pts);
  svg.append(line);
  return el("div", {}, el("div", { class: "sub", text: label }), svg);
}

function queueTable(title, pods, extra) {
  if (!pods || !pods.length) return null;
  const rows = pods.slice(0, 30).map((p) => el("tr", {}, el("td", { text: p.pod }), el("td", { text: extra(p) })));
  return el("div", {}, el("h3", { text: title }), el("table", { class: "grid" }, ...rows));
}

async function refreshScheduler() {
  let data;
  try { data = await (await fetch("/api/scheduler")).json(); } catch { return; }
  const box = $("scheduler");
  if (!data.configured) { box.replaceChildren(el("p", { class: "note", text: data.hint })); return; }
  const parts = [el("div", { class: "sub", text: data.url })];
  if (data.metricsError) parts.push(el("div", { class: "error", text: `metrics: ${data.metricsError}` }));
  const q = data.queue;
  if (q) {
    parts.push(el("div", { class: "qcounts", id: "queue-counts" },
      ...["active", "backoff", "unschedulable", "gated"].map((k) => el("span", { "data-queue": k }, el("b", { text: String(q.counts[k] ?? 0) }), ` ${k}`))));
    parts.push(queueTable("Unschedulable (rejected by)", q.unschedulable, (p) => p.plugins.join(", ") || "—"));
    parts.push(queueTable("Backoff", q.backoff, (p) => `${p.backoffRemainingSeconds}s left; ${p.plugins.join(", ")}`));
    parts.push(queueTable("Gated", q.gated, (p) => p.gatingPlugin));
    parts.push(queueTable("Active", q.active, (p) => `${p.attempts} attempts`));
  } else if (data.queueError) {
    parts.push(el("div", { class: "note", text: data.queueError }));
  }
  const s = data.series || [];
  if (s.length) {
    const last = s[s.length - 1];
    parts.push(spark(s.map((x) => x.scheduledPerSecond), "throughput", `pods scheduled per second (last: ${last.scheduledPerSecond}; ${Math.round((s.length * data.intervalSeconds) / 60)} min)`));
    parts.push(spark(s.map((x) => x.meanLatencySeconds), "latency", `mean attempt latency (last: ${last.meanLatencySeconds === null ? "—" : (last.meanLatencySeconds * 1000).toFixed(1) + " ms"}; p90 ${last.p90LatencySeconds === null ? "—" : (last.p90LatencySeconds * 1000).toFixed(1) + " ms"})`));
  } else {
    parts.push(el("div", { class: "note", text: "collecting metrics samples…" }));
  }
  box.replaceChildren(...parts.filter(Boolean));
}

// ---- live updates ------------------------------------------------------------------------------------------

function connect() {
  const conn = $("connection");
  const source = new EventSource("/api/stream");
  source.addEventListener("state", (ev) => {
    conn.dataset.state = "live";
    conn.textContent = "live";
    render(JSON.parse(ev.data));
  });
  source.onerror = () => { conn.dataset.state = "lost"; conn.textContent = "reconnecting…"; };
}

$("heat-metric").addEventListener("change", () => state.snapshot && render(state.snapshot));
$("whatif-form").addEventListener("submit", whatIf);
loadProfiles();
connect();
refreshScheduler();
setInterval(refreshScheduler, 3000);
