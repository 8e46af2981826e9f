// Views over the event log (history.mco.dev/v1): the timeline, attributed diffs, rollback with
// its dry-run preview, and the fleet as of an earlier moment (time-travel reads).
import { api, getJSON, send, historyEvents, Informer, can } from './api.js';
import { h, link, short, confirmDialog, errorBox, actionError, byName, pagedTable, view, apiUrl, placeMarks } from './dom.js';
import { cond, nodeInfo, poolOf, isBad } from './fleet.js';
import { poolsTable, nodeColumns, notFound, eventRow, EVENT_HEADERS } from './tables.js';

/** A form whose fields become the view's query string (so a filtered view is a shareable URL);
 * values are trimmed. */
function queryForm(viewName, fields, q, submitText) {
  const inputs = fields.map(([name, label, opts = {}]) => {
    const id = `f-${name}`;
    const input = opts.options
      ? h('select', { id, name }, opts.options.map((o) => h('option', { value: o, selected: q.get(name) === o }, o || '(any)')))
      : h('input', { id, name, type: opts.type || 'text', value: q.get(name) || '', placeholder: opts.placeholder || '', list: opts.list });
    return h('label', { for: id }, label, ' ', input);
  });
  return h('form', {
    class: 'filters',
    onsubmit: (e) => {
      e.preventDefault();
      const p = {};
      for (const el of e.target.elements) if (el.name && el.value.trim()) p[el.name] = el.value.trim();
      location.hash = view(viewName, p);
    },
  }, inputs, h('button', { type: 'submit' }, submitText));
}

// ---- History ----

/** Suggestions for the event type filter (any type the log holds is accepted). */
const EVENT_TYPES = ['MachineConfigCreated', 'MachineConfigUpdated', 'MachineConfigDeleted', 'RenderedConfigGenerated',
  'PoolCreated', 'PoolUpdated', 'PoolDeleted', 'PoolConfigurationSet', 'PoolStatusUpdated', 'PoolSelectingAll',
  'NodeRegistered', 'NodeUpdated', 'NodeDeleted', 'NodeStatusUpdated', 'NodeDesiredConfigSet', 'NodeStateChanged',
  'NodeDrainRequested', 'NodeDrained', 'NodeCordoned', 'NodeUncordoned'];

const KINDS = ['', 'MachineConfig', 'MachineConfigPool', 'Node', 'KubeletConfig', 'ContainerRuntimeConfig'];

export async function historyView(ctx, q) {
  const root = ctx.root;
  ctx.title('History');
  root.append(h('h1', {}, 'History'),
    h('datalist', { id: 'event-types' }, EVENT_TYPES.map((t) => h('option', { value: t }))),
    queryForm('history', [
      ['kind', 'Kind', { options: KINDS }], ['name', 'Name'], ['pool', 'Pool'], ['actor', 'Actor', { placeholder: 'admin, system:node:worker-0, controller:render' }],
      ['type', 'Event type', { placeholder: 'MachineConfigUpdated', list: 'event-types' }],
      ['since', 'Since', { placeholder: 'RFC 3339 or rv:N' }], ['until', 'Until', { placeholder: 'RFC 3339 or rv:N' }],
      ['order', 'Order', { options: ['newest', 'oldest'] }],
    ], q, 'Show'));
  // A field selector's terms are separated by commas and split at `=`: a value holding either
  // would change the query, so it is refused by name (object names never hold them).
  const FILTERS = [['kind', 'object.kind', 'Kind'], ['name', 'object.name', 'Name'], ['pool', 'pool', 'Pool'], ['actor', 'actor', 'Actor'], ['type', 'type', 'Event type']];
  const value = (k) => (q.get(k) || '').trim();
  const refused = FILTERS.filter(([k]) => /[,=]/.test(value(k)));
  if (refused.length) {
    root.append(h('p', { class: 'error', role: 'alert', id: 'filter-error' }, '✖ ', refused.map(([k, , label]) =>
      `${label} "${value(k)}" cannot be matched: a comma or "=" would add a term to the field selector (no object name holds one). `)));
    ctx.notLive('static');
    return;
  }
  const sel = FILTERS.filter(([k]) => value(k)).map(([k, f]) => `${f}=${value(k)}`).join(',');
  // Newest first unless `order=oldest`: the first page is the head of the log.
  const newest = q.get('order') !== 'oldest';
  const tbody = h('tbody');
  root.append(h('table', { id: 'history' }, h('caption', {}, `Events, ${newest ? 'newest' : 'oldest'} first`),
    h('thead', {}, h('tr', {}, EVENT_HEADERS.map((c) => h('th', { scope: 'col' }, c)))), tbody));
  let follow = null;
  let left = false;
  ctx.onLeave(() => { left = true; if (follow) follow.stop(); });
  // The page is in the URL (`continue`, the server's token): each page is shareable.
  const cont = q.get('continue') || '';
  const here = Object.fromEntries([...q.entries()].filter(([k]) => k !== 'continue'));
  // `limit` (1–500, default 100): the page size, kept in the URL like the page.
  const limit = Math.min(500, Math.max(1, Math.floor(Number(q.get('limit'))) || 100));
  const loading = h('p', { class: 'muted loading', id: 'history-loading', role: 'status' }, 'Loading events…');
  root.append(loading);
  let r;
  try {
    r = await historyEvents({ selector: sel, since: value('since'), until: value('until'), limit, cont, order: newest ? 'newest' : '' });
  } finally { loading.remove(); }
  tbody.append(...r.items.map(eventRow));
  const next = (r.metadata || {}).continue || '';
  root.append(h('p', { class: 'pager' },
    cont ? link(view('history', here), newest ? '⇤ Newest' : '⇤ First page') : null, cont && next ? ' · ' : null,
    next ? h('a', { href: view('history', { ...here, continue: next }), id: 'history-next' }, `${newest ? 'Older' : 'Next'} ${limit} →`) : null));
  const live = h('p', { class: 'muted', id: 'history-live', hidden: true },
    `● new events appear ${newest ? 'at the top' : 'below'} as they are logged`);
  root.append(live);
  // The page holding the head of an open-ended query (the first newest first, the last oldest
  // first) follows the log: a watch of the same filter from where the list ended.
  const atHead = newest ? !cont : !next;
  if (atHead && !value('until') && !left) {
    const p = new URLSearchParams();
    if (sel) p.set('fieldSelector', sel);
    const inf = new Informer(`${api.history}/events?${p}`, { from: r.metadata.resourceVersion });
    follow = inf;
    ctx.follows(inf);
    const shown = new Set(r.items.map((e) => String(e.seq)));
    inf.subscribe((items) => {
      for (const [k, e] of items) {
        if (shown.has(k)) continue;
        shown.add(k);
        if (newest) tbody.prepend(eventRow(e)); else tbody.append(eventRow(e));
      }
    });
    live.hidden = false;
  } else if (!left) {
    ctx.notLive(atHead ? 'not live: a closed time range' : 'not live: past page');
  }
}

// ---- Diff ----

const side = (s) => (s ? h('div', { class: 'side' },
  h('strong', {}, s.source || '(unattributed)'),
  s.changedBy ? [' — last changed by ', h('b', {}, s.changedBy.actor), ` at ${s.changedBy.time} (rv ${s.changedBy.resourceVersion}, ${s.changedBy.event})`,
    s.changedBy.reason ? [' ', h('q', {}, s.changedBy.reason)] : null] : null,
  s.value ? h('div', { class: 'muted' }, s.value) : null) : h('div', { class: 'side muted' }, '(absent)'));

/** A unified diff laid out side by side: removed lines left, added right, context on both. */
function sideBySide(unified, label) {
  const rows = [];
  let minus = [];
  let plus = [];
  const flush = () => {
    for (let i = 0; i < Math.max(minus.length, plus.length); i++) {
      rows.push(h('tr', {}, h('td', { class: minus[i] !== undefined ? 'del' : '' }, minus[i] !== undefined ? `− ${minus[i]}` : ''),
        h('td', { class: plus[i] !== undefined ? 'add' : '' }, plus[i] !== undefined ? `+ ${plus[i]}` : '')));
    }
    minus = []; plus = [];
  };
  for (const line of unified.split('\n')) {
    if (line.startsWith('---') || line.startsWith('+++')) continue;
    if (line.startsWith('@@')) { flush(); rows.push(h('tr', { class: 'hunk' }, h('td', { colspan: 2 }, line))); continue; }
    if (line.startsWith('-')) minus.push(line.slice(1));
    else if (line.startsWith('+')) plus.push(line.slice(1));
    else { flush(); if (line) rows.push(h('tr', {}, h('td', {}, `  ${line.slice(1)}`), h('td', {}, `  ${line.slice(1)}`))); }
  }
  flush();
  return h('table', { class: 'sbs mono' }, h('caption', {}, label), h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'before'), h('th', { scope: 'col' }, 'after'))), h('tbody', {}, rows));
}

export function diffTable(d) {
  return h('div', { id: 'diff' },
    h('p', {}, short(d.from), ' → ', short(d.to), ` · ${d.items.length} changed item(s)`),
    d.items.map((it) => h('section', { class: `diff-item ${it.change}` },
      h('h3', {}, `${it.section} ${it.name}: ${it.change}`, it.fields && it.fields.length ? ` (${it.fields.join(', ')})` : ''),
      h('div', { class: 'sides' }, h('div', {}, h('span', { class: 'muted' }, 'before: '), side(it.from)),
        h('div', {}, h('span', { class: 'muted' }, 'after: '), side(it.to))),
      it.unified ? sideBySide(it.unified, `Changes to ${it.section} ${it.name}, before and after`) : null)));
}

export async function diffView(ctx, q) {
  const root = ctx.root;
  ctx.title('Diff');
  const renders = [...(await synced(ctx.mcs())).values()].map((m) => m.metadata.name).filter((n) => n.startsWith('rendered-')).sort();
  root.append(h('h1', {}, 'Diff'),
    h('datalist', { id: 'renders' }, renders.map((r) => h('option', { value: r }))),
    h('p', { class: 'muted' }, 'Two rendered configs by name, or one pool at two moments (RFC 3339 time or rv:N; "to" defaults to now).'),
    queryForm('diff', [['from', 'From', { list: 'renders' }], ['to', 'To', { list: 'renders' }], ['pool', 'Pool'], ['node', 'Node']], q, 'Compare'));
  const p = new URLSearchParams();
  for (const k of ['from', 'to', 'pool', 'node']) if (q.get(k)) p.set(k, q.get(k));
  if (!q.get('from')) {
    const pool = (q.get('pool') || '').trim();
    // A pool alone (the pool page's Diff link): its last change, between its two newest renders.
    if (!pool || /[,=]/.test(pool)) return;
    const own = ownRender(pool);
    const r = await historyEvents({ selector: `pool=${pool},type=RenderedConfigGenerated`, limit: 50, order: 'newest' });
    const names = [...new Set(r.items.map((e) => e.object.name).filter((n) => own.test(n)))];
    if (names.length < 2) {
      root.append(h('p', { class: 'muted', id: 'diff-none' }, `Pool ${pool} has ${names.length ? 'one render' : 'no render'} in the retained history: there is no change to show. Choose two renders above.`));
      return;
    }
    root.append(h('p', { id: 'diff-last' }, `The last change of pool ${pool}: its render before and its newest.`));
    p.delete('pool');
    p.set('from', names[1]);
    p.set('to', names[0]);
  }
  root.append(diffTable(await getJSON(`${api.history}/diffs?${p}`)));
}

/** The names of a pool's own renders (`rendered-POOL-<32 hex>`), not another pool's whose name
 * extends it (`rendered-worker-gpu-…`). Pool names are `[a-z0-9.-]`. */
const ownRender = (pool) => new RegExp(`^rendered-${pool.replace(/\./g, '\\.')}-[0-9a-f]{32}$`);

// ---- Rollback ----

export async function rollbackView(ctx, pool, q) {
  const root = ctx.root;
  ctx.title(`Roll back ${pool}`);
  let poolObj;
  try {
    poolObj = await getJSON(apiUrl(api.pools(), pool));
  } catch (e) {
    if (e.status !== 404) throw e;
    root.append(h('h1', {}, `Roll back pool ${pool}`), notFound('machineconfigpools', pool));
    return;
  }
  // Even the dry-run preview creates a rollback: offered only to identities that may.
  if (!(await can('create', 'history.mco.dev', 'rollbacks'))) {
    root.append(h('h1', {}, `Roll back pool ${pool}`),
      h('p', { class: 'error', role: 'alert', id: 'rb-forbidden' },
        '✖ This token may not roll back (create rollbacks.history.mco.dev), not even as a dry run: an admin token can. ',
        link(view('pool', pool), `Pool ${pool}`)));
    return;
  }
  const current = ((poolObj.spec || {}).configuration || {}).name || '';
  // Pool names are DNS subdomains: no comma or `=` can extend the selector.
  // The newest 500 renders, read oldest first below.
  const r = await historyEvents({ selector: `pool=${pool},type=RenderedConfigGenerated`, limit: 500, order: 'newest' });
  r.items.reverse();
  // The pool's renders, each once (the newest event that produced it); not another pool's
  // whose name extends this one (`rendered-worker-gpu-…`).
  const own = ownRender(pool);
  const byRender = new Map();
  for (const e of r.items) if (own.test(e.object.name)) { byRender.delete(e.object.name); byRender.set(e.object.name, e); }
  const renders = [...byRender.values()];
  const prior = renders.filter((e) => e.object.name !== current);
  const preview = h('div', { id: 'preview', 'aria-live': 'polite' });
  const follow = h('div', { id: 'follow' });
  const select = h('select', { id: 'rb-to', name: 'to' },
    renders.slice().reverse().map((e) => h('option', { value: e.object.name, disabled: e.object.name === current, selected: q.get('to') === e.object.name },
      `${e.object.name} (rv ${e.seq}, ${e.time})${e.object.name === current ? ' — current' : ''}`)));
  const force = h('input', { type: 'checkbox', id: 'rb-force' });
  const previewBtn = h('button', { type: 'submit', id: 'rb-preview', disabled: !prior.length }, 'Preview (dry run)');
  root.append(h('h1', {}, `Roll back pool ${pool}`),
    h('p', {}, 'Currently targeting ', current ? link(view('mc', current), current) : '—', '.'),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); doPreview(); } },
      h('label', { for: 'rb-to' }, 'Prior render ', select),
      h('label', { for: 'rb-force' }, force, ' also change other pools these MachineConfigs feed'),
      previewBtn),
    h('div', {}, prior.length ? null : h('p', { class: 'error', role: 'alert', id: 'rb-none' },
      `✖ No prior render of pool ${pool} remains in the retained history (the log was compacted, or the pool has had one render): there is nothing to roll back to.`)),
    preview, follow);
  // What was previewed, exactly as the confirmation applies it; any change to the form drops it.
  let plan = null;
  let previewed = null;
  let seq = 0;
  const invalidate = () => {
    seq++;
    if (!plan && !preview.firstChild) return;
    plan = null;
    previewed = null;
    preview.replaceChildren(h('p', { class: 'muted', id: 'rb-stale' }, 'The form changed: preview again before rolling back.'));
  };
  select.addEventListener('change', invalidate);
  force.addEventListener('change', invalidate);
  async function doPreview() {
    const asked = { to: select.value, force: force.checked };
    const mine = ++seq;
    plan = null;
    previewed = null;
    preview.replaceChildren(h('p', { class: 'muted' }, 'Previewing…'));
    try {
      const p = await send('POST', `${api.history}/rollbacks`, { pool, ...asked, dryRun: true });
      if (mine !== seq) return; // the form changed meanwhile
      const changes = p.impact.pools.filter((pi) => pi.rendered !== pi.current || pi.nodes.length);
      // As `mco rollback`: no step means the sources are already as they were.
      if (!p.steps.length || !changes.length) {
        preview.replaceChildren(planView(p), h('p', { class: 'ok', id: 'rb-nothing' },
          `✔ Nothing would change: ${!p.steps.length ? 'the sources are already as they were' : 'no pool would change'}. There is nothing to roll back.`));
        return;
      }
      plan = p;
      previewed = asked;
      const needsForce = !!p.warning && !asked.force;
      preview.replaceChildren(planView(p),
        h('div', {}, needsForce ? h('p', { class: 'error', id: 'rb-needs-force' },
          '✖ This rollback changes other pools too: tick "also change other pools these MachineConfigs feed" and preview again to roll back.') : null),
        h('button', { type: 'button', id: 'rb-apply', class: 'danger', disabled: needsForce, onclick: apply }, 'Roll back…'));
    } catch (e) { if (mine === seq) preview.replaceChildren(errorBox(e)); }
  }
  async function apply() {
    if (!plan) return;
    const p = plan;
    const asked = previewed;
    const reason = h('input', { type: 'text', id: 'rb-reason', name: 'reason' });
    const effects = p.impact.pools.map((pi) => h('li', {}, pi.paused
      ? `pool ${pi.pool} is paused: its ${pi.nodes.length} node(s) will be updated when it is resumed`
      : `pool ${pi.pool}: ${pi.nodes.length} node(s) will be updated, in waves of at most ${pi.maxUnavailable}`));
    const ok = await confirmDialog(`Roll back pool ${pool}?`,
      h('p', {}, `The pool's MachineConfigs are restored to what they were when ${p.target} was produced, as previewed.`),
      h('ul', {}, effects),
      h('label', {}, 'Reason (recorded in the history) ', reason));
    if (!ok || plan !== p) return;
    try {
      const done = await send('POST', `${api.history}/rollbacks`, { pool, to: asked.to, force: asked.force },
        { reason: reason.value.trim() });
      plan = null;
      preview.querySelector('#rb-apply')?.remove();
      preview.append(h('p', { class: 'ok', id: 'rb-applied' }, `✔ applied at resourceVersion ${done.resourceVersion}; following the rollout:`));
      // Only while this view is shown (its watches end with it).
      if (ctx.root === root) followRollout(ctx, pool, follow);
    } catch (e) { preview.append(actionError(`Rollback of pool ${pool}`, e)); }
  }
}

function planView(p) {
  return h('section', { class: 'plan' },
    h('h2', {}, `Preview: ${p.current} → ${p.target}`),
    p.warning ? h('p', { class: 'error', role: 'alert' }, '⚠ ', p.warning) : null,
    h('ul', {}, p.steps.map((s) => h('li', {}, `${s.action} ${s.kind.toLowerCase()}/${s.name}`))),
    h('p', {}, 'The restored sources render ', h('code', {}, p.predicted)),
    p.impact.pools.map((pi) => h('div', {},
      h('h3', {}, `pool ${pi.pool}: `, short(pi.current), ' → ', short(pi.rendered), pi.paused ? ' (paused: its nodes update when it is resumed)' : ''),
      h('ul', {}, pi.nodes.map((n) => h('li', {}, h('b', {}, n.node), n.drain || n.reboot ? ` (${[n.drain && 'drain', n.reboot && 'reboot'].filter(Boolean).join(' and ')})` : ' (no drain, no reboot)',
        ': ', n.changes.join(', ')))),
      policyNote(pi),
      h('ol', {}, pi.waves.map((w, i) => h('li', {}, waveText(pi, w, i)))))));
}

// The pool's RolloutPolicy in a preview: its window now (and that the rollout waits for it).
function policyNote(pi) {
  const pol = pi.policy;
  if (!pol || pi.paused) return null;
  const notes = [];
  if (pol.resumesPool) notes.push(`rolloutpolicy/${pol.name} resumes the pool it paused for ${pol.pausedFor}'s failed canary`);
  for (const n of pol.heals ?? []) notes.push(`node ${n} (Degraded on another render) is returned to ${pi.rendered} by the self-healing of rolloutpolicy/${pol.name}`);
  if (pol.window) notes.push(`rolloutpolicy/${pol.name}: ${pol.window}${pol.waitsForWindow ? '; nothing rolls out until then' : ''}`);
  if (!notes.length) return null;
  return h('ul', { class: pol.waitsForWindow ? 'warn policy' : 'policy' }, notes.map((t) => h('li', {}, t)));
}

// One wave of a preview: the canary wave is named, and the bake time follows its last wave.
function waveText(pi, w, i) {
  const canaries = pi.policy?.canaryWaves ?? 0;
  const text = `wave ${i + 1} (${i < canaries ? 'canary, ' : ''}maxUnavailable ${pi.maxUnavailable}): ${w.join(', ')}`;
  return i + 1 === canaries && canaries < pi.waves.length
    ? `${text}; then the canaries bake ${pi.policy.bakeTime} before the rest`
    : text;
}

function followRollout(ctx, pool, el) {
  const head = h('div');
  let pools = [];
  const table = pagedTable({ label: `Nodes of pool ${pool}`, columns: nodeColumns(() => pools), filter: false });
  el.replaceChildren(head, table.el);
  ctx.watch(ctx.pools(), (items) => { pools = [...items.values()]; const p = items.get(pool); if (p) head.replaceChildren(poolsTable([p], `Pool ${pool}`)); });
  ctx.watch(ctx.nodes(), (items) => table.update([...items.values()].filter((n) => poolOf(n, pools) === pool)));
}

// ---- The fleet at an earlier moment ----

/** The kind of a MachineConfig write on the time slider: a rollback's (its detail is
 * `rollback of pool P to R`, src/api/rollbacks.rs) or an apply. */
const apply = (e) => (/^rollback of pool /.test(e.detail || '') ? 'rollback' : 'apply');
const MARK_ICONS = { render: '◆', apply: '✎', rollback: '⟲', degraded: '✖' };

/** The keys the time slider handles itself: Page Up an hour later, Page Down an hour earlier. */
const HOUR_KEYS = { PageUp: 1, PageDown: -1 };

export async function pastView(ctx, q) {
  const root = ctx.root;
  ctx.title('The past');
  ctx.notLive('not live: the past');
  document.body.classList.add('past');
  const stats = await getJSON(`${api.history}/store/stats`);
  const newest = Number((await getJSON(api.pools())).metadata.resourceVersion);
  // The oldest readable moment: 0 (before the first event) until the log is compacted, then
  // the state the compaction kept (its own event is gone).
  const oldest = Math.max(0, Number(stats.oldestResourceVersion || 0));
  const asOf = (q.get('asOf') || '').trim();
  const rv0 = Number(q.get('rv') || newest);
  if (!Number.isInteger(rv0) || rv0 < 0) throw new Error(`rv "${q.get('rv')}" is not a resourceVersion (a whole number)`);
  // Marks where renders happened (the newest 200): Chromium draws a datalist as ticks.
  const marks = h('datalist', { id: 'slider-marks' });
  const slider = h('input', {
    type: 'range', id: 'slider', min: oldest, max: newest, value: rv0, step: 1, list: 'slider-marks',
    'aria-label': 'resourceVersion: arrow keys one event, Page Up / Page Down one hour',
  });
  const out = h('output', { for: 'slider', id: 'slider-rv' }, `rv ${rv0}`);
  // The time axis: the time at five evenly spaced resourceVersions of the slider's range.
  const ticks = [0, 1, 2, 3, 4].map((k) => Math.round(oldest + ((newest - oldest) * k) / 4));
  const axis = h('div', { class: 'axis muted', id: 'slider-axis' }, ticks.map((rv) => h('span', { 'data-rv': rv }, '')));
  // The marks drawn along the slider, each at its resourceVersion, by kind (icon and colour).
  const strip = h('div', { class: 'strip', id: 'slider-strip', 'aria-hidden': 'true' });
  const when = h('input', { type: 'text', id: 'as-of', value: asOf, placeholder: '2026-12-01T03:00:00Z' });
  const loading = h('p', { class: 'muted loading', id: 'past-loading', role: 'status', hidden: true });
  const events = h('ul', { class: 'marks', id: 'slider-events', 'aria-label': 'Where things happened, newest first' });
  const body = h('div', { 'aria-live': 'polite' });
  root.append(h('div', { class: 'past-banner', role: 'status' }, '⟲ The past — read-only: the fleet as it was at the moment chosen below.'),
    h('h1', {}, 'The fleet at an earlier moment'),
    h('div', { class: 'filters' }, h('div', { class: 'slider-box' }, h('label', { for: 'slider' }, `resourceVersion ${oldest}–${newest} `), slider, strip, marks, axis), out,
      h('form', { onsubmit: (e) => { e.preventDefault(); show({ asOf: when.value.trim() }); } },
        h('label', { for: 'as-of' }, 'or a time ', when), h('button', { type: 'submit' }, 'Go'))),
    h('details', {}, h('summary', {}, 'Where things happened'), events),
    loading, body);
  // The ends of the time axis, and the marks: display only, failures leave them blank.
  const timeOf = (n) => (n > 0 ? getJSON(`${api.history}/events/${n}`).then((e) => e.time, () => '') : Promise.resolve(''));
  Promise.all(ticks.map((rv) => timeOf(Math.max(rv, oldest + 1, 1)))).then((times) => {
    times.forEach((t, k) => {
      // The date once, then the time of day (UTC).
      const text = !t ? '' : k === 0 || times[k - 1].slice(0, 10) !== t.slice(0, 10) ? t.replace('T', ' ').slice(0, 19) : t.slice(11, 19);
      axis.children[k].textContent = text;
      axis.children[k].title = t ? `rv ${ticks[k]}: ${t}` : '';
    });
  });
  // Marks where things happened (the newest 200 of each kind): renders, applies (a
  // MachineConfig created, changed or deleted; a rollback's are rollbacks) and degradations.
  // Chromium draws the datalist as ticks; the newest 30 are also listed as links.
  const kinds = [
    ['RenderedConfigGenerated', () => 'render'],
    ['MachineConfigCreated', apply], ['MachineConfigUpdated', apply], ['MachineConfigDeleted', apply],
    ['NodeStateChanged', (e) => {
      const state = ((((e.object || {}).body || {}).metadata || {}).annotations || {})[api.key('state')];
      return state === 'Degraded' || state === 'Unreconcilable' ? 'degraded' : null;
    }],
  ];
  Promise.all(kinds.map(([type, what]) => historyEvents({ selector: `type=${type}`, limit: 200, order: 'newest', until: `rv:${newest}`, withObjects: type === 'NodeStateChanged' })
    .then((r) => r.items.map((e) => ({ e, what: what(e) })).filter((m) => m.what && m.e.seq >= oldest), () => [])))
    .then((lists) => {
      const all = lists.flat().sort((a, b) => b.e.seq - a.e.seq);
      marks.replaceChildren(...all.map((m) => h('option', { value: m.e.seq, label: `${m.what} ${m.e.object.name}`, 'data-what': m.what })));
      // Oldest first, each where the slider's thumb stands at its rv, close ones side by side
      // (`placeMarks`, as the rollout lanes: none over another); placed again on a resize.
      strip.replaceChildren(...[...all].reverse().map((m) => h('span', {
        class: `mark mark-${m.what}`, 'data-rv': m.e.seq, 'data-what': m.what, title: `${m.what} ${m.e.object.name} (rv ${m.e.seq}, ${m.e.time})`,
        'data-f': String((m.e.seq - oldest) / Math.max(1, newest - oldest)),
      }, MARK_ICONS[m.what])));
      placeMarks(strip);
      const resized = new ResizeObserver(() => placeMarks(strip));
      resized.observe(strip);
      ctx.onLeave(() => resized.disconnect());
      events.replaceChildren(...all.slice(0, 30).map((m) => h('li', { class: `mark-${m.what}` },
        link(view('at', { rv: m.e.seq }), `${MARK_ICONS[m.what]} ${m.what} ${m.e.object.name} (rv ${m.e.seq})`))));
    });

  // The slider stays in the page (and keeps the focus) while the moment changes: the URL is
  // replaced (no navigation), only the fleet below is drawn again. `shown` guards against an
  // older answer arriving after a newer one.
  let timer = 0;
  let asked = 0;
  let momentTime = '';
  slider.addEventListener('input', () => { out.textContent = `rv ${slider.value}`; });
  slider.addEventListener('change', () => {
    clearTimeout(timer);
    timer = setTimeout(() => show({ rv: Number(slider.value) }), 150);
  });
  // Page Up / Page Down: an hour later / earlier than the moment shown (by its time; the time
  // asked for when it was a time). Before the first event (rv 0, or an asOf before it) counts as
  // the first event's time. An hour later than the newest event is the newest resourceVersion,
  // an hour earlier than the first event is rv 0 (the oldest readable one): never a time in the
  // URL that is not between them.
  const ends = Promise.all([timeOf(oldest + 1), timeOf(newest)]);
  slider.addEventListener('keydown', async (e) => {
    const dir = HOUR_KEYS[e.key];
    if (!dir) return;
    e.preventDefault();
    const [first, head] = await ends;
    const from = Date.parse(momentTime || first);
    if (Number.isNaN(from)) return;
    const t = from + dir * 3600e3;
    if (dir > 0 && (t >= Date.parse(head) || t >= Date.now())) show({ rv: newest });
    else if (dir < 0 && t < Date.parse(first)) show({ rv: oldest });
    else show({ asOf: new Date(t).toISOString() });
  });

  async function show(at) {
    const mine = ++asked;
    const params = at.asOf ? { asOf: at.asOf } : { resourceVersion: String(at.rv), resourceVersionMatch: 'Exact' };
    loading.hidden = false;
    loading.textContent = `Loading the fleet as of ${at.asOf ? at.asOf : `rv ${at.rv}`}…`;
    body.setAttribute('aria-busy', 'true');
    try {
      const drawn = await moment(new URLSearchParams(params), at.rv);
      if (mine !== asked || ctx.root !== root) return;
      body.replaceChildren(...drawn.els);
      drawn.after();
      slider.value = drawn.rv;
      out.textContent = `rv ${drawn.rv}`;
      momentTime = at.asOf && !Number.isNaN(Date.parse(at.asOf)) ? new Date(Date.parse(at.asOf)).toISOString() : drawn.time;
      if (at.asOf) when.value = at.asOf;
      const url = view('at', at.asOf ? { asOf: at.asOf } : { rv: drawn.rv });
      if (location.hash !== url) history.replaceState(history.state, '', url);
    } catch (e) {
      if (mine === asked) body.replaceChildren(errorBox(e));
    } finally {
      if (mine === asked) { loading.hidden = true; body.removeAttribute('aria-busy'); }
    }
  }

  /** The fleet at `at` (list query parameters): its elements, drawn once in the page. */
  async function moment(at, asked) {
    // Before the first event (rv 0, while nothing was compacted) the fleet was empty: the API
    // forbids resourceVersionMatch=Exact with resourceVersion 0, as kube-apiserver does.
    const none = () => ({ metadata: { resourceVersion: '0' }, items: [] });
    const [pools, nodes] = asked === 0 && oldest === 0 ? [none(), none()]
      : await Promise.all([getJSON(`${api.pools()}?${at}`), getJSON(`${api.nodes()}?${at}`)]);
    const rv = Number(pools.metadata.resourceVersion || asked);
    // The moment's own event: none before the first event (rv 0), none at the oldest readable
    // moment of a compacted log (the compaction removed it; its state was kept).
    let time = '';
    let what = '';
    if (rv === 0) what = 'before the first event: the log had recorded nothing yet';
    else if (rv <= oldest) what = 'the oldest readable moment: the events before it were compacted away, its time is not kept';
    else time = await timeOf(rv);
    const ps = pools.items.sort(byName);
    const table = pagedTable({ label: `Nodes as of rv ${rv}`, columns: nodeColumns(() => ps), filter: true,
      rowClass: (n) => (isBad(nodeInfo(n).state) ? 'row-bad' : '') });
    const els = [
      h('p', { id: 'past-when' }, h('strong', {}, `As of resourceVersion ${rv}`), time ? ` (${time})` : '',
        what ? h('span', { id: 'past-moment' }, ` — ${what}`) : '', ' · ',
        link(view('history', { until: `rv:${rv}` }), 'events up to here'), ' · ', link('#/pools', 'back to now')),
      h('p', { class: 'muted' }, 'Pool and node links open them as they are now (marked “now”); configs open as of this moment.'),
      poolsTable(ps, `Pools as of rv ${rv}`, time ? Date.parse(time) : Date.now()),
      h('ul', { id: 'past-configs' }, ps.map((p) => {
        const target = (p.spec.configuration || {}).name || '';
        return h('li', {}, `pool ${p.metadata.name} targeted `,
          target ? link(view('mc', target, { rv }), target) : '—', cond(p, 'Updated') === 'True' ? ' (updated)' : ' (not updated)',
          ' · ', link(view('diff', { pool: p.metadata.name, from: `rv:${rv}` }), 'diff from then to now'));
      })),
      table.el,
    ];
    return {
      rv, time, els,
      after() {
        table.update(nodes.items);
        markPresent(body);
        for (const b of body.querySelectorAll('button')) if (!b.closest('.paged')) b.disabled = true;
      },
    };
  }
  // The nodes table redraws its page (paging, filter): mark its links again.
  new MutationObserver(() => markPresent(body)).observe(body, { childList: true, subtree: true });
  await show(asOf ? { asOf } : { rv: rv0 });
}

/** Marks links to live views (pool, node) inside a past view as opening the present. */
function markPresent(el) {
  for (const a of el.querySelectorAll('a[href^="#/pool/"]:not([data-now]), a[href^="#/node/"]:not([data-now])')) {
    a.dataset.now = '1';
    a.title = 'opens it as it is now';
    a.append(h('span', { class: 'now-mark' }, ' (now)'));
  }
}

/** The informer's items once it has listed. */
function synced(inf) {
  if (inf.synced) return Promise.resolve(inf.items);
  return new Promise((resolve) => {
    const un = inf.subscribe((items) => { resolve(items); queueMicrotask(() => un()); });
  });
}

