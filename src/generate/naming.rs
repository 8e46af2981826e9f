//! Names of generated MachineConfigs: `99-<pool>-generated-<what>`, then `-1` … `-9`.
//!
//! MCO `pkg/controller/kubelet-config/helpers.go` `getManagedKubeletConfigKey` (and the
//! ContainerRuntimeConfig twin): the first object for a pool gets the bare name and the
//! annotation `machineconfiguration.openshift.io/mc-name-suffix: ""`; each further one gets
//! suffix n = (largest suffix among the other objects) + 1, kept in the annotation for the
//! object's life; n above 9 is refused ("max number of supported kubelet config (10) has been
//! reached"). Numbers are per pool: only the objects selecting the pool count.

/// The annotation that keeps an object's suffix for life.
pub const SUFFIX_ANNOTATION: &str = "machineconfiguration.openshift.io/mc-name-suffix";

/// The highest suffix MCO hands out (so at most 10 objects per pool).
pub const MAX_SUFFIX: u32 = 9;

/// `99-<pool>-generated-<what>` with an optional `-<suffix>`; an empty suffix is the bare name.
pub fn generated_name(pool: &str, what: &str, suffix: &str) -> String {
    if suffix.is_empty() {
        format!("99-{pool}-generated-{what}")
    } else {
        format!("99-{pool}-generated-{what}-{suffix}")
    }
}

/// MCO's limit message for KubeletConfig (`getManagedKubeletConfigKey`'s error, wrapped by the
/// controller's "could not get kubelet config key: %v", which replaces the condition message).
pub const KUBELET_LIMIT: &str = "could not get kubelet config key: max number of supported kubelet config (10) has been reached. Please delete old kubelet configs before retrying";
/// MCO's limit message for ContainerRuntimeConfig (`getManagedKeyCtrCfg`, "could not get
/// ctrcfg key: %v").
pub const CTRCFG_LIMIT: &str = "could not get ctrcfg key: max number of supported ctrcfgs (10) has been reached. Please delete old ctrcfgs before retrying";

/// The suffix of an object that holds none yet, for one pool, given the suffix annotations of
/// the OTHER objects whose selector matches that pool (`None`: not annotated, e.g. refused):
/// `""` when no other object selects the pool, else (largest non-empty suffix, 0 if none) + 1.
/// MCO `getManagedKubeletConfigKey` / `getManagedKeyCtrCfg`: the list is filtered by the pool's
/// labels, so suffixes are numbered per pool.
///
/// Errors: `limit_message` ([`KUBELET_LIMIT`] or [`CTRCFG_LIMIT`]) when the next suffix would
/// exceed [`MAX_SUFFIX`].
pub fn next_suffix(others: &[Option<&str>], limit_message: &str) -> Result<String, String> {
    if others.is_empty() {
        return Ok(String::new());
    }
    let max = others
        .iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0))
        .max()
        .unwrap_or(0);
    if max + 1 > MAX_SUFFIX {
        return Err(limit_message.to_string());
    }
    Ok((max + 1).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_bare_then_max_plus_one_up_to_nine() {
        let k = KUBELET_LIMIT;
        assert_eq!(next_suffix(&[], k).unwrap(), "");
        assert_eq!(next_suffix(&[Some("")], k).unwrap(), "1");
        assert_eq!(next_suffix(&[Some(""), Some("1"), Some("3")], k).unwrap(), "4");
        // A deleted middle one does not free its number: max + 1, as MCO.
        assert_eq!(next_suffix(&[Some(""), Some("2")], k).unwrap(), "3");
        // Another object selects the pool but holds no suffix (refused): MCO's list is longer
        // than one, so the new one is not the bare name.
        assert_eq!(next_suffix(&[None], k).unwrap(), "1");
        assert_eq!(next_suffix(&[Some(""), Some("9")], k).unwrap_err(), KUBELET_LIMIT);
        assert!(CTRCFG_LIMIT.ends_with("Please delete old ctrcfgs before retrying"));
        assert_eq!(generated_name("worker", "kubelet", ""), "99-worker-generated-kubelet");
        assert_eq!(
            generated_name("worker", "kubelet", "1"),
            "99-worker-generated-kubelet-1"
        );
    }
}
