//! What the node agent reports in its Node's `status.capacity`, `status.allocatable` and
//! `status.addresses`, computed as the kubelet computes them from the machine and from the
//! kubelet configuration the node runs (`/etc/kubernetes/kubelet.conf`, written from the
//! rendered config):
//!
//! - capacity (`pkg/kubelet/nodestatus/setters.go` `MachineInfo`, from cadvisor's machine
//!   info): `cpu` the online CPUs, `memory` `MemTotal` of `/proc/meminfo`, `ephemeral-storage`
//!   the size of the file system holding the node's root (the kubelet's root directory is on
//!   it; cadvisor's `getVfsStats`: blocks × fragment size), `pods` the configuration's `maxPods` (default 110); quantities in the kubelet's
//!   formats (`cpu` DecimalSI, bytes BinarySI: `16318712Ki`);
//! - allocatable: capacity less `kubeReserved`, `systemReserved` and the hard eviction
//!   threshold of `memory.available` / `nodefs.available` (`pkg/kubelet/cm/
//!   node_container_manager_linux.go` `getNodeAllocatableAbsoluteImpl`, with
//!   `GetNodeAllocatableReservation`; the kubelet's default thresholds when the configuration
//!   sets none: `100Mi`, `10%`), never below zero. Reservations passed as kubelet flags
//!   (MCO's node-sizing environment) are not seen: mco's agent reads only the configuration;
//! - addresses (`NodeAddress` setter): `InternalIP` the address this host reaches the server
//!   from (the kernel's source address for the server's address: what the kubelet's
//!   default-route choice gives on a one-network host) and `Hostname` the node name.

use crate::generate::quantity::Quantity;
use serde_json::{json, Map, Value};
use std::path::Path;

/// The kubelet's `maxPods` default (`KubeletConfiguration` v1beta1 defaults).
const DEFAULT_MAX_PODS: i64 = 110;

/// The kubelet's default hard eviction thresholds that reserve capacity
/// (`pkg/kubelet/eviction/defaults_linux.go` `DefaultEvictionHard`).
const DEFAULT_EVICTION_HARD: [(&str, &str); 2] = [("memory.available", "100Mi"), ("nodefs.available", "10%")];

/// The machine's own figures, as cadvisor reads them.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: i64,
    /// `MemTotal`, bytes.
    pub memory_bytes: i128,
    /// Size of the root file system, bytes.
    pub storage_bytes: i128,
}

impl Machine {
    /// Reads the machine under `root` (a sandbox node's root, or `/`).
    pub fn read(root: &Path) -> Machine {
        // SAFETY: sysconf has no preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i64;
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| mem_total_kib(&t))
            .map_or(0, |k| k * 1024);
        let storage_bytes = rustix::fs::statfs(root)
            .map(|s| s.f_blocks as i128 * s.f_frsize as i128)
            .unwrap_or(0);
        Machine {
            cpus,
            memory_bytes,
            storage_bytes,
        }
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in KiB.
fn mem_total_kib(meminfo: &str) -> Option<i128> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A byte count in the kubelet's BinarySI form (`Quantity.String()`).
fn bytes(n: i128) -> String {
    if n % 1024 == 0 && n != 0 {
        Quantity::parse(&format!("{}Ki", n / 1024)).map_or_else(|_| n.to_string(), |q| q.to_string())
    } else {
        n.to_string()
    }
}

/// A CPU amount in millicores, in DecimalSI (`4`, `3500m`).
fn cpu(millis: i128) -> String {
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// The reservation of `resource` in a reserved map (`systemReserved`, `kubeReserved`), in the
/// unit the capacity is counted in (millicores for `cpu`, bytes otherwise).
fn reserved(map: &Value, resource: &str) -> i128 {
    let Some(q) = map
        .get(resource)
        .and_then(|v| crate::generate::quantity::parse_json(v).ok())
    else {
        return 0;
    };
    if resource == "cpu" {
        milli(&q)
    } else {
        q.value()
    }
}

/// `Quantity.MilliValue()` from its canonical text.
fn milli(q: &Quantity) -> i128 {
    let text = q.to_string();
    match text.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.value().saturating_mul(1000),
    }
}

/// A hard eviction threshold against `capacity` bytes: a quantity, or a percentage of it
/// (`int64(float64(capacity.Value()) * float64(percentage))`, as the kubelet computes it).
fn threshold(value: &str, capacity: i128) -> i128 {
    match value.strip_suffix('%') {
        Some(p) => p
            .trim()
            .parse::<f64>()
            .map_or(0, |p| (capacity as f64 * (p / 100.0)) as i128),
        None => Quantity::parse(value.trim()).map_or(0, |q| q.value()),
    }
}

/// `status.capacity` and `status.allocatable` of a node on `machine` running `kubelet` (the
/// parsed kubelet configuration; `Null` when there is none).
pub fn capacity_and_allocatable(machine: &Machine, kubelet: &Value) -> (Value, Value) {
    let max_pods = kubelet["maxPods"].as_i64().unwrap_or(DEFAULT_MAX_PODS);
    let eviction: Map<String, Value> = match kubelet["evictionHard"].as_object() {
        Some(m) => m.clone(),
        None => DEFAULT_EVICTION_HARD
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    };
    let signal = |name: &str, cap: i128| {
        eviction
            .get(name)
            .and_then(Value::as_str)
            .map_or(0, |v| threshold(v, cap))
    };
    let held = |r: &str| reserved(&kubelet["systemReserved"], r) + reserved(&kubelet["kubeReserved"], r);
    let cpu_millis = i128::from(machine.cpus) * 1000;
    let capacity = json!({
        "cpu": cpu(cpu_millis),
        "ephemeral-storage": bytes(machine.storage_bytes),
        "memory": bytes(machine.memory_bytes),
        "pods": max_pods.to_string(),
    });
    let allocatable = json!({
        "cpu": cpu((cpu_millis - held("cpu")).max(0)),
        "ephemeral-storage": bytes((machine.storage_bytes - held("ephemeral-storage") - signal("nodefs.available", machine.storage_bytes)).max(0)),
        "memory": bytes((machine.memory_bytes - held("memory") - signal("memory.available", machine.memory_bytes)).max(0)),
        "pods": max_pods.to_string(),
    });
    (capacity, allocatable)
}

/// The kubelet configuration file's text parsed (YAML or JSON); `Null` when unreadable.
pub fn parse_kubelet_config(text: Option<&[u8]>) -> Value {
    text.and_then(|t| serde_saphyr::from_slice::<Value>(t).ok())
        .unwrap_or(Value::Null)
}

/// `status.addresses`: the address this host reaches `server` from, and the node name.
pub fn addresses(server: &str, node: &str) -> Value {
    let mut out = Vec::new();
    if let Some(ip) = source_address(server) {
        out.push(json!({"type": "InternalIP", "address": ip}));
    }
    out.push(json!({"type": "Hostname", "address": node}));
    Value::Array(out)
}

/// The kernel's source address for the first server of `servers` (a UDP socket connected to
/// it sends nothing).
fn source_address(servers: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    let first = servers.split(',').next()?.trim();
    let rest = first.split_once("://").map_or(first, |(_, r)| r);
    let host_port = rest.split('/').next()?;
    let with_port = if host_port
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host_port.to_string()
    } else {
        format!("{host_port}:443")
    };
    let addr = with_port.to_socket_addrs().ok()?.next()?;
    let bind = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let socket = std::net::UdpSocket::bind(bind).ok()?;
    socket.connect(addr).ok()?;
    Some(socket.local_addr().ok()?.ip().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine {
            cpus: 4,
            memory_bytes: 16_318_712 * 1024,
            storage_bytes: 102_687_672 * 1024,
        }
    }

    #[test]
    fn without_a_configuration_the_kubelet_defaults_reserve() {
        let (cap, alloc) = capacity_and_allocatable(&machine(), &Value::Null);
        assert_eq!(
            cap,
            json!({"cpu": "4", "ephemeral-storage": "102687672Ki", "memory": "16318712Ki", "pods": "110"})
        );
        // memory: 16318712Ki - 100Mi; storage: capacity less 10 % of it, in bytes.
        let storage = 102_687_672i128 * 1024;
        assert_eq!(
            alloc,
            json!({"cpu": "4", "ephemeral-storage": (storage - (storage as f64 * 0.1) as i128).to_string(),
                "memory": "16216312Ki", "pods": "110"})
        );
    }

    #[test]
    fn reservations_and_thresholds_of_the_configuration() {
        let kubelet = parse_kubelet_config(Some(
            b"maxPods: 250\nsystemReserved:\n  cpu: 500m\n  memory: 1Gi\nkubeReserved:\n  ephemeral-storage: 1Gi\nevictionHard:\n  memory.available: 200Mi\n",
        ));
        let (cap, alloc) = capacity_and_allocatable(&machine(), &kubelet);
        assert_eq!(cap["pods"], "250");
        assert_eq!(alloc["cpu"], "3500m");
        assert_eq!(alloc["memory"], format!("{}Ki", 16_318_712 - 1024 * 1024 - 200 * 1024));
        // evictionHard set without nodefs.available: no storage threshold.
        assert_eq!(alloc["ephemeral-storage"], format!("{}Ki", 102_687_672 - 1024 * 1024));
    }

    #[test]
    fn meminfo_and_addresses() {
        assert_eq!(
            mem_total_kib("MemTotal:       16318712 kB\nMemFree: 1 kB\n"),
            Some(16_318_712)
        );
        let a = addresses("https://127.0.0.1:6443", "worker-0");
        assert_eq!(
            a,
            json!([{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": "worker-0"}])
        );
    }
}
