// A pool's rollout drawn from the history (so past rollouts too): each node a row, time
// across, a mark where it was targeted, cordoned, drained, applying, rebooted, uncordoned,
// done or degraded (marks close in time set side by side, never over each other); the waves
// in which the controller took the nodes.
import { api, getJSON, historyEvents } from './api.js';
import { h, link, view, apiUrl, placeMarks } from './dom.js';
import { notFound } from './tables.js';

/** What a node's event means on the timeline, from its type and the node as it was then
 * (`object.body`): a list of `[key, label]` steps, empty for events that are not steps of a
 * rollout. The drain controller cordons in the write that answers the drain request
 * (src/controller/drain.rs, one `NodeDrained` event: `spec.unschedulable` true and
 * `lastAppliedDrain`), so that event is two steps, cordoned then drained; a cordon alone
 * (`NodeCordoned`, a user's) is one. */
function steps(e, target) {
  const body = (e.object || {}).body || {};
  const a = (body.metadata || {}).annotations || {};
  const cordoned = ((body.spec || {}).unschedulable) === true;
  const desired = a[api.key('desiredConfig')] || '';
  const current = a[api.key('currentConfig')] || '';
  const state = a[api.key('state')] || '';
  switch (e.type) {
    case 'NodeDesiredConfigSet': return desired === target ? [['targeted', 'targeted']] : [];
    case 'NodeCordoned': return [['cordoned', 'cordoned']];
    case 'NodeDrained': return cordoned ? [['cordoned', 'cordoned'], ['drained', 'drained']] : [['drained', 'drained']];
    case 'NodeUpdated': return /reboots into/.test(e.summary || '') ? [['rebooted', 'rebooting']] : [];
    case 'NodeUncordoned': return [['uncordoned', 'uncordoned']];
    case 'NodeStateChanged':
      if (state === 'Degraded' || state === 'Unreconcilable') return [['degraded', state]];
      if (state === 'Done' && current === target) return [['done', 'done']];
      if (state === 'Working') return [['applying', 'applying']];
      return [];
    default: return [];
  }
}

const MARKS = { targeted: '◆', cordoned: '▮', drained: '▼', applying: '⟳', rebooted: '↻', uncordoned: '▯', done: '✔', degraded: '✖' };

/** `#/rollout/POOL?to=RENDERED`: the rollout of POOL to RENDERED (default: its target now). */
export async function rolloutView(ctx, name, q) {
  const root = ctx.root;
  ctx.title(`Rollout of ${name}`);
  let pool;
  try {
    pool = await getJSON(apiUrl(api.pools(), name));
  } catch (e) {
    if (e.status !== 404) throw e;
    root.append(h('h1', {}, `Rollout of pool ${name}`), notFound('machineconfigpools', name));
    return;
  }
  ctx.notLive('static: drawn from the history');
  const target = (q.get('to') || ((pool.spec || {}).configuration || {}).name || '').trim();
  root.append(h('h1', {}, `Rollout of pool ${name}`),
    h('p', {}, 'To ', target ? link(view('mc', target), target) : '—', ' · ', link(view('pool', name), `Pool ${name}`), ' · ',
      link(view('history', { pool: name }), 'History')));
  if (!target || /[,=]/.test(name)) { root.append(h('p', { class: 'muted', id: 'rollout-none' }, 'The pool targets no render.')); return; }
  // The start: the newest time the pool was set to target it; the end: the next change of target.
  const sets = await historyEvents({ selector: `object.kind=MachineConfigPool,object.name=${name},type=PoolConfigurationSet`, limit: 200, order: 'newest', withObjects: true });
  const targetOf = (e) => ((((e.object || {}).body || {}).spec || {}).configuration || {}).name || '';
  const i = sets.items.findIndex((e) => targetOf(e) === target);
  if (i < 0) { root.append(h('p', { class: 'muted', id: 'rollout-none' }, `The retained history has no rollout of pool ${name} to ${target}.`)); return; }
  const start = sets.items[i].seq;
  const end = i > 0 ? sets.items[i - 1].seq : 0;
  // The nodes' events from the start, oldest first, every page (a 1,000-node rollout logs
  // some 11,000; 20 pages of 500 once dropped its last nodes), up to 200 pages: past that
  // the view says what it left out. The count read so far is shown while it reads.
  const events = [];
  let cont = '';
  const reading = h('p', { class: 'muted loading', id: 'rollout-reading', role: 'status' }, "Reading the nodes' events…");
  root.append(reading);
  try {
    for (let page = 0; page < 200; page++) {
      const r = await historyEvents({ selector: 'object.kind=Node', since: `rv:${start}`, until: end ? `rv:${end}` : '', limit: 500, cont, withObjects: true });
      events.push(...r.items);
      cont = (r.metadata || {}).continue || '';
      if (!cont) break;
      reading.textContent = `Reading the nodes' events… ${events.length} so far`;
    }
  } finally { reading.remove(); }
  if (cont) {
    root.append(h('p', { class: 'error', role: 'alert', id: 'rollout-truncated' },
      `✖ Only the first ${events.length} node events of this rollout are drawn (up to rv ${events[events.length - 1].seq}): later steps are missing. `,
      link(view('history', { kind: 'Node', since: `rv:${events[events.length - 1].seq}` }), 'The rest in the history')));
  }
  // Rows in the order the nodes were targeted; a wave is the nodes the controller targeted in
  // one decision: one append, whose events share their timestamp (src/controller: a decision
  // that changes many objects is one atomic append, tests/batching.rs).
  const rows = new Map();
  let wave = 0;
  let waveTime = null;
  for (const e of events) {
    for (const s of steps(e, target)) {
      const node = e.object.name;
      if (s[0] === 'targeted' && !rows.has(node)) {
        if (e.time !== waveTime) { wave++; waveTime = e.time; }
        rows.set(node, { node, wave, marks: [] });
      }
      const row = rows.get(node);
      if (row) row.marks.push({ key: s[0], label: s[1], seq: e.seq, time: e.time });
    }
  }
  if (!rows.size) { root.append(h('p', { class: 'muted', id: 'rollout-none' }, `No node of pool ${name} was targeted at ${target} in the retained history.`)); return; }
  const all = [...rows.values()];
  const t0 = Date.parse(sets.items[i].time);
  const t1 = Math.max(t0 + 1, ...all.flatMap((r) => r.marks.map((m) => Date.parse(m.time))));
  const iso = (ms) => new Date(ms).toISOString().slice(11, 19);
  // Each mark at its time along its lane (`placeMarks`: none overlaps another, none sticks out).
  const resized = new ResizeObserver((entries) => { for (const en of entries) placeMarks(en.target); });
  ctx.onLeave(() => resized.disconnect());
  const bar = (r) => {
    const el = h('div', { class: 'lane', role: 'img', 'aria-label': r.marks.map((m) => `${m.label} at ${m.time}`).join(', ') });
    for (const m of r.marks) {
      el.append(h('span', { class: `mark mark-${m.key}`, title: `${m.label} at ${m.time} (rv ${m.seq})`, 'data-step': m.key,
        'data-f': String(Math.min(1, Math.max(0, (Date.parse(m.time) - t0) / (t1 - t0)))) }, MARKS[m.key] || '•'));
    }
    resized.observe(el);
    return el;
  };
  const last = (r, k) => [...r.marks].reverse().find((m) => m.key === k);
  const outcome = (r) => {
    const done = last(r, 'done');
    const bad = last(r, 'degraded');
    if (bad && (!done || bad.seq > done.seq)) return h('span', { class: 'error' }, `✖ ${bad.label}`);
    return done ? h('span', { class: 'ok' }, '✔ done') : h('span', { class: 'muted' }, '… in progress');
  };
  const waves = [...new Set(all.map((r) => r.wave))];
  root.append(
    h('p', {}, `${all.length} node(s) in ${waves.length} wave(s), from ${sets.items[i].time} (rv ${start})`, end ? ` to the next change of target (rv ${end})` : '', '.'),
    h('p', { class: 'legend muted' }, Object.entries(MARKS).map(([k, m]) => h('span', { class: `mark-${k}` }, `${m} ${k} `))),
    h('table', { id: 'rollout' }, h('caption', {}, `Nodes of pool ${name} in the order they were targeted; time runs left to right`),
      h('thead', {}, h('tr', {}, ['NODE', 'WAVE', 'TARGETED', 'OUTCOME'].map((c) => h('th', { scope: 'col' }, c)),
        // The time axis: the rollout's start and its last mark, and the time between.
        h('th', { scope: 'col', class: 'lane-head' }, 'TIMELINE', h('div', { class: 'axis rollout-axis', id: 'rollout-axis' },
          h('span', {}, iso(t0)), h('span', {}, `${Math.round((t1 - t0) / 100) / 10} s`), h('span', {}, iso(t1)))))),
      h('tbody', {}, all.map((r, k) => h('tr', { 'data-name': r.node, class: k && all[k - 1].wave !== r.wave ? 'wave-start' : '' },
        h('td', {}, link(view('node', r.node), r.node)), h('td', {}, String(r.wave)),
        h('td', { class: 'mono' }, r.marks[0].time), h('td', {}, outcome(r)), h('td', { class: 'lane-cell' }, bar(r)))))));
}
