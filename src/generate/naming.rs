//! Names of generated MachineConfigs: `99-<pool>-generated-<what>`, then `-1` … `-9`.
//!
//! MCO `pkg/controller/kubelet-config/helpers.go` `getManagedKubeletConfigKey` (and the
//! ContainerRuntimeConfig twin): the first object for a pool gets the bare name and the
//! annotation `machineconfiguration.openshift.io/mc-name-suffix: ""`; each further one gets
//! suffix n = (largest suffix among the other objects) + 1, kept in the annotation for the
//! object's life; n above 9 is refused ("max number of supported kubelet config (10) has been
//! reached").

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

/// The suffix of a new object given the suffixes the other objects already hold (`""` = 0):
/// `""` when none holds one, else max + 1.
///
/// Errors: MCO's message when the next suffix would exceed [`MAX_SUFFIX`]; `noun` is
/// `kubelet config` or `container runtime config`.
pub fn next_suffix<'a>(others: impl IntoIterator<Item = &'a str>, noun: &str) -> Result<String, String> {
    let mut max: Option<u32> = None;
    for s in others {
        let n = if s.is_empty() { 0 } else { s.parse().unwrap_or(0) };
        max = Some(max.map_or(n, |m| m.max(n)));
    }
    match max {
        None => Ok(String::new()),
        Some(m) if m + 1 > MAX_SUFFIX => Err(format!(
            "max number of supported {noun} ({}) has been reached. Please delete old {noun} before retrying",
            MAX_SUFFIX + 1
        )),
        Some(m) => Ok((m + 1).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_bare_then_max_plus_one_up_to_nine() {
        assert_eq!(next_suffix([], "kubelet config").unwrap(), "");
        assert_eq!(next_suffix([""], "kubelet config").unwrap(), "1");
        assert_eq!(next_suffix(["", "1", "3"], "kubelet config").unwrap(), "4");
        // A deleted middle one does not free its number: max + 1, as MCO.
        assert_eq!(next_suffix(["", "2"], "kubelet config").unwrap(), "3");
        let e = next_suffix(["", "9"], "kubelet config").unwrap_err();
        assert!(
            e.starts_with("max number of supported kubelet config (10) has been reached"),
            "{e}"
        );
        assert_eq!(generated_name("worker", "kubelet", ""), "99-worker-generated-kubelet");
        assert_eq!(
            generated_name("worker", "kubelet", "1"),
            "99-worker-generated-kubelet-1"
        );
    }
}
