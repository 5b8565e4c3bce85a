//! A reply past the cap fails the one call — named by server, method and cap — after reading
//! no more than the cap, and the client goes on working.
use std::sync::atomic::Ordering;

use secrecy::SecretString;

use super::*;
use crate::vcenter::fake_vcenter::{self, Huge};
use crate::vcenter::{Client, Credentials};

const CAP: u64 = 1 << 20;

fn client(url: &str) -> Client {
    let options = ClientOptions {
        retry: RetryPolicy::none(),
        max_reply_bytes: CAP,
        ..ClientOptions::default()
    };
    Client::new(url, Credentials::new("u", SecretString::from("p")), options).unwrap()
}

#[tokio::test]
async fn an_endless_reply_fails_the_call_at_the_cap_and_the_next_call_works() {
    let (url, state) = fake_vcenter::start().await;
    let c = client(&url);
    c.login().await.unwrap();
    state.huge_next("CurrentTime", Huge::Endless);
    let err = c.current_time().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "vCenter {url} answered CurrentTime with more than 1 MiB (the reply cap); the reply was dropped unread"
        )
    );
    assert!(matches!(err, Error::ReplyTooLarge { limit: CAP, .. }));
    assert!(!err.is_transient(), "the same request gets the same reply");
    assert_eq!(err.class(), "ReplyTooLarge");
    // Reading stopped at the cap: the server could hand over only the cap and what the
    // connection buffers hold before the client hung up (an endless body otherwise).
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let sent = state.huge_bytes_sent.load(Ordering::Relaxed);
    assert!(sent < 48 * CAP, "the server sent {sent} bytes");
    c.current_time().await.unwrap();
}

#[tokio::test]
async fn a_reply_announced_past_the_cap_is_not_read_at_all() {
    let (url, state) = fake_vcenter::start().await;
    let c = client(&url);
    state.huge_next("RetrieveServiceContent", Huge::Announced);
    let err = c.service_content().await.unwrap_err();
    assert!(
        matches!(&err, Error::ReplyTooLarge { method, .. } if method == "RetrieveServiceContent"),
        "{err}"
    );
    c.service_content().await.unwrap();
    c.current_time().await.unwrap();
}
