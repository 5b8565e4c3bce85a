//! Properties of admission over mutated samples: it never panics on any JSON, defaulting is
//! idempotent, an admitted object stays admitted once defaulted, and typed round trips keep it.

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Value, json};
use vsphere_provider::api::manifest::{self, LoadedObject};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::admit;

/// config/samples and docs/examples: between them one object of every kind served.
fn samples() -> Vec<LoadedObject> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (objects, errors) =
        manifest::load_paths(&[root.join("config/samples"), root.join("docs/examples")]);
    assert!(errors.is_empty());
    objects
}

/// Every path to a value inside `v` (object keys and array indexes), as JSON pointers.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        _ => {}
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-zA-Z0-9_./:${}% -]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    Insert(usize, String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any_json()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        any::<usize>().prop_map(Mutation::Remove),
        (any::<usize>(), "[a-zA-Z]{1,10}", any_json())
            .prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
    ]
}

fn apply(mut v: Value, m: &Mutation) -> Value {
    let mut ptrs = Vec::new();
    pointers(&v, String::new(), &mut ptrs);
    if ptrs.is_empty() {
        return v;
    }
    match m {
        Mutation::Replace(i, new) => {
            if let Some(slot) = v.pointer_mut(&ptrs[i % ptrs.len()]) {
                *slot = new.clone();
            }
        }
        Mutation::Remove(i) => {
            let p = &ptrs[i % ptrs.len()];
            let (parent, last) = p.rsplit_once('/').unwrap();
            match v.pointer_mut(parent) {
                Some(Value::Object(o)) => {
                    o.remove(&last.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = last.parse::<usize>()
                        && i < a.len()
                    {
                        a.remove(i);
                    }
                }
                _ => {}
            }
        }
        Mutation::Insert(i, k, new) => {
            if let Some(Value::Object(o)) = v.pointer_mut(&ptrs[i % ptrs.len()]) {
                o.insert(k.clone(), new.clone());
            }
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn admission_is_total_and_defaulting_idempotent(which in any::<usize>(), muts in prop::collection::vec(mutation(), 1..4)) {
        let objs = samples();
        let base = objs[which % objs.len()].value.clone();
        let mutated = muts.iter().fold(base, apply);
        for ctx in [Ctx::default(), Ctx { allow_placeholders: true, ..Ctx::default() }] {
            let first = admit(&mutated, None, &ctx);
            if first.allowed() {
                let second = admit(&first.object, None, &ctx);
                prop_assert!(second.allowed(), "{:?}", second.errors);
                prop_assert!(second.defaulted.is_empty(), "defaults applied twice: {:?}", second.defaulted);
                prop_assert_eq!(&second.object, &first.object);
                // Updating an object to itself is always allowed.
                let update = admit(&first.object, Some(&first.object), &ctx);
                prop_assert!(update.allowed(), "{:?}", update.errors);
            }
        }
    }
}

#[test]
fn typed_round_trip_of_admitted_samples() {
    for obj in samples() {
        let out = admit(&obj.value, None, &Ctx::default());
        assert!(out.allowed());
        let defaulted = LoadedObject {
            source: obj.source.clone(),
            value: out.object.clone(),
        };
        let typed = defaulted.typed().unwrap();
        let back = match typed {
            manifest::Object::FailureDomain(o) => serde_json::to_value(o),
            manifest::Object::DeploymentZone(o) => serde_json::to_value(o),
            manifest::Object::Cluster(o) => serde_json::to_value(o),
            manifest::Object::ClusterIdentity(o) => serde_json::to_value(o),
            manifest::Object::Machine(o) => serde_json::to_value(o),
            manifest::Object::MachineHealthCheck(o) => serde_json::to_value(o),
            manifest::Object::ControlPlaneMachineSet(o) => serde_json::to_value(o),
            manifest::Object::Secret(o) => serde_json::to_value(o),
            manifest::Object::Node(o) => serde_json::to_value(o),
            manifest::Object::Infrastructure(o) => serde_json::to_value(o),
            manifest::Object::IpPool(o) => serde_json::to_value(o),
            manifest::Object::IpAddressClaim(o) => serde_json::to_value(o),
            manifest::Object::IpAddress(o) => serde_json::to_value(o),
            manifest::Object::VSphereMachine(o) => serde_json::to_value(o),
            manifest::Object::VSphereMachineTemplate(o) => serde_json::to_value(o),
            manifest::Object::VSphereVM(o) => serde_json::to_value(o),
            manifest::Object::VSphereClusterTemplate(o) => serde_json::to_value(o),
            manifest::Object::Capi(o) => serde_json::to_value(o),
        }
        .unwrap();
        let again = admit(&back, None, &Ctx::default());
        assert!(again.allowed(), "{}: {:?}", obj.source, again.errors);
        assert!(
            again.defaulted.is_empty(),
            "{}: {:?}",
            obj.source,
            again.defaulted
        );
    }
}
