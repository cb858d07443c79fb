"use strict";
// kubectl kudo ui: the filter of the Instances table, the confirmation of actions, and the live
// plans, Events and revisions of an Instance page (server-sent events replacing the server-rendered
// fragments).
(function () {
  var filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      document.querySelectorAll("#instances tbody tr").forEach(function (tr) {
        tr.hidden = q !== "" && tr.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  }
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      e.preventDefault();
    }
  });
  var plans = document.getElementById("plans");
  if (!plans || !plans.dataset.events || !window.EventSource) {
    return;
  }
  var updates = 0;
  var source = new EventSource(plans.dataset.events);
  source.onopen = function () { document.body.dataset.live = "open"; };
  source.onerror = function () { document.body.dataset.live = "reconnecting"; };
  source.addEventListener("plans", function (e) {
    plans.innerHTML = e.data;
    updates += 1;
    document.body.dataset.updates = String(updates);
  });
  var events = document.getElementById("events");
  source.addEventListener("events", function (e) {
    if (events) {
      events.innerHTML = e.data;
      document.body.dataset.eventUpdates = String(Number(document.body.dataset.eventUpdates || 0) + 1);
    }
  });
  var history = document.getElementById("history");
  source.addEventListener("revisions", function (e) {
    if (history) {
      history.innerHTML = e.data;
      document.body.dataset.revisionUpdates = String(Number(document.body.dataset.revisionUpdates || 0) + 1);
    }
  });
  source.addEventListener("gone", function (e) {
    plans.textContent = e.data;
    document.body.dataset.live = "gone";
    source.close();
  });
})();
