//! Kubernetes label selectors, evaluated in memory.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` satisfy `selector`. An empty selector (`{}`) matches everything; an unknown
/// operator matches nothing (fail closed).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let got = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => got.is_some_and(|g| values.contains(g)),
            "NotIn" => got.is_none_or(|g| !values.contains(g)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            _ => false,
        }
    });
    by_labels && by_expressions
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selectors_match_all_and_labels_must_all_match() {
        assert!(matches(&LabelSelector::default(), &labels(&[])));
        let s = LabelSelector {
            match_labels: Some(labels(&[("region", "a"), ("tier", "cp")])),
            ..LabelSelector::default()
        };
        assert!(matches(
            &s,
            &labels(&[("region", "a"), ("tier", "cp"), ("x", "y")])
        ));
        assert!(!matches(&s, &labels(&[("region", "a")])));
    }

    #[test]
    fn expressions_follow_kubernetes_semantics() {
        let req = |op: &str, vals: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "zone".into(),
                operator: op.into(),
                values: Some(vals.iter().map(|v| v.to_string()).collect()),
            }]),
            ..LabelSelector::default()
        };
        let a = labels(&[("zone", "a")]);
        let none = labels(&[]);
        assert!(matches(&req("In", &["a", "b"]), &a));
        assert!(!matches(&req("In", &["b"]), &a));
        assert!(!matches(&req("In", &["a"]), &none));
        assert!(matches(&req("NotIn", &["b"]), &a));
        assert!(matches(&req("NotIn", &["b"]), &none));
        assert!(matches(&req("Exists", &[]), &a));
        assert!(matches(&req("DoesNotExist", &[]), &none));
        assert!(!matches(&req("Bogus", &[]), &a));
    }
}
