//! Status counters and the Available / Degraded / Progressing conditions (CPMSO `status.go`),
//! plus this provider's failure-domain condition.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::updates::MachineInfo;
use crate::api::conditions::{
    ConditionUpdate, MetaCondition, STATUS_FALSE, STATUS_TRUE, cpms as c, set_meta_condition,
};

/// **Ours**: whether every listed failure domain can take control plane machines now.
pub const FAILURE_DOMAINS_USABLE: &str = "FailureDomainsUsable";
/// **Ours**, reason (False): a listed domain is not ready or has `controlPlane: false`.
pub const UNUSABLE_FAILURE_DOMAINS: &str = "UnusableFailureDomains";
/// **Ours**, Degraded reason: the spec cannot be acted on (the message names the field).
pub const INVALID_SPEC: &str = "InvalidSpec";
/// **Ours**, Degraded reason: a machine's index is neither in its name nor found by its domain.
pub const UNINDEXED_MACHINES: &str = "UnindexedMachines";

/// The status counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// All machines.
    pub replicas: i32,
    pub ready: i32,
    /// Ready and up to date.
    pub updated: i32,
    /// Indexes without a ready machine.
    pub unavailable: i32,
}

/// Counts over every index (empty ones included).
pub fn count(indexed: &BTreeMap<i32, Vec<MachineInfo>>) -> Counters {
    let mut out = Counters::default();
    for ms in indexed.values() {
        out.replicas += ms.len() as i32;
        out.ready += ms.iter().filter(|m| m.ready).count() as i32;
        out.updated += ms.iter().filter(|m| m.updated()).count() as i32;
        if !ms.iter().any(|m| m.ready) {
            out.unavailable += 1;
        }
    }
    out
}

/// A condition to set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn new(
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// Upstream's three conditions from the counters.
pub fn conditions(n: Counters, desired: i32) -> Vec<Cond> {
    let available = if n.unavailable != 0 {
        Cond::new(
            c::AVAILABLE,
            STATUS_FALSE,
            c::UNAVAILABLE_REPLICAS,
            format!("Missing {} available replica(s)", n.unavailable),
        )
    } else {
        Cond::new(c::AVAILABLE, STATUS_TRUE, c::ALL_REPLICAS_AVAILABLE, "")
    };
    let degraded = if n.ready == 0 {
        Cond::new(c::DEGRADED, STATUS_TRUE, c::NO_READY_MACHINES, "")
    } else {
        Cond::new(c::DEGRADED, STATUS_FALSE, c::AS_EXPECTED, "")
    };
    let progressing = if desired > n.updated {
        Cond::new(
            c::PROGRESSING,
            STATUS_TRUE,
            c::NEEDS_UPDATE_REPLICAS,
            format!(
                "Observed {} replica(s) in need of update",
                desired - n.updated
            ),
        )
    } else if desired < n.ready {
        Cond::new(
            c::PROGRESSING,
            STATUS_TRUE,
            c::EXCESS_REPLICAS,
            format!(
                "Waiting for {} old replica(s) to be removed",
                n.ready - n.updated
            ),
        )
    } else {
        Cond::new(c::PROGRESSING, STATUS_FALSE, c::ALL_REPLICAS_UPDATED, "")
    };
    vec![available, degraded, progressing]
}

/// A refusal: Degraded True with the reason, Progressing False `OperatorDegraded`.
pub fn refusal(reason: &'static str, message: impl Into<String>) -> Vec<Cond> {
    vec![
        Cond::new(c::DEGRADED, STATUS_TRUE, reason, message),
        Cond::new(c::PROGRESSING, STATUS_FALSE, c::OPERATOR_DEGRADED, ""),
    ]
}

/// Applies conditions in order (a later one of the same type wins).
pub fn apply(conds: &mut Vec<MetaCondition>, set: &[Cond], generation: Option<i64>, now: &Time) {
    for s in set {
        let u = ConditionUpdate {
            type_: s.type_,
            status: s.status,
            reason: s.reason,
            message: &s.message,
            severity: "",
        };
        set_meta_condition(conds, &u, generation, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cpms::updates::tests::{pending, updated};

    #[test]
    fn counters_follow_upstream() {
        let mut outdated = updated(1, "m1");
        outdated.needs_update = true;
        let indexed: BTreeMap<i32, Vec<MachineInfo>> = [
            (0, vec![updated(0, "m0")]),
            (1, vec![outdated, pending(1, "r1")]),
            (2, vec![pending(2, "m2")]),
            (3, vec![]),
        ]
        .into_iter()
        .collect();
        let n = count(&indexed);
        assert_eq!(
            n,
            Counters {
                replicas: 4,
                ready: 2,
                updated: 1,
                unavailable: 2
            }
        );
        let cs = conditions(n, 3);
        assert_eq!(cs[0].message, "Missing 2 available replica(s)");
        assert_eq!(cs[1].reason, c::AS_EXPECTED);
        assert_eq!(cs[2].message, "Observed 2 replica(s) in need of update");
    }

    #[test]
    fn excess_ready_replicas_are_progressing() {
        let n = Counters {
            replicas: 4,
            ready: 4,
            updated: 3,
            unavailable: 0,
        };
        let cs = conditions(n, 3);
        assert_eq!(cs[0].reason, c::ALL_REPLICAS_AVAILABLE);
        assert_eq!(cs[2].reason, c::EXCESS_REPLICAS);
        assert_eq!(cs[2].message, "Waiting for 1 old replica(s) to be removed");
    }
}
