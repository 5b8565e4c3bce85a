//! Local mode's side of [`KubeOps`]: the persisted object store. Every change is written to the
//! state file at once (atomically), so a run killed between two steps resumes from the last
//! one; events are stored with the objects, in order.
use std::path::PathBuf;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Event, EventSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::store::{Store, key};
use crate::api::control_plane_machine_set::{ControlPlaneMachineSet, ControlPlaneMachineSetStatus};
use crate::api::ipam::IpAddressClaim;
use crate::api::machine::Machine;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::actuated::vm_key;
use crate::plan::health::RequestRef;
use crate::plan::machine::drain::PodRef;
use crate::reconcile::kube_ops::{EventRecord, Eviction, KubeError, KubeErrorKind, KubeOps};

/// The store behind a lock, with where to persist it and the run's clock.
pub struct LocalCluster {
    pub store: Mutex<Store>,
    pub state: Option<PathBuf>,
    pub now: Time,
    /// Set when a write to the state file failed: the run stops (its changes would be lost).
    pub persist_error: Mutex<Option<String>>,
}

impl LocalCluster {
    pub fn new(store: Store, state: Option<PathBuf>, now: Time) -> Self {
        LocalCluster {
            store: Mutex::new(store),
            state,
            now,
            persist_error: Mutex::new(None),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn into_store(self) -> Store {
        self.store.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// Write the state file now.
    pub fn persist(&self) -> Result<(), KubeError> {
        let Some(path) = &self.state else {
            return Ok(());
        };
        let store = self.lock();
        store.save(path).map_err(|e| {
            let err = KubeError::new(
                format!("write state file {}", path.display()),
                KubeErrorKind::State,
                e.to_string(),
            );
            *self.persist_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.to_string());
            err
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Store) -> Result<T, KubeError>) -> Result<T, KubeError> {
        let out = {
            let mut s = self.lock();
            f(&mut s)?
        };
        self.persist()?;
        Ok(out)
    }
}

fn missing(what: &str, k: &str) -> KubeError {
    KubeError::new(
        format!("update {what} {k}"),
        KubeErrorKind::NotFound,
        "not found",
    )
}

fn machine_key(m: &Machine) -> String {
    key(
        Some(m.metadata.namespace.as_deref().unwrap_or("default")),
        m.metadata.name.as_deref().unwrap_or_default(),
    )
}

impl KubeOps for LocalCluster {
    async fn update_machine(&self, before: &Machine, after: &Machine) -> Result<(), KubeError> {
        let k = machine_key(before);
        self.with(|s| {
            let stored = s.machines.get(&k).ok_or_else(|| missing("Machine", &k))?;
            if stored.metadata.uid != before.metadata.uid {
                return Err(missing("Machine", &k));
            }
            let released = after.metadata.deletion_timestamp.is_some()
                && after.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
            if released {
                s.machines.remove(&k);
            } else {
                s.machines.insert(k.clone(), after.clone());
            }
            Ok(())
        })
    }

    async fn update_vsphere_vm(
        &self,
        before: &VSphereVM,
        after: &VSphereVM,
    ) -> Result<(), KubeError> {
        let k = vm_key(before);
        self.with(|s| {
            let stored = s
                .vsphere_vms
                .get(&k)
                .ok_or_else(|| missing("VSphereVM", &k))?;
            if stored.metadata.uid != before.metadata.uid {
                return Err(missing("VSphereVM", &k));
            }
            let released = after.metadata.deletion_timestamp.is_some()
                && after.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
            if released {
                s.vsphere_vms.remove(&k);
            } else {
                s.vsphere_vms.insert(k.clone(), after.clone());
            }
            Ok(())
        })
    }

    async fn create_machine(&self, m: &Machine) -> Result<Machine, KubeError> {
        let mut m = m.clone();
        m.metadata.namespace.get_or_insert_with(|| "default".into());
        let k = machine_key(&m);
        let now = self.now.clone();
        self.with(|s| {
            if s.machines.contains_key(&k) {
                return Err(KubeError::new(
                    format!("create Machine {k}"),
                    KubeErrorKind::Conflict,
                    "already exists",
                ));
            }
            m.metadata.uid = Some(uuid::Uuid::new_v4().to_string());
            m.metadata.creation_timestamp = Some(now);
            m.metadata.generation = Some(1);
            s.machines.insert(k, m.clone());
            Ok(m)
        })
    }

    async fn list_machines(&self, namespace: &str) -> Result<Vec<Machine>, KubeError> {
        Ok(self
            .lock()
            .machines
            .values()
            .filter(|m| m.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect())
    }

    async fn set_machine_set_status(
        &self,
        set: &ControlPlaneMachineSet,
        status: &ControlPlaneMachineSetStatus,
    ) -> Result<(), KubeError> {
        let k = key(
            set.metadata.namespace.as_deref(),
            set.metadata.name.as_deref().unwrap_or_default(),
        );
        self.with(|s| {
            let stored = s
                .machine_sets
                .get_mut(&k)
                .ok_or_else(|| missing("ControlPlaneMachineSet", &k))?;
            stored.status = Some(status.clone());
            Ok(())
        })
    }

    async fn delete_machine(&self, namespace: &str, name: &str) -> Result<(), KubeError> {
        let k = key(Some(namespace), name);
        let now = self.now.clone();
        self.with(|s| {
            // Gone already is done, as the API server's 404 is for `ApiServer`.
            let Some(m) = s.machines.get_mut(&k) else {
                return Ok(());
            };
            if m.metadata.finalizers.as_ref().is_none_or(Vec::is_empty) {
                s.machines.remove(&k);
            } else {
                m.metadata.deletion_timestamp.get_or_insert(now);
            }
            Ok(())
        })
    }

    async fn cordon(&self, node: &str) -> Result<(), KubeError> {
        self.with(|s| {
            let n = s.nodes.get_mut(node).ok_or_else(|| missing("Node", node))?;
            n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
            Ok(())
        })
    }

    async fn evict(&self, _pod: &PodRef) -> Result<Eviction, KubeError> {
        // Local mode has no pods: nothing is ever listed for eviction.
        Ok(Eviction::Evicted)
    }

    async fn delete_node(&self, node: &str) -> Result<(), KubeError> {
        self.with(|s| {
            s.nodes.remove(node);
            s.manifest_nodes.remove(node);
            Ok(())
        })
    }

    async fn create_ip_address_claim(&self, claim: &IpAddressClaim) -> Result<(), KubeError> {
        let mut claim = claim.clone();
        claim
            .metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        let k = claim.key();
        let now = self.now.clone();
        self.with(|s| {
            s.ip_claims.entry(k).or_insert_with(|| {
                claim.metadata.uid = Some(uuid::Uuid::new_v4().to_string());
                claim.metadata.creation_timestamp = Some(now);
                claim.metadata.generation = Some(1);
                claim
            });
            Ok(())
        })
    }

    async fn release_ip_address_claim(&self, namespace: &str, name: &str) -> Result<(), KubeError> {
        let k = key(Some(namespace), name);
        self.with(|s| {
            // No finalizer is left to hold it and nothing else does: the claim goes, and with it
            // its address (as the in-cluster provider frees it).
            s.ip_claims.remove(&k);
            s.ip_addresses.retain(|_, a| {
                !(a.metadata.namespace.as_deref() == Some(namespace)
                    && a.spec.claim_ref.name == name)
            });
            Ok(())
        })
    }

    async fn update_health_check(
        &self,
        before: &MachineHealthCheck,
        after: &MachineHealthCheck,
    ) -> Result<(), KubeError> {
        let k = key(
            before.metadata.namespace.as_deref(),
            before.metadata.name.as_deref().unwrap_or_default(),
        );
        self.with(|s| {
            let stored = s
                .health_checks
                .get_mut(&k)
                .ok_or_else(|| missing("MachineHealthCheck", &k))?;
            stored.metadata.annotations = after.metadata.annotations.clone();
            stored.status = after.status.clone();
            Ok(())
        })
    }

    async fn create_remediation_request(
        &self,
        namespace: &str,
        request: &serde_json::Value,
    ) -> Result<(), KubeError> {
        Err(KubeError::new(
            format!(
                "create {} {namespace}/{}",
                request["kind"].as_str().unwrap_or("remediation request"),
                request["metadata"]["name"].as_str().unwrap_or_default()
            ),
            KubeErrorKind::Invalid,
            "local mode runs no external remediation controller to act on it",
        ))
    }

    async fn delete_remediation_request(
        &self,
        _namespace: &str,
        _request: &RequestRef,
    ) -> Result<(), KubeError> {
        // Local mode never creates one.
        Ok(())
    }

    async fn event(&self, e: EventRecord) {
        let mut s = self.lock();
        // The same event again in this run is a series (count), as the API server's recorder
        // aggregates it, not a new line.
        let from = s.events_before_run.min(s.events.len());
        if let Some(same) = s.events[from..].iter_mut().find(|x| {
            x.involved_object.uid == e.regarding.uid
                && x.involved_object.name == e.regarding.name
                && x.reason.as_deref() == Some(e.reason.as_str())
                && x.message.as_deref() == Some(e.message.as_str())
        }) {
            same.count = Some(same.count.unwrap_or(1) + 1);
            same.last_timestamp = Some(self.now.clone());
            return;
        }
        let n = s.events.len();
        let name = format!(
            "{}.{:x}",
            e.regarding.name.as_deref().unwrap_or("object"),
            n
        );
        s.events.push(Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: e
                    .regarding
                    .namespace
                    .clone()
                    .or_else(|| Some("default".into())),
                ..ObjectMeta::default()
            },
            involved_object: e.regarding,
            reason: Some(e.reason),
            message: Some(e.message),
            type_: Some(e.type_),
            first_timestamp: Some(self.now.clone()),
            last_timestamp: Some(self.now.clone()),
            count: Some(1),
            source: Some(EventSource {
                component: Some("vsphere-provider".into()),
                host: None,
            }),
            ..Event::default()
        });
    }
}
