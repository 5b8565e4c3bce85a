//! What to do for one machine that needs remediation: upstream's three ways (a remediation
//! request from the template, the external bare-metal annotation, deleting the Machine when a
//! controller owns it), plus two things upstream lacks: a backoff for replacements that fail
//! again at once (openshift/enhancements#673) and the control plane gate (quorum, one at a time).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::machine::Machine;
use crate::api::machine_health_check::{MachineHealthCheck, REMEDIATION_STRATEGY_ANNOTATION};

use super::status::condition as c;
use super::targets::{has_external_annotation, phase_of};

/// The MHC annotation value selecting the external bare-metal strategy.
pub const REMEDIATION_STRATEGY_EXTERNAL: &str = "external-baremetal";
/// Owner reference kind of a ControlPlaneMachineSet.
pub const CPMS_KIND: &str = "ControlPlaneMachineSet";
/// Annotations a remediation request carries (openshift/api `TemplateClonedFrom*Annotation`).
pub const CLONED_FROM_NAME_ANNOTATION: &str = "machine.openshift.io/cloned-from-name";
pub const CLONED_FROM_GROUP_KIND_ANNOTATION: &str = "machine.openshift.io/cloned-from-groupkind";
const TEMPLATE_SUFFIX: &str = "Template";

/// How a machine is remediated.
#[derive(Clone, Debug, PartialEq)]
pub enum RemediationAction {
    /// Delete the Machine (its controller replaces it).
    DeleteMachine,
    /// Add [`super::targets::EXTERNAL_REMEDIATION_ANNOTATION`] (empty value) to the Machine.
    AnnotateExternal,
    /// Create this remediation request (a full object: apiVersion, kind, metadata, spec).
    CreateRequest(Value),
}

impl RemediationAction {
    pub fn describe(&self) -> &'static str {
        match self {
            RemediationAction::DeleteMachine => "requesting to delete Machine object",
            RemediationAction::AnnotateExternal => "requesting external remediation",
            RemediationAction::CreateRequest(_) => "creating a remediation request",
        }
    }
}

/// The remediation way for a machine, before the gates.
#[derive(Clone, Debug, PartialEq)]
pub enum Way {
    Act(RemediationAction),
    /// Already under way (annotated, request exists, or being deleted): nothing to do.
    Underway,
    /// No controller owns the machine: deleting it would not bring it back.
    NoController,
    /// The template could not be read or has no `spec.template`.
    TemplateUnavailable(String),
}

/// API groups whose `*RemediationTemplate` kinds a health check may name: Cluster API
/// infrastructure providers' (Metal3RemediationTemplate) and medik8s's remediators
/// (SelfNodeRemediationTemplate, FenceAgentsRemediationTemplate,
/// MachineDeletionRemediationTemplate). The manager reads the template and creates the request
/// with its own rights, so an open list would make it read or create any kind it may touch
/// (Secrets, Machines) on a tenant's behalf.
pub const REMEDIATION_GROUPS: &[&str] = &[
    "infrastructure.cluster.x-k8s.io",
    "remediation.medik8s.io",
    "fence-agents-remediation.medik8s.io",
    "machine-deletion-remediation.medik8s.io",
];
const REMEDIATION_TEMPLATE_SUFFIX: &str = "RemediationTemplate";

/// Why a health check's `spec.remediationTemplate` may not be used, naming the field: it must
/// be in the check's own namespace (upstream reads it there; another namespace would let a
/// tenant probe or copy objects it cannot read) and of an allowed remediation kind
/// ([`REMEDIATION_GROUPS`]). The webhook refuses these; the controller ignores such a template
/// with a condition if one gets through (installed before the webhook, or with it off).
pub fn template_ref_refused(
    tref: &ObjectReference,
    mhc_namespace: &str,
) -> Option<(String, String)> {
    let field = |f: &str| format!("spec.remediationTemplate.{f}");
    if let Some(ns) = tref.namespace.as_deref().filter(|n| !n.is_empty())
        && ns != mhc_namespace
    {
        return Some((
            field("namespace"),
            format!(
                "{ns}: must be the MachineHealthCheck's own namespace {mhc_namespace} (or unset)"
            ),
        ));
    }
    let av = tref.api_version.as_deref().unwrap_or_default();
    let group = av.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
    if !REMEDIATION_GROUPS.contains(&group) {
        return Some((
            field("apiVersion"),
            format!(
                "{av}: the group must be one of {} (remediation providers)",
                REMEDIATION_GROUPS.join(", ")
            ),
        ));
    }
    let kind = tref.kind.as_deref().unwrap_or_default();
    if kind.len() <= REMEDIATION_TEMPLATE_SUFFIX.len()
        || !kind.ends_with(REMEDIATION_TEMPLATE_SUFFIX)
    {
        return Some((
            field("kind"),
            format!(
                "{kind}: must be a remediation template kind, <Name>{REMEDIATION_TEMPLATE_SUFFIX}"
            ),
        ));
    }
    None
}

/// MAO's `remediate` for one target: a template wins; else the external strategy annotation
/// (never for a Failed machine); else delete when a controller owns the machine.
pub fn choose_way(
    mhc: &MachineHealthCheck,
    machine: &Machine,
    template: Option<&Value>,
    has_request: bool,
) -> Way {
    if let Some(tref) = &mhc.spec.remediation_template {
        let ns = mhc.metadata.namespace.as_deref().unwrap_or("default");
        if let Some((field, why)) = template_ref_refused(tref, ns) {
            return Way::TemplateUnavailable(format!("{field}: {why}; the template is ignored"));
        }
        if has_request {
            return Way::Underway;
        }
        let Some(t) = template else {
            return Way::TemplateUnavailable(format!(
                "remediation template {} {:?} not found",
                tref.kind.as_deref().unwrap_or_default(),
                tref.name.as_deref().unwrap_or_default()
            ));
        };
        return match remediation_request(t, tref, machine) {
            Ok(v) => Way::Act(RemediationAction::CreateRequest(v)),
            Err(e) => Way::TemplateUnavailable(e),
        };
    }
    if machine.metadata.deletion_timestamp.is_some() {
        return Way::Underway;
    }
    let external = mhc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REMEDIATION_STRATEGY_ANNOTATION))
        .is_some_and(|v| v == REMEDIATION_STRATEGY_EXTERNAL);
    if external && phase_of(machine) != Some(crate::api::machine::phase::FAILED) {
        return if has_external_annotation(machine) {
            Way::Underway
        } else {
            Way::Act(RemediationAction::AnnotateExternal)
        };
    }
    if controller_owner(machine).is_none() {
        return Way::NoController;
    }
    Way::Act(RemediationAction::DeleteMachine)
}

/// The machine's controller owner reference (`controller: true`).
pub fn controller_owner(
    m: &Machine,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    m.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Whether a ControlPlaneMachineSet owns the machine.
pub fn cpms_owned(m: &Machine) -> bool {
    m.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == CPMS_KIND)
}

/// Reference to a remediation request (for deleting it once the machine is healthy again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

/// The request a template makes for `machine_name`: same apiVersion, Kind minus "Template",
/// named after the machine.
pub fn request_ref(tref: &ObjectReference, machine_name: &str) -> RequestRef {
    let kind = tref.kind.as_deref().unwrap_or_default();
    RequestRef {
        api_version: tref.api_version.clone().unwrap_or_default(),
        kind: kind
            .strip_suffix(TEMPLATE_SUFFIX)
            .unwrap_or(kind)
            .to_string(),
        name: machine_name.to_string(),
    }
}

/// The remediation request upstream creates from a template (MAO `external.GenerateTemplate`):
/// the template's `spec.template`, named after the machine, in its namespace, owned by it,
/// annotated with where it was cloned from.
pub fn remediation_request(
    template: &Value,
    tref: &ObjectReference,
    machine: &Machine,
) -> Result<Value, String> {
    let tkind = template
        .get("kind")
        .and_then(Value::as_str)
        .or(tref.kind.as_deref())
        .unwrap_or_default();
    let tname = template
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .or(tref.name.as_deref())
        .unwrap_or_default();
    let Some(Value::Object(inner)) = template.pointer("/spec/template") else {
        return Err(format!("missing Spec.Template on {tkind} {tname:?}"));
    };
    let mut to = inner.clone();
    let meta = to
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| format!("spec.template.metadata of {tkind} {tname:?} is not an object"))?;
    for k in [
        "resourceVersion",
        "finalizers",
        "uid",
        "selfLink",
        "generateName",
    ] {
        meta.remove(k);
    }
    let name = machine.metadata.name.clone().unwrap_or_default();
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(machine.metadata.namespace));
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("spec.template.metadata.annotations is not an object")?;
    let group = tref
        .api_version
        .as_deref()
        .and_then(|v| v.rsplit_once('/').map(|(g, _)| g))
        .unwrap_or_default();
    let ref_kind = tref.kind.as_deref().unwrap_or_default();
    let group_kind = if group.is_empty() {
        ref_kind.to_string()
    } else {
        format!("{ref_kind}.{group}")
    };
    annotations.insert(
        CLONED_FROM_NAME_ANNOTATION.into(),
        json!(tref.name.as_deref().unwrap_or_default()),
    );
    annotations.insert(CLONED_FROM_GROUP_KIND_ANNOTATION.into(), json!(group_kind));
    meta.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "Machine",
            "name": name,
            "uid": machine.metadata.uid.clone().unwrap_or_default(),
        }]),
    );
    // The request is of the template's own group and kind: a template's inner apiVersion/kind
    // may not turn it into another kind (the manager would create that with its rights).
    let own_kind = tkind.strip_suffix(TEMPLATE_SUFFIX).unwrap_or(tkind);
    if let Some(k) = to
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        && k != own_kind
    {
        return Err(format!(
            "spec.template.kind {k} of {tkind} {tname:?} is not {own_kind}: a template makes requests of its own kind"
        ));
    }
    if let Some(v) = to
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
    {
        let inner_group = v.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
        if inner_group != group {
            return Err(format!(
                "spec.template.apiVersion {v} of {tkind} {tname:?} is not in group {group}: a template makes requests of its own group"
            ));
        }
    }
    if to
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let v = template
            .get("apiVersion")
            .and_then(Value::as_str)
            .or(tref.api_version.as_deref())
            .unwrap_or_default();
        to.insert("apiVersion".into(), json!(v));
    }
    if to
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let k = tkind.strip_suffix(TEMPLATE_SUFFIX).unwrap_or(tkind);
        to.insert("kind".into(), json!(k));
    }
    Ok(Value::Object(to))
}

// ---------------------------------------------------------------------------------------------
// Backoff (openshift/enhancements#673, never merged upstream).

/// MHC annotation carrying the backoff state: JSON `{"<Kind>/<name>": {"count": n, "last": t}}`
/// per controller owner of remediated machines.
pub const BACKOFF_ANNOTATION: &str = "vsphere-provider.io/remediation-backoff";
/// The wait after the first remediation before its replacement may be remediated.
pub const BACKOFF_BASE: Duration = Duration::from_secs(60);
/// The longest wait.
pub const BACKOFF_MAX: Duration = Duration::from_secs(3600);
/// How long after its backoff ran out an owner's record is kept (a remediation within it
/// doubles the next wait; CAPI's `minHealthyPeriod` default).
pub const STABLE_PERIOD: Duration = Duration::from_secs(3600);

/// One owner's remediations.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BackoffEntry {
    /// Remediations in a row, each within the previous one's backoff and stable period.
    pub count: u32,
    /// When the last one was decided.
    pub last: Time,
}

/// The backoff state of one MHC, keyed by controller owner (`Kind/name`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(transparent)]
pub struct Backoff(pub BTreeMap<String, BackoffEntry>);

/// The wait after `count` remediations in a row: 1 min, 2, 4, … capped at 1 h.
pub fn backoff_delay(count: u32) -> Duration {
    let exp = count.saturating_sub(1).min(20);
    BACKOFF_BASE.saturating_mul(1 << exp).min(BACKOFF_MAX)
}

/// The key of a machine's owner in [`Backoff`].
pub fn owner_key(m: &Machine) -> Option<String> {
    controller_owner(m).map(|o| format!("{}/{}", o.kind, o.name))
}

impl Backoff {
    /// Reads the MHC's annotation; a malformed one reads as empty (and is rewritten).
    pub fn from_mhc(mhc: &MachineHealthCheck) -> Self {
        mhc.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(BACKOFF_ANNOTATION))
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default()
    }

    /// The annotation value (`None`: remove it).
    pub fn to_annotation(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    fn ends(e: &BackoffEntry) -> i128 {
        e.last.0.as_nanosecond() + backoff_delay(e.count).as_nanos() as i128
    }

    fn live(e: &BackoffEntry, now: &Time) -> bool {
        now.0.as_nanosecond() < Self::ends(e) + STABLE_PERIOD.as_nanos() as i128
    }

    /// How long remediation of `m` must wait: it is a replacement (created at or after its
    /// owner's last remediation) and that remediation's backoff has not run out.
    pub fn hold(&self, m: &Machine, now: &Time) -> Option<(Duration, u32)> {
        let e = self.0.get(&owner_key(m)?)?;
        let replacement = m
            .metadata
            .creation_timestamp
            .as_ref()
            .is_none_or(|c| c.0 >= e.last.0);
        let left = Self::ends(e) - now.0.as_nanosecond();
        (replacement && left > 0).then(|| {
            (
                Duration::from_nanos(u64::try_from(left).unwrap_or(u64::MAX)),
                e.count,
            )
        })
    }

    /// Records a remediation of `m` decided at `now`.
    pub fn record(&mut self, m: &Machine, now: &Time) {
        let Some(key) = owner_key(m) else { return };
        let count = match self.0.get(&key) {
            Some(e) if Self::live(e, now) => e.count.saturating_add(1),
            _ => 1,
        };
        self.0.insert(
            key,
            BackoffEntry {
                count,
                last: now.clone(),
            },
        );
    }

    /// Forgets owners whose record ran out.
    pub fn prune(&mut self, now: &Time) {
        self.0.retain(|_, e| Self::live(e, now));
    }
}

// ---------------------------------------------------------------------------------------------
// Control plane gate.

/// A control plane machine of the namespace, as the gate sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlaneMember {
    pub name: String,
    pub deleting: bool,
    /// Running with a Ready node, nothing pending under this MHC's rules.
    pub healthy: bool,
}

/// Why a control plane remediation is held back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    ReplacementInProgress,
    Deleting(String),
    Unhealthy(Vec<String>),
    Quorum { healthy: usize, members: usize },
    OneAtATime(String),
}

impl Held {
    pub fn reason(&self) -> &'static str {
        match self {
            Held::ReplacementInProgress => c::CONTROL_PLANE_REPLACEMENT_IN_PROGRESS,
            Held::Deleting(_) => c::CONTROL_PLANE_MACHINE_DELETING,
            Held::Unhealthy(_) => c::CONTROL_PLANE_MACHINE_UNHEALTHY,
            Held::Quorum { .. } => c::ETCD_QUORUM_AT_RISK,
            Held::OneAtATime(_) => c::CONTROL_PLANE_REMEDIATION_IN_PROGRESS,
        }
    }

    pub fn message(&self, machine: &str) -> String {
        let why = match self {
            Held::ReplacementInProgress => {
                "the control plane machine set is replacing a machine".to_string()
            }
            Held::Deleting(n) => format!("control plane machine {n} is being deleted"),
            Held::Unhealthy(ns) => format!(
                "other control plane machines are not healthy: {}",
                ns.join(", ")
            ),
            Held::Quorum { healthy, members } => format!(
                "etcd would lose quorum: {healthy} healthy of {members} voting members would remain, {} needed",
                quorum(members.saturating_sub(1))
            ),
            Held::OneAtATime(n) => {
                format!("control plane machine {n} is remediated first (one at a time)")
            }
        };
        format!("Remediation of control plane machine {machine} held back: {why}")
    }
}

/// Majority of `n` voting members.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Whether control plane machine `target` may be remediated now: no replacement in progress, no
/// other control plane machine deleting or unhealthy, the remaining voting members keep quorum,
/// and no other control plane remediation was decided in this pass (`first`).
pub fn control_plane_gate(
    target: &str,
    members: &[ControlPlaneMember],
    replacement_in_progress: bool,
    first: Option<&str>,
) -> Result<(), Held> {
    if replacement_in_progress {
        return Err(Held::ReplacementInProgress);
    }
    let others = || members.iter().filter(|m| m.name != target);
    if let Some(d) = others().find(|m| m.deleting) {
        return Err(Held::Deleting(d.name.clone()));
    }
    let unhealthy: Vec<String> = others()
        .filter(|m| !m.healthy)
        .map(|m| m.name.clone())
        .collect();
    if !unhealthy.is_empty() {
        return Err(Held::Unhealthy(unhealthy));
    }
    let voting = members.iter().filter(|m| !m.deleting).count().max(1);
    let healthy = others().filter(|m| m.healthy && !m.deleting).count();
    if healthy < quorum(voting - 1) {
        return Err(Held::Quorum {
            healthy,
            members: voting,
        });
    }
    if let Some(f) = first.filter(|f| *f != target) {
        return Err(Held::OneAtATime(f.to_string()));
    }
    Ok(())
}
