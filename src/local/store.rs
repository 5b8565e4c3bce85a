//! The in-process object store of local mode: manifests loaded from files, admitted with the
//! same code as `validate` and the webhooks (defaults applied), kept typed.
use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;

use crate::api::manifest::{LoadedObject, Object, load_paths};
use crate::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};
use crate::webhook::Ctx;
use crate::webhook::admission::admit_loaded;

/// Objects by kind; cluster-scoped kinds by name, namespaced ones by `namespace/name`.
#[derive(Clone, Debug, Default)]
pub struct Store {
    pub failure_domains: BTreeMap<String, VSphereFailureDomain>,
    pub zones: BTreeMap<String, VSphereDeploymentZone>,
    pub clusters: BTreeMap<String, VSphereCluster>,
    pub secrets: Vec<Secret>,
    pub machines: Vec<Machine>,
    /// Admitted objects local mode does not reconcile (validated, not printed).
    pub others: Vec<serde_json::Value>,
}

/// Why the manifests cannot be used: every problem, each naming file:line and field.
#[derive(Debug, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct InputError {
    pub problems: Vec<String>,
}

fn key(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

impl Store {
    /// Load, default and validate every object in `paths`. Anything rejected (or of an unknown
    /// kind, or a duplicate) is an input error: nothing is reconciled from a half-valid set.
    pub fn load(paths: &[PathBuf]) -> Result<Self, InputError> {
        let (objects, errors) = load_paths(paths);
        let mut problems: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let mut store = Store::default();
        let ctx = Ctx {
            allow_placeholders: false,
        };
        for obj in &objects {
            if let Err(p) = store.admit(obj, &ctx) {
                problems.push(p);
            }
        }
        if objects.is_empty() && problems.is_empty() {
            problems.push(format!(
                "no objects found in {}",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if problems.is_empty() {
            Ok(store)
        } else {
            Err(InputError { problems })
        }
    }

    fn admit(&mut self, obj: &LoadedObject, ctx: &Ctx) -> Result<(), String> {
        let what = format!("{} {} {}", obj.source, obj.kind(), obj.name());
        let outcome = admit_loaded(obj, ctx);
        if !outcome.errors.is_empty() {
            let errs: Vec<String> = outcome.errors.iter().map(|e| e.to_string()).collect();
            return Err(format!("{what}: {}", errs.join("; ")));
        }
        let defaulted = LoadedObject {
            source: obj.source.clone(),
            value: outcome.object.clone(),
        };
        let typed = defaulted.typed().map_err(|e| format!("{what}: {e}"))?;
        let dup = |kind: &str, k: &str| format!("{what}: duplicate {kind} {k}");
        match typed {
            Object::FailureDomain(fd) => {
                let k = fd.metadata.name.clone().unwrap_or_default();
                if self.failure_domains.insert(k.clone(), *fd).is_some() {
                    return Err(dup("VSphereFailureDomain", &k));
                }
            }
            Object::DeploymentZone(z) => {
                let k = z.metadata.name.clone().unwrap_or_default();
                if self.zones.insert(k.clone(), *z).is_some() {
                    return Err(dup("VSphereDeploymentZone", &k));
                }
            }
            Object::Cluster(c) => {
                let k = key(
                    Some(c.metadata.namespace.as_deref().unwrap_or("default")),
                    c.metadata.name.as_deref().unwrap_or_default(),
                );
                let mut c = *c;
                c.metadata.namespace.get_or_insert_with(|| "default".into());
                if self.clusters.insert(k.clone(), c).is_some() {
                    return Err(dup("VSphereCluster", &k));
                }
            }
            Object::Secret(s) => {
                let mut s = *s;
                s.metadata.namespace.get_or_insert_with(|| "default".into());
                self.secrets.push(s);
            }
            Object::Machine(m) => {
                let mut m = *m;
                m.metadata.namespace.get_or_insert_with(|| "default".into());
                self.machines.push(m);
            }
            Object::MachineHealthCheck(_) | Object::ControlPlaneMachineSet(_) => {
                self.others.push(outcome.object);
            }
        }
        Ok(())
    }
}
