"use strict";
// kubectl kudo ui: the filter of the Instances table, the confirmation of actions, and the live
// parts of the pages: server-sent events replacing the server-rendered fragments (the Instances
// table's rows; an Instance's plans, Events and revisions; a Rollout's waves).
(function () {
  var filter = document.getElementById("filter");
  function applyFilter() {
    var q = filter.value.toLowerCase();
    document.querySelectorAll("#instances tbody tr").forEach(function (tr) {
      tr.hidden = q !== "" && tr.textContent.toLowerCase().indexOf(q) < 0;
    });
  }
  if (filter) {
    filter.addEventListener("input", applyFilter);
  }
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      e.preventDefault();
    }
  });
  // Replaces `target`'s content with each event `name`, counting them in data-<counter>.
  function follow(source, name, target, counter, then) {
    source.addEventListener(name, function (e) {
      if (!target) {
        return;
      }
      target.innerHTML = e.data;
      document.body.dataset[counter] = String(Number(document.body.dataset[counter] || 0) + 1);
      if (then) {
        then();
      }
    });
  }
  function open(url) {
    var source = new EventSource(url);
    source.onopen = function () { document.body.dataset.live = "open"; };
    source.onerror = function () { document.body.dataset.live = "reconnecting"; };
    return source;
  }
  if (!window.EventSource) {
    return;
  }
  var table = document.getElementById("instances");
  if (table && table.dataset.events) {
    follow(open(table.dataset.events), "instances", table.querySelector("tbody"), "rowUpdates",
      function () { if (filter) { applyFilter(); } });
  }
  var rollout = document.getElementById("rollout");
  if (rollout && rollout.dataset.events) {
    follow(open(rollout.dataset.events), "rollout", rollout, "updates");
  }
  var plans = document.getElementById("plans");
  if (!plans || !plans.dataset.events) {
    return;
  }
  var source = open(plans.dataset.events);
  follow(source, "plans", plans, "updates");
  follow(source, "events", document.getElementById("events"), "eventUpdates");
  follow(source, "revisions", document.getElementById("history"), "revisionUpdates");
  source.addEventListener("gone", function (e) {
    plans.textContent = e.data;
    document.body.dataset.live = "gone";
    source.close();
  });
})();
