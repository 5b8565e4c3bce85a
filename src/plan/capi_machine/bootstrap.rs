//! What a Cluster API machine's guest reads at first boot, as CAPV hands it over:
//!
//! * the bootstrap data Secret (`Machine.spec.bootstrap.dataSecretName`, keys `value` and
//!   `format`; an empty format is cloud-config) goes into the clone's extraConfig —
//!   `guestinfo.userdata` for cloud-config, `guestinfo.ignition.config.data` for Ignition, each
//!   with `….encoding=base64`, the data base64-decoded while it decodes and encoded once — then
//!   `spec.customVMXKeys` less the refused ones ([`vmx_keys`]);
//! * `guestinfo.metadata` (+ `.encoding=base64`): cloud-init metadata naming the VM
//!   (`instance-id`, `local-hostname`: the Node's name) with a netplan v2 network config whose
//!   devices are matched by the MACs the clone got, so it is written once the VM exists.
//!
//! The payload travels in a [`Payload`], whose `Debug` shows its size only: bootstrap data
//! carries join tokens and never reaches a log, an event or a status.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Map, Value, json};

use crate::api::infrastructure::v1beta2::clone_spec::{NetworkDeviceSpec, NetworkRouteSpec};
use crate::api::infrastructure::v1beta2::common::DhcpOverrides;
use crate::plan::capi_machine::vmx_keys;
use crate::plan::machine::user_data::Payload;

/// The Secret key of the bootstrap data.
pub const VALUE_KEY: &str = "value";
/// The Secret key of its format.
pub const FORMAT_KEY: &str = "format";

/// How the guest reads its bootstrap data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// cloud-init (`format: cloud-config`, or no format).
    CloudConfig,
    /// Ignition (`format: ignition`).
    Ignition,
}

/// A machine's bootstrap data, ready for the clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapData {
    pub format: Format,
    pub payload: Payload,
}

fn key(secret: &Secret, k: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(k))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|s| s.clone().into_bytes())
        })
}

/// The bootstrap data in `secret` (`namespace/name` for messages). Err: why the machine waits,
/// naming the Secret and never its content.
pub fn read(secret: Option<&Secret>, ns: &str, name: &str) -> Result<BootstrapData, String> {
    let what = format!("bootstrap data Secret {ns}/{name} (Machine spec.bootstrap.dataSecretName)");
    let Some(secret) = secret else {
        return Err(format!("{what} not found"));
    };
    let Some(value) = key(secret, VALUE_KEY) else {
        return Err(format!("{what} has no key {VALUE_KEY:?}"));
    };
    let format = match key(secret, FORMAT_KEY)
        .as_deref()
        .map(String::from_utf8_lossy)
    {
        None => Format::CloudConfig,
        Some(f) if f.is_empty() || f == "cloud-config" => Format::CloudConfig,
        Some(f) if f == "ignition" => Format::Ignition,
        Some(other) => {
            return Err(format!(
                "{what} has format {other:?}: only \"cloud-config\" and \"ignition\" are supported"
            ));
        }
    };
    Ok(BootstrapData {
        format,
        payload: Payload::from_bytes(value),
    })
}

/// The clone's extraConfig: the bootstrap keys, then `customVMXKeys` (sorted by key) less the
/// refused ones ([`vmx_keys`]): a machine holding one is not cloned at all
/// (`plan::machine::user_data`), and this keeps any other caller from writing one.
pub fn extra_config(
    data: &BootstrapData,
    custom_vmx_keys: Option<&BTreeMap<String, String>>,
) -> Vec<(String, String)> {
    let base = match data.format {
        Format::CloudConfig => "guestinfo.userdata",
        Format::Ignition => "guestinfo.ignition.config.data",
    };
    let mut out = vec![
        (base.to_string(), data.payload.expose().to_string()),
        (format!("{base}.encoding"), "base64".to_string()),
    ];
    out.extend(
        custom_vmx_keys
            .into_iter()
            .flatten()
            .filter(|(k, _)| vmx_keys::refusal(k).is_none())
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    out
}

fn overrides(o: &DhcpOverrides) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("hostname", o.hostname.clone().map(Value::from));
    put("route-metric", o.route_metric.map(Value::from));
    put("send-hostname", o.send_hostname.map(Value::from));
    put("use-dns", o.use_dns.map(Value::from));
    put("use-domains", o.use_domains.clone().map(Value::from));
    put("use-hostname", o.use_hostname.map(Value::from));
    put("use-mtu", o.use_mtu.map(Value::from));
    put("use-ntp", o.use_ntp.map(Value::from));
    put("use-routes", o.use_routes.clone().map(Value::from));
    Value::Object(m)
}

fn routes(r: &[NetworkRouteSpec]) -> Value {
    r.iter()
        .map(|r| json!({"to": r.to, "via": r.via, "metric": r.metric}))
        .collect()
}

/// The cloud-init metadata (YAML) of a VM named `hostname` with these devices and global
/// routes; `macs[i]` is the MAC the clone gave device `i` (devices the template has beyond the
/// spec are matched by MAC too, as CAPV does). `extra_addrs[i]` are addresses an IPAM provider
/// allocated to device `i` (CIDR form).
pub fn metadata(
    hostname: &str,
    devices: &[NetworkDeviceSpec],
    global_routes: &[NetworkRouteSpec],
    macs: &[String],
    extra_addrs: &[Vec<String>],
) -> String {
    let (mut v4, mut v6) = (false, false);
    let mut ethernets = Map::new();
    for i in 0..devices.len().max(macs.len()) {
        let d = devices.get(i).cloned().unwrap_or_default();
        let mut addrs = d.ip_addrs.clone().unwrap_or_default();
        addrs.extend(extra_addrs.get(i).cloned().unwrap_or_default());
        for a in &addrs {
            match a
                .split('/')
                .next()
                .unwrap_or_default()
                .parse::<std::net::IpAddr>()
            {
                Ok(std::net::IpAddr::V4(_)) => v4 = true,
                Ok(std::net::IpAddr::V6(_)) => v6 = true,
                Err(_) => {}
            }
        }
        let (dhcp4, dhcp6) = (d.dhcp4.unwrap_or(false), d.dhcp6.unwrap_or(false));
        v4 |= dhcp4;
        v6 |= dhcp6;
        let mut e = Map::new();
        e.insert(
            "match".into(),
            json!({"macaddress": macs.get(i).cloned().unwrap_or_default()}),
        );
        e.insert(
            "set-name".into(),
            d.device_name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("eth{i}"))
                .into(),
        );
        e.insert("wakeonlan".into(), true.into());
        e.insert("dhcp4".into(), dhcp4.into());
        e.insert("dhcp6".into(), dhcp6.into());
        e.insert("accept-ra".into(), dhcp6.into());
        if let Some(o) = &d.dhcp4_overrides {
            e.insert("dhcp4-overrides".into(), overrides(o));
        }
        if let Some(o) = &d.dhcp6_overrides {
            e.insert("dhcp6-overrides".into(), overrides(o));
        }
        if !addrs.is_empty() {
            e.insert("addresses".into(), addrs.into());
        }
        for (k, g) in [("gateway4", &d.gateway4), ("gateway6", &d.gateway6)] {
            if let Some(g) = g.as_ref().filter(|g| !g.is_empty()) {
                e.insert(k.into(), g.clone().into());
            }
        }
        if let Some(mtu) = d.mtu {
            e.insert("mtu".into(), mtu.into());
        }
        if let Some(r) = d.routes.as_deref().filter(|r| !r.is_empty()) {
            e.insert("routes".into(), routes(r));
        }
        let ns = d.nameservers.clone().unwrap_or_default();
        let search = d.search_domains.clone().unwrap_or_default();
        if !ns.is_empty() || !search.is_empty() {
            let mut n = Map::new();
            if !ns.is_empty() {
                n.insert("addresses".into(), ns.into());
            }
            if !search.is_empty() {
                n.insert("search".into(), search.into());
            }
            e.insert("nameservers".into(), Value::Object(n));
        }
        ethernets.insert(format!("id{i}"), Value::Object(e));
    }
    let mut network = json!({"version": 2, "ethernets": ethernets});
    if !global_routes.is_empty() {
        network["routes"] = routes(global_routes);
    }
    let doc = json!({
        "instance-id": hostname,
        "local-hostname": hostname,
        "wait-on-network": {"ipv4": v4, "ipv6": v6},
        "network": network,
    });
    serde_saphyr::to_string(&doc).unwrap_or_default()
}

/// `guestinfo.metadata` and its encoding, for the reconfigure after the clone.
pub fn metadata_extra_config(yaml: &str) -> Vec<(String, String)> {
    vec![
        ("guestinfo.metadata".into(), STANDARD.encode(yaml)),
        ("guestinfo.metadata.encoding".into(), "base64".into()),
    ]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn secret(entries: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    const CLOUD: &[u8] = b"#cloud-config\nruncmd: [kubeadm join --token abcdef.0123456789abcdef]\n";

    #[test]
    fn formats_pick_the_guestinfo_keys_and_custom_keys_follow() {
        let cases: &[(Option<&[u8]>, &str)] = &[
            (None, "guestinfo.userdata"),
            (Some(b""), "guestinfo.userdata"),
            (Some(b"cloud-config"), "guestinfo.userdata"),
            (Some(b"ignition"), "guestinfo.ignition.config.data"),
        ];
        for (format, key) in cases {
            let mut entries: Vec<(&str, &[u8])> = vec![("value", CLOUD)];
            if let Some(f) = format {
                entries.push(("format", f));
            }
            let data = read(Some(&secret(&entries)), "ns", "m-0-bootstrap").unwrap();
            let custom: BTreeMap<String, String> =
                [("disk.EnableUUID".into(), "TRUE".into())].into();
            let ec = extra_config(&data, Some(&custom));
            let keys: Vec<&str> = ec.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                keys,
                [*key, &format!("{key}.encoding"), "disk.EnableUUID"],
                "{format:?}"
            );
            // Encoded once, even when the Secret held it base64-encoded already.
            assert_eq!(ec[0].1, STANDARD.encode(CLOUD));
            assert_eq!(ec[1].1, "base64");
        }
        let twice = STANDARD.encode(STANDARD.encode(CLOUD));
        let data = read(Some(&secret(&[("value", twice.as_bytes())])), "ns", "s").unwrap();
        assert_eq!(data.payload.expose(), STANDARD.encode(CLOUD));
    }

    /// A refused key never reaches the clone's extraConfig, whatever its case; a benign one does.
    #[test]
    fn refused_custom_keys_are_never_written() {
        let data = read(Some(&secret(&[("value", CLOUD)])), "ns", "m-0-bootstrap").unwrap();
        let custom: BTreeMap<String, String> = [
            ("disk.EnableUUID", "TRUE"),
            ("Isolation.Tools.Copy.Disable", "FALSE"),
            ("guestinfo.userdata", "c21hc2g="),
            ("vsphere-provider.machine", "other-ns/other-vm"),
            ("ethernet1.present", "TRUE"),
            ("uuid.bios", "42 00"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let ec = extra_config(&data, Some(&custom));
        let keys: Vec<&str> = ec.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "guestinfo.userdata",
                "guestinfo.userdata.encoding",
                "disk.EnableUUID"
            ]
        );
        assert_eq!(
            ec[0].1,
            STANDARD.encode(CLOUD),
            "the provider's own user data"
        );
    }

    #[test]
    fn missing_or_odd_secrets_name_the_secret_and_never_the_data() {
        let e = read(None, "ns", "m-0").unwrap_err();
        assert!(
            e.contains("Secret ns/m-0") && e.contains("not found"),
            "{e}"
        );
        let e = read(Some(&secret(&[("format", b"cloud-config")])), "ns", "m-0").unwrap_err();
        assert!(e.contains("no key \"value\""), "{e}");
        let e = read(
            Some(&secret(&[("value", CLOUD), ("format", b"yaml")])),
            "ns",
            "m-0",
        )
        .unwrap_err();
        assert!(e.contains("format \"yaml\""), "{e}");
        let data = read(Some(&secret(&[("value", CLOUD)])), "ns", "m-0").unwrap();
        let shown = format!("{data:?}");
        assert!(!shown.contains("kubeadm") && !shown.contains(&STANDARD.encode(CLOUD)));
    }

    #[test]
    fn metadata_names_the_vm_and_matches_devices_by_mac() {
        let devices = vec![
            NetworkDeviceSpec {
                network_name: "VM Network".into(),
                dhcp4: Some(true),
                dhcp4_overrides: Some(DhcpOverrides {
                    send_hostname: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            },
            NetworkDeviceSpec {
                network_name: "storage".into(),
                device_name: Some("storage0".into()),
                ip_addrs: Some(vec!["fd00::5/64".into()]),
                gateway6: Some("fd00::1".into()),
                nameservers: Some(vec!["fd00::53".into()]),
                search_domains: Some(vec!["example.com".into()]),
                mtu: Some(9000),
                ..Default::default()
            },
        ];
        let routes = [NetworkRouteSpec {
            to: "10.0.0.0/8".into(),
            via: "192.168.0.1".into(),
            metric: 10,
        }];
        let macs = ["00:50:56:00:00:01".to_string(), "00:50:56:00:00:02".into()];
        let yaml = metadata(
            "m-0",
            &devices,
            &routes,
            &macs,
            &[vec![], vec!["fd00::6/64".into()]],
        );
        let doc: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(doc["instance-id"], "m-0");
        assert_eq!(doc["local-hostname"], "m-0");
        assert_eq!(doc["wait-on-network"], json!({"ipv4": true, "ipv6": true}));
        let e0 = &doc["network"]["ethernets"]["id0"];
        assert_eq!(e0["match"]["macaddress"], "00:50:56:00:00:01");
        assert_eq!(e0["set-name"], "eth0");
        assert_eq!(e0["dhcp4"], true);
        assert_eq!(e0["dhcp4-overrides"], json!({"send-hostname": false}));
        let e1 = &doc["network"]["ethernets"]["id1"];
        assert_eq!(e1["set-name"], "storage0");
        assert_eq!(e1["addresses"], json!(["fd00::5/64", "fd00::6/64"]));
        assert_eq!(e1["gateway6"], "fd00::1");
        assert_eq!(e1["mtu"], 9000);
        assert_eq!(
            e1["nameservers"],
            json!({"addresses": ["fd00::53"], "search": ["example.com"]})
        );
        assert_eq!(doc["network"]["routes"][0]["via"], "192.168.0.1");
        let ec = metadata_extra_config(&yaml);
        assert_eq!(ec[0].0, "guestinfo.metadata");
        assert_eq!(STANDARD.decode(&ec[0].1).unwrap(), yaml.as_bytes());
        // A template NIC beyond the spec is still configured (by MAC, no DHCP).
        let yaml = metadata("m-1", &devices[..1], &[], &macs, &[]);
        let doc: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(doc["network"]["ethernets"]["id1"]["set-name"], "eth1");
        assert_eq!(doc["wait-on-network"], json!({"ipv4": true, "ipv6": false}));
    }
}
