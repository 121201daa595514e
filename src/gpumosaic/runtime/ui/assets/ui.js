/* gpumosaic /ui: the shared part of every page. The stream is Server-Sent Events read with
   fetch (so the bearer token travels in the Authorization header, never in a URL): a
   "world" event replaces the state, a "patch" event sets and deletes keys per section.
   The page's own script registers a render(world, changed) function with GM.start. */
var GM = (function () {
  'use strict';
  var KEY = 'gpumosaic-token:' + location.host;
  var world = {}, lastId = '', render = null, pending = {}, scheduled = false;
  var offset = 0; // server clock - browser clock (s), from the service's "now"

  function takeTokenFromUrl() {
    // A link such as HOST:8470/ui#token=SECRET gives the token once: it is kept
    // for this tab and removed from the address bar (a fragment never reaches a server).
    var m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
      history.replaceState(null, '', location.pathname + location.search);
    }
  }
  function token() { return sessionStorage.getItem(KEY) || ''; }

  function esc(s) {
    return String(s == null ? '' : s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }
  function color(id) { // distinct, stable colours: golden-angle hues
    var h = (Number(id) * 137.508) % 360;
    return 'hsl(' + h.toFixed(1) + ',62%,' + (44 + (Number(id) % 3) * 6) + '%)';
  }
  function dur(s) {
    if (s == null || !isFinite(s)) return '-';
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  }
  function num(v, d) {
    if (v == null || !isFinite(v)) return '-';
    var a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toLocaleString('en');
    return Number(v).toPrecision(d || 3).replace(/\.?0+$/, '').replace(/\.?0+e/, 'e');
  }
  function pct(v) { return v == null || !isFinite(v) ? '-' : (100 * v).toFixed(0) + '%'; }
  function clock(t) { // a server time as this browser's local clock time
    if (t == null) return '-';
    var d = new Date((t - offset) * 1000);
    return d.toLocaleTimeString('en-GB', {hour12: false});
  }
  function now() { return Date.now() / 1000 + offset; }
  function setNow(serverNow) { if (serverNow != null) offset = serverNow - Date.now() / 1000; }
  function $(id) { return document.getElementById(id); }
  function html(id, s) { var e = $(id); if (e && e.innerHTML !== s) e.innerHTML = s; }
  function text(id, s) { var e = $(id); if (e && e.textContent !== String(s)) e.textContent = s; }

  function status(on, what) {
    var d = $('live-dot'), t = $('live-text');
    if (d) d.className = 'dot ' + (on ? 'on' : 'off');
    if (t) t.textContent = what;
  }

  function apply(kind, data) {
    var msg = JSON.parse(data), name, k;
    if (kind === 'world') {
      world = msg;
      for (name in world) pending[name] = true;
    } else if (kind === 'patch') {
      for (name in msg.set) {
        var sec = world[name] || (world[name] = {});
        for (k in msg.set[name]) sec[k] = msg.set[name][k];
        pending[name] = true;
      }
      for (name in msg.del) {
        var s2 = world[name] || {};
        msg.del[name].forEach(function (key) { delete s2[key]; });
        pending[name] = true;
      }
    }
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(function () {
        scheduled = false;
        var changed = pending;
        pending = {};
        if (render) render(world, changed);
      });
    }
  }

  function handle(block) {
    var kind = 'message', data = [], id = null;
    block.split('\n').forEach(function (line) {
      if (!line || line.charAt(0) === ':') return;
      var i = line.indexOf(':');
      var field = i < 0 ? line : line.slice(0, i);
      var value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'event') kind = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    });
    if (id !== null) lastId = id;
    if (data.length) apply(kind, data.join('\n'));
  }

  function askToken(message) {
    status(false, 'token needed');
    var box = $('login');
    if (!box) return;
    $('login-msg').textContent = message;
    box.style.display = 'flex';
    $('login-token').focus();
  }

  function streamUrl() {
    var base = location.pathname.replace(/\/+$/, '') + '/stream';
    return base + (lastId ? '?v=' + encodeURIComponent(lastId) : '');
  }

  var retry = 500;
  function connect() {
    var headers = {}, t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    fetch(streamUrl(), {headers: headers, cache: 'no-store'}).then(function (res) {
      if (res.status === 401) {
        askToken(t ? 'That token was refused. The service\'s token:' : 'This service needs its token:');
        return null;
      }
      if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
      status(true, 'live');
      retry = 500;
      var reader = res.body.getReader(), dec = new TextDecoder(), buf = '';
      function pump() {
        return reader.read().then(function (r) {
          if (r.done) return 'ended';
          buf += dec.decode(r.value, {stream: true}).replace(/\r\n?/g, '\n');
          var i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            handle(buf.slice(0, i));
            buf = buf.slice(i + 2);
          }
          return pump();
        });
      }
      return pump();
    }).then(function (how) {
      if (how === 'ended') setTimeout(connect, 50); // the stream's lifetime: resume at once
    }).catch(function () {
      status(false, 'reconnecting');
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 8000);
    });
  }

  function start(fn) {
    render = fn;
    takeTokenFromUrl();
    var form = $('login');
    if (form) {
      form.querySelector('form').addEventListener('submit', function (ev) {
        ev.preventDefault();
        sessionStorage.setItem(KEY, $('login-token').value.trim());
        form.style.display = 'none';
        connect();
      });
    }
    status(false, 'connecting');
    connect();
    // Countdowns and "finishes in" move between updates.
    setInterval(function () { if (render) render(world, {tick: true}); }, 1000);
  }

  return {start: start, esc: esc, color: color, dur: dur, num: num, pct: pct, clock: clock,
          now: now, setNow: setNow, html: html, text: text, $: $};
})();
