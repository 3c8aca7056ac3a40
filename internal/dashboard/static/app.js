// webordinary dashboard: relative times, and live updates over Server-Sent Events.
(() => {
  'use strict';

  const span = (ms) => {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + (s % 60) + 's';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h ' + (m % 60) + 'm';
    return Math.floor(h / 24) + 'd';
  };

  const tick = () => {
    const now = Date.now();
    document.querySelectorAll('time[data-rel]').forEach((el) => {
      el.textContent = span(now - Date.parse(el.dateTime)) + ' ago';
    });
    document.querySelectorAll('[data-since]').forEach((el) => {
      el.textContent = span(now - Date.parse(el.dataset.since));
    });
  };
  tick();
  setInterval(tick, 1000);

  document.addEventListener('submit', (e) => {
    const b = e.submitter;
    if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) e.preventDefault();
  });

  const src = document.body.dataset.events;
  if (!src) return;
  const es = new EventSource(src);
  const live = document.getElementById('live');
  const mark = (on, title) => { if (live) { live.classList.toggle('on', on); live.title = title; } };
  es.onopen = () => mark(true, 'Live updates: connected');
  es.onerror = () => mark(false, 'Live updates: reconnecting…');

  es.addEventListener('swap', (e) => {
    const m = JSON.parse(e.data);
    const el = document.getElementById(m.id);
    if (el) { el.innerHTML = m.html; tick(); }
  });

  const out = document.getElementById('output');
  const append = (lines) => {
    if (!out || !lines || !lines.length) return;
    const stick = out.scrollTop + out.clientHeight >= out.scrollHeight - 8;
    out.append(lines.join('\n') + '\n'); // a text node: output is never parsed as HTML
    if (stick) out.scrollTop = out.scrollHeight;
  };
  es.addEventListener('reset', (e) => { if (out) { out.textContent = ''; append(JSON.parse(e.data)); } });
  es.addEventListener('lines', (e) => append(JSON.parse(e.data)));
  es.addEventListener('end', () => { es.close(); mark(false, 'Live updates: the job has ended'); });
})();
