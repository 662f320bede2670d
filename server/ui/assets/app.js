// agentic serve: the web UI's only script. Run data (prompts, answers, output, state, events) enters the page
// as text only (textContent / text nodes), never as markup.
(function () {
  'use strict';

  var FINAL = { completed: true, failed: true, cancelled: true };
  var EVENTS = ['agent_started', 'agent_completed', 'agent_failed', 'token', 'tool_call', 'tool_result',
    'model_turn', 'planner_decision', 'waiting_for_capacity', 'suspended', 'resumed', 'completed', 'failed', 'cancelled'];

  // An element with properties (`role` and `data-*` as attributes) and children (strings become text nodes).
  function el(tag, props, children) {
    var node = document.createElement(tag);
    Object.keys(props || {}).forEach(function (k) {
      if (k === 'role' || k.indexOf('data-') === 0) node.setAttribute(k, props[k]);
      else node[k] = props[k];
    });
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return node;
  }

  // A value from a run: a string as its text, anything else as indented JSON.
  function display(v) {
    if (typeof v === 'string') return v;
    if (v === undefined) return '';
    return JSON.stringify(v, null, 2);
  }

  // A prompt as nodes: text, its Markdown code spans (`name`) as code elements (never as HTML), as the server
  // renders it (ui.rs code_spans).
  function prose(text) {
    var s = display(text), out = [], open;
    while ((open = s.indexOf('`')) >= 0) {
      var close = s.indexOf('`', open + 1);
      if (close < 0) break;
      if (open > 0) out.push(s.slice(0, open));
      out.push(el('code', {}, [s.slice(open + 1, close)]));
      s = s.slice(close + 1);
    }
    if (s) out.push(s);
    return out;
  }

  function clip(s, n) { return s.length > n ? s.slice(0, n) + '…' : s; }

  // A state value cut after 2000 characters, as the server renders it: megabytes would make the page as large.
  var SHOWN_CHARS = 2000;
  function shortened(s, runId) {
    if (s.length <= SHOWN_CHARS) return s;
    var chars = Array.from(s);
    if (chars.length <= SHOWN_CHARS) return s;
    return chars.slice(0, SHOWN_CHARS).join('') + '… (' + (chars.length - SHOWN_CHARS) +
      ' more characters; the whole value is in GET /api/v1/runs/' + seg(runId) + ' and the report)';
  }
  function seg(s) { return encodeURIComponent(s); }
  function shortTime(s) { return s && s.length >= 19 ? s.slice(0, 10) + ' ' + s.slice(11, 19) + 'Z' : (s || ''); }

  function timeEl(ts) {
    if (!ts) return document.createTextNode('');
    var t = el('time', {}, [shortTime(ts)]);
    t.dateTime = ts;
    return t;
  }

  function badge(status) { return el('span', { className: 'badge status-' + status }, [status]); }

  // An answer's text as the CLI reads it: JSON when it is valid JSON, else the text as a string.
  function parseValue(text) {
    try { return JSON.parse(text); } catch (e) { return text; }
  }

  // A call to the API: {status, ok, data}; a network failure is status 0.
  // The page's CSRF token (the sign-in cookie alone does not let a request change anything).
  var csrfMeta = document.querySelector('meta[name="csrf-token"]');
  var CSRF = csrfMeta ? csrfMeta.content : '';

  function api(method, path, body) {
    var init = { method: method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
    if (method !== 'GET' && CSRF) init.headers['X-CSRF-Token'] = CSRF;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (res) {
      return res.json().catch(function () { return null; }).then(function (data) {
        return { status: res.status, ok: res.ok, data: data };
      });
    }, function (e) {
      return { status: 0, ok: false, data: { error: 'cannot reach the server: ' + e.message } };
    });
  }

  // The API's error message, with its list of located errors (an invalid spec, invalid inputs).
  function showError(box, r) {
    var message = r.data && typeof r.data.error === 'string' ? r.data.error : 'the server answered ' + r.status;
    box.replaceChildren(document.createTextNode(message));
    var errors = r.data && Array.isArray(r.data.errors) ? r.data.errors : [];
    if (errors.length > 1) {
      box.appendChild(el('ul', {}, errors.map(function (e) { return el('li', {}, [display(e.text || e.message || e)]); })));
    }
    box.hidden = false;
  }

  function showMessage(box, message) {
    box.replaceChildren(document.createTextNode(message));
    box.hidden = false;
  }

  // ---- Answer forms (run page and inbox) --------------------------------------------------------------

  function answerForm(runId, responseId) {
    var form = el('form', { className: 'answer-form', 'data-run-id': runId, 'data-response-id': responseId }, [
      el('label', {}, ['Answer ', el('span', { className: 'hint' }, ['(JSON, or plain text sent as a string)']),
        el('textarea', { name: 'value', rows: 2, required: true })]),
      el('button', { type: 'submit' }, ['Answer']),
      el('p', { className: 'form-error', role: 'alert', hidden: true })
    ]);
    return form;
  }

  // ---- Tool calls waiting for a person, calls in doubt (SPEC.md §4) -------------------------------------

  // A value on one line (a table cell, a hint): a string as its text, anything else as compact JSON.
  function compact(v) {
    if (typeof v === 'string') return v;
    if (v === undefined) return '';
    return JSON.stringify(v);
  }

  var SCALARS = { string: 'string', number: 'number', integer: 'number', boolean: 'boolean' };

  // The fields of a form for `args` when `parameters` is a flat object schema of scalars and `args` an object
  // holding only its properties, with values of their types: [{name, type, required, description}]; else null
  // (the arguments are edited as JSON).
  function flatFields(parameters, args) {
    if (!parameters || typeof parameters !== 'object' || parameters.type !== 'object') return null;
    var props = parameters.properties;
    if (!props || typeof props !== 'object' || Array.isArray(props)) return null;
    if (!args || typeof args !== 'object' || Array.isArray(args)) return null;
    if (Object.keys(args).some(function (k) { return !Object.prototype.hasOwnProperty.call(props, k); })) return null;
    var required = Array.isArray(parameters.required) ? parameters.required : [];
    var fields = [];
    var names = Object.keys(props);
    for (var i = 0; i < names.length; i++) {
      var name = names[i], schema = props[name];
      if (!schema || typeof schema !== 'object' || !SCALARS[schema.type]) return null;
      var v = args[name];
      if (v !== undefined && typeof v !== SCALARS[schema.type]) return null;
      if (schema.type === 'integer' && v !== undefined && !Number.isInteger(v)) return null;
      fields.push({ name: name, type: schema.type, required: required.indexOf(name) >= 0,
        description: typeof schema.description === 'string' ? schema.description : '' });
    }
    return fields;
  }

  // One labelled input for argument `f` holding `value`: typed for numbers, a choice for booleans.
  function argInput(f, value) {
    var input;
    if (f.type === 'boolean') {
      var options = (f.required ? [] : ['']).concat(['true', 'false']);
      input = el('select', {}, options.map(function (o) { return el('option', { value: o }, [o || '(none)']); }));
      input.value = value === undefined ? '' : String(value);
    } else {
      input = el('input', { type: f.type === 'string' ? 'text' : 'number' });
      if (f.type === 'integer') input.step = '1';
      if (f.type === 'number') input.step = 'any';
      input.value = value === undefined ? '' : String(value);
    }
    input.setAttribute('data-arg', f.name);
    input.setAttribute('data-type', f.type);
    var hint = f.type + (f.required ? '' : ', optional') + (f.description ? ': ' + f.description : '');
    return el('label', { className: 'arg' }, [f.name + ' ', el('span', { className: 'hint' }, ['(' + hint + ')']), input]);
  }

  // The arguments the card's form holds: {args} or {error}. An empty field of a number or an optional
  // argument is left out (the server says when it is required).
  function formArgs(form) {
    var json = form.querySelector('textarea[data-args-json]');
    if (json) {
      try { return { args: JSON.parse(json.value) }; } catch (e) {
        return { error: 'arguments: not valid JSON (' + e.message + ')' };
      }
    }
    var args = {};
    var inputs = form.querySelectorAll('[data-arg]');
    for (var i = 0; i < inputs.length; i++) {
      var input = inputs[i], name = input.dataset.arg, type = input.dataset.type, raw = input.value;
      if (raw === '' && (type !== 'string' || input.dataset.optional === 'true')) continue;
      if (type === 'string') args[name] = raw;
      else if (type === 'boolean') args[name] = raw === 'true';
      else args[name] = Number(raw);
    }
    return { args: args };
  }

  // A row of a card: a labelled field and the button that sends it.
  function decisionRow(label, hint, field, button) {
    return el('div', { className: 'decision-row' }, [
      el('label', {}, [label + ' ', el('span', { className: 'hint' }, [hint]), field]), button]);
  }

  function decisionButton(decision, text, danger) {
    return el('button', { type: 'button', className: danger ? 'danger' : '', 'data-decision': decision }, [text]);
  }

  // The card of a tool call waiting for approval (`kind` `tool_call`) or in doubt (`in_doubt`): the tool, its
  // arguments (a form to edit them, or as JSON) and a button per answer. `call` is the pending response's data.
  function toolForm(runId, responseId, kind, call) {
    call = call || {};
    var form = el('form', { className: 'tool-form', 'data-run-id': runId, 'data-response-id': responseId,
      'data-kind': kind });
    form.setAttribute('aria-label', (kind === 'in_doubt' ? 'Call in doubt: ' : 'Tool call: ') + compact(call.tool));
    var head = [ 'Tool ', el('code', { className: 'tool-name' }, [compact(call.tool)]) ];
    if (call.n !== undefined) head.push(' · call #' + compact(call.n));
    if (kind === 'in_doubt') head.push(' · started at ', timeEl(typeof call.started_at === 'string' ? call.started_at : ''));
    form.appendChild(el('p', { className: 'tool-line' }, head));
    var error = el('p', { className: 'form-error', role: 'alert', hidden: true });
    if (kind === 'in_doubt') {
      form.appendChild(el('div', { className: 'tool-args' }, [el('span', { className: 'field-name' }, ['Arguments']),
        el('pre', { className: 'value', 'data-args': '' }, [display(call.args)])]));
      form.appendChild(decisionRow('What it did', '(JSON, or plain text sent as a string: the result the model gets)',
        el('textarea', { name: 'result', rows: 2 }), decisionButton('result', 'It happened (result)')));
      form.appendChild(el('div', { className: 'decisions' }, [decisionButton('retry', 'Retry'), decisionButton('fail', 'Fail', true)]));
      form.appendChild(error);
      return form;
    }
    form.setAttribute('data-args-hash', typeof call.args_hash === 'string' ? call.args_hash : '');
    var fields = flatFields(call.parameters, call.args);
    var args = [el('legend', {}, ['Arguments'])];
    if (fields) {
      fields.forEach(function (f) {
        var label = argInput(f, call.args[f.name]);
        if (!f.required) label.querySelector('[data-arg]').setAttribute('data-optional', 'true');
        args.push(label);
      });
    } else {
      var text = el('textarea', { rows: 4, 'data-args-json': '' });
      text.value = JSON.stringify(call.args === undefined ? {} : call.args, null, 2);
      args.push(el('label', {}, ['Arguments ', el('span', { className: 'hint' }, ['(JSON)']), text]));
    }
    args.push(el('p', { className: 'hint' }, ['As the model wrote them: ', el('code', {}, [compact(call.args)])]));
    form.appendChild(el('fieldset', { className: 'tool-args' }, args));
    form.appendChild(el('div', { className: 'decisions' }, [
      decisionButton('approve', 'Approve'), decisionButton('edit', 'Approve with edits')]));
    form.appendChild(decisionRow('Message', '(with Reject: the model gets "rejected: <message>")',
      el('input', { type: 'text', name: 'message' }), decisionButton('reject', 'Reject', true)));
    form.appendChild(decisionRow('Result', '(with Respond: JSON, or plain text sent as a string; the tool is not run)',
      el('textarea', { name: 'result', rows: 2 }), decisionButton('respond', 'Respond')));
    form.appendChild(error);
    return form;
  }

  // The answer a card's button sends: {value} or {error}.
  function toolAnswer(form, decision) {
    var hash = form.dataset.argsHash;
    var withHash = function (answer) { if (hash) answer.args_hash = hash; return { value: answer }; };
    var result = function () {
      var text = form.elements.result.value;
      return text.trim() === '' ? undefined : parseValue(text);
    };
    switch (decision) {
      case 'approve': return withHash({ decision: 'approve' });
      case 'edit': {
        var a = formArgs(form);
        return a.error ? a : withHash({ decision: 'edit', args: a.args });
      }
      case 'reject': return withHash({ decision: 'reject', message: form.elements.message.value });
      case 'respond': {
        var r = result();
        return r === undefined ? { error: 'Result: write the result the model gets.' } : withHash({ decision: 'respond', result: r });
      }
      case 'result': {
        var done = result();
        return done === undefined ? { error: 'What it did: write the result the model gets.' } : { value: { result: done } };
      }
      case 'retry': return { value: 'retry' };
      case 'fail': return { value: 'fail' };
      default: return { error: 'unknown answer ' + decision };
    }
  }

  document.addEventListener('click', function (ev) {
    var button = ev.target.closest ? ev.target.closest('button[data-decision]') : null;
    var form = button && button.form;
    if (!form || !form.classList.contains('tool-form') || form.dataset.sending) return;
    var box = form.querySelector('.form-error');
    box.hidden = true;
    var answer = toolAnswer(form, button.dataset.decision);
    if (answer.error) return showMessage(box, answer.error);
    var buttons = Array.prototype.slice.call(form.querySelectorAll('button'));
    buttons.forEach(function (b) { b.disabled = true; });
    form.dataset.sending = 'true';
    var path = '/api/v1/runs/' + seg(form.dataset.runId) + '/responses/' + seg(form.dataset.responseId);
    api('POST', path, { value: answer.value }).then(function (r) {
      buttons.forEach(function (b) { b.disabled = false; });
      delete form.dataset.sending;
      if (r.status === 202) answered(form);
      else showError(box, r);
    });
  });

  // The answer to a pending response as the page shows it: a tool call's or a call in doubt's card, else the form.
  function answerFor(runId, p) {
    if (p.kind === 'tool_call' || p.kind === 'in_doubt') return toolForm(runId, p.id, p.kind, p.data);
    return answerForm(runId, p.id);
  }

  // The cards the server left for the script to draw (`data-call`: the pending response's data).
  function drawToolCards() {
    Array.prototype.slice.call(document.querySelectorAll('.tool-answer[data-call]')).forEach(function (d) {
      var call = {};
      try { call = JSON.parse(d.dataset.call) || {}; } catch (e) { call = {}; }
      d.replaceWith(toolForm(d.dataset.runId, d.dataset.responseId, d.dataset.kind, call));
    });
  }

  function answered(form) {
    var runId = form.dataset.runId;
    var item = form.closest('li');
    if (document.body.dataset.page === 'inbox' && item) {
      // The item leaves the inbox; a note links to its run.
      var link = el('a', { href: '/runs/' + seg(runId) }, ['Open run ' + runId]);
      var note = el('li', { className: 'card answered-note', 'data-run-id': runId }, [
        el('p', { className: 'done' }, ['Answered ' + form.dataset.responseId + '. ', link])
      ]);
      item.replaceWith(note);
      updateInboxEmpty();
    } else {
      form.replaceWith(el('p', { className: 'done' }, ['Answered; the run continues once every answer is in.']));
    }
  }

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (form.classList && form.classList.contains('tool-form')) { ev.preventDefault(); return; }
    if (!form.classList || !form.classList.contains('answer-form')) return;
    ev.preventDefault();
    var button = form.querySelector('button');
    var box = form.querySelector('.form-error');
    box.hidden = true;
    button.disabled = true;
    // While the answer is on its way, the inbox's refresh leaves its item in place (the server may already
    // list it as answered): the reply replaces it with the note, or shows the error next to the answer.
    form.dataset.sending = 'true';
    var path = '/api/v1/runs/' + seg(form.dataset.runId) + '/responses/' + seg(form.dataset.responseId);
    api('POST', path, { value: parseValue(form.elements.value.value) }).then(function (r) {
      button.disabled = false;
      delete form.dataset.sending;
      if (r.status === 202) answered(form);
      else showError(box, r);
    });
  });

  // Ctrl+Enter (Cmd+Enter) in an answer sends it.
  document.addEventListener('keydown', function (ev) {
    var t = ev.target;
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey) && t.form && t.form.classList.contains('answer-form')) {
      ev.preventDefault();
      t.form.requestSubmit();
    }
  });

  // ---- Runs list ----------------------------------------------------------------------------------------

  function runsPage() {
    var table = document.getElementById('runs');
    if (!table || table.dataset.live !== 'true') return;
    var status = table.dataset.status;
    var tbody = table.tBodies[0];
    function render(runs) {
      tbody.replaceChildren.apply(tbody, runs.map(function (r) {
        return el('tr', { 'data-run-id': r.run_id }, [
          el('td', {}, [el('a', { href: '/runs/' + seg(r.run_id) }, [r.run_id])]),
          el('td', {}, [r.name || '']),
          el('td', {}, [badge(r.status)]),
          el('td', {}, [(r.pending || []).join(', ')]),
          el('td', {}, [timeEl(r.updated_at)])
        ]);
      }));
      document.getElementById('runs-empty').hidden = runs.length > 0;
    }
    function tick() {
      var next = function () { setTimeout(tick, 2000); };
      if (document.hidden) return next();
      api('GET', '/api/v1/runs?limit=50' + (status ? '&status=' + seg(status) : '')).then(function (r) {
        if (r.ok && r.data && Array.isArray(r.data.runs)) render(r.data.runs);
        next();
      });
    }
    setTimeout(tick, 2000);
  }

  // ---- Run page -----------------------------------------------------------------------------------------

  function eventDetail(name, d) {
    var attempt = d.attempt > 1 ? ' (attempt ' + d.attempt + ')' : '';
    switch (name) {
      case 'agent_started': return attempt.trim();
      case 'agent_completed': return display(d.output) + attempt;
      case 'agent_failed': return display(d.error) + attempt;
      case 'tool_call':
        return [(d.tool || '') + ' #' + d.n, d.status || '', display(d.args),
          d.result !== undefined ? '→ ' + display(d.result) : '', d.error ? 'error: ' + display(d.error) : '',
          d.message ? display(d.message) : '', d.by ? 'by ' + d.by : ''].filter(Boolean).join(' ');
      case 'model_turn': return (d.model || '') + ' turn ' + d.turn;
      case 'tool_result': return (d.tool || '') + ' → ' + display(d.result);
      case 'planner_decision': return [display(d.decision), d.rationale ? display(d.rationale) : ''].join(' ').trim();
      case 'waiting_for_capacity':
        return 'model call waits for ' + (d.limit || 'capacity') + ' of ' + (d.endpoint || '') +
          (d.wait_ms ? ' (' + (d.wait_ms / 1000).toFixed(1) + ' s)' : '');
      case 'suspended': return 'waiting for ' + (d.pending || []).map(function (p) { return p.id; }).join(', ');
      case 'resumed': return 'answers ' + display(d.answers);
      case 'completed': return display(d.output);
      case 'failed': return display(d.error);
      default: return '';
    }
  }

  function runPage() {
    var root = document.getElementById('run');
    if (!root) return;
    var id = root.dataset.runId;
    var base = '/api/v1/runs/' + seg(id);
    var tbody = document.querySelector('#timeline tbody');
    var live = document.getElementById('live');
    var cancel = document.getElementById('cancel');
    var note = document.getElementById('cancel-note');
    var lastToken = null;
    var calls = document.querySelector('#calls tbody');
    var callsBox = document.getElementById('calls-box');
    var callKeys = {};

    // One row per change of a tool call (its journaled `tool_call` events): the call, its status and what
    // came with it (the arguments asked or edited, the result, the message, who decided).
    function addCall(d) {
      var key = [d.seq, d.path, compact(d.item), d.n, d.status].join('\u0000');
      if (callKeys[key]) return;
      callKeys[key] = true;
      var detail = [];
      if (d.status === 'awaiting_approval' || d.status === 'edited') detail.push(compact(d.args));
      if (d.result !== undefined) detail.push(compact(d.result));
      if (d.error) detail.push('error: ' + compact(d.error));
      if (d.message) detail.push('message: ' + compact(d.message));
      if (d.by) detail.push('by ' + compact(d.by));
      var full = detail.join(' ');
      var cell = el('td', {}, [clip(full, 300)]);
      if (full.length > 300) cell.title = clip(full, 5000);
      var path = (d.path || '') + (d.item !== undefined ? ' [item ' + display(d.item) + ']' : '');
      var agent = el('td', {}, [d.agent || '']);
      agent.title = path;
      calls.appendChild(el('tr', { 'data-status': d.status || '' }, [
        el('td', {}, [d.seq !== undefined && d.seq !== null ? String(d.seq) : '']),
        agent,
        el('td', {}, [(d.tool || '') + ' #' + d.n]),
        el('td', {}, [el('span', { className: 'call-status call-' + (d.status || '') }, [d.status || ''])]),
        cell
      ]));
      callsBox.hidden = false;
    }

    function addRow(name, d) {
      if (name === 'token') {
        if (lastToken && lastToken.path === d.path) {
          lastToken.text += d.text || '';
          lastToken.cell.textContent = lastToken.text.length > 400 ? '…' + lastToken.text.slice(-400) : lastToken.text;
          return;
        }
      }
      var full = name === 'token' ? (d.text || '') : eventDetail(name, d);
      var cell = el('td', {}, [clip(full, 300)]);
      if (full.length > 300) cell.title = clip(full, 5000);
      var path = d.path || '';
      if (d.item !== undefined) path += ' [item ' + display(d.item) + ']';
      tbody.appendChild(el('tr', { 'data-event': name }, [
        el('td', {}, [d.seq !== undefined && d.seq !== null ? String(d.seq) : '']),
        el('td', {}, [el('span', { className: 'ev ev-' + name }, [name])]),
        el('td', {}, [d.agent || '']),
        el('td', {}, [el('code', {}, [path])]),
        cell
      ]));
      lastToken = name === 'token' ? { path: d.path, cell: cell, text: full } : null;
    }

    function pendingItem(p) {
      return el('li', { className: 'card pending-item', 'data-response-id': p.id }, [
        el('p', { className: 'prompt' }, prose(p.prompt)),
        el('p', { className: 'meta-line' }, ['response ', el('code', {}, [p.id]), ' · agent ', el('code', {}, [p.agent || ''])]),
        answerFor(id, p)
      ]);
    }

    function applyRun(run) {
      document.getElementById('run-status').replaceChildren(badge(run.status));
      document.getElementById('run-name').textContent = run.name || '';
      document.getElementById('run-created').replaceChildren(timeEl(run.created_at));
      document.getElementById('run-updated').replaceChildren(timeEl(run.updated_at));
      document.getElementById('run-steps').textContent = String(run.steps === undefined ? '' : run.steps);
      var out = run.output === null || run.output === undefined;
      document.getElementById('run-output-box').hidden = out;
      document.getElementById('run-output').textContent = out ? '' : display(run.output);
      var err = run.error === null || run.error === undefined;
      document.getElementById('run-error-box').hidden = err;
      document.getElementById('run-error').textContent = err ? '' : display(run.error);

      // Pending steps: keep the items still waiting (an answer being typed stays), add the new ones.
      var list = document.getElementById('pending');
      var pending = Array.isArray(run.pending) ? run.pending : [];
      var ids = pending.map(function (p) { return p.id; });
      Array.prototype.slice.call(list.children).forEach(function (li) {
        if (ids.indexOf(li.dataset.responseId) < 0) li.remove();
      });
      pending.forEach(function (p) {
        var shown = Array.prototype.some.call(list.children, function (li) { return li.dataset.responseId === p.id; });
        if (!shown) list.appendChild(pendingItem(p));
      });
      document.getElementById('pending-box').hidden = pending.length === 0;

      var state = run.state || {};
      var keys = Object.keys(state).sort();
      var shownKeys = keys.filter(function (k) { return k.charAt(0) !== '_'; });
      document.querySelector('#state tbody').replaceChildren.apply(document.querySelector('#state tbody'),
        shownKeys.map(function (k) {
          return el('tr', {}, [el('td', {}, [el('code', {}, [k])]),
            el('td', {}, [el('pre', { className: 'value' }, [shortened(display(state[k]), run.run_id)])])]);
        }));
      document.getElementById('state-empty').hidden = shownKeys.length > 0;
      document.getElementById('state-hidden').hidden = keys.length === shownKeys.length;
      document.getElementById('state-hidden-count').textContent = String(keys.length - shownKeys.length);
      var active = run.status === 'running' || run.status === 'suspended';
      // No button for a key that may not cancel (the page leaves it out).
      if (cancel) cancel.hidden = !active;
      if (!active && note) note.textContent = '';
    }

    var refreshing = false, again = false, soon = null;
    function refresh() {
      if (refreshing) { again = true; return; }
      refreshing = true;
      api('GET', base).then(function (r) {
        if (r.ok && r.data) applyRun(r.data);
        refreshing = false;
        if (again) { again = false; refresh(); }
      });
    }
    function refreshSoon() {
      if (soon) return;
      soon = setTimeout(function () { soon = null; refresh(); }, 700);
    }

    var opened = false, ended = false;
    var source = new EventSource(base + '/events');
    source.addEventListener('open', function () {
      // A reconnection replays the journal from the start.
      if (opened) { tbody.replaceChildren(); lastToken = null; calls.replaceChildren(); callKeys = {}; }
      opened = true;
      live.textContent = 'live';
    });
    source.addEventListener('error', function () {
      if (!ended) live.textContent = source.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting…';
    });
    EVENTS.forEach(function (name) {
      source.addEventListener(name, function (e) {
        var d = {};
        try { d = JSON.parse(e.data) || {}; } catch (x) { d = {}; }
        addRow(name, d);
        if (name === 'tool_call') addCall(d);
        if (FINAL[name]) {
          ended = true;
          source.close();
          live.textContent = 'ended';
          refresh();
        } else if (name === 'suspended' || name === 'resumed') {
          refresh();
        } else if (name === 'agent_completed' || name === 'agent_failed') {
          refreshSoon();
        }
      });
    });

    if (cancel) cancel.addEventListener('click', function () {
      cancel.disabled = true;
      api('POST', base + '/cancel').then(function (r) {
        cancel.disabled = false;
        if (r.status === 202) note.textContent = 'Cancelling: the run stops at its next step.';
        else note.textContent = r.data && r.data.error ? r.data.error : 'the server answered ' + r.status;
      });
    });
  }

  // ---- Inbox --------------------------------------------------------------------------------------------

  function updateInboxEmpty() {
    var list = document.getElementById('inbox');
    var empty = document.getElementById('inbox-empty');
    if (list && empty) empty.hidden = list.querySelector('li.inbox-item') !== null;
  }

  function inboxPage() {
    var list = document.getElementById('inbox');
    if (!list) return;
    function key(runId, responseId) { return runId + '\u0000' + responseId; }
    function item(i) {
      return el('li', { className: 'card inbox-item', 'data-run-id': i.run_id, 'data-response-id': i.id }, [
        el('p', { className: 'prompt' }, prose(i.prompt)),
        el('p', { className: 'meta-line' }, ['run ', el('a', { href: '/runs/' + seg(i.run_id) }, [i.run_id]),
          ' (' + (i.name || '') + ') · response ', el('code', {}, [i.id]), ' · agent ', el('code', {}, [i.agent || '']),
          ' · waiting since ', timeEl(i.since)].concat(i.deadline ? [el('span', { className: 'deadline', 'data-deadline': i.deadline }, [
            ' · deadline ', timeEl(i.deadline), ', ', el('strong', { className: 'time-left' }, [i.time_left || '']),
            ' left (' + (i.on_timeout || '') + ' then)'])] : [])),
        answerFor(i.run_id, i)
      ]);
    }
    // Reconciles with the server's list: items answered elsewhere leave, new ones are added at the end.
    function sync(items) {
      var wanted = {};
      items.forEach(function (i) { wanted[key(i.run_id, i.id)] = i; });
      var shown = {};
      Array.prototype.slice.call(list.querySelectorAll('li.inbox-item')).forEach(function (li) {
        var k = key(li.dataset.runId, li.dataset.responseId);
        var sending = li.querySelector('form[data-sending]') !== null;
        if (!wanted[k] && !sending) li.remove();
        else shown[k] = true;
      });
      items.forEach(function (i) {
        if (!shown[key(i.run_id, i.id)]) list.appendChild(item(i));
      });
      updateInboxEmpty();
    }
    function tick() {
      var next = function () { setTimeout(tick, 2000); };
      if (document.hidden) return next();
      api('GET', '/inbox.json').then(function (r) {
        if (r.ok && r.data && Array.isArray(r.data.items)) sync(r.data.items);
        next();
      });
    }
    setTimeout(tick, 2000);
    // Deadlines count down every second, with the server's words (`2h 05m`, `4m 10s`, `42s`).
    function pad(n) { return (n < 10 ? '0' : '') + n; }
    function left(ms) {
      var s = Math.max(0, Math.floor(ms / 1000)), h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60);
      if (h > 0) return h + 'h ' + pad(m) + 'm';
      if (m > 0) return m + 'm ' + pad(s % 60) + 's';
      return (s % 60) + 's';
    }
    setInterval(function () {
      Array.prototype.slice.call(list.querySelectorAll('[data-deadline]')).forEach(function (d) {
        var t = d.querySelector('.time-left');
        if (t) t.textContent = left(Date.parse(d.dataset.deadline) - Date.now());
      });
    }, 1000);
  }

  // ---- New run ------------------------------------------------------------------------------------------

  function newRunPage() {
    var form = document.getElementById('new-run');
    if (!form) return;
    var select = form.elements.spec_name;
    var box = document.getElementById('new-run-error');
    var button = form.querySelector('button[type=submit]');
    function showInfo() {
      document.querySelectorAll('.spec-info').forEach(function (d) { d.hidden = d.dataset.spec !== select.value; });
    }
    var wanted = new URLSearchParams(location.search).get('spec');
    if (wanted !== null) select.value = wanted;
    select.addEventListener('change', showInfo);
    showInfo();
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      box.hidden = true;
      var text = form.elements.inputs.value.trim();
      var inputs;
      try { inputs = text === '' ? {} : JSON.parse(text); } catch (e) {
        return showMessage(box, 'inputs: not valid JSON (' + e.message + ')');
      }
      if (inputs === null || typeof inputs !== 'object' || Array.isArray(inputs)) {
        return showMessage(box, 'inputs: expected a JSON object, like {"topic": "dragons"}');
      }
      var body = { spec_name: select.value, inputs: inputs };
      var runId = form.elements.run_id.value.trim();
      if (runId) body.run_id = runId;
      button.disabled = true;
      api('POST', '/api/v1/runs', body).then(function (r) {
        if (r.status === 201 && r.data && typeof r.data.run_id === 'string') {
          location.assign('/runs/' + seg(r.data.run_id));
          return;
        }
        button.disabled = false;
        showError(box, r);
      });
    });
  }

  function start() {
    drawToolCards();
    runsPage();
    runPage();
    inboxPage();
    newRunPage();
    document.body.dataset.ready = '1';
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
