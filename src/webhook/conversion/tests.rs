use serde_json::json;

use super::*;

const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

fn request(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects}}))
    .unwrap()
}

fn answer(body: &[u8]) -> Value {
    serde_json::from_slice(&review(body)).unwrap()
}

fn fd(name: &str) -> Value {
    json!({"apiVersion": V1, "kind": "VSphereFailureDomain",
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"region": {"name": "r", "type": "Datacenter", "tagCategory": "c"},
                 "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "c"},
                 "topology": {"datacenter": "DC0"}}})
}

fn names(value: &Value) -> Vec<String> {
    value["response"]["convertedObjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn converts_every_object_in_order() {
    let value = answer(&request(V2, vec![fd("a"), fd("b")]));
    assert_eq!(value["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(value["kind"], "ConversionReview");
    assert_eq!(value["response"]["uid"], "u-1");
    assert_eq!(value["response"]["result"]["status"], "Success");
    assert_eq!(names(&value), ["a", "b"]);
    let objects = value["response"]["convertedObjects"].as_array().unwrap();
    assert!(objects.iter().all(|o| o["apiVersion"] == V2));
}

/// Issue 42 N7: a tenant's unreadable conversion data fails neither the list nor the watch
/// event carrying its object; the object comes back converted from its own fields, without
/// the annotation, its other annotations kept.
#[test]
fn unreadable_conversion_data_fails_neither_the_list_nor_the_object() {
    let mut forged = fd("b");
    forged["metadata"]["annotations"] =
        json!({CONVERSION_DATA: "{", LEGACY_CONVERSION_DATA: "[]", "team": "blue"});
    let value = answer(&request(V2, vec![fd("a"), forged.clone(), fd("c")]));
    assert_eq!(value["response"]["result"]["status"], "Success", "{value}");
    assert_eq!(names(&value), ["a", "b", "c"]);
    let b = &value["response"]["convertedObjects"][1];
    assert_eq!(b["apiVersion"], V2);
    assert_eq!(b["metadata"]["uid"], "uid-b");
    assert_eq!(b["metadata"]["annotations"], json!({"team": "blue"}));
    assert_eq!(b["spec"]["topology"]["datacenter"], "DC0");
    // Alone (a watch event, a get) it converts the same way.
    let alone = answer(&request(V2, vec![forged.clone()]));
    assert_eq!(alone["response"]["convertedObjects"][0], *b);
    // With nothing else in its annotations, none are left.
    forged["metadata"]["annotations"] = json!({CONVERSION_DATA: "{"});
    let bare = answer(&request(V2, vec![forged]));
    let metadata = &bare["response"]["convertedObjects"][0]["metadata"];
    assert!(metadata.get("annotations").is_none(), "{metadata}");
}

#[test]
fn an_object_that_cannot_be_converted_at_all_fails_the_review_naming_it() {
    let value = answer(&request(
        V2,
        vec![
            fd("a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm",
                "annotations": {CONVERSION_DATA: "{"}}}),
        ],
    ));
    assert_eq!(value["response"]["uid"], "u-1");
    assert_eq!(value["response"]["result"]["status"], "Failure");
    assert_eq!(value["response"]["result"]["code"], 422);
    let message = value["response"]["result"]["message"].as_str().unwrap();
    assert!(message.contains("ConfigMap/cm"), "{message}");
    assert!(
        value["response"]["convertedObjects"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
}

#[test]
fn a_body_that_is_no_review_gets_a_failure() {
    for body in [&b"{"[..], br#"{"kind": "ConversionReview"}"#] {
        let value = answer(body);
        assert_eq!(value["response"]["result"]["status"], "Failure");
        let message = value["response"]["result"]["message"].as_str().unwrap();
        assert!(message.starts_with("invalid ConversionReview"), "{message}");
    }
}
