//! `vsphere-provider doctor`: check a vCenter step by step (address, connection and TLS, service
//! content and API version, login, session, REST tagging) and explain the first failure of each
//! class in one line an admin can act on.
use super::out::{errln, outln};
use std::process::ExitCode;
use std::sync::Arc;

use super::connect::ConnectArgs;
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::vcenter::model::trust::Thumbprint;
use crate::vcenter::tls;
use crate::vcenter::{Client, Endpoint, Error, Stats, TlsPolicy};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// One line of the report.
fn ok(check: &str, detail: impl std::fmt::Display) {
    outln!("ok    {check:<10} {detail}");
}

fn fail(check: &str, detail: impl std::fmt::Display) {
    outln!("FAIL  {check:<10} {detail}");
}

pub async fn run(mut args: Args) -> ExitCode {
    args.connect = args.connect.normalized();
    let stats = Stats::default();
    let client = match args.connect.client(stats.clone()) {
        Ok(c) => c,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let failed = check(&client).await;
    if client.has_session().await
        && let Err(e) = client.logout().await
    {
        tracing::warn!(error = %e, "logout failed");
    }
    // The summary names itself ("7 round trips (…)"); a prefix would say it twice.
    outln!("{}", stats.snapshot().summary());
    if failed {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs the checks in order; returns whether one failed. Later checks need earlier ones, so the
/// first failure ends the run, except tagging, which is reported on its own.
async fn check(client: &Client) -> bool {
    let endpoint = client.endpoint().clone();
    ok("address", endpoint.sdk_url());

    let content = match client.service_content().await {
        Ok(c) => c.clone(),
        Err(e) => {
            explain_connect_failure(&endpoint, &e).await;
            return true;
        }
    };
    ok("connect", trust_description(&endpoint, client.tls_policy()));
    let about = &content.about;
    ok(
        "vcenter",
        format!(
            "{} (API {}, {})",
            about.full_name, about.api_version, about.api_type
        ),
    );

    if let Err(e) = client.login().await {
        match e {
            Error::InvalidLogin { .. } => fail("login", &e),
            other => fail("login", other),
        }
        return true;
    }
    ok("login", format!("as {}", client.username()));

    match client.current_time().await {
        Ok(t) => ok("session", format!("active (server time {t})")),
        Err(e) => {
            fail("session", e);
            return true;
        }
    }

    match tagging(client).await {
        Ok(detail) => ok("tagging", detail),
        Err(e) => {
            fail(
                "tagging",
                format!("{e} (failure domains need the vSphere tagging API)"),
            );
            return true;
        }
    }
    false
}

async fn tagging(client: &Client) -> crate::vcenter::Result<String> {
    let dialect = client.rest_dialect().await?;
    let categories = client.list_categories().await?;
    let path = match dialect {
        crate::vcenter::rest::Dialect::Api => "/api",
        crate::vcenter::rest::Dialect::Rest => "/rest",
    };
    Ok(format!(
        "REST {path} answers, {} tag categories",
        categories.len()
    ))
}

fn trust_description(endpoint: &Endpoint, policy: &TlsPolicy) -> String {
    if !endpoint.is_https() {
        return "plain HTTP (no TLS)".into();
    }
    match policy {
        TlsPolicy::System => "TLS verified against the system CA roots".into(),
        TlsPolicy::CaFile(f) => format!("TLS verified against {}", f.display()),
        TlsPolicy::Thumbprint(t) => format!("TLS certificate pinned by thumbprint {t}"),
        TlsPolicy::Insecure => "TLS NOT verified (--insecure)".into(),
    }
}

async fn explain_connect_failure(endpoint: &Endpoint, e: &Error) {
    match e {
        Error::TlsHandshake { reason, .. } if speaks_plain_http(endpoint, reason) => {
            // Not the generic TLS error: its advice (--thumbprint, --insecure) cannot help.
            fail(
                "tls",
                format!("{endpoint} did not answer in TLS ({reason})"),
            );
            let host = endpoint.host();
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            outln!(
                "      the server may speak plain http; try --server http://{host}:{}",
                endpoint.port()
            );
        }
        Error::TlsHandshake { .. } => {
            fail("tls", e);
            if let Some(cert) = presented_certificate(endpoint).await {
                outln!(
                    "      the server presents a certificate with SHA-256 thumbprint {}",
                    Thumbprint::sha256_of(&cert)
                );
                outln!("      if you trust it, pass --thumbprint with that value");
            }
        }
        Error::Unreachable { .. } => fail("connect", e),
        Error::Http { status: 404, .. } | Error::Decode { .. } => fail(
            "connect",
            format!(
                "{e} (is this a vCenter? nothing answers SOAP at {})",
                endpoint.sdk_url()
            ),
        ),
        _ => fail("connect", e),
    }
}

/// Whether a TLS handshake failed because the answer was not TLS at all: rustls reads the
/// first bytes of an HTTP response as a record of an invalid content type. Nothing but plain
/// HTTP answers a TLS hello that way in practice, and the message alone says nothing of it.
fn speaks_plain_http(endpoint: &Endpoint, reason: &str) -> bool {
    endpoint.is_https() && reason.contains("InvalidContentType")
}

/// Connect once without verification to learn which certificate the server presents.
async fn presented_certificate(endpoint: &Endpoint) -> Option<Vec<u8>> {
    let slot: tls::CertSlot = Arc::default();
    let config = tls::recording_config(slot.clone()).ok()?;
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .ok()?;
    let _ = http
        .get(endpoint.join("sdk/vimServiceVersions.xml"))
        .send()
        .await;
    slot.lock().ok()?.clone()
}
