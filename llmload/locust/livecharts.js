// llmload's LLM tab: live charts drawn as inline SVG from ./llmload/series (livecharts.py).
// Self-contained on purpose: the web UI must work offline, so no charting library and no CDN.
// One chart per figure, one line per target (p99 dashed beside p50); the y axis starts at 0.
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
  var W = 380, H = 170, L = 48, R = 10, T = 24, B = 22;
  var CHARTS = [
    {id: "tok", title: "Output tok/s (streamed, 10 s window)", lines: [["output_tok_s", ""]]},
    {id: "ttft", title: "TTFT p50 / p99 (ms)", lines: [["ttft_p50_ms", ""], ["ttft_p99_ms", "5,4"]]},
    {id: "itl", title: "ITL p99 (ms)", lines: [["itl_p99_ms", ""]]},
    {id: "inflight", title: "Streams in flight", lines: [["in_flight", ""]]},
    {id: "kv", title: "KV-cache usage (%, engine /metrics)", lines: [["kv_cache_usage_pct", ""]], optional: true}
  ];

  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v) {
    if (v >= 1000) return Math.round(v).toLocaleString("en-US");
    return v >= 10 ? v.toFixed(0) : v.toFixed(v >= 1 ? 1 : 2);
  }
  function niceMax(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function chart(spec, data, names) {
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
    var ymax = niceMax(top), x0 = L, x1 = W - R, y0 = H - B, y1 = T;
    svg.appendChild(el("line", {x1: x0, y1: y0, x2: x1, y2: y0, stroke: "#888"}));
    svg.appendChild(el("line", {x1: x0, y1: y0, x2: x0, y2: y1, stroke: "#888"}));
    svg.appendChild(el("text", {x: x0 - 4, y: y1 + 4, "font-size": 10, "text-anchor": "end", fill: "currentColor"}, fmt(ymax)));
    svg.appendChild(el("text", {x: x0 - 4, y: y0, "font-size": 10, "text-anchor": "end", fill: "currentColor"}, "0"));
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
        var line = el("polyline", {points: pts.join(" "), fill: "none", stroke: COLORS[k % COLORS.length],
          "stroke-width": 1.6, "data-target": n, "data-field": ln[0]});
        if (ln[1]) line.setAttribute("stroke-dasharray", ln[1]);
        svg.appendChild(line);
      });
    });
    return svg;
  }

  // Draw every chart of ``data`` ({"fields": [...], "targets": {name: {"t": [...], field: [...]}}})
  // into ``box``, with a legend of the targets' colours.
  function draw(box, data) {
    var names = Object.keys(data.targets || {});
    box.textContent = "";
    var legend = document.createElement("div");
    legend.style.margin = "4px 0";
    names.forEach(function (n, k) {
      var item = document.createElement("span");
      item.style.marginRight = "16px";
      item.style.color = COLORS[k % COLORS.length];
      item.textContent = "\u25A0 " + n;
      legend.appendChild(item);
    });
    box.appendChild(legend);
    var row = document.createElement("div");
    row.style.display = "flex";
    row.style.flexWrap = "wrap";
    CHARTS.forEach(function (spec) {
      var svg = chart(spec, data, names);
      if (svg) row.appendChild(svg);
    });
    box.appendChild(row);
  }

  window.llmloadCharts = {draw: draw};
})();
