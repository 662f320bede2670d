(function () {
  'use strict';
  var doc = document;
  var SVGNS = 'http://www.w3.org/2000/svg';
  var dataEl = doc.getElementById('report-data');
  var data = dataEl ? JSON.parse(dataEl.textContent) : null;

  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    var e = doc.createElementNS(SVGNS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(us) {
    if (us < 1000) return Math.round(us) + ' µs';
    if (us < 1e6) { var ms = us / 1000; return (ms < 10 ? ms.toFixed(2) : ms.toFixed(1)) + ' ms'; }
    if (us < 6e7) { var s = us / 1e6; return (s < 10 ? s.toFixed(2) : s.toFixed(1)) + ' s'; }
    var t = Math.floor(us / 1e6);
    if (t < 3600) return Math.floor(t / 60) + 'm ' + String(t % 60).padStart(2, '0') + 's';
    return Math.floor(t / 3600) + 'h ' + String(Math.floor((t % 3600) / 60)).padStart(2, '0') + 'm';
  }
  function pretty(v) { return typeof v === 'string' ? v : JSON.stringify(v, null, 2); }
  function oneLine(v, max) {
    var s = typeof v === 'string' ? v : JSON.stringify(v);
    if (s === undefined) s = '';
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }
  function kindClass(kind, composite) {
    if (composite) return 'k-composite';
    switch (kind) {
      case 'llm': case 'supervisor': case 'decision_router': return 'k-llm';
      case 'human': return 'k-human';
      case 'compute': case 'expression': case 'template': return 'k-compute';
      case 'mcp': case 'a2a': return 'k-remote';
      case 'inputs': return 'k-inputs';
      default: return 'k-code';
    }
  }

  // ---- topology: highlight the data flow of the agent or key under the pointer
  var topo = doc.getElementById('topology-svg');
  if (topo) {
    var clear = function () {
      topo.classList.remove('focus');
      var hl = topo.querySelectorAll('.hl');
      for (var i = 0; i < hl.length; i++) hl[i].classList.remove('hl');
    };
    topo.addEventListener('mouseover', function (ev) {
      var g = ev.target.closest ? ev.target.closest('g.node, g.key') : null;
      clear();
      if (!g) return;
      var attr = g.classList.contains('node') ? 'data-n' : 'data-k';
      var id = g.getAttribute(attr);
      var edges = topo.querySelectorAll('.flow-edges path[' + attr + '="' + id + '"]');
      if (!edges.length) return;
      topo.classList.add('focus');
      for (var i = 0; i < edges.length; i++) edges[i].classList.add('hl');
    });
    topo.addEventListener('mouseleave', clear);
  }

  if (!data) { doc.documentElement.setAttribute('data-ready', '1'); return; }

  var orderByPath = {};
  data.order.forEach(function (o) { orderByPath[o.path] = o; });
  function clsOf(step) {
    var o = orderByPath[step.path];
    return kindClass(step.kind, o ? o.composite : false);
  }

  // ---- timeline
  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function drawTimeline() {
    var host = doc.getElementById('timeline');
    if (!host) return;
    var tl = data.timeline;
    if (!tl.span) { host.appendChild(el('p', 'muted', 'No invocations were recorded for this run.')); return; }
    var byPath = {};
    data.steps.forEach(function (s) {
      if (s.x0 === undefined) return;
      (byPath[s.path] = byPath[s.path] || []).push(s);
    });
    var MAXL = 12, rows = [];
    data.order.forEach(function (o) {
      var bars = byPath[o.path];
      if (!bars) return;
      bars = bars.slice().sort(function (a, b) { return a.x0 - b.x0 || a.seq - b.seq; });
      var ends = [];
      var lanes = bars.map(function (b) {
        var li = -1;
        for (var i = 0; i < ends.length; i++) if (ends[i] <= b.x0) { li = i; break; }
        if (li < 0 && ends.length < MAXL) { li = ends.length; ends.push(0); }
        if (li < 0) { li = 0; for (var j = 1; j < ends.length; j++) if (ends[j] < ends[li]) li = j; }
        ends[li] = Math.max(ends[li], b.x1);
        return li;
      });
      rows.push({ o: o, bars: bars, lanes: lanes, n: ends.length });
    });
    var labelW = 230, laneH = 18, rowPad = 8, top = 30;
    var width = Math.max((host.clientWidth || 1000) - 2, 760);
    var chartW = width - labelW - 24;
    var scale = chartW / tl.span;
    var height = top + 8;
    rows.forEach(function (r) { r.y = height; r.h = r.n * laneH + rowPad; height += r.h; });
    height += 6;
    var svg = sv('svg', { width: width, height: height, viewBox: '0 0 ' + width + ' ' + height, id: 'timeline-svg', role: 'img', 'aria-label': 'Run timeline' });
    var defs = sv('defs', {});
    var pat = sv('pattern', { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
    pat.appendChild(sv('rect', { width: 6, height: 6, fill: '#fff7e6' }));
    pat.appendChild(sv('rect', { width: 3, height: 6, fill: '#f3d9a4' }));
    defs.appendChild(pat);
    svg.appendChild(defs);
    // bands and labels
    rows.forEach(function (r, i) {
      if (i % 2 === 0) svg.appendChild(sv('rect', { class: 'tl-band', x: 0, y: r.y, width: width, height: r.h }));
      var indent = 8 + Math.min(r.o.depth, 8) * 12;
      var name = oneLine(r.o.name, Math.max(8, 30 - Math.min(r.o.depth, 8) * 2));
      var t = sv('text', { class: 'tl-label' + (r.o.composite ? ' composite' : ''), x: indent, y: r.y + 13 }, name);
      t.appendChild(sv('title', {}, r.o.name + ' (' + r.o.kind + ') ' + r.o.path));
      svg.appendChild(t);
    });
    // axis
    var axis = sv('g', { class: 'tl-axis' });
    var step = niceStep(tl.span / Math.max(2, Math.floor(chartW / 110)));
    for (var t = 0; t <= tl.span + 1; t += step) {
      var x = labelW + t * scale;
      axis.appendChild(sv('line', { x1: x, y1: top - 6, x2: x, y2: height }));
      if (x + 60 <= width) axis.appendChild(sv('text', { x: x + 3, y: top - 12 }, fmt(t)));
    }
    svg.appendChild(axis);
    // breaks (collapsed waiting periods)
    tl.breaks.forEach(function (b) {
      var x = labelW + b.x * scale, w = Math.max(8, b.w * scale);
      var r = sv('rect', { class: 'brk', x: x, y: top - 4, width: w, height: height - top });
      // [title, label] words of a break: a wait for a human, the time between a run and its fork, idle time
      var words = { suspended: ['Waiting ', 'waited '], forked: ['Forked, later by ', 'fork +'] }[b.kind] || ['Idle ', 'idle '];
      r.appendChild(sv('title', {}, words[0] + b.real + (b.label ? ' — ' + b.label : '')));
      svg.appendChild(r);
      var right = x + w + 150 > width;
      var lbl = sv('text', { class: 'brk-label', x: right ? x - 4 : x + w + 4, y: top + 10, 'text-anchor': right ? 'end' : 'start' },
        words[1] + b.real);
      lbl.appendChild(sv('title', {}, b.label));
      svg.appendChild(lbl);
    });
    // milestones that end or fail the run
    data.milestones.forEach(function (m) {
      if (m.x === null || m.x === undefined) return;
      if (['failed', 'cancelled', 'completed'].indexOf(m.kind) < 0 && !(m.kind === 'suspended' && m === data.milestones[data.milestones.length - 1])) return;
      var x = labelW + m.x * scale;
      var line = sv('line', { class: 'ms-line ' + m.kind, x1: x, y1: top - 4, x2: x, y2: height });
      line.appendChild(sv('title', {}, m.kind + ' at ' + m.at + (m.error ? ': ' + m.error : '')));
      svg.appendChild(line);
    });
    // bars
    rows.forEach(function (r) {
      r.bars.forEach(function (b, i) {
        var x = labelW + b.x0 * scale, w = Math.max(2, (b.x1 - b.x0) * scale);
        var y = r.y + 3 + r.lanes[i] * laneH;
        var cls = 'bar ' + kindClass(b.kind, r.o.composite) + (b.error ? ' err' : '') + (b.attempt > 1 ? ' retry' : '');
        var rect = sv('rect', { class: cls, x: x, y: y, width: w, height: laneH - 5, 'data-seq': b.seq });
        var tip = b.name + ' · ' + b.path + '\nstep ' + b.seq + ' · ' + (b.dur || '') +
          (b.iteration ? ' · iteration ' + b.iteration : '') + (b.attempt > 1 ? ' · attempt ' + b.attempt : '') +
          (b.tokens ? ' · ' + (b.tokens[0] + b.tokens[1]) + ' tokens' : '') + (b.error ? '\nerror: ' + b.error : '');
        rect.appendChild(sv('title', {}, tip));
        svg.appendChild(rect);
        if (b.iteration && w > 26) svg.appendChild(sv('text', { class: 'bar-text', x: x + 4, y: y + 10 }, '#' + b.iteration));
      });
    });
    svg.addEventListener('click', function (ev) {
      var seq = ev.target.getAttribute && ev.target.getAttribute('data-seq');
      if (seq) openStep(Number(seq));
    });
    host.appendChild(svg);
  }

  // ---- steps (rendered lazily, collapsed; bodies filled on first open)
  var list = doc.getElementById('steps');
  var search = doc.getElementById('step-search');
  var countEl = doc.getElementById('step-count');
  var PAGE = 200;
  var entries = [];
  (function () {
    var ms = data.milestones.slice().sort(function (a, b) { return a.seq - b.seq; });
    var mi = 0;
    data.steps.forEach(function (s, si) {
      while (mi < ms.length && ms[mi].seq < s.seq) entries.push({ m: ms[mi++] });
      entries.push({ s: s, i: si });
    });
    while (mi < ms.length) entries.push({ m: ms[mi++] });
  })();
  var matches = entries, shown = 0, query = '';

  function milestoneRow(m) {
    var d = el('div', 'ms-row ' + m.kind);
    var b = el('strong', null, m.kind.replace('_', ' '));
    d.appendChild(b);
    d.appendChild(doc.createTextNode(' · ' + m.at + ' · after step ' + m.seq));
    if (m.waited) d.appendChild(doc.createTextNode(' · waited ' + m.waited));
    if (m.pending && m.pending.length) d.appendChild(doc.createTextNode(' · waiting for ' + m.pending.join(', ')));
    (m.answers || []).forEach(function (a) {
      d.appendChild(doc.createTextNode(' · answer '));
      d.appendChild(el('code', null, a[0]));
      d.appendChild(doc.createTextNode(' = '));
      d.appendChild(el('code', null, a[1]));
    });
    if (m.error) d.appendChild(doc.createTextNode(' · ' + m.error));
    if (m.forked_from) {
      d.appendChild(doc.createTextNode(' · from run '));
      d.appendChild(el('code', null, m.forked_from));
    }
    return d;
  }

  function stepRow(s) {
    var det = el('details', 'step');
    det.id = 'step-' + s.seq;
    var sum = el('summary');
    sum.appendChild(el('span', 'seq', '#' + s.seq));
    var who = el('span', 'who');
    who.appendChild(el('span', 'dot ' + clsOf(s)));
    who.appendChild(el('span', 'sname', s.name));
    if (s.path !== s.name) who.appendChild(el('code', 'spath', s.path));
    if (s.item) who.appendChild(el('span', 'chip item', 'item ' + s.item));
    if (s.kind && s.kind !== s.name) who.appendChild(el('span', 'chip', s.kind));
    if (s.label && s.label !== s.kind) who.appendChild(el('span', 'chip label', s.label));
    if (s.iteration) who.appendChild(el('span', 'chip iter', 'iteration ' + s.iteration));
    if (s.attempt > 1) who.appendChild(el('span', 'chip retry', 'attempt ' + s.attempt));
    if (s.error) who.appendChild(el('span', 'chip err', 'error'));
    sum.appendChild(who);
    var what = el('span', 'what');
    if (s.error) what.appendChild(el('span', 'preview err-text', oneLine(s.error, 160)));
    else if (s.preview !== undefined) what.appendChild(el('span', 'preview', s.preview));
    if (s.diff.length) {
      var dl = el('span', 'delta');
      s.diff.forEach(function (d, i) {
        if (i) dl.appendChild(doc.createTextNode('  '));
        var sign = d.op === 'added' ? '+' : d.op === 'removed' ? '−' : d.op === 'changed' ? '~' : '=';
        var b = el('b', 'op-' + d.op, sign + d.key);
        dl.appendChild(b);
      });
      what.appendChild(dl);
    }
    var why = s.decisions && s.decisions.filter(function (d) { return d.rationale; })[0];
    if (why) what.appendChild(el('span', 'why', 'decision · ' + why.name + ': ' + why.rationale));
    sum.appendChild(what);
    var meta = el('span', 'meta');
    meta.textContent = (s.dur || '') + (s.tokens ? ' · ' + (s.tokens[0] + s.tokens[1]) + ' tok' : '');
    sum.appendChild(meta);
    det.appendChild(sum);
    det.addEventListener('toggle', function () {
      if (det.open && !det.dataset.filled) { det.dataset.filled = '1'; det.appendChild(stepBody(s)); }
    });
    return det;
  }

  function section(title, child) {
    var d = el('div');
    d.appendChild(el('h4', null, title));
    d.appendChild(child);
    return d;
  }
  function kvTable(map) {
    var t = el('table', 'diff');
    var keys = Object.keys(map);
    keys.forEach(function (k) {
      var tr = el('tr');
      tr.appendChild(el('td', 'mono', k)).style.width = '160px';
      var td = el('td');
      td.appendChild(el('pre', null, pretty(map[k])));
      tr.appendChild(td);
      t.appendChild(tr);
    });
    return t;
  }
  function stepBody(s) {
    var b = el('div', 'step-body');
    if (s.error) b.appendChild(section('Error', el('pre', 'err-text', s.error)));
    if (s.inputs && Object.keys(s.inputs).length) b.appendChild(section(s.label === 'inputs' ? 'Turn inputs' : 'Inputs', kvTable(s.inputs)));
    if (s.output !== undefined && s.label !== 'inputs') b.appendChild(section('Output', el('pre', null, pretty(s.output))));
    if (s.diff.length) {
      var t = el('table', 'diff');
      var cg = el('colgroup');
      cg.appendChild(el('col', 'k')); cg.appendChild(el('col', 'o')); cg.appendChild(el('col')); cg.appendChild(el('col'));
      t.appendChild(cg);
      var hr = el('tr');
      ['key', 'change', 'before', 'after'].forEach(function (h) { hr.appendChild(el('th', null, h)); });
      t.appendChild(hr);
      s.diff.forEach(function (d) {
        var tr = el('tr');
        tr.appendChild(el('td', 'mono', d.key));
        tr.appendChild(el('td', 'op-' + d.op, d.op));
        var before = el('td'), after = el('td');
        if (d.old !== undefined) before.appendChild(el('pre', null, pretty(d.old)));
        if (d.new !== undefined) after.appendChild(el('pre', null, pretty(d.new)));
        tr.appendChild(before); tr.appendChild(after);
        t.appendChild(tr);
      });
      b.appendChild(section(s.item ? 'State changes in item ' + s.item + '\u2019s scope' : 'State changes', t));
    }
    (s.decisions || []).forEach(function (d) {
      var box = el('div', 'decision');
      var head = el('div');
      head.appendChild(el('strong', null, d.name));
      head.appendChild(doc.createTextNode(' '));
      head.appendChild(el('code', 'spath', d.path));
      box.appendChild(head);
      if (d.rationale) box.appendChild(el('div', null, 'Why: ' + d.rationale));
      if (d.next.length) box.appendChild(el('div', null, 'Next: ' + d.next.join(', ')));
      if (d.finished) box.appendChild(el('div', null, 'Finished: ' + d.finished));
      var st = el('details');
      st.appendChild(el('summary', 'muted small', 'planner state'));
      st.appendChild(el('pre', null, pretty(d.state)));
      box.appendChild(st);
      b.appendChild(section('Planner decision', box));
    });
    if (!b.childNodes.length) b.appendChild(el('div', 'muted', 'Nothing recorded for this step.'));
    return b;
  }

  function renderMore() {
    var frag = doc.createDocumentFragment();
    var steps = 0;
    while (shown < matches.length && (steps < PAGE || !matches[shown].s)) {
      var e = matches[shown++];
      if (e.s) steps++;
      frag.appendChild(e.m ? milestoneRow(e.m) : stepRow(e.s));
    }
    var old = doc.getElementById('steps-more');
    if (old) old.remove();
    list.appendChild(frag);
    if (shown < matches.length) {
      var left = 0;
      for (var j = shown; j < matches.length; j++) if (matches[j].s) left++;
      var btn = el('button', 'more', 'Show ' + Math.min(PAGE, left) + ' more (' + left + ' remaining)');
      btn.id = 'steps-more';
      btn.type = 'button';
      btn.addEventListener('click', renderMore);
      list.appendChild(btn);
    }
  }
  function applyFilter() {
    query = search ? search.value.trim().toLowerCase() : '';
    matches = query ? entries.filter(function (e) { return e.s && e.s.search.indexOf(query) >= 0; }) : entries;
    list.textContent = '';
    shown = 0;
    renderMore();
    var n = query ? matches.length : data.steps.length;
    countEl.textContent = query ? n + ' of ' + data.steps.length + ' steps match' : n + ' steps';
  }
  function openStep(seq) {
    var idx = -1;
    for (var i = 0; i < matches.length; i++) if (matches[i].s && matches[i].s.seq === seq) { idx = i; break; }
    if (idx < 0 && query) { search.value = ''; applyFilter(); return openStep(seq); }
    if (idx < 0) return;
    while (shown <= idx) renderMore();
    var det = doc.getElementById('step-' + seq);
    if (!det) return;
    det.open = true;
    det.classList.add('flash');
    setTimeout(function () { det.classList.remove('flash'); }, 1500);
    det.scrollIntoView({ block: 'center' });
  }

  // The step list first: the page's scrollbar then exists when the timeline measures its width.
  if (list) {
    applyFilter();
    var timer = null;
    if (search) search.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(applyFilter, 120); });
  }
  drawTimeline();
  doc.addEventListener('click', function (ev) {
    var a = ev.target.closest ? ev.target.closest('a[data-seq]') : null;
    if (a) { ev.preventDefault(); openStep(Number(a.getAttribute('data-seq'))); }
  });
  doc.documentElement.setAttribute('data-ready', '1');
})();
