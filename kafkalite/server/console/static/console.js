// kafkalite console: the live charts (uPlot, vendored) and the live lag table.
(function () {
  "use strict";

  function fmtRate(unit) {
    return function (u, v) { return v == null ? "" : v.toFixed(v < 10 ? 1 : 0) + unit; };
  }

  function makeChart(el, title, labels, unit) {
    var series = [{}];
    var colors = ["#2f6fde", "#0b8f6a", "#c0362c"];
    labels.forEach(function (l, i) { series.push({ label: l, stroke: colors[i % colors.length], width: 2, value: fmtRate(unit) }); });
    var opts = {
      title: title, width: Math.max(400, el.clientWidth - 16), height: 200, series: series,
      axes: [{ space: 70, values: function (u, vals) { return vals.map(function (v) { return new Date(v * 1000).toLocaleTimeString([], { hour12: false }); }); } }, { size: 60, values: function (u, vals) { return vals.map(function (v) { return v + unit; }); } }],
      scales: { x: { time: true } },
    };
    var data = [[]].concat(labels.map(function () { return []; }));
    return new uPlot(opts, data, el);
  }

  function initCharts(root) {
    var charts = [
      { el: "chart-messages", title: "Messages in / s", keys: ["messages_in"], labels: ["messages in"], unit: "" },
      { el: "chart-bytes", title: "Bytes / s", keys: ["bytes_in", "bytes_out"], labels: ["in", "out"], unit: " B" },
      { el: "chart-requests", title: "Requests / s", keys: ["requests"], labels: ["requests"], unit: "" },
      { el: "chart-latency", title: "Latency (ms)", keys: ["latency_ms", "loop_lag_ms"], labels: ["request mean", "event-loop lag"], unit: " ms" },
    ];
    charts.forEach(function (c) { c.plot = makeChart(document.getElementById(c.el), c.title, c.labels, c.unit); });
    function poll() {
      fetch(root.dataset.src, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (d) {
        charts.forEach(function (c) {
          c.plot.setData([d.time].concat(c.keys.map(function (k) { return d[k]; })));
        });
        var src = document.getElementById("chart-source");
        if (src) { src.textContent = d.source; }
        root.dataset.samples = String(d.time.length);
      }).catch(function () {});
    }
    poll();
    setInterval(poll, 1000);
  }

  function initLag(table) {
    function text(v) { return v == null ? "\u2014" : String(v); }
    function poll() {
      fetch(table.dataset.live, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (d) {
        d.partitions.forEach(function (p) {
          var row = table.querySelector('tr[data-tp="' + CSS.escape(p.topic + ":" + p.partition) + '"]');
          if (!row) { return; }
          ["committed", "log_end", "lag"].forEach(function (k) {
            var cell = row.querySelector('[data-cell="' + k + '"]');
            if (cell) { cell.textContent = text(p[k]); }
          });
        });
        var total = document.getElementById("total-lag");
        if (total) { total.textContent = text(d.total_lag); }
        var state = document.getElementById("group-state");
        if (state) { state.textContent = d.state; }
      }).catch(function () {});
    }
    setInterval(poll, 2000);
  }

  var charts = document.getElementById("charts");
  if (charts && window.uPlot) { initCharts(charts); }
  var live = document.querySelector("table[data-live]");
  if (live) { initLag(live); }
})();
