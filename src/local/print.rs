//! Local-mode output: tables for people, YAML or JSON objects with status for tools.
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::driver::Report;
use super::machines::MachineReport;
use super::store::Store;
use crate::api::conditions::{cluster, find_capi};
use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;
use crate::api::machine::ZONE_LABEL;
use crate::plan::capi_machine::actuated::vm_key;
use crate::plan::capi_machine::capi_play;
use crate::plan::placement::requested_zone;

/// A fixed-width table; the last column is not padded.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n {
                out.push_str(c);
            } else {
                let _ = write!(out, "{c:<w$}  ", w = widths[i]);
            }
        }
        out.push('\n');
    };
    line(headers.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// The zone and cluster tables.
pub fn tables(store: &Store, report: &Report) -> String {
    let mut rows = Vec::new();
    for (name, z) in &store.zones {
        let verdict = report.verdicts.get(name);
        let ready = z.status.as_ref().and_then(|s| s.ready);
        let (reason, message) = verdict
            .and_then(|v| v.first_problem())
            .map(|(r, m)| (r.to_string(), m.to_string()))
            .unwrap_or_default();
        rows.push(vec![
            name.clone(),
            match ready {
                Some(true) => "True".into(),
                Some(false) => "False".into(),
                None => "Unknown".into(),
            },
            z.spec.failure_domain.clone(),
            z.spec.server.clone().unwrap_or_default(),
            reason,
            message,
        ]);
    }
    let mut out = table(
        &[
            "NAME",
            "READY",
            "FAILURE-DOMAIN",
            "SERVER",
            "REASON",
            "MESSAGE",
        ],
        &rows,
    );
    if !store.clusters.is_empty() {
        let rows: Vec<Vec<String>> = store
            .clusters
            .iter()
            .map(|(k, c)| {
                let status = c.status.as_ref();
                let fds = status
                    .and_then(|s| s.failure_domains.as_ref())
                    .map(|m| {
                        m.iter()
                            .map(|f| f.name.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                let cond = status
                    .and_then(|s| {
                        find_capi(
                            DeprecatedStatus::v1beta1_conditions(&s.deprecated),
                            cluster::FAILURE_DOMAINS_AVAILABLE,
                        )
                    })
                    .map(|c| {
                        let mut s = c.status.clone();
                        if let Some(r) = &c.reason {
                            s.push_str(&format!(" ({r})"));
                        }
                        s
                    })
                    .unwrap_or_else(|| "-".into());
                vec![
                    k.clone(),
                    if fds.is_empty() { "<none>".into() } else { fds },
                    cond,
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &["CLUSTER", "FAILURE-DOMAINS", "FAILURE-DOMAINS-AVAILABLE"],
            &rows,
        ));
    }
    out
}

/// The last line of a run: what changed in vCenter and what it cost. A dry run's is one
/// statement of what it would change, zones and machines together ("0 change(s)" for zones
/// alone, followed by the machines' own count, read as "nothing will change").
pub fn summary(store: &Store, zones: &Report, machines: &MachineReport, dry_run: bool) -> String {
    if dry_run {
        return dry_run_summary(zones, machines);
    }
    let ready = zones.verdicts.values().filter(|v| v.ready()).count();
    let mut changes = format!("{} vCenter change(s) made", zones.applied.len());
    if !zones.failed.is_empty() {
        changes.push_str(&format!(", {} refused", zones.failed.len()));
    }
    format!(
        "{ready}/{} zone(s) ready; {changes}; {}{}",
        zones.verdicts.len(),
        zones.round_trips.summary(),
        machine_summary(store, machines)
    )
}

fn dry_run_summary(zones: &Report, machines: &MachineReport) -> String {
    let ready = zones.verdicts.values().filter(|v| v.ready()).count();
    let mut would = format!("{} zone change(s)", zones.pending.len());
    if !machines.would.is_empty() || machines.rounds > 0 {
        would.push_str(&format!(" and {} machine change(s)", machines.would.len()));
    }
    format!(
        "dry run, nothing changed: would make {would}; {ready}/{} zone(s) ready; {}",
        zones.verdicts.len(),
        zones.round_trips.plus(&machines.round_trips).summary()
    )
}

/// The changes, one per line (`would:` on a dry run).
pub fn changes(report: &Report, dry_run: bool) -> String {
    let mut out = String::new();
    if dry_run {
        for s in &report.pending {
            let _ = writeln!(out, "would: {s}");
        }
    } else {
        for s in &report.applied {
            let _ = writeln!(out, "done: {s}");
        }
    }
    for (_, e) in &report.failed {
        // The executor's error already names the step.
        let _ = writeln!(out, "refused: {e}");
    }
    out
}

/// Every object after the run (never Secrets), then the run's events in order.
fn objects(store: &Store) -> Vec<serde_json::Value> {
    let mut v = store.objects();
    for e in store.run_events() {
        let mut e = serde_json::to_value(e).unwrap_or_default();
        e["apiVersion"] = "v1".into();
        e["kind"] = "Event".into();
        v.push(e);
    }
    v
}

pub fn json(store: &Store) -> String {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects(store)});
    serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"
}

pub fn yaml(store: &Store) -> String {
    objects(store)
        .iter()
        .filter_map(|o| serde_saphyr::to_string(o).ok())
        .map(|doc| format!("---\n{doc}"))
        .collect()
}

/// `5m`, `3h`, `2d`, as kubectl prints ages.
fn age(since: Option<&Time>, now: &Time) -> String {
    let Some(t) = since else { return "-".into() };
    let secs = now.0.as_second() - t.0.as_second();
    match secs {
        s if s < 0 => "0s".into(),
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The MACHINES and EVENTS tables (nothing when there are no machines and no events). A dry
/// run has no EVENTS table: its events narrate steps it did not take ("Cloning VM"); the
/// `would:` lines say what it would do, and the problems what stands in the way.
pub fn machine_tables(store: &Store, report: &MachineReport, now: &Time, dry_run: bool) -> String {
    let mut out = String::new();
    if !store.machines.is_empty() {
        let rows: Vec<Vec<String>> = store
            .machines
            .iter()
            .map(|(k, m)| {
                let st = m.status.as_ref();
                let zone = requested_zone(m, store.zones.values())
                    .or_else(|| m.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned())
                    .unwrap_or_else(|| "-".into());
                let mut phase = st
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_else(|| "-".into());
                if m.metadata.deletion_timestamp.is_some() && phase != "Deleting" {
                    phase = "Deleting".into();
                }
                vec![
                    k.clone(),
                    phase,
                    zone,
                    report
                        .vm_paths
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| "-".into()),
                    st.and_then(|s| s.node_ref.as_ref())
                        .and_then(|r| r.name.clone())
                        .unwrap_or_else(|| "-".into()),
                    age(m.metadata.creation_timestamp.as_ref(), now),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &["MACHINES", "PHASE", "ZONE", "VM", "NODE", "AGE"],
            &rows,
        ));
    }
    if !store.capi_machines.is_empty() {
        out.push('\n');
        out.push_str(&capi_machine_table(store, report, now));
    }
    if !store.machine_sets.is_empty() {
        let rows: Vec<Vec<String>> = store
            .machine_sets
            .iter()
            .map(|(k, c)| {
                let st = c.status.clone().unwrap_or_default();
                let n = |v: Option<i32>| v.unwrap_or(0).to_string();
                let state = match c.spec.state_or_default() {
                    crate::api::control_plane_machine_set::ControlPlaneMachineSetState::Active => "Active",
                    crate::api::control_plane_machine_set::ControlPlaneMachineSetState::Inactive => "Inactive",
                };
                vec![
                    k.clone(),
                    c.spec.replicas_or_default().to_string(),
                    n(st.replicas),
                    n(st.ready_replicas),
                    n(st.updated_replicas),
                    n(st.unavailable_replicas),
                    state.to_string(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &[
                "CONTROLPLANEMACHINESETS",
                "DESIRED",
                "CURRENT",
                "READY",
                "UPDATED",
                "UNAVAILABLE",
                "STATE",
            ],
            &rows,
        ));
    }
    if !store.health_checks.is_empty() {
        let rows: Vec<Vec<String>> = store
            .health_checks
            .iter()
            .map(|(k, h)| {
                let st = h.status.clone().unwrap_or_default();
                vec![
                    k.clone(),
                    st.expected_machines.unwrap_or(0).to_string(),
                    st.current_healthy.unwrap_or(0).to_string(),
                    st.remediations_allowed.unwrap_or(0).to_string(),
                    if report.short_circuited.contains(k) {
                        "True"
                    } else {
                        "False"
                    }
                    .to_string(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &[
                "MACHINEHEALTHCHECKS",
                "EXPECTED",
                "HEALTHY",
                "ALLOWED",
                "SHORT-CIRCUITED",
            ],
            &rows,
        ));
    }
    let events = store.run_events();
    if !events.is_empty() && !dry_run {
        let rows: Vec<Vec<String>> = events
            .iter()
            .map(|e| {
                let o = &e.involved_object;
                vec![
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                    format!(
                        "{}/{}",
                        o.kind.as_deref().unwrap_or_default().to_ascii_lowercase(),
                        o.name.as_deref().unwrap_or_default()
                    ),
                    e.message.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(&["EVENTS", "REASON", "OBJECT", "MESSAGE"], &rows));
    }
    out
}

/// The Cluster API machines: phase (as CAPI would report it; `Provisioned` is as far as local
/// mode goes), failure domain, provider ID, VM and what it waits for.
fn capi_machine_table(store: &Store, report: &MachineReport, now: &Time) -> String {
    let rows: Vec<Vec<String>> = store
        .capi_machines
        .iter()
        .map(|(k, m)| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_string();
            let vm = capi_play::infra_machine_ref(m)
                .ok()
                .and_then(|vk| {
                    let uid = store.vsphere_machines.get(&vk)?.metadata.uid.clone()?;
                    store.vsphere_vms.values().find(|vm| {
                        vm.metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|o| o.uid == uid)
                    })
                })
                .and_then(|vm| report.vm_paths.get(&format!("VSphereVM {}", vm_key(vm))))
                .cloned()
                .unwrap_or_else(|| "-".into());
            vec![
                k.clone(),
                s(&m.status["phase"]),
                s(&m.spec["failureDomain"]),
                s(&m.spec["providerID"]),
                vm,
                match m.status["phase"].as_str() {
                    Some(capi_play::phase::PROVISIONED) => "-".into(),
                    _ => super::run::capi_machine_why(store, report, k, m)
                        .unwrap_or_else(|| "-".into()),
                },
                age(m.metadata.creation_timestamp.as_ref(), now),
            ]
        })
        .collect();
    table(
        &[
            "CLUSTER-API-MACHINES",
            "PHASE",
            "FAILURE-DOMAIN",
            "PROVIDER-ID",
            "VM",
            "WAITING-FOR",
            "AGE",
        ],
        &rows,
    )
}

/// The vCenter changes machines made, one per line.
pub fn machine_changes(report: &MachineReport) -> String {
    let mut out = String::new();
    for w in &report.capi_done {
        let _ = writeln!(out, "done: cluster api (played by local mode): {w}");
    }
    for w in &report.vcenter_writes {
        let _ = writeln!(out, "done: {w}");
    }
    for w in &report.would {
        let _ = writeln!(out, "would: {w}");
    }
    for f in &report.failed {
        let _ = writeln!(out, "failed: {f}");
    }
    for (k, why) in &report.machine_failures {
        let _ = writeln!(out, "failed: machine {k}: {why}");
    }
    out
}

/// The machines' part of a run's summary line.
fn machine_summary(store: &Store, report: &MachineReport) -> String {
    if store.machines.is_empty()
        && store.capi_machines.is_empty()
        && report.vcenter_writes.is_empty()
    {
        return String::new();
    }
    let running = store
        .machines
        .values()
        .filter(|m| m.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    let capi = if store.capi_machines.is_empty() {
        String::new()
    } else {
        let provisioned = store
            .capi_machines
            .values()
            .filter(|m| m.status["phase"] == capi_play::phase::PROVISIONED)
            .count();
        format!(
            "; {provisioned}/{} Cluster API machine(s) provisioned",
            store.capi_machines.len()
        )
    };
    format!(
        "; {running}/{} machine(s) running{capi}; {} machine change(s) in vCenter; {}",
        store.machines.len(),
        report.vcenter_writes.len(),
        report.round_trips.summary()
    )
}
