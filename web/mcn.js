// The node page's MachineConfigNode section: the node's update phase as MCO 4.20 reports it
// (one condition per phase, README "MachineConfigNode"), drawn from the MCN object alone.
import { h, condBadge, age } from './dom.js';

/** MCO's phases in the order an update passes them (child conditions after their parent). */
const PHASES = [
  ['UpdatePrepared', 0], ['UpdateExecuted', 0], ['Cordoned', 1], ['Drained', 1], ['AppliedFilesAndOS', 1],
  ['UpdatePostActionComplete', 0], ['RebootedNode', 1], ['UpdateComplete', 0], ['Uncordoned', 1],
  ['Resumed', 0], ['Updated', 0], ['NodeDegraded', 0],
];

/** The section for MCN `m` (`null` while the node has none): its desired and current config
 * and a table of the phases, each with MCO's status, reason, message and when it changed. */
export function mcnSection(m) {
  const title = h('h2', {}, 'MachineConfigNode');
  if (!m) return h('section', { id: 'mcn' }, title, h('p', { class: 'muted' }, 'No MachineConfigNode for this node yet.'));
  const st = m.status || {};
  const byType = new Map((st.conditions || []).map((c) => [c.type, c]));
  const rows = PHASES.filter(([t]) => byType.has(t)).map(([t, depth]) => {
    const c = byType.get(t);
    return h('tr', {}, h('th', { scope: 'row', class: depth ? 'child' : '' }, depth ? `↳ ${t}` : t),
      h('td', {}, condBadge(t, c.status)), h('td', {}, c.reason || ''), h('td', {}, c.message || ''),
      h('td', {}, age(c.lastTransitionTime)));
  });
  const v = st.configVersion || {};
  return h('section', { id: 'mcn' }, title,
    h('p', {}, 'pool ', h('code', {}, (m.spec.pool || {}).name || '—'), ' · desired ', h('code', {}, (m.spec.configVersion || {}).desired || '—'),
      ' · status desired ', h('code', {}, v.desired || '—'), ' · current ', h('code', {}, v.current || '—')),
    h('table', { id: 'mcn-phases' }, h('caption', {}, `Update phases of ${m.metadata.name}`),
      h('thead', {}, h('tr', {}, ['PHASE', 'STATUS', 'REASON', 'MESSAGE', 'SINCE'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows)));
}
