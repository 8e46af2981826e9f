// The tables and answers the views share: pools with MCO's printer columns, the node
// columns and their state filter, one history event as a row, and the not-found answer.
import { h, link, badge, condBadge, age, short, view, errorBox, cmp } from './dom.js';
import { cond, poolOf, nodeInfo, isBad } from './fleet.js';

/** A not-found answer of the API, shown in place of the view (no actions). */
export function notFound(kind, name, ...more) {
  return h('div', { id: 'not-found' }, errorBox(new Error(`${kind} "${name}" not found`)), ...more);
}

// ---- Pools ----

/** MCO's printer columns for pools (`oc get mcp`) with a progress bar while rolling. */
function poolRow(p, now) {
  const s = p.status || {};
  const updating = cond(p, 'Updating') === 'True';
  const count = s.machineCount || 0;
  const updated = s.updatedMachineCount || 0;
  const config = (s.configuration || {}).name || '';
  const target = (p.spec.configuration || {}).name || '';
  // The key columns first (name, progress, the three conditions), so that a phone's width
  // shows them; then MCO's printer columns (`oc get mcp`) in their order.
  return [
    link(view('pool', p.metadata.name), p.metadata.name),
    h('span', {}, progress(updated, count, updating, p.metadata.name, cond(p, 'Degraded') === 'True' || (s.degradedMachineCount || 0) > 0),
      p.spec.paused ? badge('Paused', 'warn') : null,
      target && target !== config ? h('span', { class: 'target' }, ' target ', short(target)) : null),
    condBadge('Updated', cond(p, 'Updated')),
    condBadge('Updating', cond(p, 'Updating')),
    condBadge('Degraded', cond(p, 'Degraded')),
    // CONFIG is MCO's printer column `.status.configuration.name` (what `oc get mcp` prints);
    // the target (spec.configuration) is shown, labelled, with the progress while it differs.
    short(config),
    count, s.readyMachineCount || 0, updated, s.degradedMachineCount || 0,
    age(p.metadata.creationTimestamp, now),
  ];
}

/** A progress bar (updated / machine count) with its figures in text: "done" when every
 * machine is updated, "degraded" when one is degraded (a drifted node is not being rolled:
 * MCO's `isNodeUpdating` does not count it), "rolling" while the pool is Updating, else
 * "updated". */
function progress(updated, count, rolling, name, degraded = false) {
  const done = count > 0 && updated >= count;
  return h('span', { class: 'progress' },
    h('progress', { max: count || 1, value: updated, 'aria-label': `pool ${name}: ${updated} of ${count} machines updated` }),
    h('span', { class: 'progress-text' }, `${updated}/${count} ${done ? 'done' : degraded ? 'degraded' : rolling ? 'rolling' : 'updated'}`));
}

/** The pools table's columns, in order. */
export const POOL_HEADERS = ['NAME', 'PROGRESS', 'UPDATED', 'UPDATING', 'DEGRADED', 'CONFIG', 'MACHINECOUNT', 'READYMACHINECOUNT',
  'UPDATEDMACHINECOUNT', 'DEGRADEDMACHINECOUNT', 'AGE'];

const count = (k) => (p) => (p.status || {})[k] || 0;
/** The sort key of each column of the pools table (numbers compare as numbers): PROGRESS by
 * the share updated, AGE youngest first (as the column reads, ascending). */
const POOL_KEYS = [
  (p) => p.metadata.name,
  (p) => { const s = p.status || {}; return s.machineCount ? (s.updatedMachineCount || 0) / s.machineCount : 0; },
  (p) => cond(p, 'Updated'), (p) => cond(p, 'Updating'), (p) => cond(p, 'Degraded'),
  (p) => ((p.status || {}).configuration || {}).name || '',
  count('machineCount'), count('readyMachineCount'), count('updatedMachineCount'), count('degradedMachineCount'),
  (p) => -(Date.parse(p.metadata.creationTimestamp) || 0),
];
const keyCmp = (a, b) => (typeof a === 'number' && typeof b === 'number' ? a - b : cmp(String(a), String(b)));

/** `pools` sorted by the column `header` of the pools table, `dir` 1 ascending or -1
 * descending, ties by name. */
export function sortPools(pools, header, dir = 1) {
  const key = POOL_KEYS[Math.max(0, POOL_HEADERS.indexOf(header))];
  return pools.map((p) => [key(p), p]).sort((a, b) => keyCmp(a[0], b[0]) * dir || cmp(a[1].metadata.name, b[1].metadata.name))
    .map((e) => e[1]);
}

/** A pool's state for the pools view's filter, the first that holds: Degraded (its condition
 * True), Paused, Updating, Updated, else Unknown. */
export const poolState = (p) => (cond(p, 'Degraded') === 'True' ? 'Degraded' : p.spec.paused ? 'Paused'
  : cond(p, 'Updating') === 'True' ? 'Updating' : cond(p, 'Updated') === 'True' ? 'Updated' : 'Unknown');
/** The values of the pools view's state filter. */
export const POOL_STATES = ['Updated', 'Updating', 'Degraded', 'Paused', 'Unknown'];

/** Pools as a table with MCO's columns, from a list of pool objects; ages at `now` (ms), or
 * live ages without it. With `sort` (`{header, dir, by(header)}`) each header is a button
 * that sorts by its column, `aria-sort` saying how the rows are sorted. */
export function poolsTable(pools, label = 'Machine config pools', now = undefined, sort = null) {
  // `READY<wbr>MACHINECOUNT`: the header may break there on narrow screens, its text stays whole.
  const text = (c) => c.split(/(?=MACHINECOUNT)/).map((part, i) => [i ? h('wbr') : null, part]);
  return h('div', { class: 'scroll' }, h('table', { id: 'pools' }, h('caption', {}, label),
    h('thead', {}, h('tr', {}, POOL_HEADERS.map((c) => h('th', {
      scope: 'col', class: `col-${c}`,
      'aria-sort': !sort ? null : sort.header !== c ? 'none' : sort.dir > 0 ? 'ascending' : 'descending',
    }, sort ? h('button', { type: 'button', class: 'sort', 'data-col': c, onclick: () => sort.by(c) }, text(c)) : text(c))))),
    h('tbody', {}, pools.map((p) =>
      h('tr', { 'data-name': p.metadata.name, class: cond(p, 'Degraded') === 'True' ? 'row-bad' : '' },
        poolRow(p, now).map((c, i) => h('td', { class: `col-${POOL_HEADERS[i]}` }, c)))))));
}

// ---- Nodes ----

/** Node columns: name, pool, desired, current, state, reason, cordon, readiness (kubectl's
 * STATUS: NotReady once its lease is stale); each sortable. */
export function nodeColumns(pools) {
  return [
    ['NAME', (n) => link(view('node', n.metadata.name), n.metadata.name), (n) => n.metadata.name],
    ['POOL', (n) => poolOf(n, pools()), (n) => poolOf(n, pools())],
    ['DESIRED', (n) => short(nodeInfo(n).desired), (n) => nodeInfo(n).desired],
    ['CURRENT', (n) => short(nodeInfo(n).current), (n) => nodeInfo(n).current],
    ['STATE', (n) => badge(nodeInfo(n).state || 'Unknown'), nodeState],
    ['REASON', (n) => h('span', { class: 'reason' }, nodeInfo(n).reason), (n) => nodeInfo(n).reason],
    ['SCHEDULING', (n) => (nodeInfo(n).cordoned ? badge('Cordoned', 'warn') : 'schedulable'), (n) => (nodeInfo(n).cordoned ? 'Cordoned' : 'schedulable')],
    ['STATUS', (n) => (nodeInfo(n).ready === 'Ready' ? 'Ready' : badge(nodeInfo(n).ready, 'warn')), (n) => nodeInfo(n).ready],
  ];
}

/** A node's MCO state (`Unknown` without the annotation). */
const nodeState = (n) => nodeInfo(n).state || 'Unknown';
/** The node tables' filter by state: MCO's node states. */
export const NODE_STATES = { label: 'State', of: nodeState, values: ['Done', 'Working', 'Degraded', 'Unreconcilable', 'Unknown'] };
/** The node tables' row class: `row-bad` for a degraded or unreconcilable node. */
export const nodeRowClass = (n) => (isBad(nodeInfo(n).state) ? 'row-bad' : '');

// ---- Events ----

const objLink = (o) => {
  const kind = o.kind || '';
  const href = kind === 'Node' ? view('node', o.name) : kind === 'MachineConfigPool' ? view('pool', o.name)
    : kind === 'MachineConfig' ? view('mc', o.name) : null;
  const text = `${kind.toLowerCase()}/${o.name}`;
  return href ? link(href, text) : text;
};

/** One history entry as a table row: rv, time, actor, type, object, summary and reason. */
export function eventRow(e) {
  return h('tr', { 'data-rv': e.seq },
    h('td', {}, link(view('at', { rv: e.seq }), String(e.seq))), h('td', { class: 'mono' }, e.time),
    h('td', {}, e.actor), h('td', {}, e.type), h('td', {}, objLink(e.object)),
    h('td', {}, e.summary, e.reason ? h('span', { class: 'muted' }, ` — “${e.reason}”`) : null));
}

/** The columns of an event row (`eventRow`). */
export const EVENT_HEADERS = ['RV', 'TIME', 'ACTOR', 'EVENT', 'OBJECT', 'SUMMARY'];
