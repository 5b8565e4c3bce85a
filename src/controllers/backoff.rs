//! Per-object exponential backoff for failed reconciles.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Per-object exponential backoff for failed reconciles: an unreachable vCenter is retried
/// at 5 s, 10 s, 20 s … up to 5 min for each zone, never in a hot loop, and a success starts
/// over. Objects that stopped failing without a success (deleted ones) are forgotten once they
/// have not failed for twice the cap.
#[derive(Debug)]
pub struct Backoff {
    failures: Mutex<HashMap<String, Failures>>,
    base: Duration,
    cap: Duration,
}

#[derive(Debug)]
struct Failures {
    count: u32,
    last: tokio::time::Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_secs(5), Duration::from_secs(300))
    }
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            failures: Mutex::default(),
            base,
            cap,
        }
    }

    /// Record one more failure of `key` and say how long to wait.
    pub fn next(&self, key: &str) -> Duration {
        let now = tokio::time::Instant::now();
        let stale = self.cap.saturating_mul(2);
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|k, f| k == key || now.duration_since(f.last) < stale);
        let f = map.entry(key.to_string()).or_insert(Failures {
            count: 0,
            last: now,
        });
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(f.count.min(16)))
            .min(self.cap);
        f.count = f.count.saturating_add(1);
        f.last = now;
        delay
    }

    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// How many objects have a failure on record.
    pub fn tracked(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_object_up_to_the_cap_and_resets() {
        let b = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));
        let seq: Vec<u64> = (0..6).map(|_| b.next("zone/a").as_secs()).collect();
        assert_eq!(seq, [5, 10, 20, 40, 60, 60]);
        assert_eq!(b.next("zone/b").as_secs(), 5, "per object");
        b.reset("zone/a");
        assert_eq!(b.next("zone/a").as_secs(), 5);
    }

    #[tokio::test]
    async fn backoff_forgets_objects_that_stopped_failing() {
        // Stale after twice the cap (200 ms) without a failure.
        let b = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
        for i in 0..100 {
            b.next(&format!("zone/deleted-{i}"));
        }
        b.next("zone/still-failing");
        assert_eq!(b.tracked(), 101);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            b.next("zone/still-failing").as_millis(),
            20,
            "kept its count"
        );
        assert_eq!(b.tracked(), 1, "the deleted objects are forgotten");
    }
}
