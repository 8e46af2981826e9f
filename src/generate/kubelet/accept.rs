//! Whether the kubelet accepts a kubelet.conf: the rules of Kubernetes'
//! `pkg/kubelet/apis/config/validation/validation.go` (`ValidateKubeletConfiguration`) that a
//! KubeletConfig can reach, with the kubelet's messages, judged after the kubelet's defaulting
//! (`pkg/kubelet/apis/config/v1beta1/defaults.go`: an absent or zero field takes its default,
//! so `maxPods: 0` is 110, not refused).
//!
//! MCO writes whatever the merge produced; a kubelet.conf the kubelet refuses makes every node
//! of the pool NotReady after its reboot. mco refuses such a KubeletConfig instead (its
//! `Accepted` condition names the field and quotes the kubelet's rule): a deliberate difference,
//! stated in the README. Rules that depend on feature gates the cluster sets (CPU CFS quota
//! period, image maximum GC age, crash-loop back-off, log query, memory QoS, image pull
//! credential verification) are left to the kubelet: the gates are not known here. The
//! graceful-shutdown and swap rules assume their gates on, as they are by default.

use super::schema::parse_duration;
use serde_json::Value;

/// A rule the kubelet would refuse the configuration by: the top-level field and the
/// kubelet's message (`invalid configuration: ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `enforceNodeAllocatable`, `maxPods`, ... (under `spec.kubeletConfig`).
    pub field: String,
    /// The kubelet's error text.
    pub message: String,
}

fn refuse(field: &str, message: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal {
        field: field.into(),
        message: message.into(),
    })
}

/// An integer field, or `default` when absent, null or zero (the kubelet's defaulting of
/// zero values; pass `None` for fields whose zero is kept).
fn int(conf: &Value, key: &str, default: Option<i64>) -> Option<i64> {
    match conf[key].as_i64() {
        Some(0) | None => default.or(conf[key].as_i64()),
        Some(n) => Some(n),
    }
}

fn text<'a>(conf: &'a Value, key: &str) -> &'a str {
    conf[key].as_str().unwrap_or("")
}

/// Seconds of a duration field (0 when absent).
fn seconds(conf: &Value, key: &str) -> f64 {
    conf[key].as_str().and_then(parse_duration).unwrap_or(0.0) / 1e9
}

/// Checks `conf` (a KubeletConfiguration as JSON) against the kubelet's validation.
///
/// Errors: the first rule broken, in the kubelet's order.
pub fn check(conf: &Value) -> Result<(), Refusal> {
    if !text(conf, "systemCgroups").is_empty() && text(conf, "cgroupRoot").is_empty() {
        refuse(
            "systemCgroups",
            "invalid configuration: systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified",
        )?;
    }
    for (key, flag) in [
        ("eventBurst", "--event-burst"),
        ("eventRecordQPS", "--event-qps"),
        ("kubeAPIBurst", "--kube-api-burst"),
        ("kubeAPIQPS", "--kube-api-qps"),
        ("maxOpenFiles", "--max-open-files"),
        ("maxPods", "--max-pods"),
        ("podsPerCore", "--pods-per-core"),
        ("registryBurst", "--registry-burst"),
        ("registryPullQPS", "--registry-qps"),
    ] {
        if let Some(n) = conf[key].as_i64().filter(|n| *n < 0) {
            refuse(
                key,
                format!("invalid configuration: {key} ({flag}) {n} must not be a negative number"),
            )?;
        }
    }
    if let Some(p) = conf["healthzPort"]
        .as_i64()
        .filter(|p| *p != 0 && !(1..=65535).contains(p))
    {
        refuse(
            "healthzPort",
            format!("invalid configuration: healthzPort (--healthz-port) {p} must be between 1 and 65535, inclusive"),
        )?;
    }
    let high = int(conf, "imageGCHighThresholdPercent", Some(85)).unwrap_or(85);
    let low = int(conf, "imageGCLowThresholdPercent", Some(80)).unwrap_or(80);
    for (key, flag, v) in [
        ("imageGCHighThresholdPercent", "--image-gc-high-threshold", high),
        ("imageGCLowThresholdPercent", "--image-gc-low-threshold", low),
    ] {
        if !(0..=100).contains(&v) {
            refuse(
                key,
                format!("invalid configuration: {key} ({flag}) {v} must be between 0 and 100, inclusive"),
            )?;
        }
    }
    if low >= high {
        refuse(
            "imageGCLowThresholdPercent",
            format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"),
        )?;
    }
    if seconds(conf, "imageMinimumGCAge") < 0.0 {
        refuse(
            "imageMinimumGCAge",
            format!(
                "invalid configuration: imageMinimumGCAge {} must not be negative",
                text(conf, "imageMinimumGCAge")
            ),
        )?;
    }
    for (key, flag) in [
        ("iptablesDropBit", "--iptables-drop-bit"),
        ("iptablesMasqueradeBit", "--iptables-masquerade-bit"),
    ] {
        if let Some(b) = conf[key].as_i64().filter(|b| !(0..=31).contains(b)) {
            refuse(
                key,
                format!("invalid configuration: {key} ({flag}) {b} must be between 0 and 31, inclusive"),
            )?;
        }
    }
    if let Some(n) = conf["nodeStatusMaxImages"].as_i64().filter(|n| *n < -1) {
        refuse(
            "nodeStatusMaxImages",
            format!("invalid configuration: nodeStatusMaxImages (--node-status-max-images) {n} must be -1 or greater"),
        )?;
    }
    if let Some(n) = conf["oomScoreAdj"].as_i64().filter(|n| !(-1000..=1000).contains(n)) {
        refuse(
            "oomScoreAdj",
            format!(
                "invalid configuration: oomScoreAdj (--oom-score-adj) {n} must be between -1000 and 1000, inclusive"
            ),
        )?;
    }
    if let Some(p) = conf["port"].as_i64().filter(|p| *p != 0 && !(1..=65535).contains(p)) {
        refuse(
            "port",
            format!("invalid configuration: port (--port) {p} must be between 1 and 65535, inclusive"),
        )?;
    }
    if let Some(p) = conf["readOnlyPort"]
        .as_i64()
        .filter(|p| *p != 0 && !(1..=65535).contains(p))
    {
        refuse(
            "readOnlyPort",
            format!(
                "invalid configuration: readOnlyPort (--read-only-port) {p} must be between 0 and 65535, inclusive"
            ),
        )?;
    }
    let parallel = conf["maxParallelImagePulls"].as_i64();
    if let Some(n) = parallel.filter(|n| *n < 1) {
        refuse(
            "maxParallelImagePulls",
            format!("invalid configuration: maxParallelImagePulls {n} must be a positive number"),
        )?;
    }
    // serializeImagePulls defaults to true.
    if conf["serializeImagePulls"].as_bool().unwrap_or(true) && parallel.is_some_and(|n| n > 1) {
        refuse(
            "maxParallelImagePulls",
            "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false",
        )?;
    }
    for (i, t) in conf["registerWithTaints"].as_array().into_iter().flatten().enumerate() {
        if t.get("timeAdded").is_some_and(|v| !v.is_null()) {
            refuse(
                &format!("registerWithTaints[{i}].timeAdded"),
                "invalid configuration: taint.TimeAdded is not nil",
            )?;
        }
    }
    let policy = text(conf, "topologyManagerPolicy");
    if !matches!(policy, "" | "none" | "best-effort" | "restricted" | "single-numa-node") {
        refuse(
            "topologyManagerPolicy",
            format!("invalid configuration: topologyManagerPolicy (--topology-manager-policy) {policy:?} must be one of: [\"none\" \"best-effort\" \"restricted\" \"single-numa-node\"]"),
        )?;
    }
    let scope = text(conf, "topologyManagerScope");
    if !matches!(scope, "" | "container" | "pod") {
        refuse(
            "topologyManagerScope",
            format!("invalid configuration: topologyManagerScope (--topology-manager-scope) {scope:?} must be one of: \"container\", or \"pod\""),
        )?;
    }
    let (grace, critical) = (
        seconds(conf, "shutdownGracePeriod"),
        seconds(conf, "shutdownGracePeriodCriticalPods"),
    );
    if critical > grace {
        refuse(
            "shutdownGracePeriodCriticalPods",
            format!(
                "invalid configuration: shutdownGracePeriodCriticalPods {} must be <= shutdownGracePeriod {}",
                text(conf, "shutdownGracePeriodCriticalPods"),
                text(conf, "shutdownGracePeriod")
            ),
        )?;
    }
    for (key, v) in [
        ("shutdownGracePeriod", grace),
        ("shutdownGracePeriodCriticalPods", critical),
    ] {
        if v < 0.0 || (v > 0.0 && v < 1.0) {
            refuse(
                key,
                format!(
                    "invalid configuration: {key} {} must be either zero or otherwise >= 1 sec",
                    text(conf, key)
                ),
            )?;
        }
    }
    if conf["shutdownGracePeriodByPodPriority"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
        && (grace > 0.0 || critical > 0.0)
    {
        refuse(
            "shutdownGracePeriodByPodPriority",
            "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time",
        )?;
    }
    let swap = conf
        .pointer("/memorySwap/swapBehavior")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !matches!(swap, "" | "NoSwap" | "LimitedSwap") {
        refuse(
            "memorySwap.swapBehavior",
            format!("invalid configuration: memorySwap.swapBehavior {swap:?} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\""),
        )?;
    }
    enforce_node_allocatable(conf)?;
    let hairpin = text(conf, "hairpinMode");
    if !matches!(hairpin, "" | "none" | "hairpin-veth" | "promiscuous-bridge") {
        refuse(
            "hairpinMode",
            format!("invalid configuration: option {hairpin:?} specified for hairpinMode (--hairpin-mode). Valid options are \"none\", \"hairpin-veth\" or \"promiscuous-bridge\""),
        )?;
    }
    let cpus = text(conf, "reservedSystemCPUs");
    if !cpus.is_empty() {
        if !text(conf, "systemReservedCgroup").is_empty() || !text(conf, "kubeReservedCgroup").is_empty() {
            refuse(
                "reservedSystemCPUs",
                "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)",
            )?;
        }
        if !valid_cpuset(cpus) {
            refuse(
                "reservedSystemCPUs",
                format!("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) {cpus}, error: invalid cpuset"),
            )?;
        }
    }
    if let Some(f) = conf["memoryThrottlingFactor"]
        .as_f64()
        .filter(|f| *f <= 0.0 || *f > 1.0)
    {
        refuse(
            "memoryThrottlingFactor",
            format!("invalid configuration: memoryThrottlingFactor {f} must be greater than 0 and less than or equal to 1.0"),
        )?;
    }
    // enableSystemLogHandler defaults to true.
    if conf["enableSystemLogQuery"].as_bool() == Some(true) && conf["enableSystemLogHandler"].as_bool() == Some(false) {
        refuse(
            "enableSystemLogHandler",
            "invalid configuration: enableSystemLogHandler is required for enableSystemLogQuery",
        )?;
    }
    // containerLogMaxWorkers defaults to 1, containerLogMaxFiles to 5, containerLogMonitorInterval to 10s.
    if conf["containerLogMaxWorkers"].as_i64().is_some_and(|n| n < 1) {
        refuse(
            "containerLogMaxWorkers",
            "invalid configuration: containerLogMaxWorkers must be greater than or equal to 1",
        )?;
    }
    if conf["containerLogMonitorInterval"].is_string() && seconds(conf, "containerLogMonitorInterval") < 3.0 {
        refuse(
            "containerLogMonitorInterval",
            "invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s",
        )?;
    }
    if conf["containerLogMaxFiles"].as_i64().is_some_and(|n| n <= 1) {
        refuse(
            "containerLogMaxFiles",
            "invalid configuration: containerLogMaxFiles must be greater than 1",
        )?;
    }
    if let Some(dir) = conf["podLogsDir"].as_str().filter(|d| !d.is_empty()) {
        if !dir.starts_with('/') {
            refuse(
                "podLogsDir",
                format!("invalid configuration: pod logs path {dir:?} must be absolute path"),
            )?;
        }
        // Go's `filepath.Clean(dir) == dir`: no empty, `.` or `..` element, no trailing slash.
        let clean = dir == "/" || dir[1..].split('/').all(|c| !matches!(c, "" | "." | ".."));
        if dir.starts_with('/') && !clean {
            refuse(
                "podLogsDir",
                format!("invalid configuration: pod logs path {dir:?} must be normalized"),
            )?;
        }
        if !dir.is_ascii() {
            refuse(
                "podLogsDir",
                format!("invalid configuration: pod logs path {dir:?} mut contains ASCII characters only"),
            )?;
        }
    }
    Ok(())
}

/// The `enforceNodeAllocatable` rules: no key twice, `system-reserved` and
/// `system-reserved-compressible` (and the kube-reserved pair) not together, each reserved key
/// with its cgroup, `none` alone, only known keys, and `cgroupsPerQOS` (default true) on.
fn enforce_node_allocatable(conf: &Value) -> Result<(), Refusal> {
    const FIELD: &str = "enforceNodeAllocatable";
    let list: Vec<&str> = conf[FIELD]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let has = |k: &str| list.contains(&k);
    for (a, b) in [
        ("system-reserved", "system-reserved-compressible"),
        ("kube-reserved", "kube-reserved-compressible"),
    ] {
        if has(a) && has(b) {
            refuse(
                FIELD,
                format!("invalid configuration: both {a:?} and {b:?} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"),
            )?;
        }
    }
    let mut seen = Vec::new();
    for v in &list {
        if seen.contains(v) {
            refuse(
                FIELD,
                format!("invalid configuration: duplicated enforcements {v:?} in enforceNodeAllocatable (--enforce-node-allocatable)"),
            )?;
        }
        seen.push(*v);
        match *v {
            "pods" => {}
            "system-reserved" | "system-reserved-compressible" if text(conf, "systemReservedCgroup").is_empty() => refuse(
                FIELD,
                "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)",
            )?,
            "kube-reserved" | "kube-reserved-compressible" if text(conf, "kubeReservedCgroup").is_empty() => refuse(
                FIELD,
                "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)",
            )?,
            "system-reserved" | "system-reserved-compressible" | "kube-reserved" | "kube-reserved-compressible" => {}
            "none" => {
                if list.len() > 1 {
                    refuse(
                        FIELD,
                        "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when \"none\" is specified",
                    )?;
                }
                continue;
            }
            other => refuse(
                FIELD,
                format!("invalid configuration: option {other:?} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\", \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\", \"kube-reserved-compressible\" or \"none\""),
            )?,
        }
        if conf["cgroupsPerQOS"].as_bool() == Some(false) {
            refuse(
                "cgroupsPerQOS",
                format!("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when {v:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)"),
            )?;
        }
    }
    Ok(())
}

/// A Linux CPU list as `k8s.io/utils/cpuset.Parse` accepts it: comma-separated CPUs and
/// ranges `a-b` with `a <= b` (`0-3,8`); empty is the empty set.
fn valid_cpuset(s: &str) -> bool {
    s.split(',').all(|part| {
        let mut ends = part.trim().splitn(2, '-').map(|n| n.trim().parse::<u32>());
        match (ends.next(), ends.next()) {
            (Some(Ok(_)), None) => true,
            (Some(Ok(a)), Some(Ok(b))) => a <= b,
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(conf: Value) -> Refusal {
        check(&conf).unwrap_err()
    }

    /// The kubelet's rules, its messages (`pkg/kubelet/apis/config/validation/validation.go`).
    #[test]
    fn enforce_node_allocatable_needs_its_cgroups() {
        let e = refused(json!({"enforceNodeAllocatable": ["pods", "system-reserved"]}));
        assert_eq!(e.field, "enforceNodeAllocatable");
        assert_eq!(e.message, "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)");
        check(&json!({"enforceNodeAllocatable": ["pods", "system-reserved"], "systemReservedCgroup": "/system.slice"}))
            .unwrap();
        assert!(refused(json!({"enforceNodeAllocatable": ["kube-reserved"]}))
            .message
            .starts_with("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified"));
        assert!(refused(json!({"enforceNodeAllocatable": ["pods", "pods"]}))
            .message
            .contains("duplicated enforcements \"pods\""));
        assert!(refused(json!({"enforceNodeAllocatable": ["none", "pods"]}))
            .message
            .contains("may not contain additional enforcements when \"none\""));
        assert!(refused(json!({"enforceNodeAllocatable": ["podz"]}))
            .message
            .starts_with("invalid configuration: option \"podz\" specified for enforceNodeAllocatable"));
        assert!(refused(json!({"enforceNodeAllocatable": ["system-reserved", "system-reserved-compressible"], "systemReservedCgroup": "/s"}))
            .message
            .contains("cannot be specified together"));
        assert_eq!(
            refused(json!({"enforceNodeAllocatable": ["pods"], "cgroupsPerQOS": false})).field,
            "cgroupsPerQOS"
        );
        check(&json!({"enforceNodeAllocatable": ["none"], "cgroupsPerQOS": false})).unwrap();
    }

    #[test]
    fn reserved_cpus_exclude_the_reserved_cgroups_and_must_parse() {
        assert!(
            refused(json!({"reservedSystemCPUs": "0-1", "systemReservedCgroup": "/system.slice"}))
                .message
                .starts_with("invalid configuration: can't use reservedSystemCPUs")
        );
        assert!(refused(json!({"reservedSystemCPUs": "3-1"}))
            .message
            .starts_with("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) 3-1"));
        check(&json!({"reservedSystemCPUs": "0-1,4"})).unwrap();
    }

    /// Zero is the kubelet's "unset": defaults apply before validation.
    #[test]
    fn ranges_after_the_kubelets_defaults() {
        check(&json!({"maxPods": 0, "imageGCHighThresholdPercent": 0, "kubeAPIQPS": 0})).unwrap();
        assert_eq!(
            refused(json!({"maxPods": -1})).message,
            "invalid configuration: maxPods (--max-pods) -1 must not be a negative number"
        );
        assert_eq!(
            refused(json!({"imageGCLowThresholdPercent": 90})).message,
            "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 90 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85"
        );
        assert_eq!(
            refused(json!({"systemCgroups": "/system.slice"})).field,
            "systemCgroups"
        );
        assert_eq!(
            refused(json!({"shutdownGracePeriod": "10s", "shutdownGracePeriodCriticalPods": "20s"})).field,
            "shutdownGracePeriodCriticalPods"
        );
        assert_eq!(
            refused(json!({"shutdownGracePeriod": "500ms"})).field,
            "shutdownGracePeriod"
        );
        assert_eq!(
            refused(json!({"containerLogMaxFiles": 1})).field,
            "containerLogMaxFiles"
        );
        assert_eq!(refused(json!({"podLogsDir": "var/log"})).field, "podLogsDir");
        assert_eq!(refused(json!({"podLogsDir": "/var//log"})).field, "podLogsDir");
        assert_eq!(
            refused(json!({"topologyManagerPolicy": "strict"})).field,
            "topologyManagerPolicy"
        );
        assert_eq!(
            refused(json!({"maxParallelImagePulls": 5})).message,
            "invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false"
        );
        check(&json!({"maxParallelImagePulls": 5, "serializeImagePulls": false})).unwrap();
    }
}
