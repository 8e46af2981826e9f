// Views over the event log (history.mco.dev/v1): the timeline, attributed diffs, rollback with
// its dry-run preview, and the fleet as of an earlier moment (time-travel reads).
import { api, getJSON, send, historyEvents, Informer } from './api.js';
import { h, link, short, confirmDialog, errorBox, byName, pagedTable } from './dom.js';
import { cond, nodeInfo, poolOf, isBad } from './fleet.js';
import { poolsTable, nodeColumns } from './app.js';

const objLink = (o) => {
  const kind = o.kind || '';
  const href = kind === 'Node' ? `#/node/${o.name}` : kind === 'MachineConfigPool' ? `#/pool/${o.name}`
    : kind === 'MachineConfig' ? `#/mc/${o.name}` : null;
  const text = `${kind.toLowerCase()}/${o.name}`;
  return href ? link(href, text) : text;
};

/** One history entry as a table row: rv, time, actor, type, object, summary and reason. */
export function eventRow(e) {
  return h('tr', { 'data-rv': e.seq },
    h('td', {}, link(`#/at?rv=${e.seq}`, String(e.seq))), h('td', { class: 'mono' }, e.time),
    h('td', {}, e.actor), h('td', {}, e.type), h('td', {}, objLink(e.object)),
    h('td', {}, e.summary, e.reason ? h('span', { class: 'muted' }, ` — “${e.reason}”`) : null));
}

const EVENT_HEADERS = ['RV', 'TIME', 'ACTOR', 'EVENT', 'OBJECT', 'SUMMARY'];

/** A form whose fields become the view's query string (so a filtered view is a shareable URL). */
function queryForm(view, fields, q, submitText) {
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
      const p = new URLSearchParams();
      for (const el of e.target.elements) if (el.name && el.value) p.set(el.name, el.value);
      location.hash = `#/${view}?${p}`;
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
      ['kind', 'Kind', { options: KINDS }], ['name', 'Name'], ['pool', 'Pool'], ['actor', 'Actor', { placeholder: 'cli, dashboard, daemon:worker-0' }],
      ['type', 'Event type', { placeholder: 'MachineConfigUpdated', list: 'event-types' }],
      ['since', 'Since', { placeholder: 'RFC 3339 or rv:N' }], ['until', 'Until', { placeholder: 'RFC 3339 or rv:N' }],
    ], q, 'Show'));
  const sel = [['kind', 'object.kind'], ['name', 'object.name'], ['pool', 'pool'], ['actor', 'actor'], ['type', 'type']]
    .filter(([k]) => q.get(k)).map(([k, f]) => `${f}=${q.get(k)}`).join(',');
  const tbody = h('tbody');
  const more = h('button', { type: 'button', hidden: true }, 'More (older pages follow)');
  root.append(h('table', { id: 'history' }, h('caption', {}, 'Events, oldest first'),
    h('thead', {}, h('tr', {}, EVENT_HEADERS.map((c) => h('th', { scope: 'col' }, c)))), tbody), more);
  let cont = '';
  let follow = null;
  let left = false;
  ctx.onLeave(() => { left = true; if (follow) follow.stop(); });
  const live = h('p', { class: 'muted', id: 'history-live', hidden: true }, '● new events appear below as they are logged');
  root.append(live);
  async function page() {
    const r = await historyEvents({ selector: sel, since: q.get('since') || '', until: q.get('until') || '', limit: 100, cont });
    tbody.append(...r.items.map(eventRow));
    cont = (r.metadata || {}).continue || '';
    more.hidden = !cont;
    more.textContent = 'Next 100';
    // On the last page of an open-ended query, follow the log: watch from where the list ended.
    if (!cont && !q.get('until') && !left) {
      const p = new URLSearchParams();
      if (sel) p.set('fieldSelector', sel);
      const inf = new Informer(`${api.history}/events?${p}`, { from: r.metadata.resourceVersion });
      follow = inf;
      const shown = new Set(r.items.map((e) => String(e.seq)));
      inf.subscribe((items) => {
        for (const [k, e] of items) if (!shown.has(k)) { shown.add(k); tbody.append(eventRow(e)); }
      });
      live.hidden = false;
    }
  }
  more.addEventListener('click', () => page().catch((e) => root.append(errorBox(e))));
  await page();
}

// ---- Diff ----

const side = (s) => (s ? h('div', { class: 'side' },
  h('strong', {}, s.source || '(unattributed)'),
  s.changedBy ? [' — last changed by ', h('b', {}, s.changedBy.actor), ` at ${s.changedBy.time} (rv ${s.changedBy.resourceVersion}, ${s.changedBy.event})`,
    s.changedBy.reason ? [' ', h('q', {}, s.changedBy.reason)] : null] : null,
  s.value ? h('div', { class: 'muted' }, s.value) : null) : h('div', { class: 'side muted' }, '(absent)'));

/** A unified diff laid out side by side: removed lines left, added right, context on both. */
function sideBySide(unified) {
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
  return h('table', { class: 'sbs mono' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'before'), h('th', { scope: 'col' }, 'after'))), h('tbody', {}, rows));
}

export function diffTable(d) {
  return h('div', { id: 'diff' },
    h('p', {}, short(d.from), ' → ', short(d.to), ` · ${d.items.length} changed item(s)`),
    d.items.map((it) => h('section', { class: `diff-item ${it.change}` },
      h('h3', {}, `${it.section} ${it.name}: ${it.change}`, it.fields && it.fields.length ? ` (${it.fields.join(', ')})` : ''),
      h('div', { class: 'sides' }, h('div', {}, h('span', { class: 'muted' }, 'before: '), side(it.from)),
        h('div', {}, h('span', { class: 'muted' }, 'after: '), side(it.to))),
      it.unified ? sideBySide(it.unified) : null)));
}

export async function diffView(ctx, q) {
  const root = ctx.root;
  ctx.title('Diff');
  const renders = [...(await synced(ctx.mcs())).values()].map((m) => m.metadata.name).filter((n) => n.startsWith('rendered-')).sort();
  root.append(h('h1', {}, 'Diff'),
    h('datalist', { id: 'renders' }, renders.map((r) => h('option', { value: r }))),
    h('p', { class: 'muted' }, 'Two rendered configs by name, or one pool at two moments (RFC 3339 time or rv:N; "to" defaults to now).'),
    queryForm('diff', [['from', 'From', { list: 'renders' }], ['to', 'To', { list: 'renders' }], ['pool', 'Pool'], ['node', 'Node']], q, 'Compare'));
  if (!q.get('from')) return;
  const p = new URLSearchParams();
  for (const k of ['from', 'to', 'pool', 'node']) if (q.get(k)) p.set(k, q.get(k));
  root.append(diffTable(await getJSON(`${api.history}/diffs?${p}`)));
}

// ---- Rollback ----

export async function rollbackView(ctx, pool, q) {
  const root = ctx.root;
  ctx.title(`Roll back ${pool}`);
  const r = await historyEvents({ selector: `pool=${pool},type=RenderedConfigGenerated`, limit: 500 });
  // The pool's renders, each once (the newest event that produced it); not another pool's
  // whose name extends this one (`rendered-worker-gpu-…`).
  const own = new RegExp(`^rendered-${pool.replace(/\./g, '\\.')}-[0-9a-f]{32}$`); // pool names: [a-z0-9.-]
  const byRender = new Map();
  for (const e of r.items) if (own.test(e.object.name)) { byRender.delete(e.object.name); byRender.set(e.object.name, e); }
  const renders = [...byRender.values()];
  const current = (await getJSON(`${api.pools()}/${pool}`)).spec.configuration.name;
  const preview = h('div', { id: 'preview', 'aria-live': 'polite' });
  const follow = h('div', { id: 'follow' });
  const select = h('select', { id: 'rb-to', name: 'to' },
    renders.slice().reverse().map((e) => h('option', { value: e.object.name, disabled: e.object.name === current, selected: q.get('to') === e.object.name },
      `${e.object.name} (rv ${e.seq}, ${e.time})${e.object.name === current ? ' — current' : ''}`)));
  const force = h('input', { type: 'checkbox', id: 'rb-force' });
  const reason = h('input', { type: 'text', id: 'rb-reason' });
  root.append(h('h1', {}, `Roll back pool ${pool}`),
    h('p', {}, 'Currently targeting ', link(`#/mc/${current}`, current), '.'),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); doPreview(); } },
      h('label', { for: 'rb-to' }, 'Prior render ', select),
      h('label', { for: 'rb-reason' }, 'Reason ', reason),
      h('label', { for: 'rb-force' }, force, ' also change other pools these MachineConfigs feed'),
      h('button', { type: 'submit', id: 'rb-preview' }, 'Preview (dry run)')),
    preview, follow);
  let plan = null;
  async function doPreview() {
    preview.replaceChildren(h('p', { class: 'muted' }, 'Previewing…'));
    try {
      plan = await send('POST', `${api.history}/rollbacks`, { pool, to: select.value, dryRun: true, force: force.checked });
      preview.replaceChildren(planView(plan),
        h('button', { type: 'button', id: 'rb-apply', class: 'danger', onclick: apply }, 'Roll back…'));
    } catch (e) { preview.replaceChildren(errorBox(e)); }
  }
  async function apply() {
    const ok = await confirmDialog(`Roll back pool ${pool}?`,
      h('p', {}, `The pool's MachineConfigs are restored to what they were when ${plan.target} was produced; `,
        `${plan.impact.pools.reduce((n, p) => n + p.nodes.length, 0)} node(s) will be updated, in waves.`));
    if (!ok) return;
    try {
      const done = await send('POST', `${api.history}/rollbacks`, { pool, to: plan.target, force: force.checked },
        { reason: reason.value });
      preview.append(h('p', { class: 'ok', id: 'rb-applied' }, `✔ applied at resourceVersion ${done.resourceVersion}; following the rollout:`));
      followRollout(ctx, pool, follow);
    } catch (e) { preview.append(errorBox(e)); }
  }
}

function planView(p) {
  return h('section', { class: 'plan' },
    h('h2', {}, `Preview: ${p.current} → ${p.target}`),
    p.warning ? h('p', { class: 'error', role: 'alert' }, '⚠ ', p.warning) : null,
    h('ul', {}, p.steps.map((s) => h('li', {}, `${s.action} ${s.kind.toLowerCase()}/${s.name}`))),
    h('p', {}, 'The restored sources render ', h('code', {}, p.predicted)),
    p.impact.pools.map((pi) => h('div', {},
      h('h3', {}, `pool ${pi.pool}: `, short(pi.current), ' → ', short(pi.rendered), pi.paused ? ' (paused)' : ''),
      h('ul', {}, pi.nodes.map((n) => h('li', {}, h('b', {}, n.node), n.drain || n.reboot ? ` (${[n.drain && 'drain', n.reboot && 'reboot'].filter(Boolean).join(' and ')})` : ' (no drain, no reboot)',
        ': ', n.changes.join(', ')))),
      h('ol', {}, pi.waves.map((w, i) => h('li', {}, `wave ${i + 1} (maxUnavailable ${pi.maxUnavailable}): ${w.join(', ')}`))))));
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

export async function pastView(ctx, q) {
  const root = ctx.root;
  ctx.title('The past');
  document.body.classList.add('past');
  const stats = await getJSON(`${api.history}/store/stats`);
  const newest = Number((await getJSON(api.pools())).metadata.resourceVersion);
  const oldest = Math.max(1, Number(stats.oldestResourceVersion || 1));
  const asOf = q.get('asOf') || '';
  let rv = Number(q.get('rv') || newest);
  const slider = h('input', { type: 'range', id: 'slider', min: oldest, max: newest, value: rv, 'aria-label': 'resourceVersion' });
  const out = h('output', { for: 'slider', id: 'slider-rv' }, `rv ${rv}`);
  const when = h('input', { type: 'text', id: 'as-of', value: asOf, placeholder: '2026-12-01T03:00:00Z' });
  const body = h('div', { 'aria-live': 'polite' });
  root.append(h('div', { class: 'past-banner', role: 'status' }, '⟲ The past — read-only: the fleet as it was at the moment chosen below.'),
    h('h1', {}, 'The fleet at an earlier moment'),
    h('div', { class: 'filters' }, h('label', { for: 'slider' }, `resourceVersion ${oldest}–${newest} `, slider), out,
      h('form', { onsubmit: (e) => { e.preventDefault(); location.hash = `#/at?asOf=${encodeURIComponent(when.value)}`; } },
        h('label', { for: 'as-of' }, 'or a time ', when), h('button', { type: 'submit' }, 'Go'))),
    body);
  let timer = 0;
  slider.addEventListener('input', () => { out.textContent = `rv ${slider.value}`; });
  // The URL follows the slider once it rests, so the moment shown is shareable.
  slider.addEventListener('change', () => { clearTimeout(timer); timer = setTimeout(() => { location.hash = `#/at?rv=${slider.value}`; }, 150); });
  const at = asOf ? `asOf=${encodeURIComponent(asOf)}` : `resourceVersion=${rv}&resourceVersionMatch=Exact`;
  const [pools, nodes] = await Promise.all([getJSON(`${api.pools()}?${at}`), getJSON(`${api.nodes()}?${at}`)]);
  rv = Number(pools.metadata.resourceVersion || rv);
  slider.value = rv;
  out.textContent = `rv ${rv}`;
  const time = await getJSON(`${api.history}/events/${rv}`).then((e) => e.time).catch(() => '');
  const ps = pools.items.sort(byName);
  const table = pagedTable({ label: `Nodes as of rv ${rv}`, columns: nodeColumns(() => ps), filter: true,
    rowClass: (n) => (isBad(nodeInfo(n).state) ? 'row-bad' : '') });
  body.replaceChildren(
    h('p', { id: 'past-when' }, h('strong', {}, `As of resourceVersion ${rv}`), time ? ` (${time})` : '', ' · ',
      link(`#/history?until=rv:${rv}`, 'events up to here'), ' · ', link('#/pools', 'back to now')),
    poolsTable(ps, `Pools as of rv ${rv}`, time ? Date.parse(time) : Date.now()),
    h('ul', { id: 'past-configs' }, ps.map((p) => {
      const target = (p.spec.configuration || {}).name || '';
      return h('li', {}, `pool ${p.metadata.name} targeted `,
        target ? link(`#/mc/${target}?rv=${rv}`, target) : '—', cond(p, 'Updated') === 'True' ? ' (updated)' : ' (not updated)',
        ' · ', link(`#/diff?pool=${p.metadata.name}&from=rv:${rv}`, 'diff from then to now'));
    })),
    table.el);
  table.update(nodes.items);
  for (const b of body.querySelectorAll('button')) if (!b.closest('.paged')) b.disabled = true;
}

/** The informer's items once it has listed. */
function synced(inf) {
  if (inf.synced) return Promise.resolve(inf.items);
  return new Promise((resolve) => {
    const un = inf.subscribe((items) => { resolve(items); queueMicrotask(() => un()); });
  });
}

