// The dashboard's only way to the server: the public REST API that kubectl and the mco CLI use
// (lists, watches, merge patches, history.mco.dev/v1). No private endpoints.

/** The component the dashboard declares (`X-Mco-Actor`): the field manager of its writes. The
 * event log records the authenticated user of its token as the actor. */
export const ACTOR = 'dashboard';

// ---- the bearer token ----

const TOKEN_KEY = 'mco.token';

/** A `#token=TOKEN` fragment, optionally followed by `&/route`: the token and the route. */
const TOKEN_FRAGMENT = /^#token=([^&]*)(?:&(.*))?$/;

const tokenListeners = new Set();

/** Calls `f()` whenever the token in force changes (a `#token=` link opened in this tab, or the
 * sign-in form): the caller drops what it read with the old one. */
export function onTokenChange(f) {
  tokenListeners.add(f);
}

/** Makes `t` the token in force: kept in sessionStorage (this tab only, gone when it closes);
 * the live collections are dropped (their watches carry the old one) and the listeners told. */
function useToken(t) {
  if (t === token()) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  refused = false;
  for (const inf of informers.values()) inf.stop();
  informers.clear();
  reviews.clear();
  for (const f of tokenListeners) f();
  announce();
}

/** Takes the token from the URL fragment `#token=TOKEN` (optionally `#token=TOKEN&/route`), as
 * the README's link carries it: a fragment never reaches the server. Runs when the page loads
 * and on every hash change (a link opened in a tab that already shows the dashboard), before
 * the route is read, so that the token is never drawn as a view's name. The fragment is
 * replaced (`history.replaceState`: the address bar and this history entry no longer hold
 * it). The token is never written to the DOM, the title or the console. Returns whether the
 * fragment held one. */
export function takeToken() {
  const m = TOKEN_FRAGMENT.exec(location.hash);
  if (!m) return false;
  history.replaceState(history.state, '', location.pathname + location.search + (m[2] ? `#${m[2]}` : '#/pools'));
  let t = m[1];
  try { t = decodeURIComponent(t); } catch { /* a malformed escape: the raw text, which the server refuses */ }
  t = t.trim();
  if (t) useToken(t);
  return true;
}

/** The token every request carries (`Authorization: Bearer`), or ''. */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

function withAuth(headers) {
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

/** On a 401 answer: a sign-in prompt over the page (once), asking for a token; a token given
 * there replaces the stored one (the password field's value is never an attribute, so it is
 * not in the page's HTML) and the view is drawn again with it. */
function signIn() {
  if (document.getElementById('signin')) return;
  const box = document.createElement('div');
  box.id = 'signin';
  box.setAttribute('role', 'dialog');
  box.setAttribute('aria-modal', 'true');
  box.setAttribute('aria-labelledby', 'signin-title');
  const form = document.createElement('form');
  const title = document.createElement('h2');
  title.id = 'signin-title';
  title.textContent = token() ? 'Sign in again: the server refused this token' : 'Sign in';
  const help = document.createElement('p');
  // Where the admin token is, as `mco up` says on its "dashboard:" line (src/up/mod.rs
  // print_locations): DATA_DIR/admin.token, DATA_DIR being the server's --data-dir; the CLI
  // finds it by itself only in ./mco-data, elsewhere MCO_TOKEN_FILE names it.
  help.textContent = 'The mco server needs a bearer token: paste one, or open the dashboard '
    + 'with it after #token= in the address. The admin\'s is in DATA_DIR/admin.token, DATA_DIR '
    + 'being the server\'s --data-dir (./mco-data by default): the file mco up names on its '
    + '"dashboard:" line. A read-only one: MCO_TOKEN_FILE=DATA_DIR/admin.token mco token create --kind reader '
    + '(from the directory holding mco-data/, plain mco token create --kind reader).';
  const input = document.createElement('input');
  input.type = 'password';
  input.name = 'token';
  input.autocomplete = 'off';
  input.setAttribute('aria-label', 'Token');
  const ok = document.createElement('button');
  ok.type = 'submit';
  ok.textContent = 'Sign in';
  form.append(title, help, input, ok);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    input.value = '';
    box.remove();
    useToken(t);
  });
  box.append(form);
  document.body.append(box);
  input.focus();
}

/** Removes the sign-in prompt (a token link opened while it shows). */
function closeSignIn() {
  const box = document.getElementById('signin');
  if (box) box.remove();
}
onTokenChange(closeSignIn);

let refused = false;

/** Whether the server answered 401 to the token in force (none, a wrong or a revoked one) since
 * it was taken: the page says a sign-in is needed, not that it is reconnecting. */
export function tokenRefused() {
  return refused;
}

/** Fetch with the token; a 401 answer opens the sign-in prompt and tells the connection
 * listeners (`tokenRefused()`). */
async function authFetch(url, opts = {}) {
  const r = await fetch(url, { ...opts, headers: withAuth({ ...(opts.headers || {}) }) });
  if (r.status === 401) {
    signIn();
    if (!refused) { refused = true; announce(); }
  }
  return r;
}

let group = 'machineconfiguration.openshift.io';

/** Learns the configured API group from discovery (`GET /apis`): the first served
 * `machineconfiguration.*` group is the one whose keys the node annotations use. */
export async function discover() {
  const apis = await getJSON('/apis');
  const g = (apis.groups || []).find((g) => g.name.startsWith('machineconfiguration.'));
  if (g) group = g.name;
  return group;
}

export const api = {
  get group() { return group; },
  pools: () => `/apis/${group}/v1/machineconfigpools`,
  mcs: () => `/apis/${group}/v1/machineconfigs`,
  nodes: () => '/api/v1/nodes',
  history: '/apis/history.mco.dev/v1',
  /** A node annotation key under the configured group (`<group>/state`). */
  key: (k) => `${group}/${k}`,
};

/** A refused request: the Kubernetes `Status` the server answered. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** GET a JSON document. */
export async function getJSON(url, opts = {}) {
  const r = await authFetch(url, { ...opts, headers: { Accept: 'application/json' } });
  const body = await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

/** A write with the dashboard's actor and, when given, the operator's reason. */
export async function send(method, url, body, { contentType = 'application/json', reason = '' } = {}) {
  const headers = { Accept: 'application/json', 'Content-Type': contentType, 'X-Mco-Actor': ACTOR };
  if (reason) headers['X-Mco-Reason'] = encodeURIComponent(reason);
  const r = await authFetch(url, { method, headers, body: JSON.stringify(body) });
  const answer = await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(r.status, answer);
  return answer;
}

// ---- live lists: LIST, then WATCH from its resourceVersion, resuming after a drop ----

const connListeners = new Set();

/** Calls `f()` now and whenever an informer's state (`connecting`, `live`,
 * `reconnecting`, `refused`: a 401) or `tokenRefused()` changes or one stops; the caller reads the states of the informers it
 * cares about (the current view's). */
export function onConnection(f) {
  connListeners.add(f);
  f();
  return () => connListeners.delete(f);
}
function announce() {
  for (const f of connListeners) f();
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });

/**
 * A live copy of one collection, as client-go's informer keeps it: one LIST, then a WATCH
 * (`?watch=1&resourceVersion=RV`, newline-delimited events read from the fetch body stream).
 * A dropped stream resumes from the last resourceVersion seen (backing off up to 10 s); a
 * 410 Expired relists. Subscribers are told at most once per animation frame.
 */
export class Informer {
  /** `path` may carry a query (a field selector); `from` skips the LIST and watches from that
   * resourceVersion (for a history page already read up to it). */
  constructor(path, { from = null } = {}) {
    this.path = path;
    this.items = new Map();
    this.rv = from;
    this.synced = from !== null;
    this.state = 'connecting';
    this.subs = new Set();
    this.abort = new AbortController();
    this.pending = false;
    this.run();
  }

  /** Calls `f(items)` now (when synced) and on each change; returns the unsubscribe. */
  subscribe(f) {
    this.subs.add(f);
    if (this.synced) f(this.items);
    return () => this.subs.delete(f);
  }

  /** Ends the watch and leaves the connection indicator. */
  stop() {
    this.stopped = true;
    this.abort.abort();
    announce();
  }

  /** Moves to state `s`; leaving `live` records the moment (`confirmedAt`, ms since the
   * epoch): until then the stream was open, so the items were current. */
  setState(s) {
    if (this.state === s) return;
    if (this.state === 'live') this.confirmedAt = Date.now();
    this.state = s;
    announce();
  }

  changed() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      for (const f of this.subs) f(this.items);
    });
  }

  async run() {
    const signal = this.abort.signal;
    let backoff = 500;
    while (!signal.aborted) {
      try {
        if (this.rv === null) {
          const t0 = performance.now();
          const list = await getJSON(this.path, { signal });
          /** How long the last LIST took, fetch and JSON parse (ms). */
          this.listMs = performance.now() - t0;
          this.items = new Map(list.items.map((o) => [o.metadata.name, o]));
          this.rv = list.metadata.resourceVersion;
          /** When the items were last known current (ms since the epoch): the LIST, then the
           * moment a watch stopped being live. */
          this.confirmedAt = Date.now();
          this.synced = true;
          this.changed();
        }
        await this.watch(signal, () => { backoff = 500; });
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ApiError && e.status === 410) this.rv = null;
        // A refused token stays refused: no retry until another one is taken (which drops
        // this informer).
        if (e instanceof ApiError && e.status === 401) { this.setState('refused'); return; }
      }
      if (signal.aborted) return;
      this.setState('reconnecting');
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 10000);
    }
  }

  async watch(signal, opened) {
    const sep = this.path.includes('?') ? '&' : '?';
    const url = `${this.path}${sep}watch=1&resourceVersion=${encodeURIComponent(this.rv)}`;
    const r = await authFetch(url, { signal, headers: { Accept: 'application/json' } });
    if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null));
    this.setState('live');
    opened();
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) this.event(JSON.parse(line));
      }
    }
  }

  event(ev) {
    const o = ev.object || {};
    if (ev.type === 'ERROR') throw new ApiError(o.code || 500, o);
    if (o.metadata && o.metadata.resourceVersion) this.rv = o.metadata.resourceVersion;
    if (ev.type === 'BOOKMARK') return;
    if (ev.type === 'DELETED') this.items.delete(o.metadata.name);
    else this.items.set(o.metadata.name, o);
    this.changed();
  }
}

const informers = new Map();
/** The one shared informer of a collection path (started on first use, kept for the session). */
export function informer(path) {
  if (!informers.has(path)) informers.set(path, new Informer(path));
  return informers.get(path);
}

/** The history events matching `selector` (`object.kind=Node,object.name=worker-0`), one page,
 * oldest first or (`order: 'newest'`) newest first. */
export function historyEvents({ selector = '', since = '', until = '', limit = 50, cont = '', order = '', withObjects = false } = {}) {
  const q = new URLSearchParams();
  if (order) q.set('order', order);
  if (withObjects) q.set('includeObject', 'Object');
  if (selector) q.set('fieldSelector', selector);
  if (since) q.set('since', since);
  if (until) q.set('until', until);
  if (limit) q.set('limit', String(limit));
  if (cont) q.set('continue', cont);
  return getJSON(`${api.history}/events?${q}`);
}

// ---- who the token is, and what it may do ----

/** The identity of the token in force (`SelfSubjectReview`, as `kubectl auth whoami`):
 * `{username, groups}`. */
export async function whoami() {
  const r = await send('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
  return (r.status || {}).userInfo || {};
}

/** Answers of `can`, per question, for the token in force (cleared when it changes). */
const reviews = new Map();

/** Whether the token in force may `verb` the `resource` of `group` (named `name`, or any):
 * the server's `SelfSubjectAccessReview` (as `kubectl auth can-i`), asked once per question
 * and token. A review that fails answers false: an action is offered only when the server
 * said yes. */
export function can(verb, group, resource, name = '') {
  const key = [verb, group, resource, name].join('\n');
  if (!reviews.has(key)) {
    reviews.set(key, send('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { verb, group, resource, name } },
    }).then((r) => !!(r.status && r.status.allowed), () => false));
  }
  return reviews.get(key);
}

takeToken();
