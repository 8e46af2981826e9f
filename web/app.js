// The dashboard's shell: hash routes (each view a shareable URL), the connection indicator,
// and the live views of pools, one pool, nodes and one node.
import { api, discover, informer, onConnection, send, historyEvents, Informer, takeToken, onTokenChange, whoami, can, tokenRefused } from './api.js';
import { h, link, badge, condBadge, age, pagedTable, confirmDialog, errorBox, actionError, byName, cmp, view, apiUrl, refreshAges } from './dom.js';
import { poolOf, nodeInfo, offendingPaths, isBad, rolloutOrder } from './fleet.js';
import { historyView, diffView, rollbackView, pastView } from './history.js';
import { mcsView, mcView, mcsServerView } from './mcs.js';
import { objectPanel } from './object.js';
import { rolloutView } from './rollout.js';
import { mcnSection } from './mcn.js';
import { notFound, poolsTable, nodeColumns, NODE_STATES, nodeRowClass, eventRow, EVENT_HEADERS, sortPools, poolState, POOL_STATES, POOL_HEADERS } from './tables.js';

const mainEl = document.getElementById('main');
/** The current view's element: a view started before the last navigation writes into a
 * detached element, never over the next view. */
let main = mainEl;
let cleanup = [];
/** The watches of the current view (what the connection indicator reports), and what the
 * indicator says when it has none. */
const viewWatches = new Set();
let staticNote = 'static';

/** Routes: `#/pools`, `#/pool/NAME`, `#/nodes`, `#/node/NAME`, `#/mcs`, `#/mc/NAME`,
 * `#/mcs-server`, `#/history?...`, `#/diff?...`, `#/rollback/POOL`, `#/rollout/POOL?to=R`, `#/at?rv=N`. Matched on the raw (still
 * percent-encoded) path, a trailing slash accepted; each captured segment is decoded alone. */
const routes = [
  [/^\/?$/, (m, q) => poolsView(q)],
  [/^\/pools$/, (m, q) => poolsView(q)],
  [/^\/pool\/([^/]+)$/, (m) => poolView(m[1])],
  [/^\/nodes$/, (m, q) => nodesView(q)],
  [/^\/node\/([^/]+)$/, (m) => nodeView(m[1])],
  [/^\/mcs$/, () => mcsView(ctx)],
  [/^\/mcs-server$/, () => mcsServerView(ctx)],
  [/^\/mc\/([^/]+)$/, (m, q) => mcView(ctx, m[1], q)],
  [/^\/history$/, (m, q) => historyView(ctx, q)],
  [/^\/diff$/, (m, q) => diffView(ctx, q)],
  [/^\/rollback\/([^/]+)$/, (m, q) => rollbackView(ctx, m[1], q)],
  [/^\/rollout\/([^/]+)$/, (m, q) => rolloutView(ctx, m[1], q)],
  [/^\/at$/, (m, q) => pastView(ctx, q)],
];

/** What views share: the live collections and a way to register teardown. */
const ctx = {
  pools: () => informer(api.pools()),
  nodes: () => informer(api.nodes()),
  mcs: () => informer(api.mcs()),
  /** The current view's element (capture it when the view starts). */
  get root() { return main; },
  /** Subscribes for the life of the current view; the watch counts for the indicator. */
  watch(inf, f) { cleanup.push(inf.subscribe(f)); ctx.follows(inf); },
  /** Counts a view's own informer (stopped by the view) for the indicator. */
  follows(inf) { viewWatches.add(inf); showConnection(); },
  /** What the indicator says while the view watches nothing (`not live: past page`). */
  notLive(text) { staticNote = text; showConnection(); },
  onLeave(f) { cleanup.push(f); },
  title(t) { document.title = `${t} · mco`; },
};

/** A `%` not followed by two hex digits: a malformed percent-encoding. */
const BAD_PERCENT = /%(?![0-9a-fA-F]{2})/;

/** Splits the hash into its raw path and its query. The query is parsed from the raw text by
 * URLSearchParams (so `%2B` stays `+` and `%26` stays inside its value); the path is matched
 * raw and its segments decoded one by one. Throws URIError on a malformed encoding. */
export function parseHash(hash) {
  const raw = hash.replace(/^#/, '');
  const i = raw.indexOf('?');
  let path = i < 0 ? raw : raw.slice(0, i);
  const qs = i < 0 ? '' : raw.slice(i + 1);
  if (BAD_PERCENT.test(path) || BAD_PERCENT.test(qs)) throw new URIError('malformed percent-encoding');
  if (path.length > 1) path = path.replace(/\/+$/, '');
  return { path, q: new URLSearchParams(qs) };
}

/** An address as it may be shown: the value of any `token=` in it replaced by `…` (a
 * mistyped token link is never drawn with its secret). */
export const redact = (text) => text.replace(/(token=)[^&?#/]*/gi, '$1…');

async function route(navigated = false) {
  for (const f of cleanup.splice(0)) f();
  viewWatches.clear();
  staticNote = 'static';
  main = h('div', { class: 'view' });
  mainEl.replaceChildren(main);
  document.body.classList.remove('past');
  showConnection();
  let path;
  let q;
  let found = null;
  try {
    ({ path, q } = parseHash(location.hash));
    for (const [re, v] of routes) {
      const m = re.exec(path);
      if (m) { found = [v, [m[0], ...m.slice(1).map(decodeURIComponent)]]; break; }
    }
  } catch (e) {
    if (!(e instanceof URIError)) throw e;
    ctx.title('Malformed URL');
    main.append(h('h1', { tabindex: '-1' }, 'Malformed URL'),
      h('p', { class: 'error', role: 'alert' }, '✖ The address has a malformed percent-encoding (a "%" must be followed by two hex digits of valid UTF-8): ',
        h('code', {}, redact(location.hash)), '. ', link('#/pools', 'Pools')));
    if (navigated) focusHeading();
    return;
  }
  for (const a of document.querySelectorAll('nav a')) {
    // `#/pools` is current on `/pools` and `/pool/NAME`; `#/mcs` not on `/mcs-server`.
    const base = a.getAttribute('href').slice(1);
    const cur = path === base || path.startsWith(`${base.replace(/s$/, '')}/`);
    if (cur) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (!found) {
    ctx.title('Not found');
    main.append(h('h1', { tabindex: '-1' }, 'Not found'), h('p', {}, 'No view at ', h('code', {}, redact(path)), '. ', link('#/pools', 'Pools')));
    if (navigated) focusHeading();
    return;
  }
  const [v, m] = found;
  const el = main;
  // A view that reads before it draws (one MachineConfig, a diff, a rollback, a history page,
  // the past) says it is loading, below what it has drawn so far, until it is done.
  const loading = h('p', { class: 'muted loading', id: 'view-loading', role: 'status' }, 'Loading…');
  try {
    const pending = v(m, q);
    if (pending && typeof pending.then === 'function' && el === main) mainEl.append(loading);
    await pending;
  } catch (e) {
    el.append(errorBox(e));
  } finally {
    loading.remove();
  }
  // Only on navigation: on the first load the focus stays at the top, "Skip to content" first.
  if (navigated && el === main) focusHeading();
}

/** Moves the focus to the view's main heading (focusable, out of the Tab order), or the view. */
function focusHeading() {
  const h1 = main.querySelector('h1');
  if (h1) {
    h1.setAttribute('tabindex', '-1');
    h1.focus({ preventScroll: true });
  } else mainEl.focus({ preventScroll: true });
}

// ---- Pools ----

/** `#/pools?sort=COLUMN&order=desc&state=S`: the pools, sorted by any column (a header
 * button; again for descending) and filtered by state, both kept in the URL (replaced, not
 * added to the tab's history). */
function poolsView(q) {
  ctx.title('Pools');
  let header = POOL_HEADERS.includes(q.get('sort')) ? q.get('sort') : 'NAME';
  let dir = q.get('order') === 'desc' ? -1 : 1;
  let state = POOL_STATES.includes(q.get('state')) ? q.get('state') : '';
  let pools = null;
  const body = h('div', {}, h('p', { class: 'muted loading' }, 'Loading…'));
  const info = h('span', { class: 'muted', id: 'pools-shown', 'aria-live': 'polite' });
  const select = h('select', { class: 'state-filter', id: 'pools-state', 'aria-label': 'State of the pools', onchange: (e) => { state = e.target.value; draw(true); } },
    h('option', { value: '' }, 'any state'), POOL_STATES.map((v) => h('option', { value: v, selected: v === state }, v)));
  main.append(h('h1', {}, 'Machine config pools'), h('div', { class: 'toolbar' }, select, ' ', info), body,
    h('p', {}, link('#/history', 'History'), ' · ', link('#/at', 'The fleet at an earlier moment'), ' · ',
      link('#/nodes', 'All nodes')));
  const by = (c) => {
    dir = c === header ? -dir : 1;
    header = c;
    draw(true);
    body.querySelector(`button.sort[data-col="${c}"]`)?.focus();
  };
  /** Draws the pools; `chosen`: after the user's sort or filter, which the URL then keeps. */
  function draw(chosen = false) {
    if (!pools) return;
    const url = view('pools', { sort: header === 'NAME' ? '' : header, order: dir < 0 ? 'desc' : '', state });
    if (chosen && location.hash !== url) history.replaceState(history.state, '', url);
    const shown = sortPools(state ? pools.filter((p) => poolState(p) === state) : pools, header, dir);
    info.textContent = `${shown.length} of ${pools.length} pools`;
    // A live event redraws the table: a header button that had the focus has it again.
    const focused = body.contains(document.activeElement) ? document.activeElement.dataset.col : null;
    body.replaceChildren(poolsTable(shown, 'Machine config pools', undefined, { header, dir, by }));
    if (focused) body.querySelector(`button.sort[data-col="${focused}"]`)?.focus();
  }
  ctx.watch(ctx.pools(), (items) => { pools = [...items.values()]; draw(); });
}

// ---- Nodes ----

const byCreation = (a, b) =>
  cmp(a.metadata.creationTimestamp || '', b.metadata.creationTimestamp || '') || byName(a, b);

/** `#/nodes?sort=COLUMN&order=desc&state=S&name=TEXT`: every node, sorted by any column and
 * filtered by state and name, the choices kept in the URL as the pools view keeps its own
 * (replaced, not added to the tab's history), so a reload or a shared link keeps them. */
function nodesView(q) {
  ctx.title('Nodes');
  let pools = [];
  ctx.watch(ctx.pools(), (items) => { pools = [...items.values()]; });
  const initial = { sort: q.get('sort') || '', dir: q.get('order') === 'desc' ? -1 : 1, state: q.get('state') || '', query: q.get('name') || '' };
  const onChange = ({ sort, dir, state, query }) => {
    const url = view('nodes', { sort, order: sort && dir < 0 ? 'desc' : '', state, name: query });
    if (location.hash !== url) history.replaceState(history.state, '', url);
  };
  const table = pagedTable({ label: 'Nodes', columns: nodeColumns(() => pools), pageSize: 100, rowClass: nodeRowClass, states: NODE_STATES, initial, onChange });
  const timing = h('p', { class: 'muted', id: 'timing' });
  main.append(h('h1', {}, 'Nodes'), table.el, timing);
  const inf = ctx.nodes();
  ctx.watch(inf, (items) => {
    // Measured on each update (sort + filter + one page of rows): the 10,000-node figure.
    const t0 = performance.now();
    table.update([...items.values()].sort(byName));
    const ms = performance.now() - t0;
    timing.dataset.updateMs = ms.toFixed(1);
    timing.dataset.listMs = (inf.listMs || 0).toFixed(1);
    timing.textContent = `${items.size} nodes: listed in ${(inf.listMs || 0).toFixed(0)} ms, table updated in ${ms.toFixed(1)} ms`;
  });
}

// ---- Pool ----

function poolView(name) {
  ctx.title(`Pool ${name}`);
  const head = h('div');
  const conds = h('div');
  const order = h('div');
  let pools = [];
  let pool = null;
  const table = pagedTable({ label: `Nodes of pool ${name}`, columns: nodeColumns(() => pools), rowClass: nodeRowClass, states: NODE_STATES });
  const pauseBtn = h('button', { type: 'button', id: 'pause', onclick: () => togglePause() }, 'Pause');
  // Actions are offered only to identities the server says may take them (a
  // SelfSubjectAccessReview each): Pause… / Resume… patches the pool, Roll back… creates a
  // rollback (its dry-run preview too). `data-perms` is set once both are known.
  const actions = h('p', { class: 'actions', id: 'pool-actions' },
    link(view('history', { pool: name }), 'History'), ' · ', link(view('diff', { pool: name }), 'Diff'), ' · ',
    link(view(['rollout', name]), 'Rollout timeline'));
  Promise.all([can('patch', api.group, 'machineconfigpools', name), can('create', 'history.mco.dev', 'rollbacks')])
    .then(([mayPause, mayRollBack]) => {
      if (mayPause) actions.prepend(pauseBtn, ' ');
      if (mayRollBack) actions.append(' · ', link(view(['rollback', name]), 'Roll back…'));
      if (!mayPause || !mayRollBack) {
        actions.append(h('span', { class: 'muted', id: 'read-only' },
          ` · this token may not ${[!mayPause && 'pause', !mayRollBack && 'roll back'].filter(Boolean).join(' or ')} this pool`));
      }
      actions.dataset.perms = 'ready';
    });
  // The actions and sections are in the page only while the pool exists (an unknown pool has
  // none).
  const panel = objectPanel(`Pool ${name}`);
  const known = h('div', {}, actions,
    h('h2', {}, 'Conditions'), conds, h('h2', {}, 'Rollout'), order, h('h2', {}, 'Nodes'), table.el, panel.el);
  // Errors of the user's actions: never redrawn by live events, kept until dismissed.
  const alerts = h('div', { id: 'alerts' });
  const root = main;
  root.append(h('h1', {}, `Pool ${name}`), alerts, head);

  async function togglePause() {
    if (!pool) return;
    const pause = !pool.spec.paused;
    const reason = h('input', { type: 'text', id: 'pause-reason', name: 'reason' });
    const ok = await confirmDialog(`${pause ? 'Pause' : 'Resume'} pool ${name}?`,
      h('p', {}, pause
        ? 'While paused, no node of this pool is moved to a new rendered config.'
        : 'Nodes of this pool will be moved to its target rendered config, within maxUnavailable.'),
      h('label', {}, 'Reason (recorded in the history) ', reason));
    if (!ok) return;
    try {
      await send('PATCH', apiUrl(api.pools(), name), { spec: { paused: pause } },
        { contentType: 'application/merge-patch+json', reason: reason.value });
    } catch (e) { alerts.append(actionError(`${pause ? 'Pause' : 'Resume'} of pool ${name}`, e)); }
  }

  function draw(nodes) {
    if (!pool) {
      known.remove();
      head.replaceChildren(notFound('machineconfigpools', name));
      return;
    }
    if (!known.isConnected) root.append(known);
    panel.update(pool);
    const s = pool.status || {};
    const target = (pool.spec.configuration || {}).name || '';
    pauseBtn.textContent = pool.spec.paused ? 'Resume…' : 'Pause…';
    head.replaceChildren(poolsTable([pool], `Pool ${name}`),
      h('p', {}, 'Target rendered config: ', target ? link(view('mc', target), target) : '—',
        pool.spec.paused ? [' ', badge('Paused', 'warn'), ' no node is moved while paused'] : null,
        ` · maxUnavailable ${pool.spec.maxUnavailable ?? 1}`));
    conds.replaceChildren(h('table', {}, h('caption', {}, 'Conditions'),
      h('thead', {}, h('tr', {}, ['TYPE', 'STATUS', 'REASON', 'MESSAGE', 'SINCE'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, (s.conditions || []).map((c) => h('tr', {},
        h('td', {}, c.type), h('td', {}, condBadge(c.type, c.status)),
        h('td', {}, c.reason || ''), h('td', { class: 'reason' }, c.message || ''), h('td', {}, age(c.lastTransitionTime)))))));
    const members = nodes.filter((n) => poolOf(n, pools) === name).sort(byCreation);
    // MCO's definitions (pkg/controller/common/helpers.go isNodeUpdating / isNodeDegraded,
    // mco-facts "Pool status"): degraded is state Degraded or Unreconcilable; updating is
    // desired != current or state Working; a degraded node is never counted as updating.
    const groups = { degraded: [], updating: [], onTarget: [], waiting: [] };
    for (const n of members) {
      const i = nodeInfo(n);
      if (isBad(i.state)) groups.degraded.push(n);
      else if (i.desired !== i.current || i.state === 'Working') groups.updating.push(n);
      else if (i.current === target) groups.onTarget.push(n);
      else groups.waiting.push(n);
    }
    const { degraded, updating: moving, onTarget } = groups;
    const waiting = groups.waiting.sort(rolloutOrder);
    // The first 20 names of each group; the nodes table below has them all.
    const names = (l) => (l.length
      ? [l.slice(0, 20).map((n, i) => [i ? ', ' : '', link(view('node', n.metadata.name), n.metadata.name)]),
        l.length > 20 ? ` and ${l.length - 20} more` : '']
      : '—');
    order.replaceChildren(h('ul', {},
      h('li', { id: 'on-target' }, `✔ on ${target ? 'the target' : 'its config'} (${onTarget.length}): `, names(onTarget)),
      h('li', { id: 'degraded', class: degraded.length ? 'row-bad' : '' }, `✖ degraded (${degraded.length}): `, names(degraded)),
      h('li', { id: 'updating' }, `⟳ updating now (${moving.length}): `, names(moving)),
      h('li', { id: 'waiting' }, `○ waiting their turn, in rollout order: zone, then oldest (${waiting.length}): `, names(waiting))));
    table.update(members);
  }
  let nodes = [];
  ctx.watch(ctx.pools(), (items) => { pools = [...items.values()]; pool = items.get(name) || null; draw(nodes); });
  ctx.watch(ctx.nodes(), (items) => { nodes = [...items.values()]; draw(nodes); });
}

// ---- Node ----

function nodeView(name) {
  ctx.title(`Node ${name}`);
  const head = h('div');
  const drift = h('div');
  const details = h('div');
  const phases = h('div');
  const timeline = h('div');
  const panel = objectPanel(`Node ${name}`);
  const root = main;
  root.append(h('h1', {}, `Node ${name}`), head, drift, details, phases, h('h2', {}, 'Timeline'), timeline);
  ctx.watch(informer(`/apis/${api.group}/v1/machineconfignodes`), (items) => phases.replaceChildren(mcnSection(items.get(name) || null)));
  let pools = [];
  ctx.watch(ctx.pools(), (items) => { pools = [...items.values()]; });
  ctx.watch(ctx.nodes(), (items) => {
    const n = items.get(name);
    if (!n) {
      head.replaceChildren(notFound('nodes', name, h('p', {}, link(view('history', { kind: 'Node', name }), `History of node ${name}`))));
      drift.replaceChildren();
      details.replaceChildren();
      panel.el.remove();
      return;
    }
    const i = nodeInfo(n);
    const pool = poolOf(n, pools);
    head.replaceChildren(h('p', { id: 'node-state', class: isBad(i.state) ? 'row-bad' : '' }, badge(i.state || 'Unknown'), ' ',
      i.cordoned ? badge('Cordoned', 'warn') : 'schedulable', ' · ', i.ready === 'Ready' ? 'Ready' : badge(i.ready, 'warn'), ' · pool ', pool ? link(view('pool', pool), pool) : '—',
      ' · boot id ', h('code', {}, i.bootID || '—')));
    drift.replaceChildren();
    if (isBad(i.state)) {
      drift.append(h('section', { class: 'drift', id: 'drift', role: 'alert' },
        h('h2', {}, `✖ ${i.state}`), h('p', {}, i.reason),
        h('ul', {}, offendingPaths(i.reason).map((p) => h('li', {}, 'offending path ', h('code', {}, p))))));
    }
    details.replaceChildren(
      h('dl', {}, h('dt', {}, 'desiredConfig'), h('dd', {}, i.desired ? link(view('mc', i.desired), i.desired) : '—'),
        h('dt', {}, 'currentConfig'), h('dd', {}, i.current ? link(view('mc', i.current), i.current) : '—'),
        h('dt', {}, 'reason'), h('dd', {}, i.reason || '—')));
    if (!panel.el.isConnected) root.append(panel.el);
    panel.update(n);
  });
  // The timeline: the newest 100 of the node's events, then new ones on top as the log records
  // them (a watch of the same filter from where the list ended); older pages behind a link.
  let follow = null;
  let left = false;
  ctx.onLeave(() => { left = true; if (follow) follow.stop(); });
  async function loadTimeline() {
    // Node names are DNS subdomains: a name with a comma or `=` (no node has one) would add a
    // selector term, so it has no timeline.
    if (/[,=]/.test(name)) { timeline.replaceChildren(h('p', { class: 'muted' }, 'No node name holds a comma or "=".')); return; }
    const selector = `object.kind=Node,object.name=${name}`;
    try {
      // The newest 100, newest first (one request, whatever the log's length).
      const r = await historyEvents({ selector, limit: 100, order: 'newest' });
      const items = r.items;
      const rv = r.metadata.resourceVersion;
      const tbody = h('tbody', {}, items.map(eventRow));
      // Older pages behind it: the history page right below the newest 100 (the server's
      // continue token of this very query), then on down from there.
      const cont = (r.metadata || {}).continue || '';
      const older = { kind: 'Node', name, limit: 100 };
      timeline.replaceChildren(h('table', { id: 'timeline' }, h('caption', {}, `Latest events of node ${name}, newest first`),
        h('thead', {}, h('tr', {}, EVENT_HEADERS.map((c) => h('th', { scope: 'col' }, c)))), tbody),
        h('p', { class: 'pager' }, link(view('history', { kind: 'Node', name }), 'Full history'),
          cont ? [' · ', h('a', { href: view('history', { ...older, continue: cont }), id: 'timeline-older' }, 'Older 100 →')] : null));
      if (left) return;
      follow = new Informer(`${api.history}/events?${new URLSearchParams({ fieldSelector: selector })}`, { from: rv });
      ctx.follows(follow);
      const shown = new Set(items.map((e) => String(e.seq)));
      follow.subscribe((all) => {
        for (const [k, e] of all) {
          if (shown.has(k)) continue;
          shown.add(k);
          tbody.prepend(eventRow(e));
          // Rows are kept (the older page continues right below the last one) up to 1,000;
          // past that the oldest go, and so does the link that continued below them.
          if (tbody.children.length > 1000) {
            tbody.lastElementChild.remove();
            timeline.querySelector('#timeline-older')?.remove();
          }
        }
      });
    } catch (e) { timeline.replaceChildren(errorBox(e)); }
  }
  loadTimeline();
}

// ---- boot ----

// "Skip to content" moves the focus without touching the hash (the hash is the view's URL).
document.querySelector('.skip').addEventListener('click', (e) => {
  e.preventDefault();
  mainEl.focus();
});

const conn = document.getElementById('conn');
const whoEl = document.getElementById('whoami');
/** The indicator reports the current view's own watches: live when all are, reconnecting
 * when one is not, and the view's note (`static`, `not live: past page`) when it has none. */
function showConnection() {
  const watches = [...viewWatches].filter((i) => !i.stopped);
  let state;
  let text;
  const refused = tokenRefused();
  if (refused) { state = 'refused'; text = '✖ token refused: sign in'; }
  else if (!watches.length) { state = 'static'; text = `○ ${staticNote}`; }
  else if (watches.some((i) => i.state === 'reconnecting')) { state = 'reconnecting'; text = '⟳ reconnecting…'; }
  else if (watches.some((i) => i.state !== 'live')) { state = 'connecting'; text = 'connecting…'; }
  else { state = 'live'; text = '● live'; }
  conn.dataset.state = state;
  if (conn.textContent !== text) conn.textContent = text;
  // After a 401 the header names no identity: the old one is no longer the page's.
  if (refused) { whoEl.textContent = 'not signed in'; whoEl.title = ''; }
  showStaleness(watches.filter((i) => i.state === 'reconnecting' || i.state === 'refused'), refused);
}

const staleNote = document.getElementById('stale-note');
/** While one of the view's watches is down its data may be out of date: the view is dimmed
 * (`main.stale`, colours greyed: a green "Done" is not claimed) and labelled with the time
 * it was last confirmed (the oldest moment one of those watches stopped being live); both go
 * when they are live again. */
function showStaleness(down, refused) {
  const stale = down.length > 0;
  mainEl.classList.toggle('stale', stale);
  mainEl.toggleAttribute('aria-busy', stale);
  staleNote.hidden = !stale;
  if (!stale) { staleNote.replaceChildren(); return; }
  const known = down.map((i) => i.confirmedAt).filter(Boolean);
  const at = known.length ? new Date(Math.min(...known)) : null;
  const text = refused
    ? `⚠ Not live: the server refused the token (401: none, a wrong or a revoked one); sign in with a valid one${at ? `; what is shown was last confirmed at ${at.toLocaleTimeString()} (${at.toISOString()})` : ''}.`
    : at
    ? `⚠ Not live: what is shown was last confirmed at ${at.toLocaleTimeString()} (${at.toISOString()}); reconnecting…`
    : '⚠ Not live: nothing shown has been confirmed by the server yet; reconnecting…';
  if (staleNote.textContent !== text) {
    staleNote.replaceChildren(text);
    staleNote.dataset.confirmedAt = at ? at.toISOString() : '';
  }
}
onConnection(showConnection);

// Ages (AGE, SINCE) follow the clock between events: display only, nothing is fetched.
setInterval(refreshAges, 5000);

/** The header names who the dashboard acts as (the token's user, never the token). */
async function showIdentity() {
  try {
    const u = await whoami();
    if (tokenRefused()) return;
    whoEl.textContent = u.username ? `as ${u.username}` : '';
    whoEl.title = u.groups ? `groups: ${u.groups.join(', ')}` : '';
  } catch { whoEl.textContent = tokenRefused() ? 'not signed in' : ''; }
}

// A `#token=` link opened in this tab (a hash change) is taken before the route is read; a
// new token (from such a link or the sign-in form) draws the view again with it, after
// discovery (which a refused first load could not read).
let taking = false;
async function signedIn(navigated) {
  showIdentity();
  await discover().catch(() => {});
  route(navigated);
}
onTokenChange(() => { if (!taking) signedIn(false); });

discover().catch((e) => mainEl.append(errorBox(e))).finally(() => {
  window.addEventListener('hashchange', () => {
    taking = true;
    let took = false;
    try { took = takeToken(); } finally { taking = false; }
    if (took) signedIn(true); else route(true);
  });
  showIdentity();
  route();
});
