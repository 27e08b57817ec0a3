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
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
)html";

}  // namespace sray::dashboard
