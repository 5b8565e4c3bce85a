//! `vsphere-provider validate -f FILE|DIR ...`: offline admission for CI pipelines and admins.
//!
//! Every object in the given files (multi-document YAML or JSON; directories are walked) is
//! defaulted and validated as the apiserver and this provider's admission webhooks would on
//! create: schema (unknown fields, types, enums, required), CEL rules, webhook rules. One line per
//! object on standard output:
//!
//! ```text
//! config/samples/zones.yaml:2: VSphereDeploymentZone zone-a: ok (defaulted spec.controlPlane)
//! bad.yaml:7: VSphereFailureDomain fd: rejected: spec.region.type: Forbidden: region's Failure Domain type cannot be HostGroup
//! x.yaml:1: v1/ConfigMap cm: skipped: not served by vsphere-provider
//! ```
//!
//! Kinds other controllers serve are skipped, not failed: a cluster template (clusterctl's, with
//! its KubeadmControlPlane, ConfigMaps and ClusterResourceSet) is the natural input of a CI gate,
//! and a flag every such pipeline must remember would be worse than a default that fits it.
//! What is skipped is only what is surely not ours (`manifest::unserved`): a missing apiVersion
//! or kind, a kind of ours at a version it is not served at, or a CAPV kind this provider does
//! not serve is rejected, since a cluster running it would refuse those.
//!
//! Warnings go to standard error. Exit status: 0 all admitted (or skipped), 1 some object
//! rejected, 2 a file could not be read or parsed (the error names file and line).
//!
//! `${VAR}` placeholders (clusterctl templates) are strings: values holding one skip format
//! checks unless `--strict-placeholders` is given.

use super::out::{errln, outln};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::api::manifest::{self, LoadedObject, ObjectType};
use crate::api::{Kind, VSphereDeploymentZone};
use crate::webhook::Ctx;
use crate::webhook::admission::{AdmissionOutcome, admit_loaded};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Manifest files or directories (`-` for standard input). Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "FILE|DIR", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Treat `${VAR}` placeholders like any other value (they then fail format checks).
    #[arg(long)]
    pub strict_placeholders: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Print only rejected objects (no `ok` or `skipped` lines; the summary still counts them).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// One line per object.
    Text,
    /// A JSON document with one entry per object.
    Json,
}

/// The verdict on one object.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The object as loaded.
    pub object: LoadedObject,
    /// Admission's outcome.
    pub outcome: AdmissionOutcome,
}

impl Verdict {
    /// `ok`, `rejected` or `skipped` (another controller's kind, not judged).
    pub fn result(&self) -> &'static str {
        if self.skipped() {
            "skipped"
        } else if self.outcome.errors.is_empty() && self.outcome.object_type != ObjectType::Unknown
        {
            "ok"
        } else {
            "rejected"
        }
    }

    fn skipped(&self) -> bool {
        self.outcome.object_type == ObjectType::Unknown
            && manifest::unserved(self.object.api_version(), self.object.kind()).is_none()
    }

    fn label(&self) -> String {
        let kind = match self.outcome.object_type {
            ObjectType::Unknown => match (self.object.api_version(), self.object.kind()) {
                ("", "") => "(no apiVersion or kind)".to_string(),
                ("", kind) => kind.to_string(),
                (api_version, "") => format!("{api_version} (no kind)"),
                (api_version, kind) => format!("{api_version}/{kind}"),
            },
            // Name the version when it is not the kind's first (v1beta2 beside v1beta1).
            ObjectType::Served(k) if self.object.api_version() != k.api_versions()[0] => {
                let version = self
                    .object
                    .api_version()
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                format!("{} ({version})", self.object.kind())
            }
            _ => self.object.kind().to_string(),
        };
        let name = self.object.name();
        let name = if name.is_empty() {
            "(no name)".to_string()
        } else {
            name
        };
        match self.object.namespace() {
            Some(ns)
                if self.outcome.object_type != ObjectType::Served(Kind::VSphereFailureDomain)
                    && self.outcome.object_type
                        != ObjectType::Served(Kind::VSphereDeploymentZone) =>
            {
                format!("{kind} {ns}/{name}")
            }
            _ => format!("{kind} {name}"),
        }
    }

    /// The one-line text form.
    pub fn line(&self) -> String {
        let head = format!("{}: {}", self.object.source, self.label());
        match self.result() {
            "skipped" => format!("{head}: skipped: not served by vsphere-provider"),
            "ok" if self.outcome.defaulted.is_empty() => format!("{head}: ok"),
            "ok" => format!(
                "{head}: ok (defaulted {})",
                self.outcome.defaulted.join(", ")
            ),
            _ => {
                let errors: Vec<String> = self
                    .outcome
                    .errors
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                format!("{head}: rejected: {}", errors.join("; "))
            }
        }
    }
}

/// Admits every object and adds the checks that need the whole set: duplicates, and references
/// between zones, failure domains and control plane machine sets (warnings).
pub fn check_all(objects: Vec<LoadedObject>, ctx: &Ctx) -> Vec<Verdict> {
    let mut verdicts: Vec<Verdict> = objects
        .into_iter()
        .map(|object| Verdict {
            outcome: admit_loaded(&object, ctx),
            object,
        })
        .collect();

    // Duplicates: the same kind, namespace and name twice.
    let mut first: HashMap<(String, String, String, String), String> = HashMap::new();
    for v in &mut verdicts {
        let name = v.object.name();
        if name.is_empty() || name.ends_with('*') {
            continue;
        }
        let id = (
            v.object.api_version().to_string(),
            v.object.kind().to_string(),
            v.object.namespace().unwrap_or_default().to_string(),
            name,
        );
        match first.get(&id) {
            Some(at) => v
                .outcome
                .errors
                .push(crate::webhook::FieldError::new_duplicate_object(at)),
            None => {
                first.insert(id, v.object.source.to_string());
            }
        }
    }

    // References, only when the set carries the referenced kind at all.
    let names_of = |kind: Kind, verdicts: &[Verdict]| -> Vec<String> {
        verdicts
            .iter()
            .filter(|v| v.outcome.object_type == ObjectType::Served(kind))
            .map(|v| v.object.name())
            .collect()
    };
    let secrets: Vec<(String, String)> = verdicts
        .iter()
        .filter(|v| v.outcome.object_type == ObjectType::Secret)
        .map(|v| {
            (
                v.object.namespace().unwrap_or_default().to_string(),
                v.object.name(),
            )
        })
        .collect();
    let fds = names_of(Kind::VSphereFailureDomain, &verdicts);
    let zones = names_of(Kind::VSphereDeploymentZone, &verdicts);
    for v in &mut verdicts {
        match v.outcome.object_type {
            ObjectType::Served(Kind::VSphereDeploymentZone) if !fds.is_empty() => {
                if let Ok(z) =
                    serde_json::from_value::<VSphereDeploymentZone>(v.outcome.object.clone())
                    && let Some(fd) = z.spec.failure_domain_name()
                    && !fds.iter().any(|n| n == fd)
                {
                    v.outcome.warnings.push(format!(
                        "spec.failureDomain: no VSphereFailureDomain {fd:?} among the given objects"
                    ));
                }
            }
            ObjectType::Served(Kind::ControlPlaneMachineSet) if !zones.is_empty() => {
                if let Ok(c) = serde_json::from_value::<crate::api::ControlPlaneMachineSet>(
                    v.outcome.object.clone(),
                ) {
                    for name in c.spec.vsphere_failure_domains() {
                        if !zones.iter().any(|z| z == name) {
                            v.outcome.warnings.push(format!(
                                "failure domain {name:?}: no VSphereDeploymentZone of that name among the given objects"
                            ));
                        }
                    }
                }
            }
            // Upstream's webhook warns when the credentials secret does not exist; offline, the
            // given Secrets stand for the cluster's.
            ObjectType::Served(Kind::Machine) if !secrets.is_empty() => {
                let namespace = v.object.namespace().unwrap_or_default().to_string();
                if let Some(name) = v
                    .outcome
                    .object
                    .pointer("/spec/providerSpec/value/credentialsSecret/name")
                    .and_then(Value::as_str)
                    && !name.is_empty()
                    && !secrets.contains(&(namespace.clone(), name.to_string()))
                {
                    v.outcome.warnings.push(format!(
                        "spec.providerSpec.value.credentialsSecret: Invalid value: {name:?}: not found. Expected CredentialsSecret to exist (no Secret {namespace}/{name} among the given objects): the machine cannot be created without vCenter credentials"
                    ));
                }
            }
            _ => {}
        }
    }
    verdicts
}

fn to_json(verdicts: &[Verdict], load_errors: &[manifest::LoadError]) -> Value {
    let objects: Vec<Value> = verdicts
        .iter()
        .map(|v| {
            let errors: Vec<Value> = v
                .outcome
                .errors
                .iter()
                .map(|e| json!({"path": e.path, "type": e.kind.as_str(), "value": e.value, "message": e.message, "text": e.to_string()}))
                .collect();
            json!({
                "source": {"file": v.object.source.file, "line": v.object.source.line, "document": v.object.source.document},
                "apiVersion": v.object.api_version(),
                "kind": v.object.kind(),
                "namespace": v.object.namespace(),
                "name": v.object.name(),
                "result": v.result(),
                "defaulted": v.outcome.defaulted,
                "errors": errors,
                "warnings": v.outcome.warnings,
            })
        })
        .collect();
    let input_errors: Vec<String> = load_errors.iter().map(ToString::to_string).collect();
    json!({"objects": objects, "inputErrors": input_errors})
}

pub async fn run(args: Args) -> ExitCode {
    let ctx = Ctx {
        allow_placeholders: !args.strict_placeholders,
        ..Ctx::default()
    };
    let (objects, load_errors) = manifest::load_paths(&args.files);
    let verdicts = check_all(objects, &ctx);

    match args.output {
        Output::Json => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&to_json(&verdicts, &load_errors)).unwrap_or_default()
            );
        }
        Output::Text => {
            for v in &verdicts {
                if !(args.quiet && v.result() != "rejected") {
                    outln!("{}", v.line());
                }
                for w in &v.outcome.warnings {
                    errln!("{}: {}: warning: {w}", v.object.source, v.label());
                }
            }
            for e in &load_errors {
                errln!("error: {e}");
            }
        }
    }

    let rejected = verdicts.iter().filter(|v| v.result() == "rejected").count();
    let skipped = verdicts.iter().filter(|v| v.result() == "skipped").count();
    if args.output == Output::Text {
        errln!(
            "{} object(s): {} ok, {rejected} rejected, {skipped} skipped (not served by vsphere-provider); {} input error(s)",
            verdicts.len(),
            verdicts.len() - rejected - skipped,
            load_errors.len()
        );
    }
    if !load_errors.is_empty() {
        ExitCode::from(super::EXIT_USAGE)
    } else if rejected > 0 {
        ExitCode::from(super::EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}
