// llmload's LLM tab: live charts drawn as inline SVG from ./llmload/series (livecharts.py).
// Self-contained on purpose: the web UI must work offline, so no charting library and no CDN.
// One chart per figure, one line per target (p99 dashed beside p50); the y axis starts at 0, with
// labelled gridlines. Each target's colour is report.html's (report/palette.py, sent as data.colours),
// in the scenario's order (data.order). Overlapping lines stay visible: the first target's line is
// the widest and each later one narrower and slightly transparent, drawn on top of it.
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var W = 400, H = 180, L = 56, R = 10, T = 24, B = 22;
  var CHARTS = [
    {id: "tok", title: "Output tok/s (streamed, 10 s window)", unit: "tok/s", lines: [["output_tok_s", ""]]},
    {id: "ttft", title: "TTFT p50 / p99 (dashed)", unit: "ms", lines: [["ttft_p50_ms", ""], ["ttft_p99_ms", "5,4"]]},
    {id: "itl", title: "ITL p99", unit: "ms", lines: [["itl_p99_ms", ""]]},
    {id: "inflight", title: "Streams in flight", unit: "streams", lines: [["in_flight", ""]]},
    {id: "kv", title: "KV-cache usage (engine /metrics)", unit: "%", lines: [["kv_cache_usage_pct", ""]], optional: true}
  ];
  var FALLBACK = "#636EFA";

  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // Gridline step: 1, 2 or 5 times a power of ten, giving 3 to 5 intervals up to the top value.
  function niceStep(v) {
    if (!(v > 0)) return 0.25;
    var raw = v / 4, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function axis(svg, spec, ymax, step, x0, x1, y0, y1) {
    var digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    for (var i = 0; i * step <= ymax + step / 2; i++) {
      var v = i * step, y = y0 - (y0 - y1) * v / ymax;
      var label = v.toLocaleString("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits});
      svg.appendChild(el("line", {x1: x0, y1: y, x2: x1, y2: y, stroke: v ? "#8884" : "#888", "data-grid": label}));
      svg.appendChild(el("text", {x: x0 - 4, y: y + 3, "font-size": 10, "text-anchor": "end", fill: "currentColor"}, label));
    }
    svg.appendChild(el("line", {x1: x0, y1: y0, x2: x0, y2: y1, stroke: "#888"}));
    var mid = (y0 + y1) / 2;
    svg.appendChild(el("text", {x: 11, y: mid, "font-size": 10, "text-anchor": "middle", fill: "currentColor",
      transform: "rotate(-90 11 " + mid + ")", "data-axis": "y"}, spec.unit));
  }

  function chart(spec, data, names, colours) {
    var t0 = Infinity, t1 = -Infinity, top = 0, any = false;
    names.forEach(function (n) {
      var s = data.targets[n];
      s.t.forEach(function (t, i) {
        spec.lines.forEach(function (ln) {
          var v = s[ln[0]][i];
          if (v === null || v === undefined) return;
          any = true; top = Math.max(top, v); t0 = Math.min(t0, t); t1 = Math.max(t1, t);
        });
      });
    });
    if (spec.optional && !any) return null;
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "data-chart": spec.id});
    svg.style.marginRight = "12px";
    svg.appendChild(el("text", {x: L, y: 14, "font-size": 12, fill: "currentColor"}, spec.title));
    var step = niceStep(top), ymax = Math.max(step, Math.ceil(top / step - 1e-9) * step);
    var x0 = L, x1 = W - R, y0 = H - B, y1 = T;
    axis(svg, spec, ymax, step, x0, x1, y0, y1);
    if (!any) {
      svg.appendChild(el("text", {x: (x0 + x1) / 2, y: (y0 + y1) / 2, "font-size": 11, "text-anchor": "middle", fill: "#888"}, "no data yet"));
      return svg;
    }
    var span = Math.max(1, t1 - t0);
    svg.appendChild(el("text", {x: x0, y: H - 6, "font-size": 10, fill: "currentColor"}, "-" + Math.round(span) + " s"));
    svg.appendChild(el("text", {x: x1, y: H - 6, "font-size": 10, "text-anchor": "end", fill: "currentColor"}, "now"));
    names.forEach(function (n, k) {
      var s = data.targets[n];
      spec.lines.forEach(function (ln) {
        var pts = [];
        s.t.forEach(function (t, i) {
          var v = s[ln[0]][i];
          if (v === null || v === undefined) return;
          pts.push((x0 + (x1 - x0) * (t - t0) / span).toFixed(1) + "," + (y0 - (y0 - y1) * v / ymax).toFixed(1));
        });
        if (!pts.length) return;
        var line = el("polyline", {points: pts.join(" "), fill: "none", stroke: colours[n] || FALLBACK,
          "stroke-width": Math.max(1.2, 3.2 - 0.8 * k), "stroke-opacity": k ? 0.85 : 1,
          "data-target": n, "data-field": ln[0]});
        if (ln[1]) line.setAttribute("stroke-dasharray", ln[1]);
        svg.appendChild(line);
      });
    });
    return svg;
  }

  // Draw every chart of ``data`` ({"fields": [...], "targets": {name: {"t": [...], field: [...]}}})
  // into ``box``, with a legend of the targets' colours.
  function draw(box, data) {
    var names = (data.order || Object.keys(data.targets || {})).filter(function (n) { return (data.targets || {})[n]; });
    var colours = data.colours || {};
    box.textContent = "";
    var legend = document.createElement("div");
    legend.style.margin = "4px 0";
    names.forEach(function (n, k) {
      var item = document.createElement("span");
      item.style.marginRight = "16px";
      item.style.color = colours[n] || FALLBACK;
      item.setAttribute("data-target", n);
      item.textContent = "\u25A0 " + n;
      legend.appendChild(item);
    });
    box.appendChild(legend);
    var row = document.createElement("div");
    row.style.display = "flex";
    row.style.flexWrap = "wrap";
    CHARTS.forEach(function (spec) {
      var svg = chart(spec, data, names, colours);
      if (svg) row.appendChild(svg);
    });
    box.appendChild(row);
  }

  window.llmloadCharts = {draw: draw};
})();
