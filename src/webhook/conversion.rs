//! The CRD conversion webhook: `POST /convert`, ConversionReview v1, answered with
//! [`crate::api::conversion::convert`] for every object of the request. config/crd registers it
//! for the kinds served in more than one version.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

use crate::api::conversion::convert;

/// The URL path the CRDs' `spec.conversion.webhook.clientConfig` names.
pub const PATH: &str = "/convert";

/// The answer to one ConversionReview (pure). Objects come back in request order; if any
/// object cannot be converted the whole review fails with the reasons, each naming its object,
/// as the API server then refuses the request instead of serving a half-converted list.
pub fn review(review: ConversionReview) -> ConversionReview {
    let request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(e) => {
            return ConversionResponse::invalid(failure(format!("invalid ConversionReview: {e}")))
                .into_review();
        }
    };
    let desired = request.desired_api_version.clone();
    let (converted, failed): (Vec<_>, Vec<_>) = request
        .objects
        .iter()
        .map(|o| convert(o, &desired))
        .partition(Result::is_ok);
    let response = ConversionResponse::for_request(request);
    if failed.is_empty() {
        response
            .success(converted.into_iter().filter_map(Result::ok).collect())
            .into_review()
    } else {
        let why: Vec<String> = failed
            .into_iter()
            .filter_map(Result::err)
            .map(|e| e.to_string())
            .collect();
        response
            .failure(failure(format!(
                "cannot convert to {desired}: {}",
                why.join("; ")
            )))
            .into_review()
    }
}

fn failure(message: String) -> Status {
    Status::failure(&message, "Invalid").with_code(422)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(desired: &str, objects: Vec<serde_json::Value>) -> ConversionReview {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects}}))
        .unwrap()
    }

    #[test]
    fn converts_every_object_in_order() {
        let fd = |name: &str| {
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereFailureDomain",
                "metadata": {"name": name},
                "spec": {"region": {"name": "r", "type": "Datacenter", "tagCategory": "c"},
                         "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "c"},
                         "topology": {"datacenter": "DC0"}}})
        };
        let out = review(request(
            "infrastructure.cluster.x-k8s.io/v1beta2",
            vec![fd("a"), fd("b")],
        ));
        let value = serde_json::to_value(&out).unwrap();
        assert_eq!(value["response"]["uid"], "u-1");
        assert_eq!(value["response"]["result"]["status"], "Success");
        let objects = value["response"]["convertedObjects"].as_array().unwrap();
        let names: Vec<_> = objects.iter().map(|o| &o["metadata"]["name"]).collect();
        assert_eq!(names, [&json!("a"), &json!("b")]);
        assert!(
            objects
                .iter()
                .all(|o| o["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1beta2")
        );
    }

    #[test]
    fn one_object_that_cannot_be_converted_fails_the_review_naming_it() {
        let out = review(request(
            "infrastructure.cluster.x-k8s.io/v1beta2",
            vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})],
        ));
        let value = serde_json::to_value(&out).unwrap();
        assert_eq!(value["response"]["result"]["status"], "Failure");
        let message = value["response"]["result"]["message"].as_str().unwrap();
        assert!(message.contains("ConfigMap/cm"), "{message}");
        assert!(
            value["response"]["convertedObjects"]
                .as_array()
                .is_none_or(Vec::is_empty)
        );
    }
}
