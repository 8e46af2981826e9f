// MachineConfigs: the list, and one MachineConfig with its files decoded (data URLs, gzip
// through the browser's DecompressionStream), units, dropins, which pools select it, and for a
// rendered config its sources and the attribution of each item.
import { api, getJSON, historyEvents, token } from './api.js';
import { h, link, age, byName, view, apiUrl, errorBox, short } from './dom.js';
import { selects } from './fleet.js';
import { objectPanel } from './object.js';

const ATTRIBUTION = 'mco.dev/attribution';

export function mcsView(ctx) {
  ctx.title('MachineConfigs');
  const body = h('div', {}, h('p', { class: 'muted loading' }, 'Loading…'));
  ctx.root.append(h('h1', {}, 'MachineConfigs'), body);
  ctx.watch(ctx.mcs(), (items) => {
    const all = [...items.values()].sort(byName);
    const table = (list, label) => h('table', {}, h('caption', {}, label),
      h('thead', {}, h('tr', {}, ['NAME', 'GENERATEDBYCONTROLLER', 'IGNITIONVERSION', 'AGE'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, list.map((m) => h('tr', { 'data-name': m.metadata.name },
        h('td', {}, link(view('mc', m.metadata.name), m.metadata.name)),
        h('td', {}, (m.metadata.annotations || {})[api.key('generated-by-controller-version')] || ''),
        h('td', {}, (((m.spec || {}).config || {}).ignition || {}).version || ''),
        h('td', {}, age(m.metadata.creationTimestamp))))));
    body.replaceChildren(table(all.filter((m) => !m.metadata.name.startsWith('rendered-')), 'Source MachineConfigs'),
      table(all.filter((m) => m.metadata.name.startsWith('rendered-')), 'Rendered configs'));
  });
}

/** The bytes of an Ignition data URL (`data:[type][;base64],DATA`), gunzipped when
 * `compression` is `gzip`; text when it decodes as UTF-8. */
export async function decode(source, compression) {
  const m = /^data:([^,]*),(.*)$/s.exec(source || '');
  if (!m) return { text: null, note: source ? `remote source ${source}` : 'no contents' };
  let bytes;
  if (/;base64$/i.test(m[1])) bytes = Uint8Array.from(atob(decodeURIComponent(m[2])), (c) => c.charCodeAt(0));
  else bytes = new TextEncoder().encode(decodeURIComponent(m[2]));
  if (compression === 'gzip') {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  }
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(bytes), note: '' };
  } catch {
    return { text: null, note: `${bytes.length} bytes of binary data` };
  }
}

const mode = (m) => (m === undefined || m === null ? '' : `mode 0${m.toString(8)}`);
const owner = (f) => [f.user && (f.user.name || f.user.id), f.group && (f.group.name || f.group.id)].filter((x) => x !== undefined && x !== null).join(':');

/** One MachineConfig; with `?rv=N`, as it was at resourceVersion N (a time-travel read). */
export async function mcView(ctx, name, q) {
  ctx.title(`MachineConfig ${name}`);
  const main = ctx.root;
  const rv = q.get('rv') || '';
  const at = rv ? `?resourceVersion=${encodeURIComponent(rv)}&resourceVersionMatch=Exact` : '';
  if (rv) {
    ctx.notLive('not live: the past');
    document.body.classList.add('past');
    main.append(h('div', { class: 'past-banner', role: 'status' }, `⟲ The past — read-only: as of resourceVersion ${rv}. `,
      link(view('mc', name), 'as it is now')));
  }
  let mc;
  try {
    mc = await getJSON(`${apiUrl(api.mcs(), name)}${at}`);
  } catch (e) {
    if (e.status !== 404) throw e;
    main.append(h('h1', {}, `MachineConfig ${name}`), errorBox(e), await lastVersion(name, rv));
    return;
  }
  const cfg = (mc.spec || {}).config || {};
  const annotations = mc.metadata.annotations || {};
  let attribution = null;
  try { attribution = annotations[ATTRIBUTION] ? JSON.parse(annotations[ATTRIBUTION]) : null; } catch { attribution = null; }
  const by = (map, key) => (attribution && attribution[map] && attribution[map][key]
    ? h('span', { class: 'attr' }, 'from ', mcLink(attribution[map][key])) : null);
  const pools = (await getJSON(`${api.pools()}${at}`)).items;
  // Sources deleted since: linked to their version at this moment (the render's own
  // resourceVersion when read now: a render never changes after it is produced).
  const existing = rv ? null : new Set((await getJSON(api.mcs())).items.map((m) => m.metadata.name));
  const thenRv = rv || mc.metadata.resourceVersion;
  const mcLink = (n) => (existing && !existing.has(n)
    ? [link(view('mc', n, { rv: thenRv }), n), h('span', { class: 'muted' }, ' (deleted since; as it was then)')]
    : link(rv ? view('mc', n, { rv }) : view('mc', n), n));
  const selecting = name.startsWith('rendered-')
    ? (mc.metadata.ownerReferences || []).map((o) => o.name)
    : pools.filter((p) => selects(p.spec.machineConfigSelector, mc.metadata.labels || {})).map((p) => p.metadata.name);
  main.append(h('h1', {}, `MachineConfig ${name}`),
    h('p', {}, name.startsWith('rendered-') ? 'Rendered config of pool ' : 'Selected by pool(s) ',
      selecting.length ? selecting.map((p, i) => [i ? ', ' : '', link(view('pool', p), p)]) : '—',
      ` · Ignition ${(cfg.ignition || {}).version || '—'} · `, link(view('history', { kind: 'MachineConfig', name }), 'history')));
  if (attribution) {
    main.append(h('h2', {}, 'Sources'), h('ol', { id: 'sources' }, (attribution.sources || []).map((s) => h('li', {}, mcLink(s)))));
  }
  const files = (cfg.storage || {}).files || [];
  main.append(h('h2', {}, `Files (${files.length})`));
  for (const f of files) {
    const { text, note } = await decode((f.contents || {}).source, (f.contents || {}).compression).catch((e) => ({ text: null, note: `cannot decode: ${e.message}` }));
    main.append(h('details', { class: 'file', 'data-path': f.path },
      h('summary', {}, h('code', {}, f.path), ` ${mode(f.mode)} ${owner(f)}`, (f.contents || {}).compression ? ` (${f.contents.compression})` : '', ' ', by('files', f.path)),
      text !== null ? h('pre', {}, text) : h('p', { class: 'muted' }, note)));
  }
  const units = (cfg.systemd || {}).units || [];
  main.append(h('h2', {}, `Units (${units.length})`));
  for (const u of units) {
    const state = [u.enabled === true && 'enabled', u.enabled === false && 'disabled', u.mask && 'masked'].filter(Boolean).join(', ');
    main.append(h('details', { class: 'unit' }, h('summary', {}, h('code', {}, u.name), ` ${state} `, by('units', u.name)),
      u.contents ? h('pre', {}, u.contents) : null,
      (u.dropins || []).map((d) => h('div', {}, h('h4', {}, `dropin ${d.name} `, by('dropins', `${u.name}/${d.name}`)), d.contents ? h('pre', {}, d.contents) : null))));
  }
  const keys = (((cfg.passwd || {}).users || []).find((u) => u.name === 'core') || {}).sshAuthorizedKeys || [];
  if (keys.length) main.append(h('h2', {}, 'SSH keys (core)'), h('ul', {}, keys.map((k) => h('li', { class: 'mono' }, k.slice(0, 60), k.length > 60 ? '…' : '', ' ', by('sshKeys', k)))));
  const spec = mc.spec || {};
  const kargs = spec.kernelArguments || [];
  if (kargs.length) {
    const src = (a) => ((attribution && attribution.kernelArguments) || []).find((s) => s.value === a);
    main.append(h('h2', {}, 'Kernel arguments'), h('ul', {}, kargs.map((a) => h('li', {}, h('code', {}, a), src(a) ? [' from ', mcLink(src(a).source)] : null))));
  }
  const extra = [['kernelType', 'kernelType'], ['fips', 'fips'], ['osImageURL', 'osImageUrl']].filter(([k]) => spec[k] !== undefined && spec[k] !== '' && spec[k] !== false);
  if (extra.length) {
    main.append(h('dl', {}, extra.map(([k, a]) => [h('dt', {}, k), h('dd', {}, String(spec[k]), attribution && attribution[a] ? [' from ', mcLink(attribution[a])] : '')])));
  }
  const panel = objectPanel(`MachineConfig ${name}`);
  main.append(panel.el);
  panel.update(mc);

}

/** For a MachineConfig not found: a link to its history and, when the log still holds its
 * last version, to it (`?rv=` the resourceVersion before its deletion). */
async function lastVersion(name, rv) {
  const selector = `object.kind=MachineConfig,object.name=${name}`;
  const links = [link(view('history', { kind: 'MachineConfig', name }), `History of ${name}`)];
  if (/[,=]/.test(name)) return h('p', { id: 'mc-gone' }, links);
  try {
    // Its newest event (up to the moment asked): one request, newest first.
    const r = await historyEvents({ selector, until: rv ? `rv:${rv}` : '', limit: 1, order: 'newest' });
    const last = r.items[0] || null;
    if (last && /Deleted$/.test(last.type) && last.seq > 1) {
      links.push(' · ', h('a', { href: view('mc', name, { rv: last.seq - 1 }), id: 'last-version' },
        `its last version (rv ${last.seq - 1}, before its deletion at rv ${last.seq})`));
    } else if (!last) {
      links.push(h('span', { class: 'muted' }, ' · the retained history has no event of it'));
    }
  } catch { /* the history link remains */ }
  return h('p', { id: 'mc-gone' }, links);
}

/** The Ignition spec versions a new node may ask the Machine Config Server for (its `Accept`
 * header); 3.4.0 is served without one (mco's default; MCO's is 2.2.0). */
export const IGNITION_VERSIONS = ['3.5.0', '3.4.0', '3.3.0', '3.2.0', '3.1.0', '3.0.0', '2.2.0'];

/** The render the Machine Config Server serves a pool's new nodes (MCO's
 * `pkg/server/cluster_server.go`, as `served_config` in src/api/mcs.rs): the target
 * (`spec.configuration`) once a machine is updated to it or while the pool has no status
 * configuration, else the status one. */
export function servedRender(pool) {
  const s = pool.status || {};
  const status = (s.configuration || {}).name || '';
  return (s.updatedMachineCount || 0) > 0 || !status ? ((pool.spec || {}).configuration || {}).name || '' : status;
}

/** `#/mcs-server`: the Machine Config Server as a new node sees it: per pool, the URL a node
 * fetches (`/config/POOL`), the render served, and each Ignition version asked for in turn
 * (the answer's `ignition.version` and file count, or the refusal). */
export async function mcsServerView(ctx) {
  const root = ctx.root;
  ctx.title('Machine Config Server');
  ctx.notLive('static: read once');
  const pools = (await getJSON(api.pools())).items.sort(byName);
  root.append(h('h1', {}, 'Machine Config Server'),
    h('p', {}, 'A new node fetches its first-boot Ignition config from ', h('code', {}, `${location.origin}/config/POOL`),
      ' (or the separate listener of mco server --mcs-listen, MCO\'s port 22623), asking for a spec version in its Accept header; ',
      'without one it gets 3.4.0. The files MCO adds (the encapsulated MachineConfig) are included.'));
  const ask = async (pool, version) => {
    const headers = { Accept: `application/vnd.coreos.ignition+json;version=${version}` };
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    try {
      const r = await fetch(`/config/${encodeURIComponent(pool)}`, { headers });
      if (!r.ok) return h('span', { class: 'error' }, `✖ ${r.status} ${(await r.text()).slice(0, 80)}`);
      const c = await r.json();
      const files = ((c.storage || {}).files || []).length;
      return h('span', { class: 'ok', 'data-version': (c.ignition || {}).version || '' }, `✔ ${(c.ignition || {}).version || '?'}, ${files} file(s)`);
    } catch (e) { return h('span', { class: 'error' }, `✖ ${e.message}`); }
  };
  const rows = await Promise.all(pools.map(async (p) => {
    const name = p.metadata.name;
    const answers = await Promise.all(IGNITION_VERSIONS.map((v) => ask(name, v)));
    const served = servedRender(p);
    return h('tr', { 'data-name': name },
      h('td', {}, link(view('pool', name), name)), h('td', { class: 'mono' }, `/config/${name}`),
      h('td', {}, served ? link(view('mc', served), short(served)) : '—'), answers.map((a) => h('td', {}, a)));
  }));
  root.append(h('table', { id: 'mcs-server' }, h('caption', {}, 'What each pool\'s new nodes are served, per Ignition version asked for'),
    h('thead', {}, h('tr', {}, ['POOL', 'URL', 'SERVES', ...IGNITION_VERSIONS].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows)));
}
