//! The sweep's reads: the recorded tasks, the inventory with the VM properties, the VM groups of
//! the clusters whose new VMs wait for them, and (at execute time, only for clones that need
//! them) the template devices and port group switches. Each failure is typed and says which
//! read of which server failed, so a machine that could not be reconciled says why.
use std::collections::BTreeMap;

use super::data::{MachineView, SweepInput};
use crate::api::machine::Machine;
use crate::plan::failure::Failure;
use crate::plan::machine::devices::DeviceFacts;
use crate::plan::machine::observe::{group_wanted, observe};
use crate::plan::machine::tags_to_check;
use crate::plan::placement::Placement;
use crate::vcenter::{Client, MoRef};

/// The machine's recorded vCenter task.
pub fn task_ref(m: &Machine) -> Option<MoRef> {
    crate::plan::machine::waiting::task_in_flight(m)
}

/// `what` could not be read from the client's server.
fn failed(client: &Client, what: &str, e: crate::vcenter::Error) -> Failure {
    Failure::vcenter(Some(&format!("reading {what} from {}", client.server())), e)
}

/// Everything the machines of a sweep are planned on, in a fixed number of bulk reads.
pub async fn read_view(input: &SweepInput<'_>, client: &Client) -> Result<MachineView, Failure> {
    // Machines powered on together share one task: read it once.
    let mut refs: Vec<MoRef> = input.machines.iter().filter_map(task_ref).collect();
    refs.sort();
    refs.dedup();
    let tasks = if refs.is_empty() {
        BTreeMap::new()
    } else {
        client
            .task_states(&refs)
            .await
            .map_err(|e| failed(client, "the machines' recorded tasks", e))?
    };
    let inventory = client
        .inventory()
        .await
        .map_err(|e| failed(client, "the inventory", e))?;
    // The clusters whose groups decide whether a new VM may be powered on, and the VMs whose
    // tags are to be checked, each read together.
    let mut clusters: Vec<MoRef> = Vec::new();
    let mut tagged: Vec<MoRef> = Vec::new();
    for m in &input.machines {
        let (placed, vm) = observe(m, input.zones, input.failure_domains, &inventory);
        if let Some((cluster, _)) = group_wanted(&placed, vm.as_ref()) {
            clusters.push(cluster.clone());
        }
        if tags_to_check(m, vm.as_ref())
            && let Some(r) = vm.as_ref().and_then(|v| v.moref.clone())
        {
            tagged.push(r);
        }
    }
    let tags = if tagged.is_empty() {
        BTreeMap::new()
    } else {
        client
            .list_attached_tags_on_objects(&tagged)
            .await
            .map_err(|e| failed(client, "the tags on the machines' VMs", e))?
            .into_iter()
            .collect()
    };
    clusters.sort();
    clusters.dedup();
    let configs = if clusters.is_empty() {
        BTreeMap::new()
    } else {
        client
            .cluster_configs(&clusters)
            .await
            .map_err(|e| failed(client, "the VM groups of the machines' clusters", e))?
    };
    Ok(MachineView {
        tasks,
        inventory,
        configs,
        tags,
    })
}

/// What this sweep's clones need to know of their templates and port groups: one read for the
/// templates (their devices, and their snapshot trees when a linked clone is planned) and two
/// for the port groups, only when clones with network devices, a disk size, data disks or a
/// linked clone are planned. A failure stays a typed vCenter failure (a 503 is retried later,
/// not called a decode error).
pub async fn device_facts(client: &Client, clones: &[&Placement]) -> Result<DeviceFacts, Failure> {
    let wanted: Vec<&&Placement> = clones
        .iter()
        .filter(|p| {
            !p.networks.is_empty()
                || p.disk_gib.is_some()
                || !p.data_disks.is_empty()
                || p.linked_clone.is_some()
        })
        .collect();
    let snapshots = wanted.iter().any(|p| p.linked_clone.is_some());
    if wanted.is_empty() {
        return Ok(DeviceFacts::default());
    }
    let mut templates: Vec<MoRef> = wanted.iter().map(|p| p.template.clone()).collect();
    templates.sort();
    templates.dedup();
    let mut pgs: Vec<MoRef> = wanted
        .iter()
        .flat_map(|p| p.networks.iter())
        .filter(|n| n.kind == "DistributedVirtualPortgroup")
        .cloned()
        .collect();
    pgs.sort();
    pgs.dedup();
    let templates = client
        .template_clone_facts(&templates, snapshots)
        .await
        .map_err(|e| failed(client, "the templates' devices", e))?;
    let switch_uuids = if pgs.is_empty() {
        BTreeMap::new()
    } else {
        client
            .portgroup_switch_uuids(&pgs)
            .await
            .map_err(|e| failed(client, "the port groups' switches", e))?
    };
    Ok(DeviceFacts {
        templates,
        switch_uuids,
    })
}
