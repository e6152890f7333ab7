// jobqueue dashboard: live updates over server-sent events, and nothing else.
// On "change" (counters moved, a job ended) or "running" (a job page whose job runs:
// its progress), the page fetches its own URL again with X-Partial: 1 and swaps the
// content of <main>. A page whose content ages with time alone (the Workers page:
// heartbeats, stale workers) asks, by a data-refresh="SECONDS" element, to be fetched
// again that often besides. The "Live" checkbox pauses and resumes; the choice is kept.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var toggle = document.getElementById("live");
  if (!main || main.dataset.live !== "on" || !window.EventSource) return;
  var KEY = "jobqueue.live";
  var source = null;
  var busy = false;
  var again = false;
  var ticker = null;
  var fetched = Date.now();
  var edited = false; // a form of the page was changed and not sent yet

  function refresh() {
    if (busy) { again = true; return; }
    if (edited || (document.activeElement && main.contains(document.activeElement) &&
         /INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName)) ||
        main.querySelector("input[type=checkbox]:checked")) {
      return; // do not swap a form, or ticked jobs, from under the user's hands
    }
    busy = true;
    fetch(window.location.href, { headers: { "X-Partial": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null && !edited) {
          var opened = detailsState();
          main.innerHTML = html;
          restoreDetails(opened);
          main.dataset.updated = String(Date.now());
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        fetched = Date.now();
        if (again) { again = false; refresh(); }
      });
  }

  // A <details> the user opened or closed (a full traceback, say) stays so across a
  // swap: it is found again by the id of the element holding it and its summary.
  function detailsKey(d) {
    var host = d.closest("[id]");
    var summary = d.querySelector("summary");
    return (host ? host.id : "") + "|" + (summary ? summary.textContent : "");
  }

  function detailsState() {
    var state = {};
    main.querySelectorAll("details").forEach(function (d) { state[detailsKey(d)] = d.open; });
    return state;
  }

  function restoreDetails(state) {
    main.querySelectorAll("details").forEach(function (d) {
      var key = detailsKey(d);
      if (Object.prototype.hasOwnProperty.call(state, key)) d.open = state[key];
    });
  }

  function runningJob() {
    var head = main.querySelector("[data-running]");
    return head && head.dataset.running === "yes";
  }

  function tick() {
    var every = main.querySelector("[data-refresh]");
    if (every && Date.now() - fetched >= 1000 * parseFloat(every.dataset.refresh)) refresh();
  }

  function start() {
    if (source) return;
    source = new EventSource(main.dataset.root + "/events");
    main.dataset.stream = "open";
    source.addEventListener("change", refresh);
    source.addEventListener("running", function () { if (runningJob()) refresh(); });
    ticker = window.setInterval(tick, 1000);
  }

  function stop() {
    if (source) { source.close(); source = null; }
    if (ticker) { window.clearInterval(ticker); ticker = null; }
    main.dataset.stream = "closed";
  }

  // A filter or a limit being chosen is kept as the user left it: the page stays as it
  // is until the form is sent (a new page). Ticked jobs hold it only while ticked.
  function changed(event) { if (event.target.type !== "checkbox") edited = true; }
  main.addEventListener("input", changed);
  main.addEventListener("change", changed);

  // A form sent (every action is one) replaces the page with its answer. Refreshed
  // meanwhile, the page would ask for what the action may have just removed: a
  // deleted job's page is a 404, in the browser's console.
  document.addEventListener("submit", function () { edited = true; stop(); });
  // Brought back by the browser's Back button from its back/forward cache, such a
  // page would stay stopped: it updates again.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted && (!toggle || toggle.checked)) { edited = false; start(); refresh(); }
  });

  if (toggle) {
    toggle.checked = window.localStorage.getItem(KEY) !== "off";
    toggle.addEventListener("change", function () {
      window.localStorage.setItem(KEY, toggle.checked ? "on" : "off");
      if (toggle.checked) { start(); refresh(); } else { stop(); }
    });
  }
  if (!toggle || toggle.checked) start();
})();
