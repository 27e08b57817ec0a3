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
</style>
</head>
<body>
<h1>sray job <span id="job"></span></h1>
<div id="status">loading</div>
<h2>Nodes</h2>
<table id="nodes">
<thead><tr><th>node</th><th>host</th><th>CPU free / total</th><th>GPU free / total</th>
<th>queued tasks</th><th>workers</th><th>store used / capacity (MiB)</th><th>spilled (MiB)</th>
<th>objects</th></tr></thead>
<tbody></tbody>
</table>
<h2>Training</h2>
<div id="training"><p>no training run yet</p></div>
<h2>Events</h2>
<ul id="events"></ul>
<script>
"use strict";
function mib(bytes) { return (bytes / 1048576).toFixed(1); }
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
async function refresh() {
  try {
    const response = await fetch("/api/nodes", { credentials: "same-origin" });
    if (!response.ok) throw new Error(response.status + " " + await response.text());
    const cluster = await response.json();
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
    const response = await fetch("/api/training", { credentials: "same-origin" });
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
    const response = await fetch("/api/events", { credentials: "same-origin" });
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
refresh();
refreshTraining();
refreshEvents();
setInterval(() => { refresh(); refreshTraining(); refreshEvents(); }, 2000);
</script>
</body>
</html>
)html";

}  // namespace sray::dashboard
