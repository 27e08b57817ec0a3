#pragma once

// The dashboard's page, served from the binary: nothing is fetched from
// anywhere but this server's /api. Data reaches the page through
// textContent only, never as markup.

#include <string_view>

namespace sray::dashboard {

inline constexpr std::string_view kDashboardPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sray dashboard</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; }
table { border-collapse: collapse; margin-top: 0.5em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }
th { background: #f3f3f3; }
td.text { text-align: left; }
#status { color: #666; font-size: 0.9em; }
.run { margin: 1em 0; }
.run h3 { font-size: 1em; margin: 0.3em 0; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.chart text { font-size: 11px; fill: #555; }
.chart polyline { fill: none; stroke: #1f77b4; stroke-width: 1.5; }
.chart circle { fill: #1f77b4; }
pre#log-text { background: #f7f7f7; border: 1px solid #ddd; padding: 0.5em; max-height: 30em;
               overflow: auto; white-space: pre-wrap; }
td.dead { color: #a00; }
</style>
</head>
<body>
<h1>sray job <span id="job"></span></h1>
<div id="status">loading</div>
<h2>Nodes</h2>
<table id="nodes">
<thead><tr><th>node</th><th>host</th><th>CPU free / total</th><th>GPU free / total</th>
<th>queued tasks</th><th>workers</th><th>store used / capacity (MiB)</th><th>spilled (MiB)</th>
<th>objects</th><th>load (1 min)</th><th>memory free / total (GiB)</th><th>sray resident (MiB)</th></tr></thead>
<tbody></tbody>
</table>
<h2>Tasks</h2>
<p id="task-totals"></p>
<table id="tasks">
<thead><tr><th>function</th><th>queued</th><th>running</th><th>finished</th><th>failed</th></tr></thead>
<tbody></tbody>
</table>
<h2>Actors</h2>
<p id="actor-totals"></p>
<table id="actors">
<thead><tr><th>id</th><th>name</th><th>class</th><th>state</th><th>node</th><th>pid</th>
<th>restarts</th><th>cause</th></tr></thead>
<tbody></tbody>
</table>
<h2>Placement groups</h2>
<table id="groups">
<thead><tr><th>id</th><th>name</th><th>strategy</th><th>state</th><th>bundles</th>
<th>on nodes</th></tr></thead>
<tbody></tbody>
</table>
<h2>Training</h2>
<div id="training"><p>no training run yet</p></div>
<h2>Logs</h2>
<select id="log-file"></select>
<pre id="log-text"></pre>
<h2>Events</h2>
<ul id="events"></ul>
<script>
"use strict";
function mib(bytes) { return (bytes / 1048576).toFixed(1); }
function gib(bytes) { return ((bytes || 0) / 1073741824).toFixed(1); }
function pair(available, total, name) {
  if (!(name in total)) return "-";
  return (available[name] || 0) + " / " + total[name];
}
function cell(row, text, isText) {
  const td = document.createElement("td");
  td.textContent = text;
  if (isText) td.className = "text";
  row.appendChild(td);
}
// The session a login link gave this tab: in sessionStorage, which browsers
// keep per origin (host and port), never sent to other pages of the host as
// a cookie would be.
function authorized(path) {
  const session = sessionStorage.getItem("sray_session") || "";
  return fetch(path, { credentials: "omit", headers: { "Authorization": "Bearer " + session } });
}
async function api(path) {
  const response = await authorized(path);
  if (response.status === 401) {
    throw new Error("this tab is not logged in to the job (or the job ended): run 'sray login JOB' " +
                    "and open the link it prints");
  }
  if (!response.ok) throw new Error(response.status + " " + await response.text());
  return response.json();
}
function fillTable(id, rows, columns) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of rows) {
    const row = document.createElement("tr");
    for (const [text, isText] of columns(item)) cell(row, text, isText);
    body.appendChild(row);
  }
  return body;
}
function describe(resources) {
  return Object.keys(resources).map(name => name + ":" + resources[name]).join(" ") || "-";
}
async function refreshTasks() {
  const tasks = await api("/api/tasks");
  const all = tasks.by_state;
  document.getElementById("task-totals").textContent = all.queued + " queued, " + all.running +
      " running, " + all.finished + " finished, " + all.failed + " failed attempts";
  fillTable("tasks", tasks.by_function, t => [[t.function, true], [t.queued], [t.running],
                                              [t.finished], [t.failed]]);
}
async function refreshActors() {
  const actors = await api("/api/actors");
  const states = Object.keys(actors.listed_by_state)
                       .map(state => actors.listed_by_state[state] + " " + state).join(", ");
  document.getElementById("actor-totals").textContent =
      actors.total + " actor(s)" + (states ? ": " + states : "") +
      (actors.actors.length < actors.total ? " (the newest " + actors.actors.length +
                                             " listed)" : "");
  const body = fillTable("actors", actors.actors,
      a => [[a.id], [a.name || "-", true], [a["class"], true], [a.state, true],
            [a.state === "alive" ? a.node : "-"], [a.state === "alive" ? a.pid : "-"],
            [a.restarts + " / " + a.max_restarts], [a.cause || "", true]]);
  for (const row of body.rows) {
    if (row.cells[3].textContent === "dead") row.cells[3].className = "text dead";
  }
  const groups = await api("/api/placement_groups");
  fillTable("groups", groups.placement_groups,
      g => [[g.id], [g.name || "-", true], [g.strategy, true], [g.state, true],
            [g.bundles.map(describe).join(", "), true], [g.bundle_nodes.join(", ") || "-", true]]);
}
async function refreshLogs() {
  const select = document.getElementById("log-file");
  const files = (await api("/api/logs")).logs;
  const chosen = select.value;
  select.replaceChildren();
  for (const file of files) {
    const option = document.createElement("option");
    option.value = file.node + "/" + file.worker;
    option.textContent = "node " + file.node + " worker " + file.worker + " (" + file.bytes +
        " bytes)";
    select.appendChild(option);
  }
  if (files.length === 0) return;
  const nonEmpty = files.find(file => file.bytes > 0) || files[0];
  select.value = [...select.options].some(o => o.value === chosen)
                     ? chosen : nonEmpty.node + "/" + nonEmpty.worker;
  const tail = await api("/api/logs/" + select.value);
  const text = document.getElementById("log-text");
  text.textContent = (tail.offset > 0 ? "... (" + tail.offset + " bytes before)\n" : "") +
      tail.data;
}
async function refresh() {
  try {
    const cluster = await api("/api/nodes");
    document.getElementById("job").textContent = cluster.job_id + "." + cluster.step_id;
    const body = document.querySelector("#nodes tbody");
    body.replaceChildren();
    for (const node of cluster.nodes) {
      const row = document.createElement("tr");
      row.className = "node";
      cell(row, node.node_id, false);
      cell(row, node.hostname, true);
      cell(row, pair(node.resources_available, node.resources_total, "CPU"), false);
      cell(row, pair(node.resources_available, node.resources_total, "GPU"), false);
      cell(row, node.queued_tasks, false);
      cell(row, node.worker_processes, false);
      const store = node.object_store;
      cell(row, mib(store.in_memory_bytes) + " / " + mib(store.capacity_bytes), false);
      cell(row, mib(store.spilled_bytes), false);
      cell(row, store.objects, false);
      const load = node.load || {};
      cell(row, load.load_average_1m >= 0 ? load.load_average_1m.toFixed(2) : "-", false);
      cell(row, gib(load.memory_available_bytes) + " / " + gib(load.memory_total_bytes), false);
      cell(row, mib(load.sray_resident_bytes || 0), false);
      body.appendChild(row);
    }
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    document.getElementById("status").textContent = "cannot reach the job: " + error.message;
  }
}
const SVG = "http://www.w3.org/2000/svg";
function svg(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const key in attributes) element.setAttribute(key, attributes[key]);
  return element;
}
function label(parent, x, y, text, anchor) {
  const element = svg("text", { x: x, y: y, "text-anchor": anchor || "start" });
  element.textContent = text;
  parent.appendChild(element);
}
function short(value) {
  return Math.abs(value) >= 1000 ? value.toFixed(0) : value.toPrecision(4);
}
// One metric of a run over its reports: a line with a dot per report.
function chart(title, points) {
  const width = 420, height = 170, left = 55, right = 10, top = 22, bottom = 28;
  const box = svg("svg", { width: width, height: height, class: "chart metric" });
  box.dataset.metric = title;
  box.dataset.points = points.length;
  label(box, left, 14, title);
  if (points.length === 0) return box;
  const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
  const xMin = Math.min(...xs), xMax = Math.max(...xs);
  let yMin = Math.min(...ys), yMax = Math.max(...ys);
  if (yMin === yMax) { yMin -= 1; yMax += 1; }
  const x = v => left + (xMax === xMin ? 0.5 : (v - xMin) / (xMax - xMin)) * (width - left - right);
  const y = v => top + (1 - (v - yMin) / (yMax - yMin)) * (height - top - bottom);
  box.appendChild(svg("rect", { x: left, y: top, width: width - left - right,
                                height: height - top - bottom, fill: "none", stroke: "#ddd" }));
  box.appendChild(svg("polyline",
                      { points: points.map(p => x(p[0]) + "," + y(p[1])).join(" ") }));
  for (const p of points) box.appendChild(svg("circle", { cx: x(p[0]), cy: y(p[1]), r: 2.5 }));
  label(box, left - 4, top + 8, short(yMax), "end");
  label(box, left - 4, height - bottom, short(yMin), "end");
  label(box, left, height - 8, "report " + xMin);
  label(box, width - right, height - 8, "report " + xMax, "end");
  return box;
}
async function refreshTraining() {
  try {
    const response = await authorized("/api/training");
    if (!response.ok) return;
    const runs = (await response.json()).runs;
    if (runs.length === 0) return;
    const area = document.getElementById("training");
    area.replaceChildren();
    for (const run of runs) {
      const section = document.createElement("div");
      section.className = "run";
      section.dataset.run = run.name;
      const heading = document.createElement("h3");
      heading.textContent = run.name + " (" + run.state + ", " + run.num_workers + " workers" +
          (run.use_gpu ? ", GPU" : "") + ", " + run.restarts + " restart(s), " +
          run.points.length + " reports)";
      section.appendChild(heading);
      const charts = document.createElement("div");
      charts.className = "charts";
      const names = new Set();
      for (const point of run.points) for (const name in point.metrics) names.add(name);
      for (const name of [...names].sort()) {
        charts.appendChild(chart(name, run.points.filter(p => name in p.metrics)
                                                 .map(p => [p.report, p.metrics[name]])));
      }
      const speed = run.points.filter(p => p.samples_per_second)
                              .map(p => [p.report, p.samples_per_second]);
      if (speed.length > 0) charts.appendChild(chart("samples/s", speed));
      section.appendChild(charts);
      area.appendChild(section);
    }
  } catch (error) {
    // The nodes table says when the job cannot be reached.
  }
}
async function refreshEvents() {
  try {
    const response = await authorized("/api/events");
    if (!response.ok) return;
    const events = (await response.json()).events.slice(-50).reverse();
    const list = document.getElementById("events");
    list.replaceChildren();
    for (const event of events) {
      const item = document.createElement("li");
      item.className = "event";
      item.textContent = new Date(event.unix_time * 1000).toLocaleTimeString() + "  " +
          event.message;
      list.appendChild(item);
    }
  } catch (error) {
    // The nodes table says when the job cannot be reached.
  }
}
// One request at a time, the next round 2 s after the last ended: an open
// page asks the nodes little, and never piles up requests on a slow job.
async function refreshAll() {
  await refresh();
  for (const part of [refreshTasks, refreshActors, refreshTraining, refreshLogs, refreshEvents]) {
    try {
      await part();
    } catch (error) {
      // The nodes table says when the job cannot be reached.
    }
  }
  setTimeout(refreshAll, 2000);
}
document.getElementById("log-file").addEventListener("change", refreshLogs);
refreshAll();
</script>
</body>
</html>
)html";

}  // namespace sray::dashboard
