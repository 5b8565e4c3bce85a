use std::sync::atomic::Ordering;
use std::time::Duration;

use secrecy::SecretString;

use super::*;
use crate::vcenter::RetryPolicy;
use crate::vcenter::fake_vcenter;
use crate::vcenter::idle_cache::TestClock;

const LIMITS: CacheLimits = CacheLimits {
    idle: Duration::from_secs(30 * 60),
    max_entries: 2,
};

fn user(name: &str) -> Credentials {
    Credentials::new(name, SecretString::from("secret"))
}

fn cache(time: &TestClock) -> SessionCache {
    let options = ClientOptions {
        retry: RetryPolicy::none(),
        ..ClientOptions::default()
    };
    SessionCache::with_limits(Stats::default(), options, LIMITS, time.clock())
}

/// Logouts are sent in the background: wait (briefly) for them.
async fn logouts_reach(state: &fake_vcenter::State, n: usize) {
    for _ in 0..200 {
        if state.logouts.load(Ordering::SeqCst) >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state.logouts.load(Ordering::SeqCst), n);
}

#[tokio::test]
async fn an_idle_session_is_dropped_and_logged_out() {
    let (url, state) = fake_vcenter::start().await;
    let time = TestClock::new();
    let sessions = cache(&time);
    let c = sessions
        .client(&url, &user("a"), TlsPolicy::System)
        .unwrap();
    c.current_time().await.unwrap();
    drop(c);
    time.advance(Duration::from_secs(29 * 60));
    // Used again before the limit: the same logged-in client, no new login.
    let c = sessions
        .client(&url, &user("a"), TlsPolicy::System)
        .unwrap();
    assert!(c.has_session().await);
    drop(c);
    time.advance(Duration::from_secs(30 * 60));
    let fresh = sessions
        .client(&url, &user("a"), TlsPolicy::System)
        .unwrap();
    assert!(
        !fresh.has_session().await,
        "a new client replaced the idle one"
    );
    assert_eq!(sessions.len(), 1);
    logouts_reach(&state, 1).await;
}

#[tokio::test]
async fn past_the_bound_the_least_recently_used_go_but_never_one_in_use() {
    let (url, state) = fake_vcenter::start().await;
    let time = TestClock::new();
    let sessions = cache(&time);
    let held = sessions
        .client(&url, &user("a"), TlsPolicy::System)
        .unwrap();
    held.current_time().await.unwrap();
    for name in ["b", "c", "d"] {
        time.advance(Duration::from_secs(1));
        let c = sessions
            .client(&url, &user(name), TlsPolicy::System)
            .unwrap();
        c.current_time().await.unwrap();
    }
    // Bound 2: "b" and "c" went (least recently used); "a" is held, so it stayed.
    assert_eq!(sessions.len(), 2);
    logouts_reach(&state, 2).await;
    assert!(held.has_session().await);
    held.current_time().await.unwrap();
}

fn with_password(name: &str, password: &str) -> Credentials {
    Credentials::new(name, SecretString::from(password.to_string()))
}

#[tokio::test]
async fn another_password_of_the_same_user_gets_its_own_session_and_evicts_nothing() {
    let (url, state) = fake_vcenter::start().await;
    let time = TestClock::new();
    let sessions = cache(&time);
    let manager = sessions
        .client(
            &url,
            &with_password("admin", "the-managers"),
            TlsPolicy::System,
        )
        .unwrap();
    manager.current_time().await.unwrap();
    drop(manager);
    let tenant = sessions
        .client(&url, &with_password("admin", "a-guess"), TlsPolicy::System)
        .unwrap();
    tenant.current_time().await.unwrap();
    assert_eq!(sessions.len(), 2, "one client per password");
    let manager = sessions
        .client(
            &url,
            &with_password("admin", "the-managers"),
            TlsPolicy::System,
        )
        .unwrap();
    assert!(
        manager.has_session().await,
        "the first password's client is the same, still logged in"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        state.logouts.load(Ordering::SeqCst),
        0,
        "nobody was logged out"
    );
}

#[test]
fn fingerprints_tell_credentials_apart_and_show_nothing() {
    let fp = |u: &str, p: &str| CredentialFingerprint::of(&with_password(u, p));
    assert_eq!(fp("admin", "secret"), fp("admin", "secret"));
    assert_ne!(fp("admin", "secret"), fp("admin", "secret2"));
    assert_ne!(fp("admin", "secret"), fp("admin2", "secret"));
    // The user name's end is marked: moving a character across the boundary is another key.
    assert_ne!(fp("ab", "c"), fp("a", "bc"));
    assert_eq!(
        format!("{:?}", fp("admin", "secret")),
        "CredentialFingerprint(..)"
    );
}
