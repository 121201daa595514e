/* /ui of the scheduler extender: renders the world of apps/extender/ui.py. */
(function () {
  'use strict';
  var esc = GM.esc, pct = GM.pct;
  function hue(label) { // a stable colour per pod name
    var h = 0;
    for (var i = 0; i < label.length; i++) h = (h * 31 + label.charCodeAt(i)) % 100003;
    return GM.color(h);
  }
  function cards(s) {
    var c = s.counters || {}, fb = (c.node_fallbacks || 0) + (c.gpu_fallbacks || 0);
    var items = [
      ['milli-GPU allocated', pct(s.gpu_milli_capacity ? s.gpu_milli_allocated / s.gpu_milli_capacity : 0),
        s.gpu_milli_allocated + ' of ' + s.gpu_milli_capacity],
      ['pods bound', s.pods_bound, 'holding resources'],
      ['fallbacks', fb, (c.node_fallbacks || 0) + ' node, ' + (c.gpu_fallbacks || 0) + ' GPU'],
      ['bind problems', (c.bind_rejected || 0) + (c.bind_errors || 0), (c.bind_rejected || 0) + ' rejected, ' + (c.bind_errors || 0) + ' errors'],
    ];
    GM.html('cards', items.map(function (it) {
      return '<div class="card"><div class="k">' + esc(it[0]) + '</div><div class="v">' + esc(it[1]) +
        '</div><div class="s">' + esc(it[2]) + '</div></div>';
    }).join(''));
  }
  function mosaic(nodes) {
    var names = Object.keys(nodes).sort(), n = 0, total = 0;
    names.forEach(function (name) { total += nodes[name].gpus.length; });
    var box = GM.$('mosaic');
    if (box) box.className = 'mosaic' + (total > 48 ? ' compact' : ''); // big clusters: small tiles
    GM.html('mosaic', names.map(function (name) {
      var node = nodes[name];
      var cells = node.gpus.map(function (g, i) {
        n += 1;
        var tip = [name + ' GPU ' + i + ': ' + g[0] + ' milli free'];
        var segs = g[1].map(function (p) {
          tip.push(p[0] + ': ' + p[1] + ' milli');
          return '<div class="seg" style="height:' + (p[1] / 10) + '%;background:' + hue(p[0]) + '"></div>';
        }).join('');
        return '<div class="gpu' + (g[1].length ? ' busy' : '') + '" data-gpu="' + esc(name + '/' + i) + '" title="' + esc(tip.join('\n')) + '">' + segs +
          '<span class="gi">' + i + '</span></div>';
      }).join('');
      var sub = 'CPU ' + pct(node.cpu[1] ? 1 - node.cpu[0] / node.cpu[1] : 0) + ' · memory ' + pct(node.memory[1] ? 1 - node.memory[0] / node.memory[1] : 0);
      return '<div class="node"><div class="nh"><b>' + esc(node.model || 'no GPU') + '</b> ' + esc(name) + '<br>' + esc(sub) +
        '</div><div class="gpus">' + (cells || '<span class="empty">' + esc((node.cpu_pods || []).length + ' CPU pods') + '</span>') + '</div></div>';
    }).join(''));
    GM.text('cluster-sub', n + ' GPUs on ' + names.length + ' nodes');
  }
  function binds(b) {
    var seqs = Object.keys(b).sort(function (x, y) { return Number(y) - Number(x); });
    if (!seqs.length) { GM.html('binds-table', '<div class="empty">no bind or release seen yet</div>'); return; }
    GM.html('binds-table', '<table><tr><th>time</th><th></th><th>pod</th><th>node</th><th>GPUs</th><th class="num">milli</th></tr>' +
      seqs.map(function (k) {
        var e = b[k];
        return '<tr data-bind="' + k + '"><td>' + GM.clock(e.t) + '</td><td><span class="badge b-' + (e.what === 'bind' ? 'running' : 'cancelled') + '">' +
          esc(e.what) + '</span></td><td><span class="sw" style="background:' + hue(e.pod) + '"></span>' + esc(e.pod) + '</td><td>' + esc(e.node) +
          '</td><td>' + esc(e.gpus.join(', ')) + '</td><td class="num">' + e.milli + '</td></tr>';
      }).join('') + '</table>');
  }
  function counts(s) {
    var rows = [];
    var req = s.requests || {};
    Object.keys(req).sort().forEach(function (verb) {
      rows.push([verb, Object.keys(req[verb]).sort().map(function (o) { return o + ' ' + req[verb][o]; }).join(', ')]);
    });
    var c = s.counters || {};
    Object.keys(c).forEach(function (k) { rows.push([k.replace(/_/g, ' '), c[k]]); });
    var tw = s.target_workload || {};
    rows.push(['target workload', (tw.source || '-') + ', ' + (tw.classes || 0) + ' classes']);
    (s.conflicts || []).forEach(function (x) { rows.push(['conflict', x]); });
    GM.html('counts', rows.map(function (r) { return '<div class="k">' + esc(r[0]) + '</div><div>' + esc(r[1]) + '</div>'; }).join(''));
  }
  GM.start(function (w, changed) {
    var s = (w.service || {}).s;
    if (!s) return;
    if (changed.service) GM.setNow(s.now);
    GM.text('sub', s.placement + ' · backend ' + s.backend);
    if (changed.service) { cards(s); counts(s); }
    if (changed.nodes) mosaic(w.nodes || {});
    if (changed.binds || changed.nodes) binds(w.binds || {});
  });
})();
