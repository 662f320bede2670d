(function () {
  'use strict';
  var doc = document;
  var root = doc.documentElement;
  var FILTERS = ['all', 'failed', 'regressions', 'flaky'];
  var bar = doc.getElementById('case-filter');
  var buttons = doc.querySelectorAll('#case-filter [data-filter]');
  var items = doc.querySelectorAll('[data-case]');
  var rows = doc.querySelectorAll('tr.case[data-case]');
  var none = doc.getElementById('no-match');

  function matches(el, filter) {
    switch (filter) {
      case 'failed': return el.getAttribute('data-passed') === '0';
      case 'regressions': return el.getAttribute('data-regression') === '1';
      case 'flaky': return el.getAttribute('data-flaky') === '1';
      default: return true;
    }
  }

  // Shows the cases that pass `filter`, hides the others (their rows, reason rows and detail sections).
  function apply(filter) {
    if (FILTERS.indexOf(filter) < 0) filter = 'all';
    root.setAttribute('data-filter', filter);
    for (var i = 0; i < items.length; i++) items[i].hidden = !matches(items[i], filter);
    for (var j = 0; j < buttons.length; j++) {
      buttons[j].setAttribute('aria-pressed', String(buttons[j].getAttribute('data-filter') === filter));
    }
    var shown = 0;
    for (var k = 0; k < rows.length; k++) if (!rows[k].hidden) shown++;
    if (none) none.hidden = shown > 0 || rows.length === 0;
    var note = doc.getElementById('filter-note');
    if (note) note.textContent = filter === 'all' ? '' : shown + ' of ' + rows.length + ' cases shown';
  }

  function filterOfHash() {
    var m = /^#filter=([a-z]+)$/.exec(window.location.hash);
    return m ? m[1] : null;
  }

  // A link to a case opens its section (showing every case if the filter hid it).
  function openTarget() {
    var id = window.location.hash.slice(1);
    if (!id || id.indexOf('case-') !== 0) return;
    var target = doc.getElementById(id);
    if (!target || target.tagName !== 'DETAILS') return;
    if (target.hidden) apply('all');
    target.open = true;
  }

  if (bar) bar.hidden = false;
  for (var b = 0; b < buttons.length; b++) {
    buttons[b].addEventListener('click', function (ev) {
      var filter = ev.currentTarget.getAttribute('data-filter');
      apply(filter);
      // The filter is kept in the address (`#filter=failed`), so that a link or a reload shows the same.
      window.location.hash = 'filter=' + filter;
    });
  }
  window.addEventListener('hashchange', function () {
    var filter = filterOfHash();
    if (filter) apply(filter); else openTarget();
  });
  apply(filterOfHash() || 'all');
  openTarget();
  root.setAttribute('data-ready', '1');
})();
