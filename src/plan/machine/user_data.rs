//! A machine's user data (Ignition), as machine-api-operator hands it to the guest: the
//! Secret `providerSpec.userDataSecret` names, key `userData`, base64-decoded for as long as it
//! decodes (it may arrive encoded once or more) and encoded once, into the clone's
//! `guestinfo.ignition.config.data` with `…encoding=base64`. A Secret or key that is missing
//! makes the machine wait, naming the Secret; nothing is cloned without its user data. The
//! payload is carried in a [`Payload`], whose `Debug` shows its size only, so it never reaches
//! a log line, an event or a status. A VSphereVM's stand-in reads its bootstrap data Secret in
//! CAPV's format instead (`plan::capi_machine::bootstrap`).
use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;

use crate::api::machine::Machine;
use crate::plan::capi_machine::actuated::vsphere_vm;
use crate::plan::capi_machine::bootstrap::{self, BootstrapData};
use crate::plan::capi_machine::vmx_keys;

/// The key of the user data in its Secret (upstream's).
pub const USER_DATA_KEY: &str = "userData";

/// User data, base64-encoded once, ready for `guestinfo.ignition.config.data`.
#[derive(Clone, PartialEq, Eq)]
pub struct Payload(String);

impl Payload {
    /// The base64 text (only for the clone spec).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Raw bytes, base64-decoded while they decode and encoded once (how both the Ignition of
    /// OpenShift Machines and the bootstrap data of Cluster API machines reach the guest).
    pub fn from_bytes(bytes: Vec<u8>) -> Payload {
        encode(bytes)
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} base64 bytes, redacted)", self.0.len())
    }
}

/// What a machine's clone gets as user data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserData {
    /// The provider spec names no Secret: the clone gets no Ignition keys.
    NotNamed,
    /// The Secret or its key is missing: why, naming the Secret.
    Missing(String),
    Ready(Payload),
    /// A Cluster API machine's bootstrap data (CAPV's keys) and `customVMXKeys`.
    Bootstrap {
        data: BootstrapData,
        custom_vmx_keys: BTreeMap<String, String>,
    },
}

/// The user data of `m` from `secrets` (`namespace/name` → Secret).
pub fn user_data(m: &Machine, secrets: &BTreeMap<String, Secret>) -> UserData {
    let Some(name) = secret_name(m) else {
        return UserData::NotNamed;
    };
    let ns = m.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(vm) = vsphere_vm(m) {
        // A refused key stored before admission refused it (or given to local mode) holds the
        // clone: cloning without it would hand the user a VM other than the one asked for.
        if let Some((key, why)) = vm
            .spec
            .clone
            .custom_vmx_keys
            .as_ref()
            .and_then(|keys| vmx_keys::refused(keys).into_iter().next())
        {
            let vm_name = vm.metadata.name.as_deref().unwrap_or_default();
            return UserData::Missing(format!(
                "VSphereVM {ns}/{vm_name} spec.customVMXKeys[{key}]: {}",
                vmx_keys::message(why)
            ));
        }
        return match bootstrap::read(secrets.get(&format!("{ns}/{name}")), ns, &name) {
            Ok(data) => UserData::Bootstrap {
                data,
                custom_vmx_keys: vm.spec.clone.custom_vmx_keys.unwrap_or_default(),
            },
            Err(why) => UserData::Missing(why),
        };
    }
    let field = "spec.providerSpec.value.userDataSecret";
    let Some(secret) = secrets.get(&format!("{ns}/{name}")) else {
        return UserData::Missing(format!("Secret {ns}/{name} ({field}) not found"));
    };
    let raw = secret
        .data
        .as_ref()
        .and_then(|d| d.get(USER_DATA_KEY))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(USER_DATA_KEY))
                .map(|s| s.clone().into_bytes())
        });
    match raw {
        None => UserData::Missing(format!(
            "Secret {ns}/{name} ({field}) has no key {USER_DATA_KEY}"
        )),
        Some(bytes) => UserData::Ready(encode(bytes)),
    }
}

/// The Secret the provider spec names, if any (namespace: the Machine's).
pub fn secret_name(m: &Machine) -> Option<String> {
    let name = m.vsphere_provider_spec()?.ok()?.user_data_secret?.name;
    (!name.is_empty()).then_some(name)
}

/// Decode while it decodes, then encode once (upstream's `EncodeIgnitionConfig`).
fn encode(mut bytes: Vec<u8>) -> Payload {
    if bytes.is_empty() {
        return Payload(String::new());
    }
    while let Ok(decoded) = STANDARD.decode(bytes.trim_ascii()) {
        if decoded.is_empty() {
            break;
        }
        bytes = decoded;
    }
    Payload(STANDARD.encode(bytes))
}

/// The clone's extraConfig for this user data, in upstream's order: the Ignition keys (none for
/// empty data), the hostname, and `stealclock.enable`.
pub fn extra_config(data: &UserData, hostname: &str) -> Vec<(String, String)> {
    if let UserData::Bootstrap {
        data,
        custom_vmx_keys,
    } = data
    {
        return bootstrap::extra_config(data, Some(custom_vmx_keys));
    }
    let mut out = Vec::new();
    if let UserData::Ready(p) = data
        && !p.is_empty()
    {
        out.push(("guestinfo.ignition.config.data".into(), p.0.clone()));
        out.push((
            "guestinfo.ignition.config.data.encoding".into(),
            "base64".into(),
        ));
    }
    out.push(("guestinfo.hostname".into(), hostname.to_string()));
    out.push(("stealclock.enable".into(), "TRUE".into()));
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn machine(secret: Option<&str>) -> Machine {
        let mut spec = serde_json::json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "VSphereMachineProviderSpec",
            "template": "t",
        });
        if let Some(s) = secret {
            spec["userDataSecret"] = serde_json::json!({"name": s});
        }
        let mut m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "m-0", "namespace": "ns"},
            "spec": {"providerSpec": {"value": spec}}
        }))
        .unwrap();
        m.metadata.uid = Some("u".into());
        m
    }

    fn secrets(key: &str, value: &[u8]) -> BTreeMap<String, Secret> {
        let s = Secret {
            data: Some([(key.to_string(), ByteString(value.to_vec()))].into()),
            ..Default::default()
        };
        [("ns/worker-user-data".to_string(), s)].into()
    }

    const IGN: &[u8] = br#"{"ignition":{"version":"3.2.0"}}"#;

    #[test]
    fn ignition_is_encoded_once_however_often_it_arrives_encoded() {
        let want = STANDARD.encode(IGN);
        for given in [
            IGN.to_vec(),
            STANDARD.encode(IGN).into_bytes(),
            STANDARD.encode(STANDARD.encode(IGN)).into_bytes(),
        ] {
            let got = user_data(
                &machine(Some("worker-user-data")),
                &secrets("userData", &given),
            );
            assert_eq!(got, UserData::Ready(Payload(want.clone())));
        }
    }

    #[test]
    fn a_missing_secret_or_key_names_the_secret_and_no_secret_named_is_no_user_data() {
        let m = machine(Some("worker-user-data"));
        match user_data(&m, &BTreeMap::new()) {
            UserData::Missing(why) => assert!(why.contains("Secret ns/worker-user-data"), "{why}"),
            other => panic!("{other:?}"),
        }
        match user_data(&m, &secrets("disableTemplating", b"x")) {
            UserData::Missing(why) => assert!(why.contains("has no key userData"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            user_data(&machine(None), &BTreeMap::new()),
            UserData::NotNamed
        );
    }

    /// A VSphereVM stand-in whose `customVMXKeys` are `keys`, with its bootstrap Secret.
    fn stand_in(keys: serde_json::Value) -> (Machine, BTreeMap<String, Secret>) {
        let vm: crate::api::vsphere_vm::VSphereVM = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereVM",
            "metadata": {"name": "vm-0", "namespace": "ns", "uid": "6b4c5a7e-1111-2222-3333-444455556666"},
            "spec": {"server": "vc.example", "datacenter": "DC0", "template": "ubuntu",
                "customVMXKeys": keys, "bootstrapRef": {"name": "vm-0"}}
        }))
        .unwrap();
        let m = crate::plan::capi_machine::actuated::machine_for(&vm);
        let s = Secret {
            data: Some([("value".to_string(), ByteString(b"#cloud-config\n".to_vec()))].into()),
            ..Default::default()
        };
        (m, [("ns/vm-0".to_string(), s)].into())
    }

    /// A VSphereVM stored with a refused key (before admission refused it, or in local mode)
    /// is not cloned: it waits, naming the key; benign keys still reach the clone.
    #[test]
    fn a_refused_custom_key_holds_the_clone_and_names_the_key() {
        let (m, secrets) = stand_in(serde_json::json!({
            "disk.EnableUUID": "TRUE", "isolation.tools.copy.disable": "FALSE"}));
        match user_data(&m, &secrets) {
            UserData::Missing(why) => {
                assert!(
                    why.contains(
                        "VSphereVM ns/vm-0 spec.customVMXKeys[isolation.tools.copy.disable]"
                    ) && why.contains("isolation"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        let (m, secrets) = stand_in(serde_json::json!({"disk.EnableUUID": "TRUE"}));
        let d = user_data(&m, &secrets);
        assert!(matches!(d, UserData::Bootstrap { .. }), "{d:?}");
        let keys: Vec<String> = extra_config(&d, "vm-0")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "guestinfo.userdata",
                "guestinfo.userdata.encoding",
                "disk.EnableUUID"
            ]
        );
    }

    #[test]
    fn the_payload_never_shows_in_debug_and_extra_config_follows_upstream() {
        let d = user_data(
            &machine(Some("worker-user-data")),
            &secrets("userData", IGN),
        );
        let shown = format!("{d:?}");
        assert!(
            !shown.contains(&STANDARD.encode(IGN)) && shown.contains("redacted"),
            "{shown}"
        );
        let keys: Vec<String> = extra_config(&d, "m-0")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "guestinfo.ignition.config.data",
                "guestinfo.ignition.config.data.encoding",
                "guestinfo.hostname",
                "stealclock.enable"
            ]
        );
        let empty = user_data(
            &machine(Some("worker-user-data")),
            &secrets("userData", b""),
        );
        assert_eq!(
            extra_config(&empty, "m-0").len(),
            2,
            "empty data: no Ignition keys"
        );
    }
}
