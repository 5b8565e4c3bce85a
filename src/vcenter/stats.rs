//! Round-trip accounting. Every request to vCenter is counted and timed per method, because
//! round trips are the cost that matters (benchmarks, `/metrics`, the local-mode summary).
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a call does to vCenter: the local-mode summary and idempotency tests count writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CallKind {
    /// Login, logout, service content, keep-alive.
    Session,
    Read,
    Write,
}

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MethodStats {
    pub calls: u64,
    pub errors: u64,
    #[serde(with = "duration_ms")]
    pub total: Duration,
}

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Snapshot {
    /// Per method (`RetrievePropertiesEx`, `rest:tagging.tag.create`).
    pub methods: BTreeMap<String, MethodStats>,
    pub by_kind: BTreeMap<CallKind, u64>,
}

impl Snapshot {
    /// All round trips.
    pub fn total(&self) -> u64 {
        self.methods.values().map(|m| m.calls).sum()
    }

    pub fn kind(&self, kind: CallKind) -> u64 {
        self.by_kind.get(&kind).copied().unwrap_or(0)
    }

    pub fn calls(&self, method: &str) -> u64 {
        self.methods.get(method).map(|m| m.calls).unwrap_or(0)
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut out = Snapshot::default();
        for (name, m) in &self.methods {
            let before = earlier.methods.get(name).cloned().unwrap_or_default();
            if m.calls > before.calls {
                out.methods.insert(
                    name.clone(),
                    MethodStats {
                        calls: m.calls - before.calls,
                        errors: m.errors.saturating_sub(before.errors),
                        total: m.total.saturating_sub(before.total),
                    },
                );
            }
        }
        for (kind, n) in &self.by_kind {
            let d = n.saturating_sub(earlier.by_kind.get(kind).copied().unwrap_or(0));
            if d > 0 {
                out.by_kind.insert(*kind, d);
            }
        }
        out
    }

    /// One line: `12 round trips (3 session, 8 read, 1 write): RetrievePropertiesEx×4, …`.
    pub fn summary(&self) -> String {
        let methods: Vec<String> = self
            .methods
            .iter()
            .map(|(n, m)| format!("{n}×{}", m.calls))
            .collect();
        format!(
            "{} round trips ({} session, {} read, {} write): {}",
            self.total(),
            self.kind(CallKind::Session),
            self.kind(CallKind::Read),
            self.kind(CallKind::Write),
            if methods.is_empty() {
                "none".to_string()
            } else {
                methods.join(", ")
            }
        )
    }
}

/// Shared, cheap to clone; one per process or per client.
#[derive(Clone, Debug, Default)]
pub struct Stats(Arc<Mutex<Snapshot>>);

impl Stats {
    pub fn record(&self, method: &str, kind: CallKind, elapsed: Duration, ok: bool) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let m = s.methods.entry(method.to_string()).or_default();
        m.calls += 1;
        m.total += elapsed;
        if !ok {
            m.errors += 1;
        }
        *s.by_kind.entry(kind).or_default() += 1;
    }

    pub fn snapshot(&self) -> Snapshot {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

mod duration_ms {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reports_only_the_difference() {
        let stats = Stats::default();
        stats.record("Login", CallKind::Session, Duration::from_millis(3), true);
        let before = stats.snapshot();
        stats.record(
            "RetrievePropertiesEx",
            CallKind::Read,
            Duration::from_millis(5),
            true,
        );
        stats.record(
            "RetrievePropertiesEx",
            CallKind::Read,
            Duration::from_millis(5),
            false,
        );
        let d = stats.snapshot().since(&before);
        assert_eq!(d.total(), 2);
        assert_eq!(d.calls("Login"), 0);
        assert_eq!(d.methods["RetrievePropertiesEx"].errors, 1);
        assert_eq!(d.kind(CallKind::Read), 2);
        assert!(
            d.summary()
                .starts_with("2 round trips (0 session, 2 read, 0 write)")
        );
    }
}
