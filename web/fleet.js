// Pure helpers over the objects the API answers: pool membership, node state, columns.
import { api } from './api.js';

/** A condition's status (`True`/`False`/`Unknown`) on an object. */
export function cond(o, type) {
  const c = ((o.status || {}).conditions || []).find((c) => c.type === type);
  return c ? c.status : 'Unknown';
}

/** Whether a label selector (`matchLabels`, `matchExpressions`) matches `labels`. An empty
 * pool selector matches nothing, as in MCO. */
export function selects(sel, labels = {}) {
  if (!sel || (!sel.matchLabels && !sel.matchExpressions)) return false;
  for (const [k, v] of Object.entries(sel.matchLabels || {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const v = labels[e.key];
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
    if (e.operator === 'In' && !(has && e.values.includes(v))) return false;
    if (e.operator === 'NotIn' && has && e.values.includes(v)) return false;
  }
  return true;
}

/** The pool a node belongs to, by MCO's `GetPoolsForNode` (pkg/helpers/helpers.go,
 * mco-facts "Node-to-pool resolution"): master wins, then the one custom pool, then worker; a
 * node in two custom pools, or a Windows node, belongs to none (''). */
export function poolOf(node, pools) {
  const labels = node.metadata.labels || {};
  if (labels['kubernetes.io/os'] === 'windows') return '';
  const matching = pools.filter((p) => selects(p.spec && p.spec.nodeSelector, labels)).map((p) => p.metadata.name);
  if (matching.includes('master')) return 'master';
  const custom = matching.filter((n) => n !== 'worker');
  if (custom.length > 1) return '';
  return custom[0] || (matching.includes('worker') ? 'worker' : '');
}

/** A node's MCO annotations and the fields the tables show. */
export function nodeInfo(n) {
  const a = n.metadata.annotations || {};
  return {
    desired: a[api.key('desiredConfig')] || '',
    current: a[api.key('currentConfig')] || '',
    state: a[api.key('state')] || '',
    reason: a[api.key('reason')] || '',
    cordoned: !!(n.spec && n.spec.unschedulable),
    bootID: ((n.status || {}).nodeInfo || {}).bootID || '',
    // kubectl's node STATUS from the Ready condition: NotReady once the node-lifecycle
    // controller found its lease stale (Ready Unknown).
    ready: readiness(n),
  };
}

/** `Ready`, `NotReady` (Ready False or Unknown) or `Unknown` (no Ready condition), as kubectl
 * prints a node's STATUS. */
export function readiness(n) {
  const c = ((n.status || {}).conditions || []).find((c) => c.type === 'Ready');
  if (!c) return 'Unknown';
  return c.status === 'True' ? 'Ready' : 'NotReady';
}

/** The paths a Degraded reason names (`content mismatch for file "/etc/chrony.conf"`). */
export function offendingPaths(reason) {
  return [...new Set([...(reason || '').matchAll(/"(\/[^"]*)"/g)].map((m) => m[1]))];
}

/** Whether a node's state is bad (drawn red, with a cross and the word). */
export const isBad = (state) => state === 'Degraded' || state === 'Unreconcilable';

const ZONE = 'topology.kubernetes.io/zone';
/** The order the rollout takes nodes waiting for the pool's target (MCO's `sortNodeList`,
 * pkg/controller/node/node_controller.go): by zone label ascending, oldest first within a
 * zone, nodes without a zone last (oldest first). */
export function rolloutOrder(a, b) {
  const za = (a.metadata.labels || {})[ZONE];
  const zb = (b.metadata.labels || {})[ZONE];
  if (za !== undefined && zb === undefined) return -1;
  if (za === undefined && zb !== undefined) return 1;
  if (za !== zb) return za < zb ? -1 : 1;
  const ta = a.metadata.creationTimestamp || '';
  const tb = b.metadata.creationTimestamp || '';
  return ta < tb ? -1 : ta > tb ? 1 : 0;
}
