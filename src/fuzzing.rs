//! Entry points for the fuzz targets in `fuzz/`: each runs the decoders of one kind of vCenter
//! reply over arbitrary bytes, as the client would. Not an API (hidden from the docs, changes
//! with any commit). A reply that does not decode is an ordinary `Err`, dropped here; a panic
//! or an abort is the bug the fuzzer reports. Bodies are read as the client reads them
//! (`reqwest::Response::text`: invalid UTF-8 replaced, not refused).
#![doc(hidden)]

use reqwest::StatusCode;

use crate::vcenter::client::{ServiceContent, decode_reply};
use crate::vcenter::cluster::parse_config;
use crate::vcenter::inventory::from_contents;
use crate::vcenter::model;
use crate::vcenter::model::fault::Fault;
use crate::vcenter::model::inventory::Wanted;
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::property::{Page, decode_page};
use crate::vcenter::rest::tagging::{ObjectId, ObjectsOnTag, TagsOnObject, decode};
use crate::vcenter::rest::{
    Dialect, classify_rest_error, decode_body, rest_error_detail, session_token, version_at_least,
};
use crate::vcenter::soap::Node;
use crate::vcenter::task::{parse_task_info, recent_tasks};
use crate::vcenter::updates::decode_updates;
use crate::vcenter::vm::{parse_disk, parse_nics, parse_slots, parse_snapshots};

const SERVER: &str = "https://vc.fuzz.invalid";

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// The response element of a SOAP answer with HTTP 200; errors are rendered as they would be
/// logged.
fn response(body: &str, method: &str) -> Option<Node> {
    match decode_reply(SERVER, "fuzz", method, StatusCode::OK, body) {
        Ok(node) => Some(node),
        Err(e) => {
            let _ = e.to_string();
            None
        }
    }
}

/// The SOAP envelope and fault decoder (`Client::call`), with HTTP 200 and HTTP 500, and the
/// general values read straight from a response element: the service content, a returned moref.
pub fn soap_reply(data: &[u8]) {
    let body = text(data);
    for status in [StatusCode::OK, StatusCode::INTERNAL_SERVER_ERROR] {
        match decode_reply(SERVER, "fuzz", "Fuzz", status, &body) {
            Ok(node) => {
                if let Ok(content) = ServiceContent::decode(&node) {
                    assert!(!content.root_folder.value.is_empty());
                }
                if let Some(r) = node.child("returnval") {
                    let _ = MoRef::decode(r, "returnval");
                }
            }
            Err(e) => {
                let _ = e.to_string();
                let _ = (e.class(), e.is_transient());
            }
        }
    }
    // The fault readers on any element, as `missingSet` and `TaskInfo.error` use them.
    if let Ok(root) = crate::vcenter::soap::xml::parse(&body) {
        let _ = Fault::from_localized(&root).to_string();
        let _ = Fault::from_soap_fault(&root).to_string();
    }
}

/// `RetrievePropertiesEx` / `ContinueRetrievePropertiesEx` pages (`Client::retrieve`).
pub fn retrieve_properties(data: &[u8]) {
    let Some(page) = page(&text(data)) else {
        return;
    };
    for o in &page.objects {
        assert!(!o.obj.kind.is_empty() && !o.obj.value.is_empty());
        for path in o.props.keys() {
            let _ = o.text(path);
            let _ = o.moref_prop(path);
            let _ = o.bool_prop(path);
            let _ = o.string_prop(path, &[]);
        }
        for (_, fault) in &o.missing {
            let _ = fault.to_string();
        }
    }
}

fn page(body: &str) -> Option<Page> {
    let node = response(body, "RetrievePropertiesEx")?;
    decode_page(&node)
        .map_err(|m| {
            m.into_error(SERVER.into(), "RetrievePropertiesEx")
                .to_string()
        })
        .ok()
}

/// The inventory snapshot built from a bulk read (`Client::inventory`), and the in-memory
/// lookups reconciles make on it.
pub fn inventory(data: &[u8]) {
    let Some(page) = page(&text(data)) else {
        return;
    };
    let Ok(inv) = from_contents(&page.objects) else {
        return;
    };
    let _ = inv.root();
    let wanted = [
        Wanted::Datacenter,
        Wanted::ComputeCluster,
        Wanted::ComputeResource,
        Wanted::Host,
        Wanted::ResourcePool,
        Wanted::Folder,
        Wanted::Datastore,
        Wanted::Network,
        Wanted::VirtualMachine,
    ];
    let entities: Vec<model::inventory::Entity> = inv.iter().cloned().collect();
    for e in entities.iter().take(64) {
        let _ = inv.path(&e.moref);
        let _ = inv.hosts_of(&e.moref);
        let _ = inv.root_pool_of(&e.moref);
        for w in wanted {
            let _ = inv.ancestor(&e.moref, w);
            let scope = e.parent.as_ref();
            let _ = inv.find(w, &e.name, scope).map_err(|err| err.to_string());
            let _ = inv.find(w, &e.path, None).map_err(|err| err.to_string());
        }
        if let Some(vm) = &e.vm
            && let Some(u) = &vm.instance_uuid
        {
            let _ = inv.vm_by_instance_uuid(u);
        }
    }
}

/// Task reads: `TaskInfo` (`Client::task_state`, `task_states`), `recentTask`
/// (`Client::running_task`) and the task a `*_Task` method returns (`Client::start_task`).
pub fn task_info(data: &[u8]) {
    let body = text(data);
    let Some(node) = response(&body, "RetrievePropertiesEx") else {
        return;
    };
    if let Some(r) = node.child("returnval") {
        let _ = MoRef::decode(r, "task");
    }
    let Ok(page) = decode_page(&node) else {
        return;
    };
    for o in &page.objects {
        if let Some(info) = o.props.get("info")
            && let Ok(state) = parse_task_info(info)
        {
            let _ = state.is_done();
        }
        if let Some(recent) = o.props.get("recentTask") {
            let _ = recent_tasks(recent);
        }
    }
}

/// `WaitForUpdatesEx` answers (`Client::wait_for_updates`, the long poll): the `UpdateSet`
/// decoder, then the task states and moref values the watcher reads out of its changes.
pub fn wait_for_updates(data: &[u8]) {
    let body = text(data);
    let Some(node) = response(&body, "WaitForUpdatesEx") else {
        return;
    };
    match decode_updates(&node) {
        Ok(Some(set)) => {
            for u in &set.objects {
                assert!(!u.obj.kind.is_empty() && !u.obj.value.is_empty());
                for c in &u.changes {
                    assert!(!c.name.is_empty());
                    if let Some(v) = &c.val {
                        let _ = parse_task_info(v);
                        let _ = MoRef::decode(v, "val");
                    }
                }
                for (_, f) in &u.missing {
                    let _ = f.to_string();
                }
            }
        }
        Ok(None) => {}
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Typed property values: cluster `configurationEx` (`Client::cluster_configs`) and a VM's
/// `config.hardware.device` and `snapshot` (`Client::template_clone_facts`). Every value goes
/// through every decoder, so the fuzzer need not guess property names.
pub fn property_values(data: &[u8]) {
    let Some(page) = page(&text(data)) else {
        return;
    };
    for val in page.objects.iter().flat_map(|o| o.props.values()) {
        values(val);
    }
}

fn values(val: &Node) {
    if let Ok(cfg) = parse_config(val) {
        let _ = cfg.vm_host_rules().count();
        for g in &cfg.groups {
            let _ = cfg.group(g.name());
        }
    }
    let _ = parse_disk(val);
    let _ = parse_nics(val);
    let _ = parse_slots(val);
    let _ = parse_snapshots(val);
    let _ = parse_task_info(val);
}

/// The REST (vAPI tagging) answers in both dialects: session create, every answer shape the
/// tagging calls decode, and error classification.
pub fn rest_tagging(data: &[u8]) {
    let body = text(data);
    for dialect in [Dialect::Api, Dialect::Rest] {
        let _ = session_token(dialect, &body);
        let Ok(v) = decode_body(dialect, &body) else {
            continue;
        };
        let _ = decode::<Vec<String>>(v.clone());
        let _ = decode::<String>(v.clone());
        let _ = decode::<model::tags::Category>(v.clone());
        let _ = decode::<model::tags::Tag>(v.clone());
        if let Ok(ids) = decode::<Vec<ObjectId>>(v.clone()) {
            let _: Vec<MoRef> = ids.into_iter().map(ObjectId::into_moref).collect();
        }
        let _ = decode::<Vec<TagsOnObject>>(v.clone());
        let _ = decode::<Vec<ObjectsOnTag>>(v);
    }
    for status in [400, 401, 403, 404, 409, 500] {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        let _ = classify_rest_error(status, &body).to_string();
        let _ = rest_error_detail(status, &body);
    }
    let _ = version_at_least(Some(&body), 7, 0, 2);
}
