//! Machine names `<prefix>-<rand5>-<index>` (CPMSO `getMachineName`); the randomness is an input.
use std::collections::BTreeMap;

use crate::api::control_plane_machine_set::ControlPlaneMachineSetSpec;
use crate::api::machine::{CLUSTER_ID_LABEL, MACHINE_ROLE_LABEL};

/// The alphabet of Kubernetes' random suffixes (`k8s.io/apimachinery/pkg/util/rand`): no vowels,
/// no confusable characters.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five characters drawn from `seed` (splitmix64): the same seed gives the same suffix.
pub fn rand5(seed: u64) -> String {
    let mut x = seed;
    (0..5)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ALPHABET[(z % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

/// The name prefix: `spec.machineNamePrefix`, else `<cluster id>-<role>` from the template labels.
pub fn prefix(spec: &ControlPlaneMachineSetSpec) -> String {
    if let Some(p) = spec
        .machine_name_prefix
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        return p.to_string();
    }
    let empty = BTreeMap::new();
    let labels = spec
        .template
        .machines_v1beta1_machine_openshift_io
        .as_ref()
        .map_or(&empty, |t| &t.metadata.labels);
    let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
    format!("{}-{}", get(CLUSTER_ID_LABEL), get(MACHINE_ROLE_LABEL))
}

/// `<prefix>-<rand5>-<index>`.
pub fn machine_name(prefix: &str, rand5: &str, index: i32) -> String {
    format!("{prefix}-{rand5}-{index}")
}

/// A fresh name for `index`: the `n`th draw from `seed` that no existing machine uses.
pub fn fresh_name(prefix: &str, seed: u64, index: i32, taken: &dyn Fn(&str) -> bool) -> String {
    (0u64..)
        .map(|n| {
            machine_name(
                prefix,
                &rand5(
                    seed.wrapping_add(n.wrapping_mul(7919))
                        .wrapping_add(index as u64),
                ),
                index,
            )
        })
        .find(|name| !taken(name))
        .unwrap_or_default()
}

/// The machines of a set whose VMs carry their identity (`namespace/name[ cluster=ID]`, what
/// `plan::machine::machine_identity` writes at clone time), by index: names of the set's form
/// `<prefix>-<rand5>-<index>` in the set's namespace and cluster. For one index, the first name
/// in order wins (a second VM of an index is another problem, reported by the machine).
pub fn recovered_names<'i>(
    spec: &ControlPlaneMachineSetSpec,
    namespace: &str,
    identities: impl IntoIterator<Item = &'i str>,
) -> BTreeMap<i32, String> {
    let prefix = prefix(spec);
    let cluster = spec
        .template
        .machines_v1beta1_machine_openshift_io
        .as_ref()
        .and_then(|t| t.metadata.labels.get(CLUSTER_ID_LABEL))
        .filter(|c| !c.is_empty());
    let mut names: Vec<(i32, String)> = identities
        .into_iter()
        .filter_map(|id| {
            let (who, their_cluster) = match id.split_once(" cluster=") {
                Some((w, c)) => (w, Some(c)),
                None => (id, None),
            };
            if their_cluster != cluster.map(String::as_str) {
                return None;
            }
            let name = who.strip_prefix(namespace)?.strip_prefix('/')?;
            let (rand, index) = name
                .strip_prefix(prefix.as_str())?
                .strip_prefix('-')?
                .split_once('-')?;
            let ours = rand.len() == 5 && rand.bytes().all(|b| ALPHABET.contains(&b));
            let index: i32 = index.parse().ok().filter(|i| *i >= 0)?;
            ours.then(|| (index, name.to_string()))
        })
        .collect();
    names.sort();
    let mut out = BTreeMap::new();
    for (i, n) in names {
        out.entry(i).or_insert(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cpms::mapping::name_index;

    #[test]
    fn names_carry_their_index_and_five_random_characters() {
        let n = machine_name("ocp-abc12-master", &rand5(42), 2);
        assert_eq!(name_index(&n), Some(2));
        let r = rand5(42);
        assert_eq!(r.len(), 5);
        assert!(r.bytes().all(|b| ALPHABET.contains(&b)));
        assert_eq!(rand5(42), r, "deterministic for a seed");
        assert_ne!(rand5(43), r);
    }

    #[test]
    fn taken_names_are_skipped() {
        let first = fresh_name("p", 1, 0, &|_| false);
        let second = fresh_name("p", 1, 0, &|n| n == first);
        assert_ne!(first, second);
        assert!(second.starts_with("p-") && second.ends_with("-0"));
    }

    #[test]
    fn recovered_names_are_the_sets_machines_in_its_namespace_and_cluster() {
        let set = crate::plan::cpms::tests::cpms(&[], crate::api::control_plane_machine_set::ControlPlaneMachineSetStrategyType::RollingUpdate);
        let found = recovered_names(
            &set.spec,
            "ns",
            [
                "ns/ocp-master-bcdfg-0 cluster=ocp",
                "ns/ocp-master-zzzzz-0 cluster=ocp",
                "ns/ocp-master-xyz-1 cluster=ocp",
                "other/ocp-master-bcdfg-1 cluster=ocp",
                "ns/ocp-master-bcdfg-2 cluster=elsewhere",
                "ns/ocp-master-bcdfg-2",
                "ns/ocp-worker-bcdfg-2 cluster=ocp",
                "ns/ocp-master-hjklm-2 cluster=ocp",
            ],
        );
        assert_eq!(
            found,
            [
                (0, "ocp-master-bcdfg-0".to_string()),
                (2, "ocp-master-hjklm-2".to_string())
            ]
            .into()
        );
    }
}
