//! The agent's side of a DriftPolicy ([`crate::daemon::respond`]): per newly drifted path,
//! the decision, its record in the log and, for `Revert`, the write and the node disruption
//! policy's action; the reason for the paths that still degrade the node; and an update's
//! pre-flight validation, which a path the policy Reports does not fail.

use super::{Agent, Failure, Held, Phase};
use std::sync::Arc;

impl Agent {
    /// Decides, records and carries out each newly drifted path's action; returns the node
    /// reason for the paths that degrade it ([`crate::daemon::drift::summarize`] of their messages,
    /// exactly MCO's text for a single path), `None` when none does.
    pub(super) async fn respond(&mut self, newly: &[(String, String)], failing: &[(String, String)]) -> Option<String> {
        use crate::drift::Action;
        let rules = crate::daemon::respond::rules(&self.api.client, self.api.node.as_ref()).await;
        let current = match &self.phase {
            Phase::Idle { current } => Some(current.clone()),
            _ => None,
        };
        for (path, message) in newly {
            let decision = rules.decide(path);
            let (set, p, m, d) = (self.drift.set.clone(), path.clone(), message.clone(), decision.clone());
            let record = self
                .blocking(move |h| crate::daemon::respond::record(h, set.as_deref(), &p, &m, &d))
                .await;
            tracing::warn!(%path, action = decision.action.as_str(), rule = ?decision.rule, "config drift detected");
            self.api
                .report_drift(crate::metrics::ReportKind::Drift, message, record.clone())
                .await;
            if decision.action != Action::Revert {
                continue;
            }
            let reverted = match &current {
                Some(c) => self.revert(c, path, record).await,
                None => Err("the node is not idle on a config".to_string()),
            };
            if let Err(e) = reverted {
                tracing::error!(%path, error = %e, "could not revert the drifted path; it degrades the node");
                self.drift.revert_failed.insert(path.clone());
            }
        }
        let degrading: Vec<&str> = failing
            .iter()
            .filter(|(p, _)| rules.decide(p).action == Action::Degrade || self.drift.revert_failed.contains(p))
            .map(|(_, m)| m.as_str())
            .collect();
        (!degrading.is_empty()).then(|| crate::daemon::drift::summarize(&degrading))
    }

    /// A Revert of `path` on the settled config `current` ([`super::respond`]): the path written
    /// again, then the node disruption policy's actions for it, and the revert recorded.
    async fn revert(
        &mut self,
        current: &Held,
        path: &str,
        mut record: crate::drift::DriftRecord,
    ) -> Result<(), String> {
        let mc = Arc::new(current.load()?);
        let (m, p) = (mc.clone(), path.to_string());
        let wrote = self
            .blocking(move |h| crate::daemon::respond::rewrite(h, &m, &p))
            .await?;
        let policies = self.api.disruption_policies().await.map_err(Failure::into_reason)?;
        let outcome = match crate::daemon::respond::disruption_actions(&mc, &policies, path) {
            None => "no node disruption policy names the path: no action, no reboot".to_string(),
            Some(actions)
                if crate::disruption::reboots(&actions)
                    || actions.iter().any(|a| a.kind == crate::disruption::ActionType::Drain) =>
            {
                let ann = self.api.annotations();
                self.begin_forced_update(current.clone(), ann, false)
                    .await
                    .map_err(Failure::into_reason)?;
                format!(
                    "the node disruption policy asks for {}: drain, rewrite and reboot",
                    crate::daemon::respond::describe(&actions)
                )
            }
            Some(actions) => {
                let (a, name) = (actions.clone(), mc.name().to_string());
                self.blocking(move |h| crate::daemon::actions::perform(h, &a, &name))
                    .await?;
                format!(
                    "node disruption policy actions: {}",
                    crate::daemon::respond::describe(&actions)
                )
            }
        };
        record.reverted = format!("reverted to {} ({wrote}); {outcome}", mc.name());
        tracing::info!(path, reverted = %record.reverted, "drifted path reverted");
        self.api
            .report_drift(crate::metrics::ReportKind::DriftReverted, "", record)
            .await;
        Ok(())
    }

    /// An update's pre-flight validation of `current` (MCO `validateOnDiskState` before
    /// `triggerUpdate`), under the pool's DriftPolicy: a managed path whose drift the policy
    /// Reports was accepted as it is (the node stayed Done), so it does not fail the pre-flight;
    /// the update writes it again from the new config, and the log's `NodeConfigDrifted` keeps
    /// the edit it replaced. Every other mismatch fails as in MCO. The policies are read only
    /// when MCO's validation fails.
    pub(super) async fn preflight(&mut self, current: &Held) -> Result<(), String> {
        use crate::drift::Action;
        let held = current.clone();
        let detail = match self.blocking(move |h| super::validate::validate_held(h, &held)).await {
            Ok(()) => return Ok(()),
            Err(detail) => detail,
        };
        let rules = crate::daemon::respond::rules(&self.api.client, self.api.node.as_ref()).await;
        if rules.is_empty() {
            return Err(detail);
        }
        let held = current.clone();
        let reported = move |p: &str| rules.decide(p).action == Action::Report;
        self.blocking(move |h| super::validate::validate_held_skipping(h, &held, reported))
            .await?;
        tracing::warn!(
            mismatch = %detail,
            "pre-flight: the only mismatches are drifts the DriftPolicy reports; the update writes them from the new config"
        );
        Ok(())
    }
}
