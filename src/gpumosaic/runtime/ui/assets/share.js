/* /ui of the share daemon: renders the world of runtime/share/ui.py. */
(function () {
  'use strict';
  var esc = GM.esc, dur = GM.dur, num = GM.num;
  function who(c) { return c ? esc(c.name) + ' <span class="note">pid ' + c.pid + '</span>' : '<span class="empty">nobody</span>'; }
  function mib(b) { return b == null ? '-' : num(b / 1048576) + ' MiB'; }
  function cards(s) {
    var items = [['GPUs', s.gpus, 'one lock each'], ['processes', s.clients, 'registered'],
                 ['waiting', s.waiting, 'for a lock'], ['hand-overs', s.handovers, 'since the daemon started']];
    GM.html('cards', items.map(function (it) {
      return '<div class="card"><div class="k">' + esc(it[0]) + '</div><div class="v">' + esc(it[1]) +
        '</div><div class="s">' + esc(it[2]) + '</div></div>';
    }).join(''));
  }
  function gpus(g) {
    var keys = Object.keys(g).sort(function (a, b) { return Number(a) - Number(b); });
    GM.html('gpus', keys.map(function (k) {
      var x = g[k];
      var clients = x.clients.map(function (c) {
        var role = x.holder && x.holder.id === c.id ? 'running' : (x.waiting.some(function (w) { return w.id === c.id; }) ? 'queued' : 'done');
        var label = role === 'running' ? 'holds' : (role === 'queued' ? 'waits' : 'idle');
        return '<tr data-client="' + c.id + '"><td><span class="sw" style="background:' + GM.color(c.pid) + '"></span>' + esc(c.name) +
          '</td><td class="num">' + c.pid + '</td><td><span class="badge b-' + role + '">' + label + '</span></td><td class="num">' +
          dur(c.held_s) + '</td><td class="num">' + c.grants + '</td><td class="num">' + mib(c.bytes) + '</td></tr>';
      }).join('');
      var queue = x.waiting.length ? x.waiting.map(function (c, i) { return (i + 1) + '. ' + who(c); }).join(' &nbsp; ') : '<span class="empty">empty</span>';
      return '<div class="card" style="margin:8px 0" data-gpu="' + k + '"><div class="kv">' +
        '<div class="k">GPU</div><div><b>' + k + '</b> · quantum ' + num(x.tq_s) + ' s · anti-thrashing ' + esc(x.mode) +
        (x.serialized ? ' · <b>serialized</b>' : ' · not serialized') + '</div>' +
        '<div class="k">holder</div><div id="holder-' + k + '">' + who(x.holder) + '</div>' +
        '<div class="k">queue</div><div>' + queue + '</div>' +
        '<div class="k">hand-overs</div><div>' + x.handovers + (x.latency_p50_s == null ? '' : ' · latency p50 ' + num(x.latency_p50_s * 1000) +
        ' ms, p99 ' + num(x.latency_p99_s * 1000) + ' ms') + '</div>' +
        '<div class="k">memory</div><div>working sets ' + mib(x.working_set_bytes) + (x.memory_bytes == null ? ' (GPU memory not reported yet)' : ' of ' + mib(x.memory_bytes)) + '</div></div>' +
        (clients ? '<table style="margin-top:6px"><tr><th>process</th><th class="num">pid</th><th>lock</th><th class="num">held</th>' +
          '<th class="num">grants</th><th class="num">working set</th></tr>' + clients + '</table>' : '<div class="empty">no process registered</div>') +
        '</div>';
    }).join(''));
  }
  function handovers(h) {
    var seqs = Object.keys(h).sort(function (a, b) { return Number(b) - Number(a); });
    if (!seqs.length) { GM.html('handovers-table', '<div class="empty">none seen yet</div>'); return; }
    GM.html('handovers-table', '<table><tr><th>time</th><th class="num">GPU</th><th>from</th><th>to</th></tr>' + seqs.map(function (k) {
      var e = h[k];
      return '<tr data-handover="' + k + '"><td>' + GM.clock(e.t) + '</td><td class="num">' + e.gpu + '</td><td>' + esc(e.from || '-') + '</td><td>' + esc(e.to || '-') + '</td></tr>';
    }).join('') + '</table>');
  }
  GM.start(function (w, changed) {
    var s = (w.service || {}).s;
    if (!s) return;
    if (changed.service) { GM.setNow(s.now); cards(s); }
    GM.text('sub', s.gpus + ' GPU lock' + (s.gpus === 1 ? '' : 's'));
    if (changed.gpus) gpus(w.gpus || {});
    if (changed.handovers || changed.service) handovers(w.handovers || {});
  });
})();
