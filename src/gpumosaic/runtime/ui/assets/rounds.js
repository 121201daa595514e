/* /ui of gpumosaic serve: renders the world of mechanisms/rounds/ui.py (and of
   mechanisms/gandiva/ui.py: no rounds, its own header, card and counters). */
(function () {
  'use strict';
  var esc = GM.esc, num = GM.num, dur = GM.dur, pct = GM.pct;
  var LIVE = {queued: 1, running: 1};
  // Rows drawn per table: a page stays light in the browser at thousands of jobs
  // (`gpumosaic jobs` lists them all).
  var MAX_ROWS = 150;
  var ORDER = {running: 0, queued: 1};
  function more(n, cols) {
    return n > 0 ? '<tr><td colspan="' + cols + '" class="empty">and ' + n + ' more (gpumosaic jobs lists them all)</td></tr>' : '';
  }

  function byId(a, b) { return Number(a) - Number(b); }
  function jobLabel(id, j) { return '#' + id + (j && j.name && j.name !== 'job' + id ? ' ' + j.name : ''); }
  function swatch(id) { return '<span class="sw" style="background:' + GM.color(id) + '"></span>'; }

  var progressOf = {}, merged = null, shownRound = null;
  function done(id, j) { var p = progressOf[id]; return p ? p[0] : j.done; }
  function rho(id, j) { var p = progressOf[id]; return p ? p[1] : null; }
  function left(id, j) { return Math.max((j.steps || 0) - (done(id, j) || 0), 0); }
  function rateNow(j, models) { // steps/s on the model it runs on
    if (!j.rates || !j.type) return null;
    var i = models.indexOf(j.type);
    return i < 0 ? null : j.rates[i];
  }
  function eta(id, j, models) { // seconds to finish, from the current rate or the allocation's;
    // 'measuring' while the rate it would use is a prior, not a measurement (a placeholder
    // 1 step/s gave "578d 16h"): the plan's `measuring`, decided in mechanisms/rounds/ui.py
    if (j.measuring) return 'measuring';
    var r = j.state === 'running' ? rateNow(j, models) : j.eff;
    if (!r || r <= 0) return null;
    return left(id, j) / r;
  }
  function etaText(e, clock) {
    if (e === 'measuring') return '<span class="prior" title="no measured rate yet: no estimate from a prior">measuring</span>';
    if (e == null) return '-';
    return clock ? 'in ' + dur(e) + ' (' + GM.clock(GM.now() + e) + ')' : dur(e);
  }

  function cards(s, gpus, jobs) {
    var held = 0, busy = 0, total = 0;
    Object.keys(gpus).forEach(function (k) {
      total += 1;
      var m = 0;
      gpus[k].forEach(function (p) { m += p[1]; });
      held += Math.min(m, 1000);
      if (m > 0) busy += 1;
    });
    var c = s.counts || {}, fb = s.fallbacks || {}, nfb = 0;
    Object.keys(fb).forEach(function (k) { nfb += fb[k]; });
    var end = s.round_end != null ? Math.max(0, s.round_end - GM.now()) : null;
    var items = [
      ['GPUs in use', busy + ' / ' + total, pct(total ? held / (1000 * total) : 0) + ' of milli-GPU held'],
      ['running', c.running || 0, (c.queued || 0) + ' queued'],
      ['finished', c.done || 0, (c.failed || 0) + ' failed, ' + (c.cancelled || 0) + ' cancelled, ' +
        (c.rejected || 0) + ' rejected'],
      s.card || ['round', s.round == null ? '-' : s.round, end == null ? '' : 'ends in ' + dur(end) + ' (' + dur(s.round_s) + ' rounds)'],
      ['fairness rho', s.rho_mean == null ? '-' : num(s.rho_mean), 'mean; max ' + (s.rho_max == null ? '-' : num(s.rho_max))],
      ['fallbacks', nfb, nfb ? Object.keys(fb).map(function (k) { return k + ' ' + fb[k]; }).join(', ') : 'none'],
    ];
    GM.html('cards', items.map(function (it) {
      return '<div class="card"><div class="k">' + esc(it[0]) + '</div><div class="v">' + esc(it[1]) +
        '</div><div class="s">' + esc(it[2]) + '</div></div>';
    }).join(''));
  }

  function mosaic(nodes, gpus, jobs) {
    var out = [];
    Object.keys(nodes).sort(byId).forEach(function (n) {
      var node = nodes[n], cells = [];
      for (var g = 0; g < node.gpus; g++) {
        var held = gpus[n + '.' + g] || [], segs = [], tip = [node.name + ' GPU ' + g];
        held.forEach(function (p) {
          var j = jobs[p[0]];
          segs.push('<div class="seg" style="height:' + (p[1] / 10) + '%;background:' + GM.color(p[0]) +
            '">' + (p[1] >= 250 ? '#' + p[0] : '') + '</div>');
          tip.push(jobLabel(p[0], j) + ': ' + p[1] + ' milli');
        });
        if (!held.length) tip.push('idle');
        cells.push('<div class="gpu' + (held.length ? ' busy' : '') + '" title="' + esc(tip.join('\n')) +
          '" data-gpu="' + n + '.' + g + '">' + segs.join('') + '<span class="gi">' + g + '</span></div>');
      }
      out.push('<div class="node"><div class="nh"><b>' + esc(node.model) + '</b> ' + esc(node.name) +
        '</div><div class="gpus">' + cells.join('') + '</div></div>');
    });
    var box = GM.$('mosaic');
    if (box) box.className = 'mosaic' + (Object.keys(gpus).length > 48 ? ' compact' : ''); // big clusters: small tiles
    GM.html('mosaic', out.join(''));
    GM.text('cluster-sub', Object.keys(gpus).length + ' GPUs on ' + Object.keys(nodes).length + ' nodes');
  }

  function history(nodes, rounds, current) {
    var idx = Object.keys(rounds).sort(byId);
    if (!idx.length) { GM.html('hist', '<div class="empty">no round yet</div>'); return; }
    var head = '<tr><th></th>' + idx.map(function (i) { return '<th>' + (Number(i) % 5 === 0 ? i : '') + '</th>'; }).join('') + '</tr>';
    var rows = [];
    Object.keys(nodes).sort(byId).forEach(function (n) {
      for (var g = 0; g < nodes[n].gpus; g++) {
        var key = n + '.' + g;
        var tds = idx.map(function (i) {
          var ids = rounds[i].cells[key] || [];
          var style = ids.length ? ' style="background:' + GM.color(ids[0]) + '"' : '';
          var cls = Number(i) === current ? ' class="now"' : '';
          var tip = 'round ' + i + ': ' + (ids.length ? ids.map(function (x) { return '#' + x; }).join(', ') : 'idle');
          return '<td' + cls + style + ' title="' + esc(tip) + '"></td>';
        });
        rows.push('<tr><td class="lab">' + esc(nodes[n].model + ' ' + nodes[n].name + '/' + g) + '</td>' + tds.join('') + '</tr>');
      }
    });
    GM.html('hist', '<table class="hist">' + head + rows.join('') + '</table>');
  }

  function ratesCells(j, models) {
    return models.map(function (m, i) {
      if (!j.rates || j.rates[i] == null) return '<td class="num">-</td>';
      return '<td class="num ' + (j.measured && j.measured[i] ? 'measured' : 'prior') + '">' + num(j.rates[i]) + '</td>';
    }).join('');
  }

  function progress(id, j) {
    var f = j.steps ? Math.min(1, (done(id, j) || 0) / j.steps) : 0;
    return '<span class="bar"><i style="width:' + (100 * f).toFixed(1) + '%"></i></span>' + (100 * f).toFixed(1) + '%';
  }

  function queue(jobs, models) {
    var ids = Object.keys(jobs).filter(function (i) { return jobs[i].state === 'queued'; }).sort(byId);
    GM.text('queue-sub', ids.length + ' waiting');
    if (!ids.length) { GM.html('queue-table', '<div class="empty">nobody waits</div>'); return; }
    var rows = ids.slice(0, MAX_ROWS).map(function (id) {
      var j = jobs[id], e = eta(id, j, GM.models);
      return '<tr data-job="' + id + '"><td>' + swatch(id) + esc(jobLabel(id, j)) + '</td><td class="num">' + j.gpus + ' x ' + j.milli +
        '</td><td class="num">' + dur(GM.now() - j.submitted) + '</td><td class="num">' + progress(id, j) +
        '</td><td class="num">' + etaText(e, false) + '</td><td class="why">' + esc(j.why || j.reason || '') + '</td></tr>';
    });
    GM.html('queue-table', '<table><tr><th>job</th><th class="num">GPUs x milli</th><th class="num">waiting</th>' +
      '<th class="num">progress</th><th class="num">est. finish in</th><th>why it waits</th></tr>' + rows.join('') +
      more(ids.length - MAX_ROWS, 6) + '</table>');
  }

  function jobsTable(jobs, models) {
    var ids = Object.keys(jobs).sort(function (a, b) { // running, queued, then the latest to finish
      var la = jobs[a].state in ORDER ? ORDER[jobs[a].state] : 2, lb = jobs[b].state in ORDER ? ORDER[jobs[b].state] : 2;
      if (la !== lb) return la - lb;
      return la < 2 ? Number(a) - Number(b) : (jobs[b].finished || 0) - (jobs[a].finished || 0);
    });
    var running = ids.filter(function (i) { return jobs[i].state === 'running'; }).length;
    GM.text('jobs-sub', running + ' running; live jobs and the latest to finish, ' + Math.min(ids.length, MAX_ROWS) + ' of ' + ids.length + ' shown');
    if (!ids.length) { GM.html('jobs-table', '<div class="empty">no jobs yet: gpumosaic submit ...</div>'); return; }
    var head = '<tr><th>job</th><th>state</th><th>progress</th><th class="num">steps</th><th>GPU</th>' +
      models.map(function (m) { return '<th class="num">' + esc(m) + ' steps/s</th>'; }).join('') +
      '<th class="num">est. finish</th><th class="num">GPU time</th><th class="num">rho</th><th class="num">tries</th></tr>';
    var rows = ids.slice(0, MAX_ROWS).map(function (id) {
      var j = jobs[id], e = LIVE[j.state] ? eta(id, j, models) : null, r = rho(id, j);
      var fin = j.state in LIVE ? etaText(e, true) : (j.finished ? GM.clock(j.finished) : '-');
      var where = j.state === 'running' ? esc(j.type + ' [' + j.index + ']') : (j.reason && !LIVE[j.state] ? '<span title="' + esc(j.reason) + '">' + esc(j.reason.slice(0, 40)) + '</span>' : '');
      return '<tr data-job="' + id + '" data-state="' + esc(j.state) + '"><td>' + swatch(id) + esc(jobLabel(id, j)) + '</td><td><span class="badge b-' + esc(j.state) + '">' +
        esc(j.state) + '</span></td><td>' + progress(id, j) + '</td><td class="num">' + num(done(id, j), 4) + ' / ' + num(j.steps, 4) +
        '</td><td>' + where + '</td>' + ratesCells(j, models) + '<td class="num">' + fin + '</td><td class="num">' +
        dur(j.attained_s) + '</td><td class="num">' + (r == null ? '-' : num(r)) + '</td><td class="num">' + j.attempts + '</td></tr>';
    });
    GM.html('jobs-table', '<table>' + head + rows.join('') + more(ids.length - MAX_ROWS, models.length + 9) + '</table>');
  }

  function matrix(jobs, models) {
    var ids = Object.keys(jobs).filter(function (i) { return LIVE[jobs[i].state] && jobs[i].x; }).sort(byId);
    if (!ids.length) { GM.html('matrix-table', '<div class="empty">no allocation in force</div>'); return; }
    var head = '<tr><th>job</th>' + models.map(function (m) { return '<th class="num">' + esc(m) + '</th>'; }).join('') + '</tr>';
    var rows = ids.slice(0, MAX_ROWS).map(function (id) {
      var j = jobs[id];
      return '<tr><td>' + swatch(id) + esc(jobLabel(id, j)) + '</td>' + models.map(function (m, i) {
        var x = j.x[i] || 0, got = j.got_s ? j.got_s[i] : null;
        var run = j.state === 'running' && j.type === m ? ' run' : '';
        var bg = x > 0 ? 'background:rgba(47,111,223,' + (0.12 + 0.6 * Math.min(1, x)).toFixed(2) + ')' : '';
        return '<td class="c' + run + '" style="' + bg + '" title="allocation ' + pct(x) + '; received ' + dur(got) + ' since the last solve">' +
          (x > 0 ? pct(x) : '') + '</td>';
      }).join('') + '</tr>';
    });
    GM.html('matrix-table', '<table class="mx">' + head + rows.join('') + more(ids.length - MAX_ROWS, models.length + 1) + '</table>');
  }

  function fairness(s) {
    var fb = s.fallbacks || {}, ct = s.counters || {};
    var rows = [
      ['rho (finish-time fairness)', s.rho_mean == null ? '-' : 'mean ' + num(s.rho_mean) + ', max ' + num(s.rho_max) +
        ' over live jobs (estimated finish / finish with a 1/n share; <= 1 is fair)'],
      ['policy solves', ct.policy_solves == null ? '-' : ct.policy_solves],
    ];
    Object.keys(fb).forEach(function (k) { rows.push(['fallback: ' + k, fb[k]]); });
    if (!Object.keys(fb).length) rows.push(['fallbacks', 'none so far']);
    (s.counter_labels || [['leases_launched', 'leases launched'], ['lease_extensions', 'lease extensions'], ['lease_stops', 'leases stopped'],
     ['leases_lost', 'leases lost'], ['job_retries', 'job retries'], ['forced_solves', 'forced solves'],
     ['unmeasured_grants', 'grants on an unmeasured rate']]).forEach(function (p) {
      if (ct[p[0]] != null) rows.push([p[1], ct[p[0]]]);
    });
    if (s.ui_rebuild_retries) rows.push(['page rebuilds retried', s.ui_rebuild_retries]);
    GM.html('fair', rows.map(function (r) { return '<div class="k">' + esc(r[0]) + '</div><div>' + esc(r[1]) + '</div>'; }).join(''));
  }

  GM.models = [];
  GM.start(function (w, changed) {
    var s = (w.service || {}).s;
    if (!s) return;
    if (changed.service) GM.setNow(s.now);
    var models = GM.models = s.models || [];
    var nodes = w.nodes || {}, gpus = w.gpus || {}, rounds = w.rounds || {};
    progressOf = w.progress || {};
    if (changed.jobs || changed.plan || !merged) { // a job as stored plus the decider's view of it
      merged = {};
      var stored = w.jobs || {}, plan = w.plan || {};
      Object.keys(stored).forEach(function (id) {
        var j = Object.assign({}, stored[id], plan[id] || {});
        merged[id] = j;
      });
    }
    var jobs = merged;
    if (changed.plan) changed.jobs = true;
    GM.text('sub', s.header || (s.policy + ' + ' + s.placement + ' · rounds of ' + dur(s.round_s)));
    cards(s, gpus, jobs);
    if (changed.nodes || changed.gpus || changed.jobs) mosaic(nodes, gpus, jobs);
    if (changed.nodes || changed.rounds || s.round !== shownRound) { shownRound = s.round; history(nodes, rounds, s.round); }
    if (changed.jobs || changed.progress || changed.tick) queue(jobs, models);
    if (changed.jobs || changed.progress || changed.tick) jobsTable(jobs, models);
    if (changed.jobs) matrix(jobs, models);
    if (changed.service) fairness(s);
  });
})();
