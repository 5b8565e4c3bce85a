//! Kubernetes label selectors, evaluated in memory.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

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

/// Parse a selector written as `kubectl -l` takes it: comma-separated `key=value` (or `==`),
/// `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`. The empty string selects
/// everything (`{}`). A flag takes this form because it is what admins already type.
pub fn parse(text: &str) -> Result<LabelSelector, String> {
    let mut selector = LabelSelector::default();
    let mut labels = BTreeMap::new();
    let mut expressions = Vec::new();
    for term in split_terms(text)? {
        let term = term.trim();
        if term.is_empty() {
            return Err(format!("empty requirement in selector {text:?}"));
        }
        let expr = |key: &str, operator: &str, values: Option<Vec<String>>| {
            Ok::<_, String>(LabelSelectorRequirement {
                key: label_key(key, text)?,
                operator: operator.into(),
                values,
            })
        };
        if let Some(key) = term.strip_prefix('!') {
            expressions.push(expr(key, "DoesNotExist", None)?);
        } else if let Some((key, value)) = term.split_once("!=") {
            expressions.push(expr(key, "NotIn", Some(vec![label_value(value, text)?]))?);
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels.insert(label_key(key, text)?, label_value(value, text)?);
        } else if let Some((key, operator, values)) = set_term(term) {
            let values = values
                .split(',')
                .map(|v| label_value(v, text))
                .collect::<Result<Vec<_>, _>>()?;
            expressions.push(expr(key, operator, Some(values))?);
        } else {
            expressions.push(expr(term, "Exists", None)?);
        }
    }
    selector.match_labels = (!labels.is_empty()).then_some(labels);
    selector.match_expressions = (!expressions.is_empty()).then_some(expressions);
    Ok(selector)
}

/// Split at the commas outside `( … )`.
fn split_terms(text: &str) -> Result<Vec<&str>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let (mut terms, mut depth, mut start) = (Vec::new(), 0u32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ')' in selector {text:?}"))?;
            }
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in selector {text:?}"));
    }
    terms.push(&text[start..]);
    Ok(terms)
}

/// `key in (a,b)` / `key notin (a,b)`: the key, the operator and the text inside the brackets.
fn set_term(term: &str) -> Option<(&str, &'static str, &str)> {
    let open = term.find('(')?;
    let inner = term[open + 1..].strip_suffix(')')?;
    let mut words = term[..open].split_whitespace();
    let (key, op) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let operator = match op {
        "in" => "In",
        "notin" => "NotIn",
        _ => return None,
    };
    Some((key, operator, inner))
}

/// A label key (`[prefix/]name`), checked loosely: no spaces, no operator characters.
fn label_key(key: &str, text: &str) -> Result<String, String> {
    let key = key.trim();
    let ok = !key.is_empty()
        && key.len() <= 316
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    ok.then(|| key.to_string())
        .ok_or_else(|| format!("invalid label key {key:?} in selector {text:?}"))
}

/// A label value: at most 63 characters of `[A-Za-z0-9._-]` (empty allowed).
fn label_value(value: &str, text: &str) -> Result<String, String> {
    let value = value.trim();
    let ok = value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    ok.then(|| value.to_string())
        .ok_or_else(|| format!("invalid label value {value:?} in selector {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn parse_reads_kubectl_selectors() {
        assert_eq!(parse("").unwrap(), LabelSelector::default());
        assert_eq!(parse("  ").unwrap(), LabelSelector::default());
        let s = parse("region=east, tier==cp,!legacy,gpu,zone in (a, b),rack notin (r1),env!=dev")
            .unwrap();
        assert_eq!(
            s.match_labels,
            Some(labels(&[("region", "east"), ("tier", "cp")]))
        );
        let exprs: Vec<(String, String, Option<Vec<String>>)> = s
            .match_expressions
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.operator, e.values))
            .collect();
        let v = |xs: &[&str]| Some(xs.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(
            exprs,
            vec![
                ("legacy".into(), "DoesNotExist".into(), None),
                ("gpu".into(), "Exists".into(), None),
                ("zone".into(), "In".into(), v(&["a", "b"])),
                ("rack".into(), "NotIn".into(), v(&["r1"])),
                ("env".into(), "NotIn".into(), v(&["dev"])),
            ]
        );
        let sel = parse("topology.example.com/zone in (a,b),!legacy").unwrap();
        assert!(matches(
            &sel,
            &labels(&[("topology.example.com/zone", "a")])
        ));
        assert!(!matches(
            &sel,
            &labels(&[("topology.example.com/zone", "a"), ("legacy", "")])
        ));
        assert!(!matches(
            &sel,
            &labels(&[("topology.example.com/zone", "c")])
        ));
    }

    #[test]
    fn parse_names_what_is_wrong() {
        for (bad, says) in [
            ("a=b,,c", "empty requirement"),
            ("zone in (a,b", "unbalanced '('"),
            ("zone)", "unbalanced ')'"),
            ("has space=x", "invalid label key \"has space\""),
            ("a=b c", "invalid label value \"b c\""),
            ("zone within (a)", "invalid label key"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
