//! Index → failure domain mapping (CPMSO `mapping.go`, reference §2), recomputed on every pass.
//!
//! Differences from upstream, each deliberate:
//! * every step iterates sorted keys and breaks ties by name, so the mapping never depends on the
//!   order of the inputs (upstream sorts with an unstable sort and picks among conflicting
//!   machines by list order);
//! * a final balancing step moves indexes from the most to the least used domain until the counts
//!   differ by at most one (upstream's `maxPerFD` alone tolerates 2,2,1,0 for 5 replicas over 4
//!   domains).
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A machine as the mapping sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct MappedMachine {
    pub name: String,
    /// The domain its workspace matches; empty when it matches none.
    pub domain: String,
    pub deleting: bool,
    pub created: Option<Time>,
}

/// The index in a machine name: the integer after the last `-` (upstream `getMachineNameIndex`).
pub fn name_index(name: &str) -> Option<i32> {
    let tail = name.rsplit('-').next().unwrap_or(name);
    if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    tail.parse().ok()
}

fn newer(a: &MappedMachine, b: &MappedMachine) -> bool {
    let key = |m: &MappedMachine| (m.created.as_ref().map(|t| t.0), m.name.clone());
    key(a) > key(b)
}

/// Index → domain of the machines whose names carry an index (newest machine wins a conflict),
/// and the indexes whose machines are all deleting.
fn machine_mapping(machines: &[MappedMachine]) -> (BTreeMap<i32, String>, BTreeSet<i32>) {
    let mut newest: BTreeMap<i32, &MappedMachine> = BTreeMap::new();
    let mut live: BTreeSet<i32> = BTreeSet::new();
    let mut deleting: BTreeSet<i32> = BTreeSet::new();
    for m in machines {
        let Some(i) = name_index(&m.name) else {
            continue;
        };
        if m.deleting {
            deleting.insert(i);
        } else {
            live.insert(i);
        }
        match newest.get(&i) {
            Some(old) if !newer(m, old) => {}
            _ => {
                newest.insert(i, m);
            }
        }
    }
    let map = newest
        .into_iter()
        .map(|(i, m)| (i, m.domain.clone()))
        .collect();
    (map, deleting.difference(&live).copied().collect())
}

fn count(map: &BTreeMap<i32, String>, d: &str) -> usize {
    map.values().filter(|v| *v == d).count()
}

/// The base mapping: domains deduplicated and sorted, those in use moved to the front (stable),
/// reused round-robin for `max(replicas, machine indexes)` indexes.
pub fn base_mapping(
    replicas: usize,
    domains: &[&str],
    in_use: &BTreeSet<String>,
    machine_indexes: usize,
) -> BTreeMap<i32, String> {
    let sorted: BTreeSet<&str> = domains.iter().copied().collect();
    let (mut order, rest): (Vec<&str>, Vec<&str>) =
        sorted.into_iter().partition(|d| in_use.contains(*d));
    order.extend(rest);
    if order.is_empty() {
        return BTreeMap::new();
    }
    (0..replicas.max(machine_indexes))
        .map(|i| (i as i32, order[i % order.len()].to_string()))
        .collect()
}

/// Maps every index to a domain: `replicas` indexes (or as many as the machines use), the
/// machines' own indexes kept, each machine's domain kept unless the domain is gone or over its
/// share. Empty when `domains` is empty (the template is used as it is).
pub fn map_indexes(
    replicas: i32,
    domains: &[&str],
    machines: &[MappedMachine],
) -> BTreeMap<i32, String> {
    let (machine_map, deleting_only) = machine_mapping(machines);
    let in_use: BTreeSet<String> = machine_map.values().cloned().collect();
    let base = base_mapping(
        replicas.max(0) as usize,
        domains,
        &in_use,
        machine_map.len(),
    );
    if base.is_empty() {
        return base;
    }
    // Re-key the base onto the machines' indexes ({0,1,2} → {3,4,5}).
    let mut candidates = base.clone();
    let spare: Vec<i32> = candidates
        .keys()
        .filter(|i| !machine_map.contains_key(i))
        .copied()
        .collect();
    let wanted: Vec<i32> = machine_map
        .keys()
        .filter(|i| !candidates.contains_key(i))
        .copied()
        .collect();
    for (from, to) in spare.into_iter().zip(wanted) {
        if let Some(d) = candidates.remove(&from) {
            candidates.insert(to, d);
        }
    }
    let mut unmatched: BTreeSet<i32> = candidates.keys().copied().collect();
    let mut out = machine_map.clone();
    // Cement each machine index onto an equal candidate (swap it into place).
    for (&idy, d) in &machine_map {
        if deleting_only.contains(&idy) {
            continue;
        }
        let Some(idx) = candidates.iter().find(|(_, c)| *c == d).map(|(i, _)| *i) else {
            continue;
        };
        if idx != idy
            && let (Some(a), Some(b)) =
                (candidates.get(&idx).cloned(), candidates.get(&idy).cloned())
        {
            candidates.insert(idx, b);
            candidates.insert(idy, a);
        }
        candidates.remove(&idy);
        unmatched.remove(&idy);
    }
    let base_domains: BTreeSet<&String> = base.values().collect();
    let unique = base_domains.len();
    let max_per = base.len().div_ceil(unique);
    for idx in unmatched {
        let Some(cand) = candidates.remove(&idx) else {
            continue;
        };
        let replace = match out.get(&idx) {
            None => true,
            Some(d) if !base_domains.contains(d) => true,
            Some(d) => count(&out, d) > max_per,
        };
        if replace {
            out.insert(idx, cand);
        }
    }
    balance(&mut out, &base_domains, &machine_map);
    out
}

/// Moves indexes from the most used domain to the least used one until the counts differ by at
/// most one; an index without a machine moves first, else the highest index.
fn balance(
    out: &mut BTreeMap<i32, String>,
    domains: &BTreeSet<&String>,
    machines: &BTreeMap<i32, String>,
) {
    loop {
        let counts: Vec<(usize, &String)> = domains.iter().map(|d| (count(out, d), *d)).collect();
        let Some(&(hi, most)) = counts
            .iter()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
        else {
            return;
        };
        let Some(&(lo, least)) = counts
            .iter()
            .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)))
        else {
            return;
        };
        if hi <= lo + 1 {
            return;
        }
        let in_most: Vec<i32> = out
            .iter()
            .filter(|(_, d)| *d == most)
            .map(|(i, _)| *i)
            .collect();
        let pick = in_most
            .iter()
            .rev()
            .find(|i| !machines.contains_key(i))
            .or(in_most.last())
            .copied();
        match pick {
            Some(i) => {
                out.insert(i, least.clone());
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "zone-a";
    const B: &str = "zone-b";
    const C: &str = "zone-c";
    const D: &str = "zone-d";

    fn m(name: &str, domain: &str) -> MappedMachine {
        MappedMachine {
            name: name.into(),
            domain: domain.into(),
            deleting: false,
            created: None,
        }
    }

    fn deleting(name: &str, domain: &str) -> MappedMachine {
        MappedMachine {
            deleting: true,
            ..m(name, domain)
        }
    }

    fn expect(pairs: &[(i32, &str)]) -> BTreeMap<i32, String> {
        pairs.iter().map(|(i, d)| (*i, d.to_string())).collect()
    }

    fn seq(domains: &[&str]) -> Vec<(i32, &'static str)> {
        domains
            .iter()
            .enumerate()
            .map(|(i, d)| (i as i32, [A, B, C, D].into_iter().find(|x| x == d).unwrap()))
            .collect()
    }

    fn machines(domains: &[&str]) -> Vec<MappedMachine> {
        domains
            .iter()
            .enumerate()
            .map(|(i, d)| m(&format!("machine-{i}"), d))
            .collect()
    }

    #[test]
    fn name_indexes() {
        assert_eq!(name_index("cluster-master-abcde-2"), Some(2));
        assert_eq!(name_index("machine-13"), Some(13));
        assert_eq!(name_index("machine-a"), None);
        assert_eq!(name_index("machine-"), None);
        assert_eq!(name_index("7"), Some(7));
    }

    /// Reference §2 test vectors.
    #[test]
    fn reference_vectors() {
        // domains {a,b,c}; machines b,b,c
        assert_eq!(
            map_indexes(3, &[A, B, C], &machines(&[B, B, C])),
            expect(&[(0, B), (1, A), (2, C)])
        );
        // index 0 deleting, all machines in a
        let ms = vec![
            deleting("machine-0", A),
            m("machine-1", A),
            m("machine-2", A),
        ];
        assert_eq!(
            map_indexes(3, &[A, B, C], &ms),
            expect(&[(0, B), (1, A), (2, C)])
        );
        // 5 replicas in c,b,a,c,c
        assert_eq!(
            map_indexes(5, &[A, B, C], &machines(&[C, B, A, C, C])),
            expect(&seq(&[C, B, A, A, C]))
        );
        // 3 replicas, 2 domains
        assert_eq!(map_indexes(3, &[A, B], &[]), expect(&seq(&[A, B, A])));
        // machines b,c,d; domains a–d: unchanged
        assert_eq!(
            map_indexes(3, &[A, B, C, D], &machines(&[B, C, D])),
            expect(&seq(&[B, C, D]))
        );
    }

    /// Runs a table: one vector a line, `name => replicas => listed domains => machines =>
    /// expected`; domains are letters (`a` is `zone-a`), machines `name:domain` (`!` after the
    /// domain: being deleted), expected `index:domain`.
    fn run(table: &str) {
        let zone = |l: &str| format!("zone-{l}");
        for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split(" => ").collect();
            let [name, replicas, listed, ms, want] = f[..] else {
                panic!("bad line {line}");
            };
            let listed: Vec<String> = listed
                .split_whitespace()
                .filter(|t| *t != "-")
                .map(zone)
                .collect();
            let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
            let ms: Vec<MappedMachine> = ms
                .split_whitespace()
                .map(|t| {
                    let (n, d) = t.split_once(':').expect("name:domain");
                    let mut x = m(n, &zone(d.trim_end_matches('!')));
                    x.deleting = d.ends_with('!');
                    x
                })
                .collect();
            let want: BTreeMap<i32, String> = want
                .split_whitespace()
                .filter(|t| *t != "-")
                .map(|t| {
                    let (i, d) = t.split_once(':').expect("index:domain");
                    (i.parse().unwrap(), zone(d))
                })
                .collect();
            assert_eq!(
                map_indexes(replicas.parse().unwrap(), &listed, &ms),
                want,
                "{name}"
            );
        }
    }

    /// CPMSO `mapping_test.go`, "mappingMachineIndexesToFailureDomains": "should map failure
    /// domains to indexes" (AWS zones us-east-1a/b/c/d as vSphere zones a/b/c/d). Upstream's two
    /// "returns an empty mapping" entries are one here (no domains: no mapping).
    const MAPPING_VECTORS: &str = "
        with no failure domains defined, returns an empty mapping => 3 => - => machine-0:a machine-1:b machine-2:c => -
        with three failure domains matching three machines in order (a,b,c) => 3 => a b c => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:c
        with three failure domains matching three machines in a order (b,c,a) => 3 => a b c => machine-0:b machine-1:c machine-2:a => 0:b 1:c 2:a
        with three failure domains matching three machines in a order (b,a,c) => 3 => a b c => machine-0:b machine-1:a machine-2:c => 0:b 1:a 2:c
        with three failure domains matching five machines in order (a,b,c,a,b) => 5 => a b c => machine-0:a machine-1:b machine-2:c machine-3:a machine-4:b => 0:a 1:b 2:c 3:a 4:b
        with three failure domains matching five machines in order (b,c,a,c,b) => 5 => a b c => machine-0:b machine-1:c machine-2:a machine-3:c machine-4:b => 0:b 1:c 2:a 3:c 4:b
        with three failure domains matching five machines in order (b,a,c,c,a) => 5 => a b c => machine-0:b machine-1:a machine-2:c machine-3:c machine-4:a => 0:b 1:a 2:c 3:c 4:a
        with a machine in an unrecognised failure domain (failure domains ordered a,b) => 3 => a b => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:a
        with a machine in an unrecognised failure domain (failure domains ordered b,a) => 3 => b a => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:a
        with multiple machines in unrecognised failure domains => 3 => a => machine-0:a machine-1:b machine-2:c => 0:a 1:a 2:a
        with multiple machines in the same failure domain => 3 => a b c => machine-0:b machine-1:b machine-2:c => 0:b 1:a 2:c
        with duplicate failure domains at the beginning of the Control Plane Machine Set => 3 => a a b c => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:c
        with duplicate failure domains at the end of the Control Plane Machine Set => 3 => a b c c => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:c
        with duplicate failure domains in the middle of the Control Plane Machine Set => 3 => a b b c => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:c
        with multiple duplicate failure domains in the Control Plane Machine Set => 3 => a a b b b c c => machine-0:a machine-1:b machine-2:c => 0:a 1:b 2:c
        when rebalancing indexes and an index only contains deleted machines => 3 => a b c => machine-0:a! machine-1:a machine-2:a => 0:b 1:a 2:c
        with a machine name does not indicate its index (a,b,c) => 3 => a b c => machine-a:a machine-1:b machine-2:c => 0:a 1:b 2:c
        with a machine name does not indicate its index (b,c,a) => 3 => a b c => machine-a:b machine-1:c machine-2:a => 0:b 1:c 2:a
        when the machine mappings are unbalanced, should rebalance the failure domains (c,b,a,c,c) => 5 => a b c => machine-0:c machine-1:b machine-2:a machine-3:c machine-4:c => 0:c 1:b 2:a 3:a 4:c
        with three failure domains matching three machines indexed from 3 (a,b,c) => 3 => a b c => machine-3:a machine-4:b machine-5:c => 3:a 4:b 5:c
        with three failure domains matching three machines that are not sequentially indexed (a,b,c) => 3 => a b c => machine-0:a machine-2:b machine-4:c => 0:a 2:b 4:c
        with three failure domains matching four machines that are not sequentially indexed (b,a,b,c) => 3 => a b c => machine-1:b machine-4:a machine-6:b machine-9:c => 1:b 4:a 6:b 9:c
        with three failure domains matching five machines that are not sequentially indexed (c,a,a,b,c) => 3 => a b c => machine-2:c machine-3:a machine-5:a machine-8:b machine-13:c => 2:c 3:a 5:a 8:b 13:c
        with three failure domains matching five machines which duplicate indexes => 3 => a b c => machine-3:a machine-replacement-3:a machine-4:b machine-replacement-4:b machine-5:c => 3:a 4:b 5:c
        with three failure domains matching 7 machines which duplicate indexes => 3 => a b c => machine-0:a machine-replacement-0:a machine-3:a machine-replacement-3:a machine-4:b machine-replacement-4:b machine-5:c => 0:a 3:a 4:b 5:c
        with four failure domains matching three machines, but skipping the first failure domain => 3 => a b c d => machine-0:b machine-1:c machine-2:d => 0:b 1:c 2:d
    ";

    #[test]
    fn upstream_should_map_failure_domains_to_indexes() {
        assert_eq!(
            MAPPING_VECTORS
                .lines()
                .filter(|l| !l.trim().is_empty())
                .count(),
            26
        );
        run(MAPPING_VECTORS);
    }

    /// Name, replicas, listed domains, domains in use, machine indexes, expected base.
    type BaseCase = (
        &'static str,
        usize,
        &'static [&'static str],
        BTreeSet<String>,
        usize,
        Vec<(i32, &'static str)>,
    );

    /// CPMSO `mapping_test.go`, "createBaseFailureDomainMapping": "should map the failure domains
    /// based on the replicas" (a selection; the order of the input never matters).
    #[test]
    fn upstream_create_base_failure_domain_mapping() {
        let used = |ds: &[&str]| ds.iter().map(|d| d.to_string()).collect::<BTreeSet<_>>();
        let all = used(&[A, B, C]);
        let cases: Vec<BaseCase> = vec![
            (
                "with three replicas and three failure domains (order b,c,a)",
                3,
                &[B, C, A],
                all.clone(),
                3,
                seq(&[A, B, C]),
            ),
            (
                "with three replicas and one failure domains",
                3,
                &[A],
                used(&[A]),
                3,
                seq(&[A, A, A]),
            ),
            (
                "with three replicas and two failure domains (order b,a)",
                3,
                &[B, A],
                used(&[A, B]),
                3,
                seq(&[A, B, A]),
            ),
            (
                "with five replicas and three failure domains (order b,c,a)",
                5,
                &[B, C, A],
                all.clone(),
                5,
                seq(&[A, B, C, A, B]),
            ),
            (
                "with five replicas and two failure domains (order b,a)",
                5,
                &[B, A],
                used(&[A, B]),
                5,
                seq(&[A, B, A, B, A]),
            ),
            (
                "with three replicas but a machine count of five",
                3,
                &[A, B, C],
                all.clone(),
                5,
                seq(&[A, B, C, A, B]),
            ),
            (
                "with four replicas but a machine count of 2",
                4,
                &[A, B, C],
                used(&[A, B]),
                2,
                vec![(0, A), (1, B), (2, C), (3, A)],
            ),
            (
                "with 3 replicas but a machine count of 1 (machine b)",
                3,
                &[A, B, C],
                used(&[B]),
                1,
                seq(&[B, A, C]),
            ),
            (
                "with 3 replicas but a machine count of 1 (machine c)",
                3,
                &[A, B, C],
                used(&[C]),
                1,
                seq(&[C, A, B]),
            ),
            (
                "with five failure domains and three machines, should prioritise machine domains",
                5,
                &[A, B, C, D, "zone-e"],
                used(&[B, C, D]),
                3,
                vec![(0, B), (1, C), (2, D), (3, A), (4, "zone-e")],
            ),
        ];
        for (name, replicas, domains, in_use, count, expected) in cases {
            assert_eq!(
                base_mapping(replicas, domains, &in_use, count),
                expect(&expected),
                "{name}"
            );
        }
    }

    #[test]
    fn five_replicas_over_four_domains_balance_to_one_apart() {
        let out = map_indexes(5, &[A, B, C, D], &machines(&[A, A, B, B, C]));
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for d in out.values() {
            *counts.entry(d.as_str()).or_default() += 1;
        }
        assert_eq!(counts.values().max(), Some(&2));
        assert_eq!(counts.len(), 4, "{out:?}");
    }
}
