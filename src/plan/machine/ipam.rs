//! Static IPs, as machine-api-operator does them (`pkg/util/ipam`, `constructKargsFromNetworkConfig`):
//! each network device's `addressesFromPools[j]` is one `IPAddressClaim`
//! `<machine>-claim-<device>-<j>` in the Machine's namespace, controlled by the Machine and held
//! by the finalizer `machine.openshift.io/ip-claim-protection`. Nothing is cloned until every
//! claim is bound to an `IPAddress`; then the device's `ipAddrs`, the bound addresses, the
//! gateway and the nameservers reach the guest as dracut network kargs in the clone's extraConfig
//! `guestinfo.afterburn.initrd.network-kargs`. Once the VM is gone, the claims are released
//! (finalizer removed, claim deleted) and the IPAM provider frees the addresses.
//!
//! Pure: the sweep hands in the claims and addresses it read; the shells create and release.
use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::ipam::{CLAIM_API_VERSION, CLAIM_FINALIZER, CLAIM_KIND, IpAddress, IpAddressClaim};
use crate::api::machine::{AddressesFromPool, Machine, NetworkDeviceSpec};
use crate::plan::capi_machine::actuated::is_actuated;

/// The extraConfig key afterburn reads the network kargs from in the RHCOS initrd.
pub const NETWORK_KARGS_KEY: &str = "guestinfo.afterburn.initrd.network-kargs";

/// Upstream's claim name.
pub fn claim_name(machine: &str, device: usize, pool: usize) -> String {
    format!("{machine}-claim-{device}-{pool}")
}

/// Who a machine's claims belong to: the Machine, or for a VSphereVM's stand-in the VSphereVM
/// (a controller reference to a Machine that does not exist would have the claims collected),
/// named as CAPV names them (`<vm>-<device>-<pool>`).
fn claim_owner(m: &Machine) -> (&'static str, &'static str) {
    if is_actuated(m) {
        (crate::api::Kind::VSphereVM.api_version(), "VSphereVM")
    } else {
        ("machine.openshift.io/v1beta1", "Machine")
    }
}

fn claim_name_of(m: &Machine, device: usize, pool: usize) -> String {
    let name = m.metadata.name.as_deref().unwrap_or_default();
    if is_actuated(m) {
        format!("{name}-{device}-{pool}")
    } else {
        claim_name(name, device, pool)
    }
}

/// A claim a Machine must have, as the shell creates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewClaim {
    pub namespace: String,
    pub name: String,
    pub pool: AddressesFromPool,
    pub machine: String,
    pub machine_uid: String,
    /// The owner's `(apiVersion, kind)`.
    pub owner: (&'static str, &'static str),
}

/// The claim object for `c`: a controller reference to the Machine (so the claim goes with
/// it), upstream's finalizer, and `poolRef` as upstream fills it (the provider spec's
/// `resource` in `kind`).
pub fn claim_object(c: &NewClaim) -> IpAddressClaim {
    IpAddressClaim {
        api_version: CLAIM_API_VERSION.into(),
        kind: CLAIM_KIND.into(),
        metadata: ObjectMeta {
            name: Some(c.name.clone()),
            namespace: Some(c.namespace.clone()),
            finalizers: Some(vec![CLAIM_FINALIZER.into()]),
            owner_references: Some(vec![OwnerReference {
                api_version: c.owner.0.into(),
                kind: c.owner.1.into(),
                name: c.machine.clone(),
                uid: c.machine_uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: crate::api::ipam::IpAddressClaimSpec {
            pool_ref: TypedLocalObjectReference {
                api_group: Some(c.pool.group.clone()),
                kind: c.pool.resource.clone(),
                name: c.pool.name.clone(),
            },
        },
        status: None,
    }
}

/// The devices of the provider spec (none if it does not decode: placement reports that).
fn devices(m: &Machine) -> Vec<NetworkDeviceSpec> {
    m.vsphere_provider_spec()
        .and_then(Result::ok)
        .map(|s| s.network.devices)
        .unwrap_or_default()
}

/// upstream's `HasStaticIPConfiguration`: any device with a gateway, `ipAddrs`, nameservers or
/// pools.
fn is_static(d: &NetworkDeviceSpec) -> bool {
    let some = |v: &Option<Vec<_>>| v.as_ref().is_some_and(|v: &Vec<_>| !v.is_empty());
    d.gateway.as_deref().is_some_and(|g| !g.is_empty())
        || some(&d.ip_addrs)
        || some(&d.nameservers)
        || d.addresses_from_pools
            .as_ref()
            .is_some_and(|p| !p.is_empty())
}

/// Every claim `m` asks for, `(device, pool index, pool, claim name)`.
pub fn wanted_claims(m: &Machine) -> Vec<(usize, usize, AddressesFromPool, String)> {
    devices(m)
        .into_iter()
        .enumerate()
        .flat_map(|(i, d)| {
            d.addresses_from_pools
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(move |(j, p)| (i, j, p, claim_name_of(m, i, j)))
        })
        .collect()
}

/// A claim not yet bound, and why if the IPAM provider says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unbound {
    /// `namespace/name`.
    pub claim: String,
    pub why: Option<String>,
}

/// What the machine's network means for its clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Network {
    /// No static configuration: the NICs get their addresses by DHCP; no kargs.
    Dhcp,
    /// Every claim bound: the kargs for the clone (upstream writes none when empty).
    Ready(String),
    /// Claims to create first, and claims not bound yet: nothing is cloned.
    Waiting {
        create: Vec<NewClaim>,
        unbound: Vec<Unbound>,
    },
    /// The static configuration cannot be turned into kargs (the message names the field).
    Invalid(String),
}

/// The network of `m` given the claims and addresses read (`namespace/name` → object).
pub fn network(
    m: &Machine,
    claims: &BTreeMap<String, IpAddressClaim>,
    addresses: &BTreeMap<String, IpAddress>,
) -> Network {
    let devs = devices(m);
    if !devs.iter().any(is_static) {
        return Network::Dhcp;
    }
    let (create, unbound, from_pools) = bind(m, claims, addresses);
    if !create.is_empty() || !unbound.is_empty() {
        return Network::Waiting { create, unbound };
    }
    match kargs(&devs, &from_pools) {
        Ok(k) => Network::Ready(k),
        Err(e) => Network::Invalid(e),
    }
}

/// Per device: the addresses bound to its claims (`address/prefix`) and the last non-empty
/// pool gateway.
pub type PoolAddresses = BTreeMap<usize, (Vec<String>, Option<String>)>;

/// The addresses bound to `m`'s claims so far (what a Cluster API machine's cloud-init
/// metadata configures).
pub fn pool_addresses(
    m: &Machine,
    claims: &BTreeMap<String, IpAddressClaim>,
    addresses: &BTreeMap<String, IpAddress>,
) -> PoolAddresses {
    bind(m, claims, addresses).2
}

/// The claims to create, those not bound yet, and the bound addresses.
fn bind(
    m: &Machine,
    claims: &BTreeMap<String, IpAddressClaim>,
    addresses: &BTreeMap<String, IpAddress>,
) -> (Vec<NewClaim>, Vec<Unbound>, PoolAddresses) {
    let ns = m.metadata.namespace.as_deref().unwrap_or("default");
    let mut create = Vec::new();
    let mut unbound = Vec::new();
    let mut from_pools = PoolAddresses::new();
    for (i, _, pool, name) in wanted_claims(m) {
        let key = format!("{ns}/{name}");
        let Some(claim) = claims.get(&key) else {
            create.push(NewClaim {
                namespace: ns.to_string(),
                name,
                pool,
                machine: m.metadata.name.clone().unwrap_or_default(),
                machine_uid: m.metadata.uid.clone().unwrap_or_default(),
                owner: claim_owner(m),
            });
            continue;
        };
        let address = claim
            .bound_address()
            .and_then(|a| addresses.get(&format!("{ns}/{a}")));
        match address {
            Some(a) => {
                let entry = from_pools.entry(i).or_default();
                entry
                    .0
                    .push(format!("{}/{}", a.spec.address, a.spec.prefix));
                if let Some(g) = a.spec.gateway.as_ref().filter(|g| !g.is_empty()) {
                    entry.1 = Some(g.clone());
                }
            }
            None => unbound.push(Unbound {
                claim: key,
                why: match claim.bound_address() {
                    Some(a) => Some(format!("its IPAddress {ns}/{a} was not found")),
                    None => claim.failure().map(str::to_string),
                },
            }),
        }
    }
    (create, unbound, from_pools)
}

/// The claims of the machine's namespace could not be read: it waits on every claim it asks
/// for, saying why (so it backs off), and nothing is cloned.
pub fn unreadable(m: &Machine, why: &str) -> Network {
    let ns = m.metadata.namespace.as_deref().unwrap_or("default");
    Network::Waiting {
        create: Vec::new(),
        unbound: wanted_claims(m)
            .into_iter()
            .map(|(_, _, _, name)| Unbound {
                claim: format!("{ns}/{name}"),
                why: Some(why.to_string()),
            })
            .collect(),
    }
}

/// IPv4 prefix length as a dotted mask.
fn dotted_mask(bits: u8) -> String {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(bits.min(32)))
    };
    std::net::Ipv4Addr::from(mask).to_string()
}

/// `address/prefix`.
fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (a, n) = s.split_once('/')?;
    let a: IpAddr = a.parse().ok()?;
    let n: u8 = n.parse().ok()?;
    (n <= if a.is_ipv6() { 128 } else { 32 }).then_some((a, n))
}

/// The dracut kargs, per device: one `ip=<ip>::<gw>:<mask>:::none ` per address (`ipAddrs`
/// first, then the pools'), then `nameserver=<ns> ` per nameserver; IPv6 addresses, gateways
/// and nameservers bracketed, an IPv6 prefix as its length; a gateway of the other family is
/// left out. The trailing space is upstream's.
pub fn kargs(
    devices: &[NetworkDeviceSpec],
    from_pools: &BTreeMap<usize, (Vec<String>, Option<String>)>,
) -> Result<String, String> {
    let mut out = String::new();
    for (i, d) in devices.iter().enumerate() {
        let field = format!("spec.providerSpec.value.network.devices[{i}]");
        let (pool_addrs, pool_gw) = from_pools.get(&i).cloned().unwrap_or_default();
        let gateway = pool_gw.or_else(|| d.gateway.clone().filter(|g| !g.is_empty()));
        let gateway: Option<IpAddr> = match gateway {
            None => None,
            Some(g) => Some(
                g.parse()
                    .map_err(|_| format!("{field}.gateway: {g:?} is not an IP address"))?,
            ),
        };
        let own = d.ip_addrs.clone().unwrap_or_default();
        let own_len = own.len();
        for (j, a) in own.into_iter().chain(pool_addrs).enumerate() {
            let (addr, bits) = parse_cidr(&a).ok_or_else(|| {
                if j < own_len {
                    format!("{field}.ipAddrs[{j}]: {a:?} is not an address with a prefix length (e.g. 192.168.1.10/24)")
                } else {
                    format!("{field}.addressesFromPools: the bound address {a:?} is not an address with a prefix length")
                }
            })?;
            let (ip, gw, mask) = match addr {
                IpAddr::V6(v) => (
                    format!("[{v}]"),
                    gateway
                        .filter(IpAddr::is_ipv6)
                        .map(|g| format!("[{g}]"))
                        .unwrap_or_default(),
                    bits.to_string(),
                ),
                IpAddr::V4(v) => (
                    v.to_string(),
                    gateway
                        .filter(IpAddr::is_ipv4)
                        .map(|g| g.to_string())
                        .unwrap_or_default(),
                    dotted_mask(bits),
                ),
            };
            out.push_str(&format!("ip={ip}::{gw}:{mask}:::none "));
        }
        for (j, n) in d.nameservers.iter().flatten().enumerate() {
            let a: IpAddr = n
                .parse()
                .map_err(|_| format!("{field}.nameservers[{j}]: {n:?} is not an IP address"))?;
            match a {
                IpAddr::V6(v) => out.push_str(&format!("nameserver=[{v}] ")),
                IpAddr::V4(v) => out.push_str(&format!("nameserver={v} ")),
            }
        }
    }
    Ok(out)
}

/// The claims to release once the machine's VM is gone: the ones it asked for and the ones it
/// controls, as read (`namespace/name` → claim).
pub fn claims_to_release(m: &Machine, claims: &BTreeMap<String, IpAddressClaim>) -> Vec<String> {
    let ns = m.metadata.namespace.as_deref().unwrap_or("default");
    let uid = m.metadata.uid.as_deref().unwrap_or_default();
    let wanted: Vec<String> = wanted_claims(m).into_iter().map(|w| w.3).collect();
    claims
        .values()
        .filter(|c| c.metadata.namespace.as_deref() == Some(ns))
        .filter(|c| {
            let name = c.metadata.name.as_deref().unwrap_or_default();
            let controlled = c
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && !uid.is_empty() && o.uid == uid);
            controlled || wanted.iter().any(|w| w == name)
        })
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::LocalObjectReference;

    use super::*;
    use crate::api::ipam::{IpAddressClaimStatus, IpAddressSpec};

    fn machine(devices: serde_json::Value) -> Machine {
        let mut m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "w-0", "namespace": "ns", "uid": "u-1"},
            "spec": {"providerSpec": {"value": {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "VSphereMachineProviderSpec", "template": "t",
                "network": {"devices": devices}}}}
        }))
        .unwrap();
        m.metadata.uid = Some("u-1".into());
        m
    }

    fn pools() -> serde_json::Value {
        serde_json::json!([{"networkName": "VM Network", "nameservers": ["192.168.1.100"],
            "addressesFromPools": [{"group": "ipam.cluster.x-k8s.io", "resource": "InClusterIPPool", "name": "workers"}]}])
    }

    fn bound(
        claim: &str,
        addr: &str,
        prefix: i32,
        gw: Option<&str>,
    ) -> (
        BTreeMap<String, IpAddressClaim>,
        BTreeMap<String, IpAddress>,
    ) {
        let mut c = claim_object(&NewClaim {
            namespace: "ns".into(),
            name: claim.into(),
            pool: AddressesFromPool::default(),
            machine: "w-0".into(),
            machine_uid: "u-1".into(),
            owner: ("machine.openshift.io/v1beta1", "Machine"),
        });
        c.status = Some(IpAddressClaimStatus {
            address_ref: Some(LocalObjectReference { name: claim.into() }),
            conditions: None,
        });
        let a = IpAddress {
            spec: IpAddressSpec {
                address: addr.into(),
                prefix,
                gateway: gw.map(str::to_string),
                ..Default::default()
            },
            ..Default::default()
        };
        (
            [(format!("ns/{claim}"), c)].into(),
            [(format!("ns/{claim}"), a)].into(),
        )
    }

    #[test]
    fn one_claim_per_pool_named_as_upstream_and_owned_by_the_machine() {
        let m = machine(pools());
        match network(&m, &BTreeMap::new(), &BTreeMap::new()) {
            Network::Waiting { create, unbound } => {
                assert!(unbound.is_empty());
                assert_eq!(create.len(), 1);
                let c = claim_object(&create[0]);
                assert_eq!(c.metadata.name.as_deref(), Some("w-0-claim-0-0"));
                assert_eq!(c.metadata.finalizers.unwrap(), [CLAIM_FINALIZER]);
                let owner = &c.metadata.owner_references.unwrap()[0];
                assert_eq!((owner.uid.as_str(), owner.controller), ("u-1", Some(true)));
                assert_eq!(c.spec.pool_ref.kind, "InClusterIPPool");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unbound_claim_waits_with_the_providers_reason() {
        let m = machine(pools());
        let (mut claims, _) = bound("w-0-claim-0-0", "x", 24, None);
        let c = claims.get_mut("ns/w-0-claim-0-0").unwrap();
        c.status = Some(IpAddressClaimStatus {
            address_ref: None,
            conditions: Some(vec![crate::api::conditions::CapiCondition {
                type_: "Ready".into(),
                status: "False".into(),
                severity: None,
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::UNIX_EPOCH,
                ),
                reason: Some("PoolExhausted".into()),
                message: Some("InClusterIPPool ns/workers has no free address".into()),
            }]),
        });
        match network(&m, &claims, &BTreeMap::new()) {
            Network::Waiting { create, unbound } => {
                assert!(create.is_empty());
                assert_eq!(unbound[0].claim, "ns/w-0-claim-0-0");
                assert!(unbound[0].why.as_deref().unwrap().contains("ns/workers"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn kargs_follow_upstream_for_pools_static_addresses_and_ipv6() {
        let m = machine(pools());
        let (claims, addrs) = bound("w-0-claim-0-0", "192.168.1.2", 24, Some("192.168.1.1"));
        assert_eq!(
            network(&m, &claims, &addrs),
            Network::Ready(
                "ip=192.168.1.2::192.168.1.1:255.255.255.0:::none nameserver=192.168.1.100 ".into()
            )
        );
        let m = machine(serde_json::json!([
            {"ipAddrs": ["10.0.0.5/16", "fd00::5/64"], "gateway": "10.0.0.1", "nameservers": ["fd00::53"]},
            {"ipAddrs": ["fd01::7/64"], "gateway": "fd01::1"}
        ]));
        assert_eq!(
            network(&m, &BTreeMap::new(), &BTreeMap::new()),
            Network::Ready(
                "ip=10.0.0.5::10.0.0.1:255.255.0.0:::none ip=[fd00::5]:::64:::none nameserver=[fd00::53] ip=[fd01::7]::[fd01::1]:64:::none ".into()
            )
        );
        assert_eq!(
            network(
                &machine(serde_json::json!([{"networkName": "n"}])),
                &BTreeMap::new(),
                &BTreeMap::new()
            ),
            Network::Dhcp
        );
    }

    #[test]
    fn bad_static_addresses_name_the_field() {
        let m = machine(serde_json::json!([{"networkName": "n"}, {"ipAddrs": ["10.0.0.5"]}]));
        match network(&m, &BTreeMap::new(), &BTreeMap::new()) {
            Network::Invalid(e) => assert!(
                e.starts_with("spec.providerSpec.value.network.devices[1].ipAddrs[0]"),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn release_covers_the_wanted_and_the_controlled_claims_only() {
        let m = machine(pools());
        let (mut claims, _) = bound("w-0-claim-0-0", "x", 24, None);
        let (other, _) = bound("someone-else", "x", 24, None);
        let mut other = other.into_values().next().unwrap();
        other.metadata.owner_references = None;
        claims.insert("ns/someone-else".into(), other);
        assert_eq!(claims_to_release(&m, &claims), ["w-0-claim-0-0"]);
    }

    #[test]
    fn unreadable_claims_make_every_wanted_claim_wait_with_the_reason() {
        let m = machine(pools());
        match unreadable(&m, "list IPAddressClaims in ns: 404") {
            Network::Waiting { create, unbound } => {
                assert!(create.is_empty(), "nothing created blind");
                assert_eq!(unbound.len(), 1);
                assert_eq!(unbound[0].claim, "ns/w-0-claim-0-0");
                assert_eq!(
                    unbound[0].why.as_deref(),
                    Some("list IPAddressClaims in ns: 404")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
