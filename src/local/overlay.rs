//! `kubectl apply` for local mode: the manifest's view of an object laid over what the state
//! file holds of it (spec, labels and annotations from the manifest; everything the controllers
//! wrote kept), with the keys it applied recorded so a key dropped from the manifest is removed.
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The keys the manifest applied last time (labels, annotations), as `kubectl apply` records
/// its last-applied configuration.
pub const LAST_APPLIED_ANNOTATION: &str = "vsphere-provider.io/last-applied-keys";

/// The manifest's view of an object laid over the stored one: spec, labels and annotations
/// from the manifest; identity, status, finalizers, deletion and owner references kept.
///
/// An object that cannot be laid over (its JSON does not decode back as its kind) is an error
/// naming why: keeping the stored object would silently ignore what the manifest says.
pub fn overlay<T>(stored: &T, manifest: &T, spec_keys: &[&str]) -> Result<T, String>
where
    T: Serialize + DeserializeOwned,
{
    let mut s = serde_json::to_value(stored).map_err(|e| format!("stored object: {e}"))?;
    let m = serde_json::to_value(manifest).map_err(|e| format!("manifest: {e}"))?;
    for k in spec_keys {
        let old = s.get(*k).cloned();
        let mut new = m.get(*k).cloned();
        // A controller-set providerID survives a manifest that does not say one.
        if *k == "spec"
            && let (Some(old), Some(serde_json::Value::Object(n))) = (&old, new.as_mut())
            && let Some(pid) = old.get("providerID")
            && !n.contains_key("providerID")
        {
            n.insert("providerID".into(), pid.clone());
        }
        let changed = old != new;
        match new {
            Some(v) => s[*k] = v,
            None => {
                if let Some(o) = s.as_object_mut() {
                    o.remove(*k);
                }
            }
        }
        if changed && *k == "spec" {
            let g = s["metadata"]["generation"].as_i64().unwrap_or(1);
            s["metadata"]["generation"] = (g + 1).into();
        }
    }
    // Labels and annotations: as `kubectl apply`, a key the manifest set last time and no
    // longer sets is removed; keys the controllers set (region/zone labels, instance state,
    // remediation backoff) are kept.
    let previous: serde_json::Value = s["metadata"]["annotations"]
        .get(LAST_APPLIED_ANNOTATION)
        .and_then(|v| v.as_str())
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let mut applied = serde_json::Map::new();
    for field in ["labels", "annotations"] {
        let mine = match m["metadata"].get(field) {
            Some(serde_json::Value::Object(o)) => o.clone(),
            _ => serde_json::Map::new(),
        };
        let target = &mut s["metadata"][field];
        if !target.is_object() {
            *target = serde_json::Value::Object(Default::default());
        }
        if let Some(t) = target.as_object_mut() {
            for gone in previous[field].as_array().into_iter().flatten() {
                if let Some(k) = gone.as_str()
                    && !mine.contains_key(k)
                {
                    t.remove(k);
                }
            }
            let keys: Vec<serde_json::Value> = mine.keys().cloned().map(Into::into).collect();
            applied.insert(field.to_string(), keys.into());
            t.extend(mine);
        }
    }
    s["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] =
        serde_json::Value::String(serde_json::Value::Object(applied).to_string());
    serde_json::from_value(s).map_err(|e| format!("the manifest laid over the stored object: {e}"))
}
