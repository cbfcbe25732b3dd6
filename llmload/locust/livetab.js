// llmload's LLM tab and start form, in Locust's React page (plain DOM, re-applied every 500 ms
// because React re-renders). window.llmloadTab is set by webui.py: {key, caption, labels, hide, section}.
//
// The tab: a caption, the run's status line, the charts (livecharts.js) and the table, all drawn from
// one answer of ./llmload/series, polled every 2 s for as long as the page is open. Locust's page
// polls its own /stats/requests only while its state is spawning or running: a test whose results
// were written after Locust's header turned STOPPED kept its live numbers in Locust's table (5 of 7
// stops, issue 29). This table is ours, so it turns to summary.json's final figures when they exist.
//
// The form: the scenario's plan in words in place of Locust's users, ramp-up and run-time fields
// (the scenario decides them), and llmload's options labelled in plain words.
(function () {
  var CFG = window.llmloadTab, DATA = null, PLAN = {key: null, answer: null};

  function onTab() { return new URLSearchParams(window.location.search).get("tab") === CFG.key; }

  function cell(v) { return v === null || v === undefined ? "" : String(v); }

  function renderTable(box) {
    var old = document.getElementById("llmload-table");
    if (!DATA || !DATA.columns) return;
    var t = document.createElement("table");
    t.id = "llmload-table";
    t.setAttribute("data-final", DATA.status && DATA.status.state === "finished" ? "1" : "0");
    t.style.cssText = "border-collapse:collapse;font-size:0.85rem;margin-top:8px;width:100%";
    var head = t.createTHead().insertRow();
    DATA.columns.forEach(function (c) {
      var th = document.createElement("th");
      th.textContent = c.title;
      th.style.cssText = "text-align:left;padding:6px 8px;border-bottom:2px solid #8888";
      head.appendChild(th);
    });
    var body = t.createTBody();
    (DATA.rows || []).forEach(function (r) {
      var tr = body.insertRow();
      DATA.columns.forEach(function (c) {
        var td = tr.insertCell();
        td.textContent = cell(r[c.key]);
        td.style.cssText = "padding:6px 8px;border-bottom:1px solid #8884";
        if (c.key === "target" && DATA.colours && DATA.colours[r.target]) {
          td.style.borderLeft = "6px solid " + DATA.colours[r.target];
        }
      });
    });
    if (old) old.replaceWith(t); else box.appendChild(t);
  }

  function render() {
    var box = document.getElementById("llmload-tab-head");
    if (!box || !DATA) return;
    document.getElementById("llmload-run-status").textContent = (DATA.status && DATA.status.line) || "";
    window.llmloadCharts.draw(document.getElementById("llmload-charts"), DATA);
    renderTable(box);
  }

  function buildTab(react) {
    var box = document.createElement("div");
    box.id = "llmload-tab-head";
    box.style.margin = "8px 0";
    var cap = document.createElement("span");
    cap.textContent = CFG.caption + " ";
    var link = document.createElement("a");
    link.id = "llmload-csv";
    link.href = "./llmload/live.csv";
    link.textContent = "Download LLM table CSV";
    var run = document.createElement("div");
    run.id = "llmload-run-status";
    run.style.cssText = "margin-top:4px;font-weight:500";
    var charts = document.createElement("div");
    charts.id = "llmload-charts";
    [cap, link, run, charts].forEach(function (e) { box.appendChild(e); });
    react.parentNode.insertBefore(box, react);
    render();
  }

  function applyTab() {
    var box = document.getElementById("llmload-tab-head");
    var hidden = document.querySelectorAll("[data-llmload-hidden]");
    if (!onTab()) {  // React may reuse the hidden container for another tab's table
      if (box) box.remove();
      hidden.forEach(function (e) { e.style.display = ""; e.removeAttribute("data-llmload-hidden"); });
      return;
    }
    var react = document.querySelector(".MuiTableContainer-root:not([data-llmload-hidden])");
    if (react) { react.style.display = "none"; react.setAttribute("data-llmload-hidden", "1"); }
    if (!box) {
      var anchor = react || document.querySelector("[data-llmload-hidden]");
      if (anchor) buildTab(anchor);
    }
  }

  // --- the start form ------------------------------------------------------------------------
  function fieldBox(input) {
    return input.closest(".MuiFormControl-root") || input.closest(".MuiFormControlLabel-root");
  }

  function relabel(input, text) {
    var label = input.type === "checkbox"
      ? (input.closest("label") || {querySelector: function () { return null; }}).querySelector(".MuiFormControlLabel-label")
      : document.querySelector("label[for='" + CSS.escape(input.id) + "']");
    if (label && label.textContent !== text) label.textContent = text;
  }

  function formValue(name) {
    var e = document.querySelector("form input[name='" + name + "']");
    return e ? e.value : "";
  }

  function fetchPlan(box) {
    var q = new URLSearchParams({scenario: formValue("scenario"), targets: formValue("llmTargets"), set: formValue("llmSet")});
    var key = q.toString();
    if (PLAN.key === key) return;
    PLAN.key = key;
    fetch("./llmload/plan?" + key).then(function (r) { return r.json(); }).then(function (a) {
      if (PLAN.key !== key) return;
      PLAN.answer = a;
      drawPlan(box);
    }).catch(function () { PLAN.key = null; });
  }

  function drawPlan(box) {
    var a = PLAN.answer;
    if (!a) return;
    var list = box.querySelector("ul");
    list.textContent = "";
    (a.error ? [a.error] : a.lines).forEach(function (line) {
      var li = document.createElement("li");
      li.textContent = line;
      list.appendChild(li);
    });
    box.style.color = a.error ? "#d32f2f" : "";
  }

  function applyForm() {
    var users = document.querySelector("form input[name='userCount']");
    if (!users) return;
    var plan = document.getElementById("llmload-plan");
    if (!plan) {
      plan = document.createElement("div");
      plan.id = "llmload-plan";
      var title = document.createElement("div");
      title.textContent = "Plan (the scenario decides the load; Start runs it):";
      title.style.fontWeight = "bold";
      plan.appendChild(title);
      plan.appendChild(document.createElement("ul"));
      fieldBox(users).parentNode.insertBefore(plan, fieldBox(users));
      drawPlan(plan);
    }
    CFG.hide.forEach(function (name) {
      var e = document.querySelector("form input[name='" + name + "']");
      var b = e && fieldBox(e);
      if (b && b.style.display !== "none") b.style.display = "none";
    });
    Object.keys(CFG.labels).forEach(function (name) {
      var e = document.querySelector("form input[name='" + name + "']");
      if (e) relabel(e, CFG.labels[name]);
    });
    document.querySelectorAll("form .MuiAccordionSummary-content p").forEach(function (p) {
      if (p.textContent === "Custom parameters") p.textContent = CFG.section;
    });
    fetchPlan(plan);
  }

  // Locust's header: a poll of its /stats/requests that lands in STOPPING (a master waits in it for
  // its workers' reports) or CLEANUP ends its polling there, and the header offers Stop, not New,
  // until a reload (CI=true make test, 2026-12-07). Once this run is finished and the header still
  // says otherwise at two polls in a row, the page reloads: once per run, so a header that stays
  // wrong cannot loop.
  var STALE = {polls: 0};

  function headerStale(status) {
    var labels = Array.prototype.map.call(document.querySelectorAll("button"),
      function (b) { return b.textContent.trim(); });
    return status && status.state === "finished" && labels.indexOf("New") < 0
      && (labels.indexOf("Stop") >= 0 || labels.indexOf("Loading") >= 0);
  }

  function reloadIfStale(status) {
    if (!headerStale(status)) { STALE.polls = 0; return; }
    var key = "llmload-reloaded-" + status.run_id;
    if (++STALE.polls < 2 || window.sessionStorage.getItem(key)) return;
    window.sessionStorage.setItem(key, "1");
    window.location.reload();
  }

  function poll() {
    fetch("./llmload/series").then(function (r) { return r.json(); }).then(function (s) {
      DATA = s;
      render();
      reloadIfStale(s.status);
    }).catch(function () {});
  }
  setInterval(function () { applyTab(); applyForm(); }, 500);
  setInterval(poll, 2000);
  poll();
})();
