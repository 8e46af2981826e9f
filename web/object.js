// An object as the API serves it: its metadata (labels, annotations, owners, generation,
// resourceVersion) and the whole object as YAML or JSON, as `kubectl get -o yaml|json` shows it.
import { h } from './dom.js';

/** A plain YAML scalar that reads back as the same string: no indicator first, no `: ` or ` #`,
 * no edge spaces, and not a word or number YAML 1.1/1.2 would type (true, null, 0x1f, 1e3, ~). */
const PLAIN = /^[A-Za-z_/.][A-Za-z0-9_./ ()+@-]*$/;
const TYPED = /^(?:true|false|yes|no|on|off|y|n|null|~|[-+]?(?:\.inf|\.nan)|[-+]?[0-9][0-9_.:eExXoObB+-]*)$/i;

function scalar(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  const s = String(v);
  if (s && PLAIN.test(s) && !TYPED.test(s) && !/[ ]$/.test(s)) return s;
  // A JSON string is a YAML double-quoted scalar (the same escapes).
  return JSON.stringify(s);
}

const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const empty = (v) => (Array.isArray(v) ? v.length === 0 : isMap(v) && Object.keys(v).length === 0);

/** `v` (a JSON value) as YAML block text that parses back to `v`: maps as `key: value`, lists
 * as `- item`, empty ones as `{}` / `[]`, strings plain when that is unambiguous, else
 * double-quoted with JSON's escapes (multi-line file contents stay one line). */
export function toYaml(v, indent = '') {
  if (!isMap(v) && !Array.isArray(v)) return `${indent}${scalar(v)}\n`;
  if (empty(v)) return `${indent}${Array.isArray(v) ? '[]' : '{}'}\n`;
  let out = '';
  if (Array.isArray(v)) {
    for (const item of v) {
      if ((isMap(item) || Array.isArray(item)) && !empty(item)) {
        // The first line of the nested block goes after the dash.
        const block = toYaml(item, `${indent}  `);
        out += `${indent}- ${block.slice(indent.length + 2)}`;
      } else {
        out += `${indent}- ${isMap(item) || Array.isArray(item) ? (Array.isArray(item) ? '[]' : '{}') : scalar(item)}\n`;
      }
    }
    return out;
  }
  for (const [k, val] of Object.entries(v)) {
    const key = scalar(k);
    if ((isMap(val) || Array.isArray(val)) && !empty(val)) {
      out += `${indent}${key}:\n${toYaml(val, Array.isArray(val) ? indent : `${indent}  `)}`;
    } else {
      out += `${indent}${key}: ${empty(val) ? (Array.isArray(val) ? '[]' : '{}') : scalar(val)}\n`;
    }
  }
  return out;
}

/** A panel for one object: its metadata as a list and its whole text, YAML or JSON (a choice
 * kept while the object changes: live views call `update` on every event). Returns
 * `{el, update(obj)}`. */
export function objectPanel(what) {
  const meta = h('dl', { class: 'meta', id: 'object-meta' });
  const pre = h('pre', { id: 'object-text', class: 'object-text', tabindex: '0', 'aria-label': `${what} as text` });
  let format = 'yaml';
  let obj = null;
  const buttons = ['yaml', 'json'].map((f) => h('button', {
    type: 'button', id: `as-${f}`, 'aria-pressed': String(f === format),
    onclick: () => { format = f; buttons.forEach((b) => b.setAttribute('aria-pressed', String(b.id === `as-${format}`))); draw(); },
  }, f.toUpperCase()));
  const el = h('section', { class: 'object', id: 'object' },
    h('h2', {}, 'Metadata'), meta,
    h('details', { id: 'object-raw' }, h('summary', {}, `${what} as the API serves it (YAML · JSON)`),
      h('div', { class: 'toolbar' }, buttons), pre));
  function draw() {
    if (!obj) return;
    pre.dataset.format = format;
    pre.textContent = format === 'yaml' ? toYaml(obj) : `${JSON.stringify(obj, null, 2)}\n`;
  }
  function update(o) {
    obj = o;
    const m = o.metadata || {};
    const kv = (map) => Object.entries(map || {}).sort(([a], [b]) => (a < b ? -1 : 1));
    const list = (pairs) => (pairs.length ? h('ul', {}, pairs.map(([k, v]) => h('li', { class: 'mono' }, v === '' ? k : `${k}=${v}`))) : '—');
    meta.replaceChildren(
      h('dt', {}, 'name'), h('dd', { class: 'mono' }, m.name || '—'),
      h('dt', {}, 'uid'), h('dd', { class: 'mono' }, m.uid || '—'),
      h('dt', {}, 'resourceVersion'), h('dd', { class: 'mono' }, m.resourceVersion || '—'),
      h('dt', {}, 'generation'), h('dd', { class: 'mono' }, m.generation === undefined ? '—' : String(m.generation)),
      h('dt', {}, 'created'), h('dd', { class: 'mono' }, m.creationTimestamp || '—'),
      h('dt', {}, `labels (${kv(m.labels).length})`), h('dd', {}, list(kv(m.labels))),
      h('dt', {}, `annotations (${kv(m.annotations).length})`), h('dd', {}, list(kv(m.annotations).map(([k, v]) => [k, v.length > 120 ? `${v.slice(0, 120)}…` : v]))),
      h('dt', {}, 'owners'), h('dd', {}, (m.ownerReferences || []).length
        ? h('ul', {}, m.ownerReferences.map((r) => h('li', { class: 'mono' }, `${r.kind}/${r.name}${r.controller ? ' (controller)' : ''}`))) : '—'),
      // replaceChildren writes a null as the text "null": spread nothing instead.
      ...(m.finalizers && m.finalizers.length ? [h('dt', {}, 'finalizers'), h('dd', { class: 'mono' }, m.finalizers.join(', '))] : []));
    draw();
  }
  return { el, update };
}
