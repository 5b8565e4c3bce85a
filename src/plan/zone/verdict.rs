//! What the planner decides for one zone: a check per condition, the steps still wanted and
//! where its machines go.
use crate::api::conditions::{zone, zone_v1beta1};
use crate::api::failure_domain::VSphereFailureDomain;
use crate::vcenter::model::moref::MoRef;

use super::reasons::FdProblem;
use super::steps::Step;
use crate::plan::failure::{Failure, Retry};

/// The outcome of one check: ok, or a reason pair and a message naming the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Not evaluated (an earlier failure made it meaningless).
    Skipped,
    Ok {
        message: String,
    },
    Failed {
        v1beta1_reason: &'static str,
        v1beta2_reason: &'static str,
        message: String,
    },
}

impl Check {
    pub fn is_ok(&self) -> bool {
        matches!(self, Check::Ok { .. })
    }

    pub(super) fn failed(reasons: (&'static str, &'static str), message: String) -> Self {
        Check::Failed {
            v1beta1_reason: reasons.0,
            v1beta2_reason: reasons.1,
            message,
        }
    }
}

/// What the planner decided for one zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneVerdict {
    /// `VSphereFailureDomain` missing: the only check that ran.
    pub failure_domain_missing: bool,
    pub vcenter: Check,
    pub placement: Check,
    pub failure_domain: Check,
    /// vCenter changes autoConfigure asks for (empty when nothing must change).
    pub steps: Vec<Step>,
    /// Where machines of this zone go, when everything resolved.
    pub placement_refs: Option<ZonePlacement>,
    /// What vCenter could not do for this zone (reach it, or make a change), typed: they decide
    /// whether the zone is [`ZoneState::Retrying`] or [`ZoneState::Failed`].
    pub failures: Vec<Failure>,
}

/// Where a zone stands after a pass, as the requeue policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Ready,
    /// Not ready because of its configuration or vCenter's content (a missing tag, a pending
    /// autoConfigure change): the status says what to change.
    NotReady,
    /// vCenter did not answer or was busy: the same pass later may succeed.
    Retrying,
    /// vCenter (or the connection settings) refused: nothing changes until someone acts.
    Failed,
}

impl ZoneVerdict {
    /// Ready: every check passed and nothing is left for autoConfigure to change.
    pub fn ready(&self) -> bool {
        self.steps.is_empty()
            && !self.failure_domain_missing
            && self.vcenter.is_ok()
            && self.placement.is_ok()
            && self.failure_domain.is_ok()
    }

    /// Ready, not ready, retrying or failed: a vCenter failure of any kind that a retry would
    /// not fix makes the zone failed; only failures that all may pass make it retrying.
    pub fn state(&self) -> ZoneState {
        if self.ready() {
            ZoneState::Ready
        } else if self.failures.is_empty() {
            ZoneState::NotReady
        } else if self.failures.iter().all(|f| f.retry() == Retry::Later) {
            ZoneState::Retrying
        } else {
            ZoneState::Failed
        }
    }

    /// The failure that decides the state: the first one that a retry would not fix, else the
    /// first one.
    pub fn decisive_failure(&self) -> Option<&Failure> {
        self.failures
            .iter()
            .find(|f| f.retry() == Retry::Failed)
            .or_else(|| self.failures.first())
    }

    /// vCenter could not be used at all: the VCenterAvailable check says why.
    pub fn mark_vcenter_unavailable(&mut self, failure: &Failure) {
        self.vcenter = Check::failed(
            (zone_v1beta1::VCENTER_UNREACHABLE, zone::VCENTER_UNREACHABLE),
            failure.to_string(),
        );
        self.failures.push(failure.clone());
    }

    /// vCenter refused autoConfigure changes: the zone says which and why. The reason is CAPV's
    /// for the class of the first refused change ([`FdProblem::of_step`]: region or zone
    /// misconfigured, hosts misconfigured); the message says it was autoConfigure.
    pub fn mark_auto_configure_failed<'a>(
        &mut self,
        fd: Option<&VSphereFailureDomain>,
        refused: impl IntoIterator<Item = (&'a Step, &'a Failure)>,
    ) {
        let refused: Vec<(&Step, &Failure)> = refused.into_iter().collect();
        let Some((first, _)) = refused.first() else {
            return;
        };
        let problem = FdProblem::of_step(first, fd);
        let message = refused
            .iter()
            .map(|(_, f)| f.message())
            .collect::<Vec<_>>()
            .join("; ");
        self.failures
            .extend(refused.into_iter().map(|(_, f)| f.clone()));
        self.failure_domain = Check::failed(
            problem.reasons(),
            format!("autoConfigure failed: {message}"),
        );
    }

    /// Changes are still wanted (dry run, or a run cut short): not ready, with CAPV's reason for
    /// what is still missing (the first step's class) and every change in the message.
    pub fn mark_pending(&mut self, fd: Option<&VSphereFailureDomain>) {
        let Some(first) = self.steps.first() else {
            return;
        };
        if !self.failure_domain.is_ok() {
            return;
        }
        let problem = FdProblem::of_step(first, fd);
        let what: Vec<String> = self.steps.iter().map(|s| s.to_string()).collect();
        self.failure_domain = Check::failed(
            problem.reasons(),
            format!(
                "autoConfigure has {} change(s) to make: {}",
                what.len(),
                what.join("; ")
            ),
        );
    }

    /// The first failing check's message, for one-line summaries.
    pub fn first_problem(&self) -> Option<(&'static str, &str)> {
        [&self.vcenter, &self.placement, &self.failure_domain]
            .into_iter()
            .find_map(|c| match c {
                Check::Failed {
                    v1beta1_reason,
                    message,
                    ..
                } => Some((*v1beta1_reason, message.as_str())),
                _ => None,
            })
    }
}

/// Resolved placement of a ready zone (what the machine actuator clones into).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ZonePlacement {
    pub datacenter: MoRef,
    pub compute_resource: Option<MoRef>,
    pub resource_pool: Option<MoRef>,
    pub folder: MoRef,
    pub datastore: Option<MoRef>,
    pub networks: Vec<MoRef>,
    pub vm_group: Option<String>,
}
