//! Wire names of the node protocol, shared by the server ([`crate::api`]), the client
//! ([`crate::client`]), the node daemon ([`crate::daemon`]) and the simulator ([`crate::sim`]),
//! so that no side spells them as string literals of its own: the request headers a caller
//! declares itself with, the path daemons post their reports to, and the drain requests of the
//! `desiredDrain` / `lastAppliedDrain` annotations.

/// Header carrying the caller's declared component (`cli`, `daemon:worker-1`). Untrusted: the
/// server records the authenticated user as the actor and uses this only as the default field
/// manager.
pub const ACTOR_HEADER: &str = "x-mco-actor";

/// Header carrying the caller's free-text reason for a change (percent-encoded), recorded in the
/// event.
pub const REASON_HEADER: &str = "x-mco-reason";

/// Path daemons post their [`crate::metrics::Report`]s to (`POST`, JSON body).
pub const REPORTS_PATH: &str = "/apis/metrics.mco.dev/v1/reports";

/// One drain request, as the daemon writes it to `desiredDrain` and the drain controller copies
/// it to `lastAppliedDrain` once done: `drain-<desiredConfig>` (cordon, evict) or
/// `uncordon-<config>` (mark schedulable). MCO: `pkg/daemon/drain.go` writes them,
/// `pkg/controller/drain/drain_controller.go` reads the verb as the text before the first `-`
/// (mco-facts 4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainRequest<'a> {
    /// `drain-<config>`: cordon the node and evict its workloads before `config` is written.
    Drain(&'a str),
    /// `uncordon-<config>`: the node runs `config`; mark it schedulable again.
    Uncordon(&'a str),
}

impl<'a> DrainRequest<'a> {
    /// Parses an annotation value by its verb, the text before the first `-` (MCO's
    /// `strings.Split(desiredState, "-")[0]`): `None` for any other verb, which MCO's drain
    /// controller refuses as "non-recognized drain verb".
    pub fn parse(value: &'a str) -> Option<DrainRequest<'a>> {
        let (verb, config) = value.split_once('-').unwrap_or((value, ""));
        match verb {
            "drain" => Some(DrainRequest::Drain(config)),
            "uncordon" => Some(DrainRequest::Uncordon(config)),
            _ => None,
        }
    }

    /// The config the request names.
    pub fn config(&self) -> &'a str {
        match self {
            DrainRequest::Drain(c) | DrainRequest::Uncordon(c) => c,
        }
    }
}

impl std::fmt::Display for DrainRequest<'_> {
    /// The annotation value: `drain-<config>` or `uncordon-<config>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DrainRequest::Drain(c) => write!(f, "drain-{c}"),
            DrainRequest::Uncordon(c) => write!(f, "uncordon-{c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DrainRequest;

    #[test]
    fn drain_requests_round_trip_and_read_the_verb_before_the_first_dash() {
        for (text, want) in [
            (
                "drain-rendered-worker-1a2b",
                Some(DrainRequest::Drain("rendered-worker-1a2b")),
            ),
            (
                "uncordon-rendered-worker-1a2b",
                Some(DrainRequest::Uncordon("rendered-worker-1a2b")),
            ),
            ("drain-", Some(DrainRequest::Drain(""))),
            ("uncordon", Some(DrainRequest::Uncordon(""))),
            ("uncordoned-x", None),
            ("drainx-y", None),
            ("", None),
            ("cordon-x", None),
        ] {
            assert_eq!(DrainRequest::parse(text), want, "{text:?}");
        }
        assert_eq!(DrainRequest::Drain("rendered-3").to_string(), "drain-rendered-3");
        assert_eq!(DrainRequest::Uncordon("rendered-3").to_string(), "uncordon-rendered-3");
    }
}
