//! Manifest loading: multi-document YAML (or JSON) files and directories into JSON objects that
//! remember where they came from (`file:line`), plus typed access to the kinds we serve and Secrets.
//!
//! Used by `vsphere-provider validate` and by local mode (`reconcile -f`).
//!
//! * A directory is walked recursively in name order for `*.yaml`, `*.yml` and `*.json`;
//!   `kustomization.yaml` files are skipped there (they are not objects), hidden entries too.
//! * Empty documents are skipped; `kind: List` (and `*List`) objects are expanded into their items.
//! * `${VAR}` envsubst placeholders are left as they are: they are strings ([`has_placeholder`]).

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

use super::{
    ControlPlaneMachineSet, Kind, Machine, MachineHealthCheck, VSphereCluster,
    VSphereDeploymentZone, VSphereFailureDomain,
};

/// Where an object came from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source {
    /// The file (as given or found in a directory; `-` for standard input).
    pub file: PathBuf,
    /// 0-based index of the document among the non-empty documents of the file (items of a List
    /// share their list's index).
    pub document: usize,
    /// 1-based line where the object starts (0 if unknown).
    pub line: u64,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One object read from a manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedObject {
    /// Where it came from.
    pub source: Source,
    /// The object as JSON (unchanged from the file).
    pub value: Value,
}

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// YAML syntax error.
    #[error("{}:{line}:{column}: YAML syntax error: {message}", file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// 1-based line (0 if unknown).
        line: u64,
        /// 1-based column (0 if unknown).
        column: u64,
        /// The parser's message.
        message: String,
    },
    /// A document that is not a mapping (e.g. a bare string or a sequence).
    #[error("{at}: document is not an object (found {found})")]
    NotAnObject {
        /// Where.
        at: Source,
        /// What was found instead.
        found: &'static str,
    },
}

/// The typed form of a loaded object.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    /// VSphereFailureDomain.
    FailureDomain(Box<VSphereFailureDomain>),
    /// VSphereDeploymentZone.
    DeploymentZone(Box<VSphereDeploymentZone>),
    /// VSphereCluster.
    Cluster(Box<VSphereCluster>),
    /// VSphereClusterIdentity.
    ClusterIdentity(Box<super::VSphereClusterIdentity>),
    /// Machine.
    Machine(Box<Machine>),
    /// MachineHealthCheck.
    MachineHealthCheck(Box<MachineHealthCheck>),
    /// ControlPlaneMachineSet.
    ControlPlaneMachineSet(Box<ControlPlaneMachineSet>),
    /// A core/v1 Secret (e.g. the credentials a VSphereCluster identityRef names).
    Secret(Box<Secret>),
    /// A core/v1 Node (local mode: a node given by hand, e.g. NotReady).
    Node(Box<k8s_openapi::api::core::v1::Node>),
    /// OpenShift's `config.openshift.io/v1` Infrastructure (its vSphere failure domains).
    Infrastructure(Box<super::Infrastructure>),
    /// The in-cluster IPAM provider's `InClusterIPPool` or `GlobalInClusterIPPool` (local mode
    /// allocates from it).
    IpPool(Box<super::ipam::InClusterIpPool>),
    /// A CAPI `IPAddressClaim` (local mode's state file only: the machine controller makes them).
    IpAddressClaim(Box<super::ipam::IpAddressClaim>),
    /// A CAPI `IPAddress` (local mode's state file only: local mode's IPAM makes them).
    IpAddress(Box<super::ipam::IpAddress>),
    /// A Cluster API core object (`cluster.x-k8s.io` Cluster, Machine, MachineDeployment):
    /// local mode's input for Cluster API machines.
    Capi(Box<super::capi_core::CapiObject>),
    /// VSphereMachine.
    VSphereMachine(Box<super::VSphereMachine>),
    /// VSphereMachineTemplate.
    VSphereMachineTemplate(Box<super::VSphereMachineTemplate>),
    /// VSphereVM.
    VSphereVM(Box<super::VSphereVM>),
    /// VSphereClusterTemplate (a ClusterClass's InfraClusterTemplate).
    VSphereClusterTemplate(Box<super::VSphereClusterTemplate>),
}

/// What an object is, from its `apiVersion` and `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectType {
    /// One of the kinds this provider serves.
    Served(Kind),
    /// A core/v1 Secret.
    Secret,
    /// A core/v1 Node.
    Node,
    /// OpenShift's `config.openshift.io/v1` Infrastructure (no CRD served for it).
    Infrastructure,
    /// An in-cluster IPAM provider pool (`ipam.cluster.x-k8s.io/v1alpha2`).
    IpPool,
    /// A CAPI `IPAddressClaim` or `IPAddress` (`ipam.cluster.x-k8s.io/v1beta1`): made by the
    /// controllers, never given in manifests.
    IpamRecord,
    /// A Cluster API core object (`cluster.x-k8s.io` Cluster, Machine, MachineDeployment):
    /// CAPI serves them; local mode reads them as the user's input.
    CapiCore,
    /// Anything else.
    Unknown,
}

impl LoadedObject {
    /// `apiVersion` (empty if missing).
    pub fn api_version(&self) -> &str {
        self.value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `kind` (empty if missing).
    pub fn kind(&self) -> &str {
        self.value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `metadata.name` (or `generateName` followed by `*`; empty if neither).
    pub fn name(&self) -> String {
        let meta = self.value.get("metadata");
        if let Some(n) = meta.and_then(|m| m.get("name")).and_then(Value::as_str) {
            return n.to_string();
        }
        match meta
            .and_then(|m| m.get("generateName"))
            .and_then(Value::as_str)
        {
            Some(g) => format!("{g}*"),
            None => String::new(),
        }
    }

    /// `metadata.namespace`, if set.
    pub fn namespace(&self) -> Option<&str> {
        self.value
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
    }

    /// What this object is.
    pub fn object_type(&self) -> ObjectType {
        object_type(self.api_version(), self.kind())
    }

    /// The typed object, at the version of its kind's Rust type (a manifest at the other served
    /// version is converted first). Fields the types do not know are dropped.
    pub fn typed(&self) -> Result<Object, serde_json::Error> {
        let v = super::conversion::to_typed(&self.value);
        Ok(match self.object_type() {
            ObjectType::Served(Kind::VSphereFailureDomain) => {
                Object::FailureDomain(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::VSphereDeploymentZone) => {
                Object::DeploymentZone(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::VSphereCluster) => Object::Cluster(serde_json::from_value(v)?),
            ObjectType::Served(Kind::VSphereClusterIdentity) => {
                Object::ClusterIdentity(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::VSphereMachine) => {
                Object::VSphereMachine(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::VSphereMachineTemplate) => {
                Object::VSphereMachineTemplate(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::VSphereVM) => Object::VSphereVM(serde_json::from_value(v)?),
            ObjectType::Served(Kind::VSphereClusterTemplate) => {
                // CAPV's ClusterClass template has no spec at all (v1beta2 allows that).
                let mut v = v;
                if v.get("spec").is_none_or(Value::is_null) {
                    v["spec"] = Value::Object(Default::default());
                }
                Object::VSphereClusterTemplate(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::Machine) => Object::Machine(serde_json::from_value(v)?),
            ObjectType::Served(Kind::MachineHealthCheck) => {
                Object::MachineHealthCheck(serde_json::from_value(v)?)
            }
            ObjectType::Served(Kind::ControlPlaneMachineSet) => {
                Object::ControlPlaneMachineSet(serde_json::from_value(v)?)
            }
            ObjectType::Secret => Object::Secret(serde_json::from_value(v)?),
            ObjectType::Node => Object::Node(serde_json::from_value(v)?),
            ObjectType::Infrastructure => Object::Infrastructure(serde_json::from_value(v)?),
            ObjectType::IpPool => Object::IpPool(serde_json::from_value(v)?),
            ObjectType::IpamRecord if self.kind() == super::ipam::CLAIM_KIND => {
                Object::IpAddressClaim(serde_json::from_value(v)?)
            }
            ObjectType::IpamRecord => Object::IpAddress(serde_json::from_value(v)?),
            ObjectType::CapiCore => Object::Capi(serde_json::from_value(v)?),
            ObjectType::Unknown => {
                return Err(serde::de::Error::custom(format!(
                    "unknown kind {}/{}",
                    self.api_version(),
                    self.kind()
                )));
            }
        })
    }
}

/// What `apiVersion`/`kind` denote.
pub fn object_type(api_version: &str, kind: &str) -> ObjectType {
    if let Some(k) = Kind::from_type(api_version, kind) {
        return ObjectType::Served(k);
    }
    if api_version == "v1" && kind == "Secret" {
        return ObjectType::Secret;
    }
    if api_version == "v1" && kind == "Node" {
        return ObjectType::Node;
    }
    if api_version == super::openshift_config::v1::infrastructure::API_VERSION
        && kind == super::openshift_config::v1::infrastructure::KIND
    {
        return ObjectType::Infrastructure;
    }
    use super::ipam;
    if api_version == ipam::POOL_API_VERSION
        && (kind == ipam::POOL_KIND || kind == ipam::GLOBAL_POOL_KIND)
    {
        return ObjectType::IpPool;
    }
    if api_version == ipam::CLAIM_API_VERSION
        && (kind == ipam::CLAIM_KIND || kind == ipam::ADDRESS_KIND)
    {
        return ObjectType::IpamRecord;
    }
    if api_version.starts_with("cluster.x-k8s.io/") && super::capi_core::LOCAL_KINDS.contains(&kind)
    {
        return ObjectType::CapiCore;
    }
    ObjectType::Unknown
}

/// Why an object of no type [`object_type`] knows is not simply another controller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unserved {
    /// No `apiVersion`: no API server takes it, whatever its kind.
    MissingApiVersion,
    /// No `kind`.
    MissingKind,
    /// A kind this provider serves (its name, perhaps in another case) at a version or in a
    /// group of ours that it does not serve: a typo, or a manifest for another release.
    NotServedAs(Kind),
    /// A CAPV kind (`VSphere*` in the infrastructure group) this provider does not serve: it
    /// installs CAPV's CRD names, so a cluster running it has no CRD for this one.
    CapvKind,
}

/// For an object of a type this provider does not know ([`ObjectType::Unknown`]): why it is an
/// error, or None when it is another controller's kind (a KubeadmControlPlane, a ConfigMap in a
/// cluster template), which `validate` passes over.
pub fn unserved(api_version: &str, kind: &str) -> Option<Unserved> {
    if api_version.is_empty() {
        return Some(Unserved::MissingApiVersion);
    }
    if kind.is_empty() {
        return Some(Unserved::MissingKind);
    }
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    if group != super::INFRA_GROUP && group != super::MACHINE_GROUP {
        return None;
    }
    if let Some(k) = Kind::ALL
        .into_iter()
        .find(|k| k.name().eq_ignore_ascii_case(kind))
    {
        return Some(Unserved::NotServedAs(k));
    }
    (group == super::INFRA_GROUP && kind.to_ascii_lowercase().starts_with("vsphere"))
        .then_some(Unserved::CapvKind)
}

/// True if `s` contains an envsubst/clusterctl placeholder such as `${VSPHERE_SERVER}` or
/// `${VAR:=default}`.
pub fn has_placeholder(s: &str) -> bool {
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if end > 0 => {
                let name = &after[..end];
                let var: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !var.is_empty() && var.chars().next().is_some_and(|c| !c.is_ascii_digit()) {
                    return true;
                }
                rest = &after[end + 1..];
            }
            _ => return false,
        }
    }
    false
}

/// Loads every object from the given files and directories. Keeps going after errors: the
/// objects that could be read come back with every error met.
pub fn load_paths(paths: &[PathBuf]) -> (Vec<LoadedObject>, Vec<LoadError>) {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let mut files = Vec::new();
        if path.as_os_str() == "-" {
            files.push(path.clone());
        } else {
            match std::fs::metadata(path) {
                Ok(m) if m.is_dir() => {
                    if let Err(e) = collect_dir(path, &mut files) {
                        errors.push(e);
                    }
                }
                Ok(_) => files.push(path.clone()),
                Err(source) => {
                    errors.push(LoadError::Io {
                        path: path.clone(),
                        source,
                    });
                    continue;
                }
            }
        }
        for file in files {
            let text = if file.as_os_str() == "-" {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
            } else {
                std::fs::read_to_string(&file)
            };
            match text {
                Ok(text) => match load_str(&file, &text) {
                    Ok(mut objs) => objects.append(&mut objs),
                    Err(e) => errors.push(e),
                },
                Err(source) => errors.push(LoadError::Io { path: file, source }),
            }
        }
    }
    (objects, errors)
}

fn collect_dir(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect_dir(&path, out)?;
        } else if matches!(
            name.as_str(),
            "kustomization.yaml" | "kustomization.yml" | "Kustomization"
        ) {
            continue;
        } else if name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json") {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads every object from one file's text.
pub fn load_str(file: &Path, text: &str) -> Result<Vec<LoadedObject>, LoadError> {
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_multiple(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            let message = e.to_string();
            // The rendered message may carry its own position and snippet; keep the first line.
            let message = message.lines().next().unwrap_or_default().to_string();
            LoadError::Syntax {
                file: file.to_path_buf(),
                line,
                column,
                message,
            }
        })?;
    let mut out = Vec::new();
    for (document, doc) in docs.into_iter().enumerate() {
        let source = Source {
            file: file.to_path_buf(),
            document,
            line: doc.defined.line(),
        };
        match doc.value {
            Value::Null => {}
            Value::Object(map) => {
                let value = Value::Object(map);
                let is_list = value
                    .get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List"))
                    && value.get("items").is_some_and(Value::is_array);
                if is_list {
                    for item in value
                        .get("items")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if item.is_object() {
                            out.push(LoadedObject {
                                source: source.clone(),
                                value: item.clone(),
                            });
                        } else {
                            return Err(LoadError::NotAnObject {
                                at: source,
                                found: json_type(item),
                            });
                        }
                    }
                } else {
                    out.push(LoadedObject { source, value });
                }
            }
            other => {
                return Err(LoadError::NotAnObject {
                    at: source,
                    found: json_type(&other),
                });
            }
        }
    }
    Ok(out)
}

/// The JSON type name of a value.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        assert!(has_placeholder("${VSPHERE_SERVER}"));
        assert!(has_placeholder("x-${A}-y"));
        assert!(has_placeholder("${A:=b}"));
        assert!(!has_placeholder("$A"));
        assert!(!has_placeholder("${}"));
        assert!(!has_placeholder("${1}"));
        assert!(!has_placeholder("plain"));
    }

    #[test]
    fn multi_document_with_lines() {
        let text = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n---\n\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: b}\n";
        let objs = load_str(Path::new("f.yaml"), text).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0].source.line, 2);
        assert_eq!(objs[0].name(), "a");
        assert_eq!(objs[1].name(), "b");
        assert_eq!(objs[1].source.document, 1);
        assert_eq!(objs[0].object_type(), ObjectType::Secret);
        assert!(matches!(objs[0].typed().unwrap(), Object::Secret(_)));
    }

    #[test]
    fn syntax_error_names_line() {
        let text = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: [a\n";
        match load_str(Path::new("bad.yaml"), text) {
            Err(LoadError::Syntax { line, file, .. }) => {
                assert_eq!(file, Path::new("bad.yaml"));
                assert!(line >= 4, "line {line}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn scalar_document_rejected() {
        assert!(matches!(
            load_str(Path::new("s.yaml"), "just a string\n"),
            Err(LoadError::NotAnObject { .. })
        ));
    }
}
