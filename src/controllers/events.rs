//! Events about the objects the controllers reconcile. Publishing is best effort: a failure is
//! logged and never fails the reconcile.
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// Event notes are limited to 1 kB by the API server.
const MAX_NOTE: usize = 1024;

/// Publish one Event through `recorder` (the context's, or the machine reconcilers'
/// `api_server::ApiServer`'s).
pub async fn publish_with(
    recorder: &Recorder,
    about: &ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(truncate(note, MAX_NOTE)),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, about).await {
        tracing::debug!(object = ?about.name, error = %e, "cannot publish event");
    }
}

/// Cut `s` to at most `max` bytes at a char boundary, marking the cut.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_at_a_char_boundary() {
        let s = truncate("é".repeat(600), 1024);
        assert!(s.len() <= 1024 && s.ends_with("..."));
        assert_eq!(truncate("short".into(), 1024), "short");
    }
}
