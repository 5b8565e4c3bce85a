//! `--delete KIND/NAME`: what `kubectl delete` does to the store. An object with finalizers
//! gets a deletion timestamp and its controller finishes the job; one without is removed at
//! once. A namespaced name is looked up in every namespace; held by several, it is an error
//! naming them.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::store::Store;

/// Why a `--delete` cannot be done (exit 2, nothing sent anywhere).
#[derive(Debug, thiserror::Error)]
#[error("{flag} {arg}: {message}")]
pub struct DeleteError {
    /// The option: `--delete` or `--remove-hook`.
    pub flag: &'static str,
    pub arg: String,
    pub message: String,
}

/// The one key of `map` that `name` (bare, or `namespace/name`) means.
fn find_key<T>(
    map: &std::collections::BTreeMap<String, T>,
    arg: &str,
    kind: &str,
    name: &str,
    namespaced: bool,
) -> Result<String, DeleteError> {
    let keys: Vec<String> = map
        .keys()
        .filter(|k| {
            if namespaced {
                k.rsplit_once('/').is_some_and(|(_, n)| n == name) || k.as_str() == name
            } else {
                k.as_str() == name
            }
        })
        .cloned()
        .collect();
    let k = match keys.as_slice() {
        [] => {
            return Err(DeleteError {
                flag: "--delete",
                arg: arg.into(),
                message: format!("no {kind} named {name:?}"),
            });
        }
        [one] => one.clone(),
        many => {
            return Err(DeleteError {
                flag: "--delete",
                arg: arg.into(),
                message: format!(
                    "{kind} {name:?} exists in several namespaces ({}); write KIND/NAMESPACE/NAME",
                    many.iter()
                        .filter_map(|k| k.split_once('/').map(|(ns, _)| ns))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    };
    Ok(k)
}

fn mark<T>(
    map: &mut std::collections::BTreeMap<String, T>,
    arg: &str,
    kind: &str,
    name: &str,
    namespaced: bool,
    meta: impl Fn(&mut T) -> &mut ObjectMeta,
    now: &Time,
) -> Result<(), DeleteError> {
    let k = find_key(map, arg, kind, name, namespaced)?;
    let obj = map.get_mut(&k).expect("key found above");
    let m = meta(obj);
    if m.finalizers.as_ref().is_none_or(Vec::is_empty) {
        map.remove(&k);
    } else {
        m.deletion_timestamp.get_or_insert_with(|| now.clone());
    }
    Ok(())
}

/// Apply every `--delete`. `KIND/NAME` or `KIND/NAMESPACE/NAME`; kinds as kubectl spells them
/// (singular, plural, or with the group).
pub fn apply(store: &mut Store, args: &[String], now: &Time) -> Result<(), DeleteError> {
    for arg in args {
        let bad = |message: String| DeleteError {
            flag: "--delete",
            arg: arg.clone(),
            message,
        };
        let mut parts = arg.splitn(3, '/');
        let kind = parts.next().unwrap_or_default().to_ascii_lowercase();
        let (ns, name) = match (parts.next(), parts.next()) {
            (Some(n), None) => (None, n.to_string()),
            (Some(ns), Some(n)) => (Some(ns.to_string()), n.to_string()),
            _ => return Err(bad("expected KIND/NAME".into())),
        };
        if name.is_empty() {
            return Err(bad("expected KIND/NAME".into()));
        }
        let group = kind.split_once('.').map(|(_, g)| g.to_string());
        let kind = kind.split('.').next().unwrap_or_default().to_string();
        // `machine` is OpenShift's unless the group says Cluster API's, or only a Cluster API
        // Machine has that name.
        let capi_machine = group.as_deref() == Some("cluster.x-k8s.io")
            || (group.is_none()
                && !store
                    .machines
                    .keys()
                    .any(|k| k.rsplit_once('/').is_some_and(|(_, n)| n == name))
                && store
                    .capi_machines
                    .keys()
                    .any(|k| k.rsplit_once('/').is_some_and(|(_, n)| n == name)));
        let qualified = |n: &str| match &ns {
            Some(ns) => format!("{ns}/{n}"),
            None => n.to_string(),
        };
        let target = qualified(&name);
        match kind.as_str() {
            "machine" | "machines" if capi_machine => mark(
                &mut store.capi_machines,
                arg,
                "Machine (cluster.x-k8s.io)",
                &target,
                true,
                |m| &mut m.metadata,
                now,
            )?,
            "machinedeployment" | "machinedeployments" | "md" => mark(
                &mut store.machine_deployments,
                arg,
                "MachineDeployment",
                &target,
                true,
                |m| &mut m.metadata,
                now,
            )?,
            "machine" | "machines" => mark(
                &mut store.machines,
                arg,
                "Machine",
                &target,
                true,
                |m| &mut m.metadata,
                now,
            )?,
            "node" | "nodes" | "no" => {
                mark(
                    &mut store.nodes,
                    arg,
                    "Node",
                    &name,
                    false,
                    |n| &mut n.metadata,
                    now,
                )?;
                if !store.nodes.contains_key(&name) {
                    store.manifest_nodes.remove(&name);
                }
            }
            "vspheredeploymentzone" | "vspheredeploymentzones" => mark(
                &mut store.zones,
                arg,
                "VSphereDeploymentZone",
                &name,
                false,
                |z| &mut z.metadata,
                now,
            )?,
            "vspherefailuredomain" | "vspherefailuredomains" => mark(
                &mut store.failure_domains,
                arg,
                "VSphereFailureDomain",
                &name,
                false,
                |f| &mut f.metadata,
                now,
            )?,
            "vspherecluster" | "vsphereclusters" => mark(
                &mut store.clusters,
                arg,
                "VSphereCluster",
                &target,
                true,
                |c| &mut c.metadata,
                now,
            )?,
            "controlplanemachineset" | "controlplanemachinesets" | "cpms" => mark(
                &mut store.machine_sets,
                arg,
                "ControlPlaneMachineSet",
                &target,
                true,
                |c| &mut c.metadata,
                now,
            )?,
            "machinehealthcheck" | "machinehealthchecks" | "mhc" => mark(
                &mut store.health_checks,
                arg,
                "MachineHealthCheck",
                &target,
                true,
                |h| &mut h.metadata,
                now,
            )?,
            other => {
                return Err(bad(format!(
                    "unknown kind {other:?} (machine, machinedeployment, node, vspheredeploymentzone, vspherefailuredomain, vspherecluster, controlplanemachineset, machinehealthcheck)"
                )));
            }
        }
    }
    Ok(())
}

/// Apply every `--remove-hook machine/[NAMESPACE/]NAME:HOOK`: the named preDrain or
/// preTerminate lifecycle hook leaves the Machine's spec, as its owner would remove it (`oc edit`
/// in a cluster). Local mode plays no hook owner — no etcd operator removes
/// `EtcdQuorumOperator` once a replacement's member has joined — so a deletion held by a hook
/// would wait for ever; this is the owner's hand. A Machine from the manifests is laid over
/// again from them on the next run, so there the hook is taken out of the manifest instead;
/// this is for Machines the manifests do not hold (a control plane machine set's).
/// Hooks may always be removed, deleting or not (the webhook refuses only adding them).
pub fn remove_hooks(store: &mut Store, args: &[String]) -> Result<(), DeleteError> {
    for arg in args {
        let bad = |message: String| DeleteError {
            flag: "--remove-hook",
            arg: arg.clone(),
            message,
        };
        let Some((object, hook)) = arg.split_once(':') else {
            return Err(bad("expected machine/NAME:HOOK".into()));
        };
        let (kind, name) = object
            .split_once('/')
            .ok_or_else(|| bad("expected machine/NAME:HOOK".into()))?;
        if !matches!(kind.to_ascii_lowercase().as_str(), "machine" | "machines") {
            return Err(bad(format!(
                "lifecycle hooks are on OpenShift Machines: expected machine/NAME:HOOK, not {kind:?}"
            )));
        }
        let k = find_key(&store.machines, arg, "Machine", name, true).map_err(|e| DeleteError {
            flag: "--remove-hook",
            ..e
        })?;
        let m = store.machines.get_mut(&k).expect("key found above");
        let hooks = m.spec.lifecycle_hooks.get_or_insert_with(Default::default);
        let mut removed = false;
        for list in [&mut hooks.pre_drain, &mut hooks.pre_terminate]
            .into_iter()
            .flatten()
        {
            let before = list.len();
            list.retain(|h| h.name != hook);
            removed |= list.len() != before;
        }
        if !removed {
            let (pre_drain, pre_terminate) = m.hooks();
            let names: Vec<&str> = pre_drain
                .iter()
                .chain(pre_terminate)
                .map(|h| h.name.as_str())
                .collect();
            return Err(bad(format!(
                "Machine {k} has no lifecycle hook {hook:?} (it has: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Machine;

    fn store() -> Store {
        let mut s = Store::default();
        for (ns, name, fin) in [("a", "m-0", true), ("b", "m-0", true), ("a", "m-1", false)] {
            let mut m = Machine::new(name, Default::default());
            m.metadata.namespace = Some(ns.into());
            if fin {
                m.metadata.finalizers = Some(vec!["machine.machine.openshift.io".into()]);
            }
            s.machines.insert(format!("{ns}/{name}"), m);
        }
        s
    }

    #[test]
    fn deletes_respect_finalizers_and_namespaces() {
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let mut s = store();
        let e = apply(&mut s, &["machine/m-0".into()], &now).unwrap_err();
        assert!(e.to_string().contains("several namespaces (a, b)"), "{e}");
        apply(
            &mut s,
            &[
                "machines.machine.openshift.io/b/m-0".into(),
                "machine/m-1".into(),
            ],
            &now,
        )
        .unwrap();
        assert!(
            s.machines["b/m-0"].metadata.deletion_timestamp.is_some(),
            "finalizer: marked"
        );
        assert!(
            !s.machines.contains_key("a/m-1"),
            "no finalizer: gone at once"
        );
        assert!(s.machines["a/m-0"].metadata.deletion_timestamp.is_none());
        let e = apply(&mut s, &["pod/x".into()], &now).unwrap_err();
        assert!(e.to_string().contains("unknown kind \"pod\""), "{e}");
        let e = apply(&mut s, &["machine/nope".into()], &now).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--delete machine/nope: no Machine named \"nope\""
        );
    }

    #[test]
    fn remove_hook_takes_one_hook_off_and_names_what_is_there_when_wrong() {
        use crate::api::machine::{LifecycleHook, LifecycleHooks};
        let mut s = store();
        let hook = |n: &str| LifecycleHook {
            name: n.into(),
            owner: "clusteroperator/etcd".into(),
        };
        s.machines.get_mut("b/m-0").unwrap().spec.lifecycle_hooks = Some(LifecycleHooks {
            pre_drain: Some(vec![hook("EtcdQuorumOperator")]),
            pre_terminate: Some(vec![hook("keep")]),
        });
        remove_hooks(&mut s, &["machine/b/m-0:EtcdQuorumOperator".into()]).unwrap();
        let (pre_drain, pre_terminate) = s.machines["b/m-0"].hooks();
        assert!(pre_drain.is_empty());
        assert_eq!(pre_terminate.len(), 1, "only the named hook goes");
        let e = remove_hooks(&mut s, &["machine/b/m-0:EtcdQuorumOperator".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--remove-hook machine/b/m-0:EtcdQuorumOperator: Machine b/m-0 has no lifecycle hook \"EtcdQuorumOperator\" (it has: keep)"
        );
        let e = remove_hooks(&mut s, &["machine/m-0:keep".into()]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--remove-hook machine/m-0:keep: "),
            "{e}"
        );
        assert!(e.to_string().contains("several namespaces"), "{e}");
        let e = remove_hooks(&mut s, &["node/n".into()]).unwrap_err();
        assert!(e.to_string().contains("expected machine/NAME:HOOK"), "{e}");
    }
}
