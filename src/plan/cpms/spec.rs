//! The provider spec a machine of an index should have (template + its domain), which domain a
//! machine sits in, and the normalised comparison that decides "needs update".
//!
//! Upstream bugs fixed here (reference §5):
//! * template path vs name (SPLAT-1440, OCPBUGS-32295): templates compare by basename;
//! * domain-owned fields in the CPMS template (OCPBUGS-32947): the whole workspace and the network
//!   names come from the domain, whatever the template says, so a template `folder`,
//!   `resourcePool` or `networkName` never causes a rollout while domains are used;
//! * static IPs (OCPBUGS-29114): devices compare by `networkName`, `addressesFromPools` and
//!   `nameservers` only, never by the per-machine `ipAddrs`/`gateway`;
//! * inventory paths: `path.Clean` on every path (`//` in installer pools), and a relative name
//!   equals an absolute path with the same last element.
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::plan::placement::ZoneFill;

/// `path.Clean` for inventory paths: duplicate and trailing slashes, `.` and `..` resolved.
pub fn clean_path(p: &str) -> String {
    let absolute = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn basename(p: &str) -> &str {
    p.trim_end_matches('/').rsplit('/').next().unwrap_or(p)
}

/// Two inventory references name the same object: equal once cleaned, or, when either is a bare
/// or relative name, equal last elements.
pub fn same_path(a: &str, b: &str) -> bool {
    let (ca, cb) = (clean_path(a), clean_path(b));
    ca == cb || ((!ca.starts_with('/') || !cb.starts_with('/')) && basename(&ca) == basename(&cb))
}

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

/// The provider spec for a machine in `fill`'s domain: the template with the domain's whole
/// workspace and its network names injected (reference §1). Template devices are kept only when
/// the first carries `addressesFromPools` (static IPs); the VM template is the domain's when it
/// names one; everything else is the template's.
pub fn inject(template: &Value, fill: &ZoneFill) -> Value {
    let mut out = template.clone();
    let Some(obj) = out.as_object_mut() else {
        return out;
    };
    obj.insert(
        "workspace".into(),
        serde_json::to_value(&fill.workspace).unwrap_or(Value::Null),
    );
    if let Some(t) = &fill.template {
        obj.insert("template".into(), Value::String(t.clone()));
    }
    if !fill.networks.is_empty() {
        let devices: Vec<Value> = template
            .get("network")
            .and_then(|n| n.get("devices"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let static_ips = devices.first().is_some_and(|d| {
            d.get("addressesFromPools")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        });
        let mut out_devices = if static_ips { devices } else { Vec::new() };
        for (i, n) in fill.networks.iter().enumerate() {
            if out_devices.len() <= i {
                out_devices.push(Value::Object(Map::new()));
            }
            if let Some(d) = out_devices[i].as_object_mut() {
                d.insert("networkName".into(), Value::String(n.clone()));
            }
        }
        obj.insert(
            "network".into(),
            serde_json::json!({ "devices": out_devices }),
        );
    }
    out
}

/// Which of `fills` a provider spec's workspace sits in: `datacenter`, `datastore`, `server`,
/// `vmGroup` and the cleaned `resourcePool` all match (reference §1 extraction). Empty when none
/// does; the first by name when several do.
pub fn domain_of(spec: &Value, fills: &BTreeMap<String, ZoneFill>) -> String {
    let ws = |f: &str| str_at(spec, &["workspace", f]);
    let same = |mine: Option<&str>, theirs: &Option<String>| match (
        mine,
        theirs.as_deref().filter(|s| !s.is_empty()),
    ) {
        (None, None) => true,
        (Some(a), Some(b)) => same_path(a, b),
        _ => false,
    };
    fills
        .iter()
        .find(|(_, f)| {
            let w = &f.workspace;
            same(ws("datacenter"), &w.datacenter)
                && same(ws("datastore"), &w.datastore)
                && ws("server") == w.server.as_deref().filter(|s| !s.is_empty())
                && ws("vmGroup") == w.vm_group.as_deref().filter(|s| !s.is_empty())
                && same(ws("resourcePool"), &w.resource_pool)
        })
        .map(|(n, _)| n.clone())
        .unwrap_or_default()
}

/// Fields compared as inventory references.
const PATH_FIELDS: [&str; 4] = ["datacenter", "datastore", "folder", "resourcePool"];

/// The provider spec as compared: webhook defaults applied, nulls and empty strings dropped,
/// `apiVersion`/`kind`/`metadata` ignored, devices reduced to what the domain and IPAM own.
fn normalise(v: &Value) -> Map<String, Value> {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        // Go reads `null` as the zero value; so does the comparison (top level; the workspace and
        // devices are reduced below).
        m.retain(|_, v| !v.is_null() && v.as_str() != Some(""));
    }
    crate::api::machine::default_provider_spec(&mut v, "");
    let mut m = v.as_object().cloned().unwrap_or_default();
    for k in ["apiVersion", "kind", "metadata"] {
        m.remove(k);
    }
    if let Some(Value::Object(ws)) = m.get_mut("workspace") {
        ws.retain(|_, v| v.as_str().is_some_and(|s| !s.is_empty()));
    }
    let devices: Vec<Value> = m
        .get("network")
        .and_then(|n| n.get("devices"))
        .and_then(Value::as_array)
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    let mut o = Map::new();
                    for k in ["networkName", "addressesFromPools", "nameservers"] {
                        if let Some(x) = d.get(k).filter(|x| x.as_str() != Some("")) {
                            o.insert(k.into(), x.clone());
                        }
                    }
                    Value::Object(o)
                })
                .collect()
        })
        .unwrap_or_default();
    m.insert("network".into(), serde_json::json!({ "devices": devices }));
    m
}

fn render(v: Option<&Value>) -> String {
    v.map_or_else(|| "<unset>".into(), |v| v.to_string())
}

/// The differences between what a machine should be (`desired`) and what it is, as
/// `field: want != have` lines; empty means up to date.
pub fn diff(desired: &Value, actual: &Value) -> Vec<String> {
    let (d, a) = (normalise(desired), normalise(actual));
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&String> = d.keys().chain(a.keys()).collect();
    for k in keys {
        let (x, y) = (d.get(k), a.get(k));
        let equal = match k.as_str() {
            "template" => match (x.and_then(Value::as_str), y.and_then(Value::as_str)) {
                (Some(x), Some(y)) => basename(x) == basename(y),
                _ => x == y,
            },
            "workspace" => {
                let f = |v: Option<&Value>, f: &str| {
                    v.and_then(|w| w.get(f))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                let fields: std::collections::BTreeSet<String> = [x, y]
                    .iter()
                    .filter_map(|v| v.and_then(Value::as_object))
                    .flat_map(|o| o.keys().cloned())
                    .collect();
                fields.iter().all(|field| match (f(x, field), f(y, field)) {
                    (Some(p), Some(q)) if PATH_FIELDS.contains(&field.as_str()) => {
                        same_path(&p, &q)
                    }
                    (p, q) => p == q,
                })
            }
            "network" => {
                let devs = |v: Option<&Value>| {
                    v.and_then(|n| n.get("devices"))
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                };
                let (dx, dy) = (devs(x), devs(y));
                dx.len() == dy.len()
                    && dx.iter().zip(&dy).all(|(p, q)| {
                        let name = |d: &Value| {
                            d.get("networkName")
                                .and_then(Value::as_str)
                                .map(str::to_string)
                        };
                        let same_name = match (name(p), name(q)) {
                            (Some(a), Some(b)) => same_path(&a, &b),
                            (a, b) => a == b,
                        };
                        same_name
                            && p.get("addressesFromPools") == q.get("addressesFromPools")
                            && p.get("nameservers") == q.get("nameservers")
                    })
            }
            _ => x == y,
        };
        if !equal {
            out.push(format!("{k}: {} != {}", render(x), render(y)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cpms::tests::{fill, template_spec};
    use serde_json::json;

    /// The shared template, with domain-owned fields the domain must override.
    fn template() -> Value {
        let mut t = template_spec();
        t["workspace"] =
            json!({"folder": "/dc1/vm/other", "resourcePool": "/dc1/host/x/Resources"});
        t
    }

    #[test]
    fn paths_clean_like_go() {
        assert_eq!(
            clean_path("/dc1/host/c1//Resources/"),
            "/dc1/host/c1/Resources"
        );
        assert_eq!(clean_path("/a/./b/../c"), "/a/c");
        assert_eq!(clean_path(""), ".");
        assert!(same_path("rhcos", "/dc1/vm/rhcos"));
        assert!(!same_path("/dc1/vm/a/rhcos", "/dc1/vm/b/rhcos"));
    }

    #[test]
    fn injection_replaces_the_workspace_and_network_names() {
        let v = inject(&template(), &fill("a"));
        assert_eq!(v["workspace"]["resourcePool"], "/dc1/host/cl-a/Resources");
        assert_eq!(v["workspace"]["folder"], "/dc1/vm");
        assert_eq!(
            v["network"]["devices"],
            json!([{"networkName": "/dc1/network/net-a"}])
        );
        assert_eq!(v["numCPUs"], 4);
    }

    #[test]
    fn static_ip_devices_are_kept_with_the_domain_network() {
        let mut t = template();
        t["network"]["devices"] = json!([{"networkName": "x", "addressesFromPools": [{"group": "ipam.cluster.x-k8s.io", "resource": "IPPool", "name": "pool"}], "nameservers": ["10.0.0.1"]}]);
        let v = inject(&t, &fill("b"));
        let d = &v["network"]["devices"][0];
        assert_eq!(d["networkName"], "/dc1/network/net-b");
        assert_eq!(d["nameservers"], json!(["10.0.0.1"]));
        // A machine with its own static address is not outdated for it (OCPBUGS-29114).
        let mut machine = v.clone();
        machine["network"]["devices"][0]["ipAddrs"] = json!(["10.0.0.20/24"]);
        machine["network"]["devices"][0]["gateway"] = json!("10.0.0.1");
        assert!(diff(&v, &machine).is_empty());
    }

    /// SPLAT-1440 / OCPBUGS-32295: a template path and its name are the same template.
    #[test]
    fn bug_template_path_vs_name_is_no_rollout() {
        let desired = inject(&template(), &fill("a"));
        let mut machine = desired.clone();
        machine["template"] = json!("rhcos");
        assert!(diff(&desired, &machine).is_empty());
        machine["template"] = json!("rhcos-other");
        assert_eq!(diff(&desired, &machine).len(), 1);
    }

    /// OCPBUGS-32947: folder, resourcePool and network names in the CPMS template belong to the
    /// domain: a machine placed by its domain is up to date, whatever the template says.
    #[test]
    fn bug_domain_owned_template_fields_are_no_rollout() {
        let desired = inject(&template(), &fill("a"));
        // An installer-made machine: names not paths, `//` in the pool, bare network name.
        let machine = json!({
            "template": "rhcos",
            "numCPUs": 4, "memoryMiB": 16384, "diskGiB": 120,
            "userDataSecret": {"name": "master-user-data"},
            "credentialsSecret": {"name": "vsphere-cloud-credentials"},
            "workspace": {
                "server": "vc.example.com", "datacenter": "dc1", "folder": "/dc1/vm",
                "datastore": "/dc1/datastore/ds-a", "resourcePool": "/dc1/host/cl-a//Resources"
            },
            "network": {"devices": [{"networkName": "net-a"}]},
            "metadata": {"creationTimestamp": null}
        });
        assert_eq!(diff(&desired, &machine), Vec::<String>::new());
        let mut fills = BTreeMap::new();
        fills.insert("a".to_string(), fill("a"));
        fills.insert("b".to_string(), fill("b"));
        assert_eq!(domain_of(&machine, &fills), "a");
        // The same machine is outdated for domain b (a domain change is a diff).
        let other = inject(&template(), &fill("b"));
        assert!(!diff(&other, &machine).is_empty());
    }

    #[test]
    fn a_real_change_is_a_diff() {
        let desired = inject(&template(), &fill("a"));
        let mut machine = desired.clone();
        machine["numCPUs"] = json!(8);
        assert_eq!(
            diff(&desired, &machine),
            vec!["numCPUs: 4 != 8".to_string()]
        );
    }
}
