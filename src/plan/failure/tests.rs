//! Failures: how each is retried, and what its message may carry.
use super::*;

#[test]
fn retry_is_decided_by_the_error_type_not_its_text() {
    let unreachable = Error::Unreachable {
        server: "vc".into(),
        reason: "connection refused (permanent!)".into(),
    };
    let login = Error::InvalidLogin {
        server: "vc".into(),
    };
    let busy_http = Error::Http {
        server: "vc".into(),
        method: "RetrievePropertiesEx".into(),
        status: 503,
        detail: String::new(),
    };
    assert_eq!(Failure::from(unreachable).retry(), Retry::Later);
    assert_eq!(Failure::from(busy_http).retry(), Retry::Later);
    assert_eq!(Failure::from(login).retry(), Retry::Failed);
    assert_eq!(Failure::config("retry later").retry(), Retry::Failed);
    assert_eq!(Failure::busy("failed").retry(), Retry::Later);
}

/// What a server wrote never reaches a failure's message (conditions, events): not a
/// reply body, a fault's message, REST error messages, a decoder's quote of the reply, nor
/// the login's user name. The message is the typed description; the text stays on the
/// error for the debug log.
#[test]
fn a_failure_message_carries_no_server_text_nor_user_name() {
    use crate::vcenter::client::decode_reply;
    use crate::vcenter::model::error::RestErrorKind;
    use reqwest::StatusCode;
    const CANARY: &str = "secret-intranet-page";
    let html = format!("<html><body><p>{CANARY}<br></body></html>");
    let fault = format!(
        r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>{CANARY}</faultstring><detail><F xsi:type="InvalidLogin"/></detail></Fault></Body></Envelope>"#
    );
    let typed_fault = format!(
        r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>{CANARY}</faultstring><detail><F xsi:type="NoPermission"><privilegeId>VirtualMachine.Inventory.Create</privilegeId></F></detail></Fault></Body></Envelope>"#
    );
    let odd_type = format!(
        r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>x</faultstring><detail><F xsi:type="{CANARY} &lt;b&gt;"/></detail></Fault></Body></Envelope>"#
    );
    let server = "https://vc.example/sdk";
    let reply = |status: u16, body: &str| {
        let status = StatusCode::from_u16(status).unwrap();
        decode_reply(server, "alice@corp.example", "Login", status, body).unwrap_err()
    };
    let rest = Error::Rest {
        server: server.into(),
        operation: "get tag".into(),
        kind: RestErrorKind::Other(format!("{CANARY} <script>")),
        detail: CANARY.into(),
    };
    let cases: Vec<(Error, &str)> = vec![
        (
            reply(502, &html),
            "vCenter https://vc.example/sdk answered Login with HTTP 502",
        ),
        (reply(500, &html), "HTTP 500"),
        (
            reply(200, &html),
            "cannot decode the answer of vCenter https://vc.example/sdk to Login",
        ),
        (reply(200, CANARY), "cannot decode"),
        (
            reply(500, &fault),
            "vCenter https://vc.example/sdk rejected the login: wrong user name or password",
        ),
        (
            reply(500, &typed_fault),
            "Login on vCenter https://vc.example/sdk failed: NoPermission: privilege VirtualMachine.Inventory.Create is missing",
        ),
        (reply(500, &odd_type), "failed: an unrecognised fault"),
        (
            rest,
            "get tag on vCenter https://vc.example/sdk failed: an unrecognised error type",
        ),
    ];
    for (error, shown) in cases {
        let kept = error.server_text().is_some() || matches!(error, Error::InvalidLogin { .. });
        let failure = Failure::vcenter(Some("cloning VM m-0"), error);
        let msg = failure.message();
        assert!(msg.contains(shown), "want {shown:?} in {msg:?}");
        for leak in [CANARY, "alice", "<p>", "<html"] {
            assert!(!msg.contains(leak), "{leak:?} in {msg:?}");
        }
        assert!(kept, "the log keeps the server's text: {msg}");
    }
    assert_eq!(escaped("a\nb\u{1b}[31m\r"), "a\\nb\\u{1b}[31m\\r");
}

#[test]
fn context_prefixes_the_message_and_keeps_the_cause() {
    let f = Failure::vcenter(
        Some("create tag t"),
        Error::Unreachable {
            server: "vc".into(),
            reason: "refused".into(),
        },
    );
    assert_eq!(
        f.to_string(),
        "create tag t: cannot connect to vCenter vc: refused"
    );
    let f = f.context("zone a");
    assert!(f.starts_with("zone a: create tag t"));
    assert!(matches!(f.cause(), Cause::Vcenter(_)));
    assert_eq!(f.retry(), Retry::Later);
}
