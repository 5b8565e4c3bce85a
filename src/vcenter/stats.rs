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
    /// Round trips: requests that reached vCenter, answered or not.
    pub calls: u64,
    pub errors: u64,
    /// Attempts that never reached vCenter (the connection failed). Counted apart: a refused
    /// connection retried four times is no round trip, and a summary saying "4 round trips"
    /// would send an admin looking for a server that answered.
    pub unsent: u64,
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

    /// Attempts that never reached vCenter.
    pub fn unsent(&self) -> u64 {
        self.methods.values().map(|m| m.unsent).sum()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut out = Snapshot::default();
        for (name, m) in &self.methods {
            let before = earlier.methods.get(name).cloned().unwrap_or_default();
            if m.calls > before.calls || m.unsent > before.unsent {
                out.methods.insert(
                    name.clone(),
                    MethodStats {
                        calls: m.calls - before.calls,
                        errors: m.errors.saturating_sub(before.errors),
                        unsent: m.unsent.saturating_sub(before.unsent),
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

    /// Both together: the cost of two parts of one run, each measured with [`Snapshot::since`].
    pub fn plus(&self, other: &Snapshot) -> Snapshot {
        let mut out = self.clone();
        for (name, m) in &other.methods {
            let o = out.methods.entry(name.clone()).or_default();
            o.calls += m.calls;
            o.errors += m.errors;
            o.unsent += m.unsent;
            o.total += m.total;
        }
        for (kind, n) in &other.by_kind {
            *out.by_kind.entry(*kind).or_default() += n;
        }
        out
    }

    /// One line: `12 round trips (3 session, 8 read, 1 write): RetrievePropertiesEx×4, …`,
    /// then `; 4 attempt(s) could not connect` when some never reached vCenter.
    pub fn summary(&self) -> String {
        let methods: Vec<String> = self
            .methods
            .iter()
            .filter(|(_, m)| m.calls > 0)
            .map(|(n, m)| format!("{n}×{}", m.calls))
            .collect();
        let mut out = format!(
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
        );
        let unsent = self.unsent();
        if unsent > 0 {
            out.push_str(&format!("; {unsent} attempt(s) could not connect"));
        }
        out
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

    /// An attempt that never reached vCenter: not a round trip ([`MethodStats::unsent`]).
    pub fn record_unsent(&self, method: &str, elapsed: Duration) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let m = s.methods.entry(method.to_string()).or_default();
        m.unsent += 1;
        m.total += elapsed;
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

    /// Connections that failed are no round trips: a refused vCenter retried four times reads
    /// "0 round trips …; 4 attempt(s) could not connect", not "4 round trips".
    #[test]
    fn attempts_that_never_connected_are_not_round_trips() {
        let stats = Stats::default();
        for _ in 0..4 {
            stats.record_unsent("RetrieveServiceContent", Duration::from_millis(1));
        }
        let s = stats.snapshot();
        assert_eq!((s.total(), s.unsent()), (0, 4));
        assert_eq!(
            s.summary(),
            "0 round trips (0 session, 0 read, 0 write): none; 4 attempt(s) could not connect"
        );
        assert_eq!(s.since(&Snapshot::default()).unsent(), 4);
        assert_eq!(s.plus(&s).unsent(), 8);
    }
}
