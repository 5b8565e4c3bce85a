//! Local mode's IPAM, pure: what an `InClusterIPPool` / `GlobalInClusterIPPool` (the in-cluster
//! IPAM provider's v1alpha2 API) holds, and which address a new claim gets — the first address
//! of `spec.addresses`, in order, that is not excluded, not the gateway, not a reserved address
//! (network and broadcast for IPv4, the anycast address for IPv6, unless
//! `allocateReservedIPAddresses`) and not already allocated. Allocations are IPAddress objects
//! kept in the state file, so the same claim keeps its address across runs and no address is
//! handed out twice.
//!
//! Bad pools are refused when the manifests load, naming the pool and the field.
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{LocalObjectReference, TypedLocalObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::ipam::{
    ADDRESS_KIND, CLAIM_API_VERSION, CLAIM_KIND, GLOBAL_POOL_KIND, IPAM_GROUP, InClusterIpPool,
    IpAddress, IpAddressClaim, IpAddressSpec, POOL_KIND,
};

/// A pool, parsed: inclusive address intervals as integers (IPv4 widened to u128), one family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedPool {
    pub v6: bool,
    pub prefix: u8,
    pub gateway: Option<IpAddr>,
    ranges: Vec<(u128, u128)>,
    excluded: Vec<(u128, u128)>,
    allocate_reserved: bool,
}

/// Why a pool cannot be used: `Kind namespace/name: field: cause`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pool}: {field}: {message}")]
pub struct PoolError {
    pub pool: String,
    pub field: String,
    pub message: String,
}

/// How messages name a pool: `InClusterIPPool ns/name` or `GlobalInClusterIPPool name`.
pub fn pool_label(p: &InClusterIpPool) -> String {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    if p.global() {
        format!("{} {name}", p.kind)
    } else {
        let ns = p.metadata.namespace.as_deref().unwrap_or("default");
        format!("{} {ns}/{name}", p.kind)
    }
}

fn to_int(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

fn from_int(n: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(n.into())
    } else {
        IpAddr::V4(u32::try_from(n).unwrap_or(u32::MAX).into())
    }
}

/// `a`, `a-b` or `a/n`, as an inclusive interval and its family.
fn parse_entry(s: &str) -> Result<(u128, u128, bool), String> {
    let s = s.trim();
    let addr = |t: &str| {
        t.trim()
            .parse::<IpAddr>()
            .map_err(|_| format!("{t:?} is not an IP address"))
    };
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (addr(a)?, addr(b)?);
        if a.is_ipv6() != b.is_ipv6() {
            return Err(format!("range {s:?} mixes IPv4 and IPv6"));
        }
        if to_int(a) > to_int(b) {
            return Err(format!("range {s:?} ends before it starts"));
        }
        return Ok((to_int(a), to_int(b), a.is_ipv6()));
    }
    if let Some((a, n)) = s.split_once('/') {
        let a = addr(a)?;
        let bits: u32 = if a.is_ipv6() { 128 } else { 32 };
        let n: u32 = n
            .parse()
            .ok()
            .filter(|n| *n <= bits)
            .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {bits}"))?;
        let host_bits = bits - n;
        let mask = if host_bits == 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        let lo = to_int(a) & !mask;
        return Ok((lo, lo | mask, a.is_ipv6()));
    }
    let a = addr(s).map_err(|_| {
        format!("{s:?} is not an IP address, a range (first-last) or a CIDR (address/prefix)")
    })?;
    Ok((to_int(a), to_int(a), a.is_ipv6()))
}

/// Parse and check a pool.
pub fn parse_pool(p: &InClusterIpPool) -> Result<ParsedPool, PoolError> {
    let err = |field: String, message: String| PoolError {
        pool: pool_label(p),
        field,
        message,
    };
    let spec = &p.spec;
    if spec.addresses.is_empty() {
        return Err(err(
            "spec.addresses".into(),
            "no addresses: give single addresses, ranges (first-last) or CIDRs".into(),
        ));
    }
    let mut family: Option<bool> = None;
    let mut same_family = |v6: bool, field: String| match family {
        Some(f) if f != v6 => Err(err(
            field,
            "mixes IPv4 and IPv6 (a pool holds one family)".into(),
        )),
        _ => {
            family = Some(v6);
            Ok(())
        }
    };
    let mut ranges = Vec::new();
    for (i, a) in spec.addresses.iter().enumerate() {
        let field = format!("spec.addresses[{i}]");
        let (lo, hi, v6) = parse_entry(a).map_err(|m| err(field.clone(), m))?;
        same_family(v6, field)?;
        ranges.push((lo, hi));
    }
    let v6 = family.unwrap_or(false);
    let mut excluded = Vec::new();
    for (i, a) in spec.excluded_addresses.iter().enumerate() {
        let field = format!("spec.excludedAddresses[{i}]");
        let (lo, hi, ev6) = parse_entry(a).map_err(|m| err(field.clone(), m))?;
        if ev6 != v6 {
            return Err(err(field, "not of the pool's address family".into()));
        }
        excluded.push((lo, hi));
    }
    let max = if v6 { 128 } else { 32 };
    let prefix = u8::try_from(spec.prefix)
        .ok()
        .filter(|n| i32::from(*n) <= max)
        .ok_or_else(|| {
            err(
                "spec.prefix".into(),
                format!("{} is not a prefix length (0 to {max})", spec.prefix),
            )
        })?;
    let gateway = match spec.gateway.as_deref().filter(|g| !g.is_empty()) {
        None => None,
        Some(g) => {
            let a: IpAddr = g
                .parse()
                .map_err(|_| err("spec.gateway".into(), format!("{g:?} is not an IP address")))?;
            if a.is_ipv6() != v6 {
                return Err(err(
                    "spec.gateway".into(),
                    "not of the pool's address family".into(),
                ));
            }
            Some(a)
        }
    };
    Ok(ParsedPool {
        v6,
        prefix,
        gateway,
        ranges,
        excluded,
        allocate_reserved: spec.allocate_reserved_ip_addresses,
    })
}

impl ParsedPool {
    /// Reserved in the subnet `n` lies in (`spec.prefix`): network and broadcast (IPv4), anycast
    /// (IPv6); none for /31, /32 and /128.
    fn reserved(&self, n: u128) -> bool {
        if self.allocate_reserved {
            return false;
        }
        let bits: u32 = if self.v6 { 128 } else { 32 };
        let host_bits = bits - u32::from(self.prefix);
        if host_bits == 0 || (!self.v6 && host_bits == 1) {
            return false;
        }
        let mask = if host_bits == 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        n & mask == 0 || (!self.v6 && n & mask == mask)
    }

    /// The first free address, or None when the pool is exhausted.
    pub fn first_free(&self, used: &BTreeSet<IpAddr>) -> Option<IpAddr> {
        let used: BTreeSet<u128> = used.iter().map(|a| to_int(*a)).collect();
        let gateway = self.gateway.map(to_int);
        for &(lo, hi) in &self.ranges {
            let mut n = lo;
            while n <= hi {
                if let Some(&(_, ex_hi)) = self.excluded.iter().find(|(a, b)| *a <= n && n <= *b) {
                    // Skip the whole excluded interval at once (it may be large).
                    match ex_hi.checked_add(1) {
                        Some(next) => n = next,
                        None => break,
                    }
                    continue;
                }
                if Some(n) != gateway && !used.contains(&n) && !self.reserved(n) {
                    return Some(from_int(n, self.v6));
                }
                match n.checked_add(1) {
                    Some(next) => n = next,
                    None => break,
                }
            }
        }
        None
    }
}

/// Why a claim cannot be bound: a CAPI condition reason and a message naming the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindFailure {
    pub reason: &'static str,
    pub message: String,
}

/// The pool a claim's `poolRef` names, as a key of [`InClusterIpPool::key`]. `kind` may be the
/// kind or the plural resource (machine-api-operator writes the provider spec's `resource`
/// there), in any case.
fn pool_key(r: &TypedLocalObjectReference, ns: &str) -> Result<String, BindFailure> {
    let group = r.api_group.as_deref().unwrap_or_default();
    let unknown = || BindFailure {
        reason: "PoolNotFound",
        message: format!(
            "pool {}.{group} {:?}: local mode allocates only from {POOL_KIND} and {GLOBAL_POOL_KIND} ({IPAM_GROUP}) given in the manifests",
            r.kind, r.name
        ),
    };
    if group != IPAM_GROUP {
        return Err(unknown());
    }
    match r.kind.to_ascii_lowercase().as_str() {
        "inclusterippool" | "inclusterippools" => Ok(format!("{POOL_KIND}/{ns}/{}", r.name)),
        "globalinclusterippool" | "globalinclusterippools" => {
            Ok(format!("{GLOBAL_POOL_KIND}/{}", r.name))
        }
        _ => Err(unknown()),
    }
}

/// The address `claim` gets from its pool: the first free one (see the module doc), as an
/// IPAddress named like the claim, owned by it. `addresses` are every allocation so far.
pub fn bind(
    claim: &IpAddressClaim,
    pools: &BTreeMap<String, InClusterIpPool>,
    addresses: &BTreeMap<String, IpAddress>,
) -> Result<IpAddress, BindFailure> {
    let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
    let key = pool_key(&claim.spec.pool_ref, ns)?;
    let Some(pool) = pools.get(&key) else {
        let label = match key.split_once('/') {
            Some((kind, rest)) => format!("{kind} {rest}"),
            None => key.clone(),
        };
        return Err(BindFailure {
            reason: "PoolNotFound",
            message: format!("{label} not found in the manifests"),
        });
    };
    let parsed = parse_pool(pool).map_err(|e| BindFailure {
        reason: "InvalidPool",
        message: e.to_string(),
    })?;
    let used: BTreeSet<IpAddr> = addresses
        .values()
        .filter(|a| {
            let ns = a.metadata.namespace.as_deref().unwrap_or("default");
            pool_key(&a.spec.pool_ref, ns).is_ok_and(|k| k == key)
        })
        .filter_map(|a| a.spec.address.parse().ok())
        .collect();
    let Some(address) = parsed.first_free(&used) else {
        return Err(BindFailure {
            reason: "PoolExhausted",
            message: format!(
                "{} has no free address ({} allocated)",
                pool_label(pool),
                used.len()
            ),
        });
    };
    let name = claim.metadata.name.clone().unwrap_or_default();
    Ok(IpAddress {
        api_version: CLAIM_API_VERSION.into(),
        kind: ADDRESS_KIND.into(),
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: CLAIM_API_VERSION.into(),
                kind: CLAIM_KIND.into(),
                name: name.clone(),
                uid: claim.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: IpAddressSpec {
            claim_ref: LocalObjectReference { name },
            pool_ref: TypedLocalObjectReference {
                api_group: Some(IPAM_GROUP.into()),
                kind: pool.kind.clone(),
                name: pool.metadata.name.clone().unwrap_or_default(),
            },
            address: address.to_string(),
            prefix: i32::from(parsed.prefix),
            gateway: parsed.gateway.map(|g| g.to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ipam::{GLOBAL_POOL_KIND, InClusterIpPoolSpec, POOL_KIND};

    fn pool(addresses: &[&str], prefix: i32, gateway: Option<&str>) -> InClusterIpPool {
        let mut p = InClusterIpPool {
            kind: POOL_KIND.into(),
            spec: InClusterIpPoolSpec {
                addresses: addresses.iter().map(|s| s.to_string()).collect(),
                prefix,
                gateway: gateway.map(str::to_string),
                ..Default::default()
            },
            ..Default::default()
        };
        p.metadata.name = Some("workers".into());
        p.metadata.namespace = Some("ns".into());
        p
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn first_free_skips_gateway_reserved_excluded_and_used() {
        let mut p = pool(&["192.168.1.0/24"], 24, Some("192.168.1.1"));
        p.spec.excluded_addresses = vec!["192.168.1.2-192.168.1.4".into()];
        let parsed = parse_pool(&p).unwrap();
        let mut used = BTreeSet::new();
        assert_eq!(parsed.first_free(&used), Some(ip("192.168.1.5")));
        used.insert(ip("192.168.1.5"));
        assert_eq!(parsed.first_free(&used), Some(ip("192.168.1.6")));
        // The broadcast address is never handed out.
        let full: BTreeSet<IpAddr> = (5..=254).map(|i| ip(&format!("192.168.1.{i}"))).collect();
        assert_eq!(parsed.first_free(&full), None);
    }

    #[test]
    fn ranges_single_addresses_and_ipv6_in_order() {
        let parsed = parse_pool(&pool(
            &["10.0.0.10", "10.0.1.5-10.0.1.6"],
            16,
            Some("10.0.0.1"),
        ))
        .unwrap();
        let used = [ip("10.0.0.10"), ip("10.0.1.5")].into();
        assert_eq!(parsed.first_free(&used), Some(ip("10.0.1.6")));
        let v6 = parse_pool(&pool(&["fd00::/120"], 64, Some("fd00::1"))).unwrap();
        assert_eq!(v6.first_free(&BTreeSet::new()), Some(ip("fd00::2")));
    }

    #[test]
    fn bad_pools_name_the_pool_and_the_field() {
        let e = parse_pool(&pool(&["10.0.0.1", "10.0.0.300"], 24, None)).unwrap_err();
        assert_eq!(e.pool, "InClusterIPPool ns/workers");
        assert_eq!(e.field, "spec.addresses[1]");
        assert!(e.message.contains("10.0.0.300"), "{e}");
        let e = parse_pool(&pool(&["10.0.0.1"], 33, None)).unwrap_err();
        assert_eq!(e.field, "spec.prefix");
        let e = parse_pool(&pool(&["10.0.0.1"], 24, Some("fd00::1"))).unwrap_err();
        assert_eq!(e.field, "spec.gateway");
        let e = parse_pool(&pool(&["10.0.0.1", "fd00::1"], 24, None)).unwrap_err();
        assert!(e.message.contains("mixes"), "{e}");
        let mut g = pool(&[], 24, None);
        g.kind = GLOBAL_POOL_KIND.into();
        let e = parse_pool(&g).unwrap_err();
        assert_eq!(
            e.to_string(),
            "GlobalInClusterIPPool workers: spec.addresses: no addresses: give single addresses, ranges (first-last) or CIDRs"
        );
        let e = parse_pool(&pool(&["10.0.0.9-10.0.0.1"], 24, None)).unwrap_err();
        assert!(e.message.contains("ends before"), "{e}");
    }

    fn claim(name: &str, kind: &str, pool: &str) -> IpAddressClaim {
        let mut c = IpAddressClaim::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        c.spec.pool_ref = TypedLocalObjectReference {
            api_group: Some(IPAM_GROUP.into()),
            kind: kind.into(),
            name: pool.into(),
        };
        c
    }

    #[test]
    fn bind_takes_the_first_free_address_and_says_which_pool_failed() {
        let p = pool(&["10.0.0.10-10.0.0.11"], 24, Some("10.0.0.1"));
        let pools: BTreeMap<String, InClusterIpPool> = [(p.key(), p)].into();
        let mut addresses = BTreeMap::new();
        for (n, want) in [("a", "10.0.0.10"), ("b", "10.0.0.11")] {
            // The resource name, as machine-api-operator writes it, names the kind too.
            let a = bind(&claim(n, "inclusterippools", "workers"), &pools, &addresses).unwrap();
            assert_eq!((a.spec.address.as_str(), a.spec.prefix), (want, 24));
            assert_eq!(a.spec.gateway.as_deref(), Some("10.0.0.1"));
            assert_eq!(a.spec.claim_ref.name, n);
            addresses.insert(format!("ns/{n}"), a);
        }
        let e = bind(&claim("c", POOL_KIND, "workers"), &pools, &addresses).unwrap_err();
        assert_eq!(e.reason, "PoolExhausted");
        assert_eq!(
            e.message,
            "InClusterIPPool ns/workers has no free address (2 allocated)"
        );
        let e = bind(&claim("c", POOL_KIND, "nope"), &pools, &addresses).unwrap_err();
        assert_eq!(
            e.message,
            "InClusterIPPool ns/nope not found in the manifests"
        );
        let e = bind(&claim("c", "IPPool", "workers"), &pools, &addresses).unwrap_err();
        assert!(
            e.message.contains("IPPool") && e.message.contains("\"workers\""),
            "{}",
            e.message
        );
    }
}
