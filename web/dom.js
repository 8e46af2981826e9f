// DOM helpers: elements built from values (never from HTML strings), states as text + icon,
// ages, a paginated table that renders only the visible page, and a confirmation dialog.

/** `h('a', {href: '#/pools'}, 'Pools')`: an element; attributes starting with `on` are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** Orders objects by name (code-point order, as kubectl sorts; cheaper than localeCompare
 * over 10,000 rows). */
export const byName = (a, b) => cmp(a.metadata.name, b.metadata.name);
/** Code-point comparison of two strings. */
export const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/** A link to a view. */
export const link = (href, text) => h('a', { href }, text);

/** The hash URL of a view: each path segment percent-encoded, a last argument that is an
 * object the query (empty values left out) encoded by URLSearchParams.
 * `view('pool', 'a+b')` is `#/pool/a%2Bb`; `view('history', { name: 'a&b' })` is
 * `#/history?name=a%26b`. */
export function view(...parts) {
  const last = parts[parts.length - 1];
  const query = last !== null && typeof last === 'object' && !Array.isArray(last) ? parts.pop() : {};
  const segs = parts.flat().map((s) => encodeURIComponent(String(s)));
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return `#/${segs.join('/')}${qs ? `?${qs}` : ''}`;
}

/** An API URL: `base` followed by the percent-encoded `name`. */
export const apiUrl = (base, name) => `${base}/${encodeURIComponent(name)}`;

/** Node states: class and icon. The Paused icon is drawn by CSS (`.i-pause`): the ⏸ glyph is
 * missing from common fonts. */
const STATES = {
  Done: ['ok', '✔'],
  Working: ['busy', '⟳'],
  Degraded: ['bad', '✖'],
  Unreconcilable: ['bad', '✖'],
  Paused: ['warn', ''],
  Unknown: ['none', '?'],
};

/** A state shown with an icon and its word, coloured too but never by colour alone. */
export function badge(state, kind = STATES[state] ? STATES[state][0] : 'none', icon = STATES[state] ? STATES[state][1] : '•') {
  const mark = state === 'Paused' && !icon ? h('span', { class: 'i-pause' }) : icon;
  return h('span', { class: `badge ${kind}` }, h('span', { 'aria-hidden': 'true' }, mark), ' ', state || 'Unknown');
}

/** Whether a condition type reports a failure when True (`Degraded`, `NodeDegraded`,
 * `RenderDegraded`, …: MCO's pool conditions, mco-facts "Pool status"). */
export const isFailureCondition = (type) => /Degraded$/.test(type);

/** A condition's status with the icon of its meaning: a failure condition True is bad (✖) and
 * False fine (✔); `Updating` True is in progress (⟳); any other condition True is good (✔);
 * False of a non-failure condition and Unknown are neutral. */
export function condBadge(type, status) {
  if (status !== 'True' && status !== 'False') return badge(status || 'Unknown', 'none', '?');
  if (isFailureCondition(type)) return status === 'True' ? badge('True', 'bad', '✖') : badge('False', 'ok', '✔');
  if (type === 'Updating') return status === 'True' ? badge('True', 'busy', '⟳') : badge('False', 'none', '–');
  return status === 'True' ? badge('True', 'ok', '✔') : badge('False', 'none', '–');
}

/** Kubernetes-style age (`5s`, `3m`, `2h`, `4d`) of an RFC 3339 time, at `now` (ms). */
export function ageText(t, now = Date.now()) {
  if (!t) return '';
  const s = Math.max(0, Math.floor((now - Date.parse(t)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** An age as an element. Without `now` it is the age now, and a timer (`refreshAges`) keeps it
 * current between events; with `now` (a past moment) it is fixed. */
export function age(t, now) {
  if (!t) return '';
  if (now !== undefined) return ageText(t, now);
  return h('span', { 'data-since': t }, ageText(t));
}

/** Refreshes every live age on the page (display only: no request). */
export function refreshAges() {
  const now = Date.now();
  for (const el of document.querySelectorAll('[data-since]')) {
    const t = ageText(el.dataset.since, now);
    if (el.textContent !== t) el.textContent = t;
  }
}

/** Shortens a rendered config name for tables (the full name is the title). */
export function short(name) {
  if (!name) return h('span', { class: 'muted' }, '—');
  const m = /^(rendered-.+-)([0-9a-f]{32})$/.exec(name);
  return h('span', { title: name, class: 'mono' }, m ? `${m[1]}${m[2].slice(0, 8)}…` : name);
}

/** `items` as a table with `columns` (`[header, row => cell, row => sort key]`; a column with a
 * key sorts by it: its header is a button, ascending then descending, `aria-sort` saying so),
 * `pageSize` rows a page, an optional text filter on the name and an optional filter by state
 * (`states: {label, of: row => state, values}`); only the visible page is in the DOM (10,000
 * rows stay responsive: the keys are computed once per draw, the sort is stable, ties keep the
 * caller's order). `initial` (`{sort: HEADER, dir: 1 | -1, state, query}`) is the sort and
 * the filters to start with (a value that is not a sortable header or a state is ignored);
 * `onChange(that same shape)` is called after each choice of the user's (the nodes view keeps
 * them in its URL). Returns `{el, update(items)}`; `update` keeps the page, the sort and the
 * filters. */
export function pagedTable({ label, columns, pageSize = 50, filter = true, rowClass = () => '', states = null, initial = {}, onChange = null }) {
  let items = [];
  let page = 0;
  let query = filter ? String(initial.query || '').trim() : '';
  let state = states && states.values.includes(initial.state) ? initial.state : '';
  let sortCol = columns.findIndex(([c, , key]) => key && c === initial.sort);
  let sortDir = sortCol >= 0 && initial.dir === -1 ? -1 : 1;
  const chosen = () => { if (onChange) onChange({ sort: sortCol >= 0 ? columns[sortCol][0] : '', dir: sortDir, state, query }); };
  const caption = h('caption', {}, label);
  const heads = columns.map(([c, , key], i) => h('th', { scope: 'col', 'aria-sort': !key ? null : i !== sortCol ? 'none' : sortDir > 0 ? 'ascending' : 'descending' },
    key ? h('button', { type: 'button', class: 'sort', 'data-col': c, onclick: () => sortBy(i) }, c) : c));
  const thead = h('thead', {}, h('tr', {}, heads));
  const tbody = h('tbody');
  const info = h('span', { class: 'muted', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', onclick: () => { page--; draw(); } }, '← Previous');
  const next = h('button', { type: 'button', onclick: () => { page++; draw(); } }, 'Next →');
  const search = filter
    ? h('input', {
        type: 'search', placeholder: 'Filter by name', 'aria-label': `Filter ${label}`, value: query,
        oninput: (e) => { query = e.target.value.trim(); page = 0; draw(); chosen(); },
      })
    : null;
  const stateSelect = states
    ? h('select', { class: 'state-filter', 'aria-label': `${states.label} of ${label}`, onchange: (e) => { state = e.target.value; page = 0; draw(); chosen(); } },
      h('option', { value: '' }, `any ${states.label.toLowerCase()}`), states.values.map((v) => h('option', { value: v, selected: v === state }, v)))
    : null;
  const el = h('div', { class: 'paged' },
    h('div', { class: 'toolbar' }, search, stateSelect, prev, next, info),
    h('table', {}, caption, thead, tbody));
  function sortBy(i) {
    if (sortCol === i) sortDir = -sortDir; else { sortCol = i; sortDir = 1; }
    heads.forEach((th, j) => { if (columns[j][2]) th.setAttribute('aria-sort', j !== sortCol ? 'none' : sortDir > 0 ? 'ascending' : 'descending'); });
    page = 0;
    draw();
    chosen();
  }
  function draw() {
    const t0 = performance.now();
    let shown = query ? items.filter((o) => o.metadata.name.includes(query)) : items;
    if (state) shown = shown.filter((o) => states.of(o) === state);
    if (sortCol >= 0) {
      const key = columns[sortCol][2];
      shown = shown.map((o) => [String(key(o) ?? ''), o]).sort((a, b) => cmp(a[0], b[0]) * sortDir).map((p) => p[1]);
    }
    const pages = Math.max(1, Math.ceil(shown.length / pageSize));
    page = Math.min(Math.max(page, 0), pages - 1);
    const rows = shown.slice(page * pageSize, (page + 1) * pageSize).map((o) =>
      h('tr', { class: rowClass(o), 'data-name': o.metadata.name }, columns.map(([, f]) => h('td', {}, f(o)))));
    tbody.replaceChildren(...rows);
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
    const ms = performance.now() - t0;
    info.textContent = `${shown.length} of ${items.length} · page ${page + 1} of ${pages}`;
    el.dataset.renderMs = ms.toFixed(1);
    el.dataset.shown = String(shown.length);
    window.__mcoRenderMs = ms;
  }
  return { el, update(list) { items = list; draw(); } };
}

/** Asks for explicit confirmation in a modal dialog; resolves true only on "Confirm". */
export function confirmDialog(title, ...body) {
  return new Promise((resolve) => {
    // Confirm is the form's only submit button, so Enter in a field confirms; Cancel and Escape
    // close without confirming.
    const ok = h('button', { type: 'submit', value: 'ok', class: 'danger' }, 'Confirm');
    const cancel = h('button', { type: 'button', onclick: () => dlg.close('cancel') }, 'Cancel');
    const dlg = h('dialog', { 'aria-labelledby': 'dlg-title', id: 'confirm' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'dlg-title' }, title), ...body,
        h('div', { class: 'actions' }, cancel, ok)));
    dlg.addEventListener('close', () => { resolve(dlg.returnValue === 'ok'); dlg.remove(); });
    document.body.append(dlg);
    dlg.showModal();
    // The first field (the reason) when the dialog asks for one, else Confirm.
    (dlg.querySelector('input, textarea, select') || ok).focus();
  });
}

/** An error shown in place, with the server's message (or that it could not be reached). */
export const errorBox = (e) => h('p', { class: 'error', role: 'alert' }, '✖ ', failure(e, false));

/** The message of a failed request: the server's Status message, or, when no answer came (a
 * `TypeError` from fetch), that the server could not be reached or did not answer (a write may
 * or may not have been applied: the answer was lost, so the user is told to check). */
export const failure = (e, write = true) => (e instanceof TypeError
  ? `the server could not be reached or did not answer (${e.message})${write ? ': check whether it was applied before trying again' : ': reload the view once it is back'}`
  : e.message || String(e));

/** The error of an action the user took (`what`: "Pause of pool worker"), kept until the user
 * dismisses it: views that redraw on live events put it in a container they never redraw. */
export function actionError(what, e) {
  const box = h('div', { class: 'action-error', role: 'alert' },
    h('p', { class: 'error' }, `✖ ${what} failed: `, failure(e)),
    h('button', { type: 'button', class: 'dismiss', onclick: () => box.remove() }, 'Dismiss'));
  return box;
}

/** Places the marks of a lane (the rollout timeline's, web/rollout.js; the time slider's strip,
 * web/history.js), its children in time order, so that none overlaps another: each as near its
 * time as it can stand (`data-f`, 0 at the start, 1 at the last mark), a mark too close to
 * the one before pushed right, and the last ones pushed back left from the lane's end; the
 * lane keeps every mark inside it. Positions are pixels of the lane's width now (a
 * ResizeObserver places them again when it changes). */
export function placeMarks(lane) {
  const marks = [...lane.children];
  const w = lane.clientWidth;
  const ws = marks.map((m) => m.getBoundingClientRect().width);
  const left = marks.map((m, i) => Number(m.dataset.f) * (w - ws[i]));
  for (let i = 1; i < marks.length; i++) left[i] = Math.max(left[i], left[i - 1] + ws[i - 1]);
  for (let i = marks.length - 1; i >= 0; i--) left[i] = Math.max(0, Math.min(left[i], (i + 1 < marks.length ? left[i + 1] : w) - ws[i]));
  // CSSOM, not a style attribute: the CSP allows no inline styles.
  marks.forEach((m, i) => { m.style.left = `${left[i].toFixed(1)}px`; });
}
