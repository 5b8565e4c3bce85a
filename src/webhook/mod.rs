//! Admission: pure defaulting and validation per kind, the schema checks `validate` shares with
//! them, and the AdmissionReview server.
//!
//! * [`schema`] — structural defaulting and OpenAPI checks from the generated CRD schemas
//!   (types, enums, required, unknown fields, patterns, lengths, list-map keys).
//! * one module per kind — the upstream webhook rules and CEL rules, and the rules we add;
//!   [`provider_spec`] — the vSphere provider spec (machine-api-operator's rules), shared by
//!   Machines and ControlPlaneMachineSet templates.
//! * [`admission`] — `admit`: default + validate any object (used by `validate`, the server and
//!   local mode).
//! * [`conversion`] — the CRD conversion webhook (ConversionReview v1).
//! * [`server`] — the HTTPS AdmissionReview v1 server started by `vsphere-provider run`.
//!
//! Every function here except the server is pure: old and new objects in, errors out; no clock.
//! Field paths use JSON names (`spec.topology.computeCluster`); messages keep upstream's text.

pub mod admission;
mod connections;
pub mod control_plane_machine_set;
pub mod conversion;
pub mod deployment_zone;
pub mod failure_domain;
pub mod machine;
pub mod machine_health_check;
pub mod provider_spec;
pub mod schema;
pub mod server;
pub mod tag_ids;
pub mod vsphere_cluster;
pub mod vsphere_machine;

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::api::manifest::has_placeholder;

/// The kind of a field error, as in `k8s.io/apimachinery/pkg/util/validation/field`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// A required field is missing or empty.
    Required,
    /// The value is not valid.
    Invalid,
    /// The field may not be set (or changed) here.
    Forbidden,
    /// A value that must be unique is repeated.
    Duplicate,
    /// The value is not one of the supported values.
    NotSupported,
    /// The value is too long.
    TooLong,
    /// The list has too many items.
    TooMany,
    /// The field is not part of the schema.
    UnknownField,
}

impl ErrorKind {
    /// The text Kubernetes prints for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Required => "Required value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::UnknownField => "Unknown field",
        }
    }
}

/// One validation error: the field path, what kind of error, the offending value (rendered as
/// Kubernetes does: strings quoted) and the reason.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldError {
    /// JSON path, e.g. `spec.topology.networkConfigurations[0].networkName`.
    pub path: String,
    /// The kind of error.
    pub kind: ErrorKind,
    /// The rendered value, for kinds that show one.
    pub value: Option<String>,
    /// Why (may be empty).
    pub message: String,
}

impl FieldError {
    fn new(
        path: impl Into<String>,
        kind: ErrorKind,
        value: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        FieldError {
            path: path.into(),
            kind,
            value,
            message: message.into(),
        }
    }

    /// `path: Required value: message`.
    pub fn required(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Required, None, message)
    }

    /// `path: Invalid value: "value": message`.
    pub fn invalid(path: impl Into<String>, value: &Value, message: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, Some(render(value)), message)
    }

    /// `path: Invalid value: "value": message` for a string value.
    pub fn invalid_str(path: impl Into<String>, value: &str, message: impl Into<String>) -> Self {
        Self::invalid(path, &Value::String(value.to_string()), message)
    }

    /// `path: Invalid value: "<type>": message` — the form the apiserver uses for CEL rules.
    pub fn invalid_type(
        path: impl Into<String>,
        type_name: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::new(
            path,
            ErrorKind::Invalid,
            Some(format!("{type_name:?}")),
            message,
        )
    }

    /// `path: Forbidden: message`.
    pub fn forbidden(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Forbidden, None, message)
    }

    /// `path: Duplicate value: value`.
    pub fn duplicate(path: impl Into<String>, value: &Value) -> Self {
        Self::new(path, ErrorKind::Duplicate, Some(render(value)), "")
    }

    /// `path: Unsupported value: "value": supported values: "a", "b"`.
    pub fn not_supported(path: impl Into<String>, value: &Value, supported: &[Value]) -> Self {
        let list: Vec<String> = supported.iter().map(render).collect();
        Self::new(
            path,
            ErrorKind::NotSupported,
            Some(render(value)),
            format!("supported values: {}", list.join(", ")),
        )
    }

    /// `path: Too long: may not be more than N bytes`.
    pub fn too_long(path: impl Into<String>, max: u64) -> Self {
        Self::new(
            path,
            ErrorKind::TooLong,
            None,
            format!("may not be more than {max} bytes"),
        )
    }

    /// `path: Too many: N: must have at most M items`.
    pub fn too_many(path: impl Into<String>, have: usize, max: u64) -> Self {
        Self::new(
            path,
            ErrorKind::TooMany,
            Some(have.to_string()),
            format!("must have at most {max} items"),
        )
    }

    /// `metadata.name: Duplicate value: the same object is also at FILE:LINE` (offline sets).
    pub fn new_duplicate_object(first_at: &str) -> Self {
        Self::new(
            "metadata.name",
            ErrorKind::Duplicate,
            None,
            format!("the same object is also defined at {first_at}"),
        )
    }

    /// `path: Unknown field`.
    pub fn unknown_field(path: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::UnknownField, None, "")
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind.as_str())?;
        if let Some(v) = &self.value {
            write!(f, ": {v}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// Renders a value the way Kubernetes field errors do: strings quoted, the rest as JSON.
pub fn render(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// Options shared by every check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ctx {
    /// Accept `${VAR}` placeholders: values containing one skip format, pattern, enum and length
    /// checks (offline `validate` of clusterctl templates). The admission server never sets this.
    pub allow_placeholders: bool,
    /// The request is a dry run (`?dryRun=All`): Cluster API's topology controller may then
    /// change an immutable VSphereMachineTemplate to compute a diff.
    pub dry_run: bool,
}

impl Ctx {
    /// True if `s` is exempt from format checks (it holds a placeholder and those are allowed).
    pub fn exempt(&self, s: &str) -> bool {
        self.allow_placeholders && has_placeholder(s)
    }
}

/// `base.name` (or `name` at the root).
pub fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

/// The VM size rule both machine APIs share ([`crate::plan::vm_size`]): each negative size is
/// an error under `base`, saying that 0 (or leaving it out) keeps the template's value.
pub fn negative_sizes(base: &str, size: crate::plan::vm_size::VmSize) -> Vec<FieldError> {
    size.negative()
        .into_iter()
        .map(|(field, n)| {
            FieldError::invalid(
                child(base, field),
                &Value::from(n),
                crate::plan::vm_size::NEGATIVE,
            )
        })
        .collect()
}

/// `base[i]`.
pub fn index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

/// `base[key]` (map entries, as Kubernetes prints them).
pub fn key(base: &str, k: &str) -> String {
    format!("{base}[{k}]")
}

static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").expect("regex")
});
static DNS1123_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("regex"));
static QUALIFIED_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").expect("regex"));
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("regex"));
/// A host-name label as found in the wild: letters, digits, `-` and `_` (Windows/AD-style names
/// vCenter hosts sometimes carry), not starting or ending with `-`.
static HOST_LABEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9_]([-A-Za-z0-9_]*[A-Za-z0-9_])?$").expect("regex"));

/// The message Kubernetes gives for an invalid DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// RFC 1123 subdomain (Kubernetes object names): at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && DNS1123_SUBDOMAIN.is_match(s)
}

/// RFC 1123 label (namespaces): at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && DNS1123_LABEL.is_match(s)
}

/// A qualified name (`[prefix/]name`, name at most 63 characters, prefix a DNS subdomain), as
/// label and annotation keys are.
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix
        && (p.is_empty() || !is_dns1123_subdomain(p))
    {
        return false;
    }
    !name.is_empty() && name.len() <= 63 && QUALIFIED_NAME.is_match(name)
}

/// A label value: at most 63 characters, alphanumerics, `-`, `_`, `.`, starting and ending
/// alphanumeric (or empty).
pub fn is_label_value(s: &str) -> bool {
    s.len() <= 63 && LABEL_VALUE.is_match(s)
}

/// Checks a vCenter server: a host name, an IP address, either with an optional `:port`, or an
/// `https://` / `http://` URL with a host and no credentials. Returns the reason it is not valid.
pub fn check_server(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must be a host name, IP address or URL".into());
    }
    if s.contains("://") {
        let url = url::Url::parse(s).map_err(|e| format!("not a valid URL: {e}"))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(format!(
                "URL scheme must be https or http, not {:?}",
                url.scheme()
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("URL must not contain credentials; use identityRef".into());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("URL must not have a query or fragment".into());
        }
        return match url.host() {
            Some(url::Host::Domain(d)) => check_host_name(d),
            Some(_) => Ok(()),
            None => Err("URL has no host".into()),
        };
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').ok_or("unterminated IPv6 literal")?;
        addr.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("{addr:?} is not an IPv6 address"))?;
        match after {
            "" => return Ok(()),
            p => (
                None,
                Some(
                    p.strip_prefix(':')
                        .ok_or("expected :port after the IPv6 literal")?,
                ),
            ),
        }
    } else if s.matches(':').count() > 1 {
        return s
            .parse::<std::net::Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| "not a valid IPv6 address".into());
    } else {
        match s.split_once(':') {
            Some((h, p)) => (Some(h), Some(p)),
            None => (Some(s), None),
        }
    };
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => {}
            _ => return Err(format!("port {p:?} is not a number between 1 and 65535")),
        }
    }
    match host {
        Some(h) if h.parse::<std::net::Ipv4Addr>().is_ok() => Ok(()),
        Some(h) => check_host_name(h),
        None => Ok(()),
    }
}

fn check_host_name(h: &str) -> Result<(), String> {
    // A fully qualified name may end with the root dot (`vc.example.com.`); accept it.
    let h = h.strip_suffix('.').unwrap_or(h);
    if h.is_empty() || h.len() > 253 {
        return Err("host name must be 1 to 253 characters".into());
    }
    if h.split('.').all(|l| l.chars().all(|c| c.is_ascii_digit())) {
        return Err(format!("{h:?} is not a valid IPv4 address"));
    }
    for label in h.split('.') {
        if label.len() > 63 || !HOST_LABEL.is_match(label) {
            return Err(format!(
                "{h:?} is not a valid host name: labels are 1 to 63 letters, digits, '-' or '_', not starting or ending with '-'"
            ));
        }
    }
    Ok(())
}

/// Checks a certificate thumbprint: colon-separated hex SHA-1 (20 bytes, as CAPV uses) or SHA-256
/// (32 bytes).
pub fn check_thumbprint(s: &str) -> Result<(), String> {
    let parts: Vec<&str> = s.split(':').collect();
    let hex_ok = parts
        .iter()
        .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()));
    if hex_ok && (parts.len() == 20 || parts.len() == 32) {
        Ok(())
    } else {
        Err("must be the colon-separated hex SHA-1 (or SHA-256) fingerprint of the vCenter certificate, e.g. 01:23:…:EF".into())
    }
}

/// Sorts and removes duplicate errors (same path, kind, value and message).
pub fn dedup(errors: &mut Vec<FieldError>) {
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_kubernetes() {
        assert_eq!(
            FieldError::required("spec.failureDomain", "").to_string(),
            "spec.failureDomain: Required value"
        );
        assert_eq!(
            FieldError::invalid_type("spec.replicas", "integer", "replicas is immutable")
                .to_string(),
            "spec.replicas: Invalid value: \"integer\": replicas is immutable"
        );
        assert_eq!(
            FieldError::forbidden("spec", "VSphereFailureDomainSpec is immutable").to_string(),
            "spec: Forbidden: VSphereFailureDomainSpec is immutable"
        );
        assert_eq!(
            FieldError::not_supported("spec.x", &"a".into(), &["b".into(), "c".into()]).to_string(),
            "spec.x: Unsupported value: \"a\": supported values: \"b\", \"c\""
        );
    }

    #[test]
    fn servers() {
        for ok in [
            "vcenter.example.com",
            "127.0.0.1",
            "127.0.0.1:8989",
            "VC01.corp",
            "https://vc.example.com/sdk",
            "https://127.0.0.1:8989/sdk",
            "[::1]:443",
            "::1",
            "localhost",
            // Seen in real estates; MAO and CAPV accept them.
            "vc.example.com.",
            "vc_01.corp",
        ] {
            assert!(check_server(ok).is_ok(), "{ok}: {:?}", check_server(ok));
        }
        for bad in [
            "",
            "vc example",
            "-vc.example.com",
            "ftp://vc",
            "https://user:pw@vc",
            "vc:0",
            "vc:99999",
            "1.2.3.999",
            "vc..example.com",
            "https://",
        ] {
            assert!(check_server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert!(is_dns1123_subdomain("zone-a.example"));
        assert!(!is_dns1123_subdomain("Zone"));
        assert!(!is_dns1123_subdomain("control..plane"));
        assert!(is_qualified_name(
            "machine.openshift.io/cluster-api-cluster"
        ));
        assert!(!is_qualified_name("/x"));
        assert!(is_label_value(""));
        assert!(!is_label_value("-a"));
        assert!(check_thumbprint(&["AB"; 20].join(":")).is_ok());
        assert!(check_thumbprint("AB:CD").is_err());
    }
}
