//! The field types of the kubelet's `KubeletConfiguration` (`k8s.io/kubelet/config/v1beta1`
//! `types.go`), for the type check MCO gets from decoding `spec.kubeletConfig` into that Go
//! struct (`DecodeKubeletConfig`, `encoding/json` rules: a JSON value of the wrong kind, a
//! fraction or an out-of-range number for an integer field, or a duration `time.ParseDuration`
//! refuses is an error; unknown keys and `null` are accepted), and for the merge's zero rule
//! ([`is_zero`]).

use serde_json::Value;

/// The Go type of one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Str,
    Bool,
    I32,
    I64,
    U32,
    F64,
    /// `metav1.Duration`: a JSON string `time.ParseDuration` accepts.
    Duration,
    StrList,
    /// `map[string]string`.
    StrMap,
    /// `map[string]bool`.
    BoolMap,
    /// `map[string][]string`.
    StrListMap,
    /// A nested struct with its own fields.
    Struct(&'static [(&'static str, Ty)]),
    /// A list of structs.
    StructList(&'static [(&'static str, Ty)]),
    /// Any JSON object (structs whose inner shape the kubelet checks itself, e.g. `logging`).
    Object,
}

const X509: &[(&str, Ty)] = &[("clientCAFile", Ty::Str)];
const AUTHN_WEBHOOK: &[(&str, Ty)] = &[("enabled", Ty::Bool), ("cacheTTL", Ty::Duration)];
const ANONYMOUS: &[(&str, Ty)] = &[("enabled", Ty::Bool)];
const AUTHENTICATION: &[(&str, Ty)] = &[
    ("x509", Ty::Struct(X509)),
    ("webhook", Ty::Struct(AUTHN_WEBHOOK)),
    ("anonymous", Ty::Struct(ANONYMOUS)),
];
const AUTHZ_WEBHOOK: &[(&str, Ty)] = &[
    ("cacheAuthorizedTTL", Ty::Duration),
    ("cacheUnauthorizedTTL", Ty::Duration),
];
const AUTHORIZATION: &[(&str, Ty)] = &[("mode", Ty::Str), ("webhook", Ty::Struct(AUTHZ_WEBHOOK))];
const MEMORY_SWAP: &[(&str, Ty)] = &[("swapBehavior", Ty::Str)];
const SHUTDOWN_BY_PRIORITY: &[(&str, Ty)] = &[("priority", Ty::I32), ("shutdownGracePeriodSeconds", Ty::I64)];
const CRASH_LOOP: &[(&str, Ty)] = &[("maxContainerRestartPeriod", Ty::Duration)];
const RESERVED_MEMORY: &[(&str, Ty)] = &[("numaNode", Ty::I32), ("limits", Ty::Object)];
const TAINT: &[(&str, Ty)] = &[
    ("key", Ty::Str),
    ("value", Ty::Str),
    ("effect", Ty::Str),
    ("timeAdded", Ty::Str),
];
const TRACING: &[(&str, Ty)] = &[("endpoint", Ty::Str), ("samplingRatePerMillion", Ty::I32)];
const USER_NAMESPACES: &[(&str, Ty)] = &[("idsPerPod", Ty::I64)];

/// Every field of `KubeletConfiguration` v1beta1 with its Go type.
pub const FIELDS: &[(&str, Ty)] = &[
    ("kind", Ty::Str),
    ("apiVersion", Ty::Str),
    ("enableServer", Ty::Bool),
    ("staticPodPath", Ty::Str),
    ("podLogsDir", Ty::Str),
    ("syncFrequency", Ty::Duration),
    ("fileCheckFrequency", Ty::Duration),
    ("httpCheckFrequency", Ty::Duration),
    ("staticPodURL", Ty::Str),
    ("staticPodURLHeader", Ty::StrListMap),
    ("address", Ty::Str),
    ("port", Ty::I32),
    ("readOnlyPort", Ty::I32),
    ("tlsCertFile", Ty::Str),
    ("tlsPrivateKeyFile", Ty::Str),
    ("tlsCipherSuites", Ty::StrList),
    ("tlsMinVersion", Ty::Str),
    ("rotateCertificates", Ty::Bool),
    ("serverTLSBootstrap", Ty::Bool),
    ("authentication", Ty::Struct(AUTHENTICATION)),
    ("authorization", Ty::Struct(AUTHORIZATION)),
    ("registryPullQPS", Ty::I32),
    ("registryBurst", Ty::I32),
    ("imagePullCredentialsVerificationPolicy", Ty::Str),
    ("preloadedImagesVerificationAllowlist", Ty::StrList),
    ("eventRecordQPS", Ty::I32),
    ("eventBurst", Ty::I32),
    ("enableDebuggingHandlers", Ty::Bool),
    ("enableContentionProfiling", Ty::Bool),
    ("healthzPort", Ty::I32),
    ("healthzBindAddress", Ty::Str),
    ("oomScoreAdj", Ty::I32),
    ("clusterDomain", Ty::Str),
    ("clusterDNS", Ty::StrList),
    ("streamingConnectionIdleTimeout", Ty::Duration),
    ("nodeStatusUpdateFrequency", Ty::Duration),
    ("nodeStatusReportFrequency", Ty::Duration),
    ("nodeLeaseDurationSeconds", Ty::I32),
    ("imageMinimumGCAge", Ty::Duration),
    ("imageMaximumGCAge", Ty::Duration),
    ("imageGCHighThresholdPercent", Ty::I32),
    ("imageGCLowThresholdPercent", Ty::I32),
    ("volumeStatsAggPeriod", Ty::Duration),
    ("kubeletCgroups", Ty::Str),
    ("systemCgroups", Ty::Str),
    ("cgroupRoot", Ty::Str),
    ("cgroupsPerQOS", Ty::Bool),
    ("cgroupDriver", Ty::Str),
    ("cpuManagerPolicy", Ty::Str),
    ("singleProcessOOMKill", Ty::Bool),
    ("cpuManagerPolicyOptions", Ty::StrMap),
    ("cpuManagerReconcilePeriod", Ty::Duration),
    ("memoryManagerPolicy", Ty::Str),
    ("topologyManagerPolicy", Ty::Str),
    ("topologyManagerScope", Ty::Str),
    ("topologyManagerPolicyOptions", Ty::StrMap),
    ("qosReserved", Ty::StrMap),
    ("runtimeRequestTimeout", Ty::Duration),
    ("hairpinMode", Ty::Str),
    ("maxPods", Ty::I32),
    ("podCIDR", Ty::Str),
    ("podPidsLimit", Ty::I64),
    ("resolvConf", Ty::Str),
    ("runOnce", Ty::Bool),
    ("cpuCFSQuota", Ty::Bool),
    ("cpuCFSQuotaPeriod", Ty::Duration),
    ("nodeStatusMaxImages", Ty::I32),
    ("maxOpenFiles", Ty::I64),
    ("contentType", Ty::Str),
    ("kubeAPIQPS", Ty::I32),
    ("kubeAPIBurst", Ty::I32),
    ("serializeImagePulls", Ty::Bool),
    ("maxParallelImagePulls", Ty::I32),
    ("evictionHard", Ty::StrMap),
    ("evictionSoft", Ty::StrMap),
    ("evictionSoftGracePeriod", Ty::StrMap),
    ("evictionPressureTransitionPeriod", Ty::Duration),
    ("evictionMaxPodGracePeriod", Ty::I32),
    ("evictionMinimumReclaim", Ty::StrMap),
    ("mergeDefaultEvictionSettings", Ty::Bool),
    ("podsPerCore", Ty::I32),
    ("enableControllerAttachDetach", Ty::Bool),
    ("protectKernelDefaults", Ty::Bool),
    ("makeIPTablesUtilChains", Ty::Bool),
    ("iptablesMasqueradeBit", Ty::I32),
    ("iptablesDropBit", Ty::I32),
    ("featureGates", Ty::BoolMap),
    ("failSwapOn", Ty::Bool),
    ("memorySwap", Ty::Struct(MEMORY_SWAP)),
    ("containerLogMaxSize", Ty::Str),
    ("containerLogMaxFiles", Ty::I32),
    ("containerLogMaxWorkers", Ty::I32),
    ("containerLogMonitorInterval", Ty::Duration),
    ("configMapAndSecretChangeDetectionStrategy", Ty::Str),
    ("systemReserved", Ty::StrMap),
    ("kubeReserved", Ty::StrMap),
    ("reservedSystemCPUs", Ty::Str),
    ("showHiddenMetricsForVersion", Ty::Str),
    ("systemReservedCgroup", Ty::Str),
    ("kubeReservedCgroup", Ty::Str),
    ("enforceNodeAllocatable", Ty::StrList),
    ("allowedUnsafeSysctls", Ty::StrList),
    ("volumePluginDir", Ty::Str),
    ("providerID", Ty::Str),
    ("kernelMemcgNotification", Ty::Bool),
    ("logging", Ty::Object),
    ("enableSystemLogHandler", Ty::Bool),
    ("enableSystemLogQuery", Ty::Bool),
    ("shutdownGracePeriod", Ty::Duration),
    ("shutdownGracePeriodCriticalPods", Ty::Duration),
    ("shutdownGracePeriodByPodPriority", Ty::StructList(SHUTDOWN_BY_PRIORITY)),
    ("crashLoopBackOff", Ty::Struct(CRASH_LOOP)),
    ("reservedMemory", Ty::StructList(RESERVED_MEMORY)),
    ("enableProfilingHandler", Ty::Bool),
    ("enableDebugFlagsHandler", Ty::Bool),
    ("seccompDefault", Ty::Bool),
    ("memoryThrottlingFactor", Ty::F64),
    ("registerWithTaints", Ty::StructList(TAINT)),
    ("registerNode", Ty::Bool),
    ("tracing", Ty::Struct(TRACING)),
    ("localStorageCapacityIsolation", Ty::Bool),
    ("containerRuntimeEndpoint", Ty::Str),
    ("imageServiceEndpoint", Ty::Str),
    ("failCgroupV1", Ty::Bool),
    ("userNamespaces", Ty::Struct(USER_NAMESPACES)),
];

/// A type error: the dotted JSON path under `spec.kubeletConfig` and Go's `encoding/json`
/// message (`json: cannot unmarshal string into Go struct field KubeletConfiguration.maxPods of
/// type int32`, or `time: invalid duration "abc"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError {
    pub path: String,
    pub message: String,
}

/// Checks `config` (the user's `spec.kubeletConfig`) against [`FIELDS`] as Go's decoder does.
///
/// Errors: the first field (in key order) whose value the decoder refuses.
pub fn check(config: &Value) -> Result<(), TypeError> {
    match config {
        Value::Null => Ok(()),
        Value::Object(_) => check_struct(config, FIELDS, ""),
        other => Err(TypeError {
            path: String::new(),
            message: format!(
                "json: cannot unmarshal {} into Go value of type v1beta1.KubeletConfiguration",
                json_kind(other)
            ),
        }),
    }
}

fn json_kind(v: &Value) -> &'static str {
    crate::validation::json_type(v)
}

fn go_name(t: Ty) -> &'static str {
    match t {
        Ty::Str => "string",
        Ty::Bool => "bool",
        Ty::I32 => "int32",
        Ty::I64 => "int64",
        Ty::U32 => "uint32",
        Ty::F64 => "float64",
        Ty::Duration => "string",
        Ty::StrList => "[]string",
        Ty::StrMap => "map[string]string",
        Ty::BoolMap => "map[string]bool",
        Ty::StrListMap => "map[string][]string",
        Ty::Struct(_) | Ty::Object => "struct",
        Ty::StructList(_) => "[]struct",
    }
}

fn check_struct(v: &Value, fields: &[(&str, Ty)], prefix: &str) -> Result<(), TypeError> {
    let Some(obj) = v.as_object() else { return Ok(()) };
    for (k, val) in obj {
        if let Some((_, t)) = fields.iter().find(|(name, _)| name == k) {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            check_value(val, *t, &path)?;
        }
    }
    Ok(())
}

fn check_value(v: &Value, t: Ty, path: &str) -> Result<(), TypeError> {
    if v.is_null() {
        return Ok(());
    }
    let wrong = |value: String| TypeError {
        path: path.to_string(),
        message: format!(
            "json: cannot unmarshal {value} into Go struct field KubeletConfiguration.{path} of type {}",
            go_name(t)
        ),
    };
    let kind = || json_kind(v).to_string();
    let int_in = |lo: i128, hi: i128| -> Result<(), TypeError> {
        let Value::Number(n) = v else { return Err(wrong(kind())) };
        match n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)) {
            Some(i) if (lo..=hi).contains(&i) => Ok(()),
            _ => Err(wrong(format!("number {n}"))),
        }
    };
    match t {
        Ty::Str => v.is_string().then_some(()).ok_or_else(|| wrong(kind())),
        Ty::Bool => v.is_boolean().then_some(()).ok_or_else(|| wrong(kind())),
        Ty::I32 => int_in(i32::MIN.into(), i32::MAX.into()),
        Ty::I64 => int_in(i64::MIN.into(), i64::MAX.into()),
        Ty::U32 => int_in(0, u32::MAX.into()),
        Ty::F64 => v.is_number().then_some(()).ok_or_else(|| wrong(kind())),
        Ty::Duration => match v {
            Value::String(s) => parse_duration(s).map(|_| ()).ok_or_else(|| TypeError {
                path: path.to_string(),
                message: format!("time: invalid duration {s:?}"),
            }),
            _ => Err(wrong(kind())),
        },
        Ty::StrList => match v {
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    check_value(x, Ty::Str, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Err(wrong(kind())),
        },
        Ty::StrMap | Ty::BoolMap | Ty::StrListMap => match v {
            Value::Object(o) => {
                let inner = match t {
                    Ty::StrMap => Ty::Str,
                    Ty::BoolMap => Ty::Bool,
                    _ => Ty::StrList,
                };
                for (k, x) in o {
                    check_value(x, inner, &format!("{path}.{k}"))?;
                }
                Ok(())
            }
            _ => Err(wrong(kind())),
        },
        Ty::Struct(fields) => match v {
            Value::Object(_) => check_struct(v, fields, path),
            _ => Err(wrong(kind())),
        },
        Ty::StructList(fields) => match v {
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    if !(x.is_object() || x.is_null()) {
                        return Err(wrong(json_kind(x).to_string()));
                    }
                    check_struct(x, fields, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Err(wrong(kind())),
        },
        Ty::Object => v.is_object().then_some(()).ok_or_else(|| wrong(kind())),
    }
}

/// Go's `time.ParseDuration`: `[-+]` then one or more `<decimal><unit>` with units `ns`, `us`,
/// `µs`, `μs`, `ms`, `s`, `m`, `h`; `"0"` alone is allowed. Returns nanoseconds.
pub fn parse_duration(s: &str) -> Option<f64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0.0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." {
            return None;
        }
        let n: f64 = num.parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    Some(if neg { -total } else { total })
}

/// Whether a user value counts as Go's zero value for its field, which MCO's
/// `mergo.Merge(..., WithOverride)` never copies over the template: `""`, an empty list or
/// map, and a zero duration (`0s`). `false` and a numeric `0` are not zero here: mco lets
/// them win (see the merge rule in [`super::merge_user`]).
pub fn is_zero(t: Option<Ty>, v: &Value) -> bool {
    match v {
        Value::String(s) if s.is_empty() => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) if t == Some(Ty::Duration) => parse_duration(s) == Some(0.0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Go `encoding/json` decoding into `KubeletConfiguration`: wrong JSON kinds, fractions and
    /// out-of-range integers are refused; unknown keys and nulls pass.
    #[test]
    fn decoder_rules() {
        let e = check(&json!({"maxPods": "abc"})).unwrap_err();
        assert_eq!(e.path, "maxPods");
        assert_eq!(
            e.message,
            "json: cannot unmarshal string into Go struct field KubeletConfiguration.maxPods of type int32"
        );
        let e = check(&json!({"evictionHard": "x"})).unwrap_err();
        assert_eq!(
            e.message,
            "json: cannot unmarshal string into Go struct field KubeletConfiguration.evictionHard of type map[string]string"
        );
        let e = check(&json!({"maxPods": 1.5})).unwrap_err();
        assert_eq!(
            e.message,
            "json: cannot unmarshal number 1.5 into Go struct field KubeletConfiguration.maxPods of type int32"
        );
        let e = check(&json!({"maxPods": 3_000_000_000u64})).unwrap_err();
        assert!(e.message.contains("number 3000000000"), "{}", e.message);
        let e = check(&json!({"nodeStatusUpdateFrequency": "abc"})).unwrap_err();
        assert_eq!(e.message, "time: invalid duration \"abc\"");
        let e = check(&json!({"authentication": {"webhook": {"cacheTTL": 5}}})).unwrap_err();
        assert_eq!(e.path, "authentication.webhook.cacheTTL");
        let e = check(&json!({"evictionHard": {"memory.available": 100}})).unwrap_err();
        assert_eq!(e.path, "evictionHard.memory.available");
        let e = check(&json!({"serializeImagePulls": "false"})).unwrap_err();
        assert!(e.message.ends_with("of type bool"), "{}", e.message);
        check(
            &json!({"maxPods": 250, "unknownKey": [1], "podPidsLimit": null, "imageMinimumGCAge": "1h2m3.5s",
            "evictionHard": {"memory.available": "100Mi"}, "cpuManagerReconcilePeriod": "0"}),
        )
        .unwrap();
        assert!(check(&json!(42)).is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("0"), Some(0.0));
        assert_eq!(parse_duration("0s"), Some(0.0));
        assert_eq!(parse_duration("1m30s"), Some(90e9));
        assert_eq!(parse_duration("-1.5h"), Some(-5400e9));
        assert_eq!(parse_duration("10"), None, "a unit is required except for 0");
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("1d"), None);
    }
}
