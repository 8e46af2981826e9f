"""The official Kubernetes Python client against an mco server, as its users drive it.

Run by tests/python_client.rs with the venv that .ci/run builds: `python client.py KUBECONFIG
GROUP NODE`. Each check prints one `ok <what>: <detail>` line; the first failure raises, and the
traceback names it (exit status 1).
"""

import sys

from kubernetes import client, config, watch
from kubernetes.dynamic import DynamicClient

kubeconfig, group, node_name = sys.argv[1:4]
api = config.new_client_from_config(config_file=kubeconfig)


def ok(what, detail):
    print(f"ok {what}: {detail}", flush=True)


# VersionApi().get_code() asks GET /version/ (with the slash).
version = client.VersionApi(api).get_code()
ok("version", version.git_version)

# CoreV1Api: a Node never cordoned has spec {} (unschedulable None, no AttributeError), and
# the status a kubelet reports.
core = client.CoreV1Api(api)
node = core.read_node(node_name)
assert node.spec is not None, "node.spec is None"
assert node.spec.unschedulable is None, f"unschedulable {node.spec.unschedulable!r}"
ok("node spec.unschedulable", node.spec.unschedulable)
assert node.status.capacity and "cpu" in node.status.capacity, node.status.capacity
ok("node capacity", ",".join(f"{k}={v}" for k, v in sorted(node.status.capacity.items())))
addresses = {a.type: a.address for a in node.status.addresses or []}
assert addresses.get("Hostname") == node_name, addresses
ok("node addresses", ",".join(f"{k}={v}" for k, v in sorted(addresses.items())))
names = [n.metadata.name for n in core.list_node().items]
assert node_name in names, names
ok("list_node", ",".join(names))

# CustomObjectsApi on machineconfigpools.
custom = client.CustomObjectsApi(api)
pools = custom.list_cluster_custom_object(group, "v1", "machineconfigpools")
pool_names = sorted(p["metadata"]["name"] for p in pools["items"])
assert "worker" in pool_names and "master" in pool_names, pool_names
ok("list machineconfigpools", ",".join(pool_names))
worker = custom.get_cluster_custom_object(group, "v1", "machineconfigpools", "worker")
ok("get machineconfigpool worker", worker["spec"]["configuration"]["name"])


def machine_config(name, args):
    return {
        "apiVersion": f"{group}/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {f"{group}/role": "nobody"}},
        "spec": {"kernelArguments": args, "config": {"ignition": {"version": "3.4.0"}}},
    }


# watch.Watch().stream() from a list's resourceVersion, stopped, then resumed from the last
# resourceVersion it saw: the resumed stream starts after it (no event twice, none missed).
listed = custom.list_cluster_custom_object(group, "v1", "machineconfigs")
start = listed["metadata"]["resourceVersion"]
created = custom.create_cluster_custom_object(group, "v1", "machineconfigs", machine_config("99-python", ["a=1"]))
# No field manager given: kube-apiserver records the User-Agent's prefix (prefixFromUserAgent).
ok("created by", ",".join(f["manager"] for f in created["metadata"]["managedFields"]))
ok("user agent", api.user_agent)
w = watch.Watch()
seen = []
for event in w.stream(
    custom.list_cluster_custom_object, group, "v1", "machineconfigs",
    resource_version=start, timeout_seconds=30,
):
    obj = event["object"]
    seen.append((event["type"], obj["metadata"]["name"]))
    if obj["metadata"]["name"] == "99-python":
        w.stop()
assert ("ADDED", "99-python") in seen, seen
last = w.resource_version
ok("watch from a list", f"{seen[-1][0]} {seen[-1][1]} at {last}")
custom.patch_cluster_custom_object(
    group, "v1", "machineconfigs", "99-python", {"spec": {"kernelArguments": ["a=2"]}}
)
w = watch.Watch()
resumed = []
for event in w.stream(
    custom.list_cluster_custom_object, group, "v1", "machineconfigs",
    resource_version=last, timeout_seconds=30,
):
    obj = event["object"]
    resumed.append((event["type"], obj["metadata"]["name"], obj["spec"].get("kernelArguments")))
    if obj["metadata"]["name"] == "99-python":
        w.stop()
assert resumed[0] == ("MODIFIED", "99-python", ["a=2"]), resumed
ok("watch resumed", f"{resumed[0][0]} {resumed[0][1]} {resumed[0][2]}")

# The DynamicClient finds MachineConfig by kind alone: one resource per kind in discovery.
dyn = DynamicClient(api)
mc = dyn.resources.get(kind="MachineConfig")
ok("dynamic kind MachineConfig", mc.group_version)
items = [i.metadata.name for i in mc.get().items]
assert "99-python" in items, items
pool = dyn.resources.get(kind="MachineConfigPool")
ok("dynamic kind MachineConfigPool", pool.group_version)
nodes = dyn.resources.get(api_version="v1", kind="Node")
ok("dynamic nodes", ",".join(n.metadata.name for n in nodes.get().items))
custom.delete_cluster_custom_object(group, "v1", "machineconfigs", "99-python")
ok("done", "all checks passed")
