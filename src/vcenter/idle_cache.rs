//! A map of per-server state (sessions, views, write locks) that cannot grow without bound.
//! Servers come from objects anyone with create rights may write: kept forever, one entry per
//! server name ever seen would let a tenant grow the manager's memory until it is killed. So
//! entries unused for a while are dropped, and past a size bound the least recently used go
//! first. An entry still in use elsewhere is never dropped (the caller says which: a session a
//! reconcile holds, a write lock someone waits on), so the bound can be exceeded only by what
//! is in use at that moment.
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an entry may go unused and how many are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    pub idle: Duration,
    pub max_entries: usize,
}

impl CacheLimits {
    /// vCenter ends an idle SOAP or REST session after 30 minutes by default: a client unused
    /// that long holds a dead session anyway, so dropping it then costs no extra round trip
    /// (a new client's RetrieveServiceContent + Login replaces the old one's failed call +
    /// Login). 128 servers × identities is more than any estate we know of; each entry is one
    /// HTTP client and its connections.
    pub const DEFAULT: CacheLimits = CacheLimits {
        idle: Duration::from_secs(30 * 60),
        max_entries: 128,
    };
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Where "now" comes from: the system clock, or a test's.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(Instant::now)
}

/// A clock tests move by hand.
#[cfg(test)]
#[derive(Clone)]
pub(crate) struct TestClock {
    start: Instant,
    offset: Arc<std::sync::atomic::AtomicU64>,
}

#[cfg(test)]
impl TestClock {
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            offset: Arc::default(),
        }
    }

    pub(crate) fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.offset
            .fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn clock(&self) -> Clock {
        let this = self.clone();
        Arc::new(move || {
            this.start
                + Duration::from_millis(this.offset.load(std::sync::atomic::Ordering::SeqCst))
        })
    }
}

struct Slot<V> {
    value: V,
    used: Instant,
}

/// The map; every method takes `now` so it is a pure function of its inputs.
pub struct IdleCache<K, V> {
    entries: HashMap<K, Slot<V>>,
    limits: CacheLimits,
}

impl<K: Eq + Hash + Clone, V> IdleCache<K, V> {
    pub fn new(limits: CacheLimits) -> Self {
        Self {
            entries: HashMap::new(),
            limits,
        }
    }

    /// The entry for `key`, marked used at `now`.
    pub fn get(&mut self, key: &K, now: Instant) -> Option<&mut V> {
        let slot = self.entries.get_mut(key)?;
        slot.used = now;
        Some(&mut slot.value)
    }

    /// Store `value` under `key`, used at `now`; returns the value it replaced.
    pub fn insert(&mut self, key: K, value: V, now: Instant) -> Option<V> {
        self.entries
            .insert(key, Slot { value, used: now })
            .map(|s| s.value)
    }

    /// Remove what has been idle past the limit, then, while over the size bound, the least
    /// recently used — only entries `unused` says nobody else holds. Returns what was removed,
    /// for the caller to close.
    pub fn evict(&mut self, now: Instant, unused: impl Fn(&V) -> bool) -> Vec<(K, V)> {
        let idle = self.limits.idle;
        let mut gone: Vec<K> = self
            .entries
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.used) >= idle && unused(&s.value))
            .map(|(k, _)| k.clone())
            .collect();
        let mut rest: Vec<(&K, Instant)> = self
            .entries
            .iter()
            .filter(|(k, s)| !gone.contains(k) && unused(&s.value))
            .map(|(k, s)| (k, s.used))
            .collect();
        rest.sort_by_key(|(_, used)| *used);
        let over = (self.entries.len() - gone.len()).saturating_sub(self.limits.max_entries);
        gone.extend(rest.into_iter().take(over).map(|(k, _)| k.clone()));
        gone.into_iter()
            .filter_map(|k| self.entries.remove(&k).map(|s| (k, s.value)))
            .collect()
    }

    /// Remove everything (shutdown).
    pub fn drain(&mut self) -> Vec<(K, V)> {
        self.entries.drain().map(|(k, s)| (k, s.value)).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: CacheLimits = CacheLimits {
        idle: Duration::from_secs(60),
        max_entries: 3,
    };

    fn keys(mut v: Vec<(&'static str, u32)>) -> Vec<&'static str> {
        v.sort();
        v.into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn idle_entries_go_and_used_ones_stay() {
        let t0 = Instant::now();
        let mut c = IdleCache::new(LIMITS);
        c.insert("a", 1, t0);
        c.insert("b", 2, t0);
        assert!(c.evict(t0 + Duration::from_secs(59), |_| true).is_empty());
        assert_eq!(c.get(&"b", t0 + Duration::from_secs(30)), Some(&mut 2));
        assert_eq!(keys(c.evict(t0 + Duration::from_secs(60), |_| true)), ["a"]);
        assert_eq!(c.len(), 1);
        assert_eq!(keys(c.evict(t0 + Duration::from_secs(90), |_| true)), ["b"]);
        assert!(c.is_empty());
    }

    #[test]
    fn past_the_bound_the_least_recently_used_go_first() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = IdleCache::new(LIMITS);
        for (i, k) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            c.insert(k, i as u32, at(i as u64));
        }
        c.get(&"a", at(10));
        assert_eq!(keys(c.evict(at(11), |_| true)), ["b", "c"]);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn entries_in_use_are_never_dropped() {
        let t0 = Instant::now();
        let mut c = IdleCache::new(LIMITS);
        for (i, k) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            c.insert(k, i as u32, t0);
        }
        // Only odd values are free: "b" and "d" go, the rest stay over the bound.
        let late = t0 + Duration::from_secs(3600);
        assert_eq!(keys(c.evict(late, |v| v % 2 == 1)), ["b", "d"]);
        assert_eq!(c.len(), 3);
        assert_eq!(c.drain().len(), 3);
    }
}
