// The official Kubernetes JavaScript client (`@kubernetes/client-node` on npm, what Node.js
// dashboards and tools build on) against a real mco server, as its users drive it: VersionApi,
// CoreV1Api (read and list nodes), CustomObjectsApi (list and get pools; create, merge-patch and
// delete a MachineConfig), the generic KubernetesObjectApi (kind to resource through discovery),
// an informer (makeInformer: list, then watch) seeing add, update and delete, and a Watch of the
// nodes from a list's resourceVersion. Run by tests/node_client.rs:
//   node client.mjs KUBECONFIG GROUP NODE
// Prints `ok <what>: <value>` per check; any failure throws (exit status 1).

import * as k8s from '@kubernetes/client-node';

const [kubeconfig, group, nodeName] = process.argv.slice(2);
const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);

function ok(what, value) {
  console.log(`ok ${what}: ${value}`);
}

function check(cond, what) {
  if (!cond) {
    throw new Error(`check failed: ${what}`);
  }
}

// Resolves when `pred()` holds, checked after each event; rejects after `ms`.
function until(pred, what, ms = 30000) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      if (pred()) return resolve();
      if (Date.now() - started > ms) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 20);
    };
    tick();
  });
}

const version = await kc.makeApiClient(k8s.VersionApi).getCode();
ok('version', version.gitVersion);

const core = kc.makeApiClient(k8s.CoreV1Api);
const node = await core.readNode({ name: nodeName });
check(node.spec !== undefined, 'a Node has spec');
ok('node spec.unschedulable', String(node.spec.unschedulable));
ok('node capacity pods', node.status.capacity.pods);
ok('node address', node.status.addresses.map((a) => `${a.type}=${a.address}`).join(','));
const nodes = await core.listNode();
ok('nodes listed', nodes.items.map((n) => n.metadata.name).join(','));

const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const pools = await custom.listClusterCustomObject({ group, version: 'v1', plural: 'machineconfigpools' });
ok('pools', pools.items.map((p) => p.metadata.name).sort().join(','));
const worker = await custom.getClusterCustomObject({ group, version: 'v1', plural: 'machineconfigpools', name: 'worker' });
ok('worker rendered', worker.spec.configuration.name.startsWith('rendered-worker-'));

// An informer of MachineConfigs: its cache and add/update/delete callbacks.
const seen = [];
const informer = k8s.makeInformer(kc, `/apis/${group}/v1/machineconfigs`, () =>
  custom.listClusterCustomObject({ group, version: 'v1', plural: 'machineconfigs' }),
);
informer.on('add', (o) => seen.push(`add ${o.metadata.name}`));
informer.on('update', (o) => seen.push(`update ${o.metadata.name} ${JSON.stringify(o.spec.kernelArguments)}`));
informer.on('delete', (o) => seen.push(`delete ${o.metadata.name}`));
let informerError = null;
informer.on('error', (e) => {
  informerError = e;
});
await informer.start();
const listed = informer.list().length;
check(listed > 0, 'the informer lists the MachineConfigs');

const mc = {
  apiVersion: `${group}/v1`,
  kind: 'MachineConfig',
  metadata: { name: '99-node-client', labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
  spec: { kernelArguments: ['a=1'] },
};
const created = await custom.createClusterCustomObject({ group, version: 'v1', plural: 'machineconfigs', body: mc });
ok('created', created.metadata.name);
await custom.patchClusterCustomObject(
  { group, version: 'v1', plural: 'machineconfigs', name: '99-node-client', body: { spec: { kernelArguments: ['a=2'] } } },
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
);
// The generic client maps the kind to its resource through discovery.
const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
const read = await objects.read({ apiVersion: `${group}/v1`, kind: 'MachineConfig', metadata: { name: '99-node-client' } });
ok('object api read', JSON.stringify(read.spec.kernelArguments));
await until(() => seen.includes('update 99-node-client ["a=2"]'), 'the informer update');
await custom.deleteClusterCustomObject({ group, version: 'v1', plural: 'machineconfigs', name: '99-node-client' });
await until(() => seen.includes('delete 99-node-client'), 'the informer delete');
check(informerError === null, `informer error: ${informerError}`);
ok('informer', seen.filter((s) => s.includes('99-node-client')).join('; '));
await informer.stop();

// A Watch of the nodes from the list's resourceVersion: a label change arrives as MODIFIED.
const events = [];
const watch = new k8s.Watch(kc);
const req = await watch.watch(
  '/api/v1/nodes',
  { resourceVersion: nodes.metadata.resourceVersion, fieldSelector: `metadata.name=${nodeName}` },
  (type, obj) => events.push(`${type} ${obj.metadata.name} ${obj.metadata.labels['example.com/js'] ?? ''}`),
  () => {},
);
await core.patchNode(
  { name: nodeName, body: { metadata: { labels: { 'example.com/js': 'yes' } } } },
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
);
await until(() => events.includes(`MODIFIED ${nodeName} yes`), 'the watched node label');
req.abort();
ok('watch', `MODIFIED ${nodeName} yes`);
ok('done', 'all checks passed');
