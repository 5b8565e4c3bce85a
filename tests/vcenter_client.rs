//! The vCenter client against a live vcsim: every call, every fault class, round-trip bounds.
//! Where vcsim differs from real vCenter (vcenter-wire.md §11) the test says so.
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use secrecy::SecretString;
use vcsim::{FaultKind, FaultSpec, Vcsim};
use vsphere_provider::plan::failure::Failure;
use vsphere_provider::vcenter::model::cluster::{
    ClusterGroup, GroupChange, RuleChange, VmHostRule,
};
use vsphere_provider::vcenter::model::error::RestErrorKind;
use vsphere_provider::vcenter::model::fault::FaultKind as VFault;
use vsphere_provider::vcenter::model::tags::CategorySpec;
use vsphere_provider::vcenter::model::task::TaskState;
use vsphere_provider::vcenter::model::trust::Thumbprint;
use vsphere_provider::vcenter::model::vm::CloneSpec;
use vsphere_provider::vcenter::{
    Client, ClientOptions, Credentials, Error, MoRef, RetryPolicy, TlsPolicy, Wanted,
};

fn creds(user: &str, password: &str) -> Credentials {
    Credentials::new(user, SecretString::from(password.to_string()))
}

fn fast_retry() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(50),
        },
        ..ClientOptions::default()
    }
}

/// The moref of the one object `query` names (the test fails if it does not resolve).
fn moref_of(inv: &vsphere_provider::vcenter::Inventory, wanted: Wanted, query: &str) -> MoRef {
    inv.find(wanted, query, None).unwrap().moref.clone()
}

fn client(sim: &Vcsim) -> Client {
    Client::new(sim.url(), creds("admin", "secret"), fast_retry()).unwrap()
}

#[tokio::test]
async fn inventory_matches_vcenter_for_several_topologies_in_at_most_5_round_trips() {
    for (dcs, clusters, hosts, pools, folders) in
        [(1, 1, 3, 0, 0), (2, 2, 2, 2, 0), (1, 3, 1, 1, 1)]
    {
        let sim = Vcsim::builder()
            .datacenters(dcs)
            .clusters(clusters)
            .hosts(hosts)
            .pools(pools)
            .folders(folders)
            .start()
            .await;
        let c = client(&sim);
        let inv = c.inventory().await.unwrap();
        c.logout().await.unwrap();
        let server = sim.stats().await;
        assert!(
            server.soap_total() <= 5,
            "inventory used {} SOAP calls: {:?}",
            server.soap_total(),
            server.soap
        );
        assert_eq!(
            server.soap_total(),
            c.stats().snapshot().total(),
            "our count = vcsim's count"
        );

        // Independent check 1: vcsim's own search index resolves every path we print to the
        // same object.
        let checker = client(&sim);
        for e in inv.iter() {
            let found = checker.find_by_inventory_path(&e.path).await.unwrap();
            assert_eq!(found.as_ref(), Some(&e.moref), "path {}", e.path);
        }
        // Independent check 2: a container view of every managed entity has the same members.
        let root = checker.service_content().await.unwrap().root_folder.clone();
        let all = checker
            .retrieve_view(&root, &["ManagedEntity"], "ManagedEntity", &["name"])
            .await
            .unwrap();
        let mut viewed: Vec<String> = all.iter().map(|o| o.moref().to_string()).collect();
        let mut ours: Vec<String> = inv.iter().map(|e| e.moref.to_string()).collect();
        viewed.sort();
        ours.sort();
        assert_eq!(ours, viewed, "topology dc={dcs} clusters={clusters}");
        let expected_clusters = (dcs * clusters) as usize;
        assert_eq!(
            inv.all(Wanted::ComputeCluster, None).len(),
            expected_clusters
        );
        assert_eq!(
            inv.all(Wanted::Host, None).len(),
            (dcs * clusters * hosts + dcs) as usize,
            "cluster hosts plus one standalone host per datacenter"
        );
    }
}

#[tokio::test]
async fn inventory_cost_does_not_grow_with_size() {
    let small = Vcsim::builder().clusters(1).hosts(1).vms(1).start().await;
    let large = Vcsim::builder()
        .clusters(6)
        .hosts(4)
        .pools(3)
        .vms(3)
        .start()
        .await;
    let mut costs = Vec::new();
    for sim in [&small, &large] {
        let c = client(sim);
        let inv = c.inventory().await.unwrap();
        assert!(!inv.is_empty());
        costs.push(c.stats().snapshot().total());
    }
    assert_eq!(
        costs[0], costs[1],
        "round trips are independent of inventory size"
    );
    assert_eq!(costs[0], 3, "service content + login + one bulk read");
}

#[tokio::test]
async fn inventory_cli_prints_type_and_path_sorted() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
        .args(["inventory", "--server", sim.url()])
        .env("VSPHERE_USERNAME", "admin")
        .env("VSPHERE_PASSWORD", "secret")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.contains(&"ResourcePool\t/DC0/host/DC0_C0/Resources/DC0_C0_RP1"),
        "{text}"
    );
    assert!(lines.contains(&"Datacenter\t/DC0"));
    assert_eq!(lines[0], "Folder\t/", "the root folder is listed first");
    let paths: Vec<&str> = lines
        .iter()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("4 round trips"), "{stderr}");
    assert_eq!(
        sim.stats().await.soap_total(),
        4,
        "service content, login, bulk read, logout"
    );
}

#[tokio::test]
async fn an_expired_session_is_reestablished_without_the_caller_noticing() {
    let sim = Vcsim::start_default().await;
    let c = client(&sim);
    c.login().await.unwrap();
    let expired = sim.expire_sessions().await;
    assert!(expired.soap >= 1);
    let dc = c.find_by_inventory_path("/DC0").await.unwrap();
    assert!(dc.is_some());
    let stats = sim.stats().await;
    assert_eq!(stats.soap("Login"), 2, "one re-login");
    assert_eq!(
        stats.soap("FindByInventoryPath"),
        2,
        "the call is repeated once"
    );
}

#[tokio::test]
async fn idle_timeout_expiry_is_reestablished_too() {
    let sim = Vcsim::builder()
        .idle_timeout(Duration::from_millis(500))
        .start()
        .await;
    let c = client(&sim);
    c.current_time().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    c.current_time().await.unwrap();
    assert_eq!(sim.stats().await.soap("Login"), 2);
}

#[tokio::test]
async fn unauthenticated_property_reads_relogin_like_the_fault() {
    // vcsim answers an unauthenticated RetrievePropertiesEx with NotAuthenticated in every
    // missingSet instead of a fault (real vCenter faults); both must lead to one re-login.
    let sim = Vcsim::start_default().await;
    let c = client(&sim);
    c.login().await.unwrap();
    sim.expire_sessions().await;
    let inv = c.inventory().await.unwrap();
    assert!(!inv.is_empty());
    assert_eq!(sim.stats().await.soap("Login"), 2);
}

#[tokio::test]
async fn injected_not_authenticated_is_followed_by_exactly_one_relogin() {
    let sim = Vcsim::start_default().await;
    let c = client(&sim);
    c.login().await.unwrap();
    sim.inject(FaultSpec::new(FaultKind::NotAuthenticated).method("CurrentTime"))
        .await;
    c.current_time().await.unwrap();
    assert_eq!(sim.stats().await.soap("Login"), 2);

    // If the fresh session is rejected too, the caller gets the fault, not a loop.
    sim.inject(
        FaultSpec::new(FaultKind::NotAuthenticated)
            .method("CurrentTime")
            .count(5),
    )
    .await;
    let err = c.current_time().await.unwrap_err();
    assert!(
        err.fault().is_some_and(|f| f.is_not_authenticated()),
        "{err}"
    );
    assert_eq!(
        sim.stats().await.soap("Login"),
        3,
        "one more login, no storm"
    );
}

/// The message of a rejected login (what every object acting with these credentials shows in
/// its conditions) names the server and the cause, never the user name: that may be the
/// manager's account or another tenant's identity.
#[tokio::test]
async fn wrong_credentials_give_one_clear_error_and_no_retry_storm() {
    let sim = Vcsim::builder()
        .credentials("svc-tenant-b", "right-password")
        .start()
        .await;
    let c = Client::new(
        sim.url(),
        creds("svc-tenant-b", "wrong-password-123"),
        fast_retry(),
    )
    .unwrap();
    for _ in 0..3 {
        let err = c.inventory().await.unwrap_err();
        assert!(matches!(err, Error::InvalidLogin { .. }), "{err}");
        let msg = Failure::from(err).message().to_string();
        assert!(
            msg.contains("127.0.0.1") && msg.contains("wrong user name or password"),
            "{msg}"
        );
        assert!(!msg.contains("svc-tenant-b"), "no user name: {msg}");
        assert!(!msg.contains("wrong-password-123"));
    }
    assert_eq!(
        sim.stats().await.soap("Login"),
        1,
        "a rejected login is not repeated"
    );
}

/// A host on loopback that is no vCenter: every request gets `status`, `content_type` and
/// `body`, as an internal service a tenant names as its server would answer. Returns its URL.
async fn answering(status: &'static str, content_type: &'static str, body: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                // Read the request (head, then Content-Length bytes of body), then answer once.
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + length {
                        break;
                    }
                }
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// A server name comes from objects tenants write, so it may be any host the manager reaches.
/// Whatever that host answers — an HTML error page, garbage with 200, a SOAP fault of its own —
/// the message conditions and events show is the fixed description (server, method, HTTP
/// status, fault type); the host's text is kept for the manager's debug log only.
#[tokio::test]
async fn what_a_host_that_is_no_vcenter_answers_never_reaches_the_message() {
    const CANARY: &str = "internal-admin-panel token=9f8e7d";
    let html = format!(
        "<!DOCTYPE html><html><head><title>Intranet</title></head><body><h1>{CANARY}</h1><br>\n\x1b[31mred</body></html>"
    );
    let soap_fault = format!(
        r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>{CANARY}</faultstring><detail><SystemErrorFault xsi:type="SystemError"><reason>{CANARY}</reason></SystemErrorFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#
    );
    // (status, content type, body, what the message shows, whether the log gets the body)
    let cases: [(&str, &str, String, &str, bool); 5] = [
        (
            "502 Bad Gateway",
            "text/html",
            html.clone(),
            "HTTP 502",
            true,
        ),
        (
            "500 Internal Server Error",
            "text/html",
            html.clone(),
            "HTTP 500",
            true,
        ),
        (
            "403 Forbidden",
            "text/plain",
            CANARY.to_string(),
            "HTTP 403",
            true,
        ),
        ("200 OK", "text/html", html.clone(), "cannot decode", false),
        (
            "500 Internal Server Error",
            "text/xml",
            soap_fault,
            "SystemError",
            true,
        ),
    ];
    for (status, content_type, body, shown, logged) in cases {
        let url = answering(status, content_type, body).await;
        let c = Client::new(&url, creds("svc-tenant-b", "pw"), fast_retry()).unwrap();
        let err = c.login().await.unwrap_err();
        if logged {
            let raw = err.server_text().unwrap_or_default();
            assert!(raw.contains(CANARY), "{status}: kept for the log: {raw:?}");
        }
        let failure = Failure::from(err);
        let msg = failure.message();
        assert!(
            msg.contains(shown)
                && msg.contains("127.0.0.1")
                && msg.contains("RetrieveServiceContent"),
            "{status}: {msg}"
        );
        for leak in [CANARY, "Intranet", "<h1>", "\x1b", "svc-tenant-b"] {
            assert!(!msg.contains(leak), "{status}: {leak:?} in {msg:?}");
        }
    }
}

/// Issue 42 N5: the session cache keys by the credentials, not the user name alone. A second
/// caller naming the manager's user with a wrong password fails its own login; the manager's
/// session is neither replaced nor logged out.
#[tokio::test]
async fn a_wrong_password_for_a_cached_user_leaves_that_users_session_alone() {
    use vsphere_provider::vcenter::Stats;
    use vsphere_provider::vcenter::session::SessionCache;
    let sim = Vcsim::builder()
        .credentials("admin", "right-password")
        .start()
        .await;
    let sessions = SessionCache::new(Stats::default(), fast_retry());
    let manager = sessions
        .client(
            sim.url(),
            &creds("admin", "right-password"),
            TlsPolicy::System,
        )
        .unwrap();
    manager.current_time().await.unwrap();
    let tenant = sessions
        .client(
            sim.url(),
            &creds("admin", "wrong-password"),
            TlsPolicy::System,
        )
        .unwrap();
    let err = tenant.current_time().await.unwrap_err();
    assert!(matches!(err, Error::InvalidLogin { .. }), "{err}");
    let again = sessions
        .client(
            sim.url(),
            &creds("admin", "right-password"),
            TlsPolicy::System,
        )
        .unwrap();
    assert!(
        again.has_session().await,
        "the manager's client is still logged in"
    );
    again.current_time().await.unwrap();
    manager.current_time().await.unwrap();
    // Logouts of dropped clients run in the background: give one the time to arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = sim.stats().await;
    assert_eq!(stats.soap("Logout"), 0, "no session was logged out");
    assert_eq!(
        stats.soap("Login"),
        2,
        "the manager's one login and the refused one"
    );
}

#[tokio::test]
async fn transient_503s_are_retried_within_a_bound() {
    let sim = Vcsim::start_default().await;
    let c = client(&sim);
    c.login().await.unwrap();
    sim.inject(
        FaultSpec::new(FaultKind::Http503)
            .method("FindByInventoryPath")
            .count(2),
    )
    .await;
    assert!(c.find_by_inventory_path("/DC0").await.unwrap().is_some());
    assert_eq!(sim.stats().await.soap("FindByInventoryPath"), 3);

    sim.reset_stats().await;
    sim.inject(
        FaultSpec::new(FaultKind::Http503)
            .method("FindByInventoryPath")
            .count(50),
    )
    .await;
    let err = c.find_by_inventory_path("/DC0").await.unwrap_err();
    assert!(matches!(err, Error::Http { status: 503, .. }), "{err}");
    assert!(err.is_transient());
    assert_eq!(
        sim.stats().await.soap("FindByInventoryPath"),
        3,
        "attempts are bounded"
    );
    sim.clear_faults().await;
}

#[tokio::test]
async fn dropped_connections_are_retried_for_reads_but_not_for_writes() {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    let c = client(&sim);
    let inv = c.inventory().await.unwrap();
    sim.inject(FaultSpec::new(FaultKind::Drop).method("FindByInventoryPath"))
        .await;
    assert!(c.find_by_inventory_path("/DC0/vm").await.unwrap().is_some());

    let vm = inv
        .find(Wanted::VirtualMachine, "DC0_C0_RP0_VM0", None)
        .unwrap();
    sim.inject(FaultSpec::new(FaultKind::Drop).method("PowerOffVM_Task"))
        .await;
    let err = c.power_off_vm(&vm.moref).await.unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err}");
    assert_eq!(
        sim.stats().await.soap("PowerOffVM_Task"),
        1,
        "a write whose fate is unknown is not re-sent"
    );
}

#[tokio::test]
async fn unreachable_servers_fail_fast_with_the_cause() {
    // A port nothing listens on.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let c = Client::new(
        &format!("http://127.0.0.1:{port}"),
        creds("a", "b"),
        fast_retry(),
    )
    .unwrap();
    let err = c.login().await.unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert!(err.to_string().to_lowercase().contains("refused"), "{err}");
    assert_eq!(c.requests_sent(), 3, "bounded retries");
}

#[tokio::test]
async fn tls_is_verified_by_default_and_trust_can_be_pinned() {
    let sim = Vcsim::builder().tls(true).start().await;
    assert!(sim.url().starts_with("https://"));
    let with = |tls: TlsPolicy| {
        Client::new(
            sim.url(),
            creds("admin", "secret"),
            ClientOptions {
                tls,
                retry: RetryPolicy::none(),
                ..ClientOptions::default()
            },
        )
        .unwrap()
    };
    let err = with(TlsPolicy::System).login().await.unwrap_err();
    assert!(matches!(err, Error::TlsHandshake { .. }), "{err}");

    let sha256 = Thumbprint::parse(&sim.thumbprint_sha256().unwrap()).unwrap();
    with(TlsPolicy::Thumbprint(sha256)).login().await.unwrap();
    let sha1 = Thumbprint::parse(&sim.thumbprint_sha1().unwrap()).unwrap();
    with(TlsPolicy::Thumbprint(sha1)).login().await.unwrap();

    let wrong = Thumbprint::parse(&"00".repeat(32)).unwrap();
    let err = with(TlsPolicy::Thumbprint(wrong))
        .login()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TlsHandshake { .. }), "{err}");
    assert!(err.to_string().contains("mismatch"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, sim.cert_pem().unwrap()).unwrap();
    with(TlsPolicy::CaFile(ca)).login().await.unwrap();
    with(TlsPolicy::Insecure).login().await.unwrap();
}

#[tokio::test]
async fn stock_vcsim_legacy_certificates_work_with_insecure_and_explain_pinning() {
    // Old servers (and stock govmomi 0.24.2 vcsim) serve an RSA-1024 certificate; ring cannot
    // verify signatures made with it. hack/vcsim -tls-legacy-cert generates one (current vcsim's
    // built-in certificate is RSA-2048). --insecure (no verification) must still connect;
    // pinning must say why not.
    let sim = Vcsim::builder()
        .tls(true)
        .tls_legacy_cert(true)
        .start()
        .await;
    let with = |tls: TlsPolicy| {
        Client::new(
            sim.url(),
            creds("admin", "secret"),
            ClientOptions {
                tls,
                retry: RetryPolicy::none(),
                ..ClientOptions::default()
            },
        )
        .unwrap()
    };
    with(TlsPolicy::Insecure).inventory().await.unwrap();
    let pin = Thumbprint::parse(&sim.thumbprint_sha256().unwrap()).unwrap();
    let err = with(TlsPolicy::Thumbprint(pin)).login().await.unwrap_err();
    assert!(matches!(err, Error::TlsHandshake { .. }), "{err}");
    assert!(err.to_string().contains("too weak"), "{err}");
}

#[tokio::test]
async fn search_index_lookups_and_faults() {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    let c = client(&sim);
    let cluster = c
        .find_by_inventory_path("DC0/host/DC0_C0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cluster.kind, "ClusterComputeResource");
    assert_eq!(
        c.find_by_inventory_path("DC0/host/nope").await.unwrap(),
        None
    );

    let inv = c.inventory().await.unwrap();
    let vm = inv
        .find(Wanted::VirtualMachine, "DC0_C0_RP0_VM0", None)
        .unwrap();
    let uuid = vm.vm.as_ref().unwrap().instance_uuid.clone().unwrap();
    assert_eq!(
        c.find_vm_by_uuid(&uuid, true).await.unwrap().as_ref(),
        Some(&vm.moref)
    );
    assert_eq!(
        inv.vm_by_instance_uuid(&uuid).map(|e| &e.moref),
        Some(&vm.moref)
    );
    assert_eq!(
        c.find_vm_by_uuid("00000000-0000-0000-0000-000000000000", true)
            .await
            .unwrap(),
        None
    );
    // FindAllByUuid: every VM with the UUID (vcsim has it since govmomi 0.52; 0.24.2 answered
    // MethodNotFound).
    assert_eq!(
        c.find_all_vms_by_uuid(&uuid, true).await.unwrap(),
        vec![vm.moref.clone()]
    );
    assert_eq!(
        c.find_all_vms_by_uuid("00000000-0000-0000-0000-000000000000", true)
            .await
            .unwrap(),
        Vec::<MoRef>::new()
    );

    // Reading a missing object is a typed ManagedObjectNotFound naming it.
    let ghost = MoRef::new("VirtualMachine", "vm-99999");
    let err = c.retrieve_one(&ghost, &["name"]).await.unwrap_err();
    match err.fault().map(|f| &f.kind) {
        Some(VFault::ManagedObjectNotFound { obj }) => assert_eq!(obj.as_ref(), Some(&ghost)),
        other => panic!("{other:?}: {err}"),
    }
    assert!(c.session_is_active().await.unwrap());
}

#[tokio::test]
async fn cluster_groups_and_rules_add_edit_remove() {
    let sim = Vcsim::builder().clusters(1).hosts(2).start().await;
    let c = client(&sim);
    let inv = c.inventory().await.unwrap();
    let cluster = moref_of(&inv, Wanted::ComputeCluster, "DC0_C0");
    let hosts: Vec<MoRef> = inv
        .hosts_of(&cluster)
        .iter()
        .map(|h| h.moref.clone())
        .collect();
    let wait = Duration::from_secs(10);

    let t = c
        .reconfigure_cluster(
            &cluster,
            &[],
            &[
                GroupChange::Add(ClusterGroup::Host {
                    name: "zone-a-hosts".into(),
                    hosts: hosts.clone(),
                }),
                GroupChange::Add(ClusterGroup::Vm {
                    name: "zone-a-vms".into(),
                    vms: vec![],
                }),
            ],
        )
        .await
        .unwrap();
    c.wait_task(&t, wait).await.unwrap();
    let rule = VmHostRule {
        name: "zone-a-affinity".into(),
        enabled: true,
        mandatory: false,
        vm_group: "zone-a-vms".into(),
        affine_host_group: Some("zone-a-hosts".into()),
        ..VmHostRule::default()
    };
    let t = c
        .reconfigure_cluster(&cluster, &[RuleChange::Add(rule.clone())], &[])
        .await
        .unwrap();
    c.wait_task(&t, wait).await.unwrap();

    let cfg = c.cluster_config(&cluster).await.unwrap();
    match cfg.group("zone-a-hosts") {
        Some(ClusterGroup::Host { hosts: h, .. }) => assert_eq!(h, &hosts),
        other => panic!("{other:?}"),
    }
    let read = cfg
        .vm_host_rules()
        .find(|r| r.name == "zone-a-affinity")
        .unwrap()
        .clone();
    let key = read.key.expect("the server assigns a key");
    assert_eq!(read.vm_group, "zone-a-vms");
    assert!(read.enabled && !read.mandatory);

    // A duplicate add fails the task (vcsim: InvalidArgument without fields).
    let t = c
        .reconfigure_cluster(&cluster, &[RuleChange::Add(rule.clone())], &[])
        .await
        .unwrap();
    let err = c.wait_task(&t, wait).await.unwrap_err();
    assert!(matches!(err, Error::Task { .. }), "{err}");

    // Edit with the existing key and name: make it mandatory.
    let edited = VmHostRule {
        key: Some(key),
        mandatory: true,
        ..read.clone()
    };
    let t = c
        .reconfigure_cluster(&cluster, &[RuleChange::Edit(edited)], &[])
        .await
        .unwrap();
    c.wait_task(&t, wait).await.unwrap();
    let cfg = c.cluster_config(&cluster).await.unwrap();
    assert!(
        cfg.vm_host_rules()
            .find(|r| r.name == "zone-a-affinity")
            .unwrap()
            .mandatory
    );

    // Group edit replaces members.
    let t = c
        .reconfigure_cluster(
            &cluster,
            &[],
            &[GroupChange::Edit(ClusterGroup::Host {
                name: "zone-a-hosts".into(),
                hosts: hosts[..1].to_vec(),
            })],
        )
        .await
        .unwrap();
    c.wait_task(&t, wait).await.unwrap();

    let t = c
        .reconfigure_cluster(
            &cluster,
            &[RuleChange::Remove(key)],
            &[
                GroupChange::Remove("zone-a-vms".into()),
                GroupChange::Remove("zone-a-hosts".into()),
            ],
        )
        .await
        .unwrap();
    c.wait_task(&t, wait).await.unwrap();
    let cfg = c.cluster_config(&cluster).await.unwrap();
    assert!(cfg.groups.is_empty() && cfg.rules.is_empty(), "{cfg:?}");
}

/// A full clone named `name` into `folder` and `pool`, powered off (to power it on in the test:
/// vcsim honours powerOn like real vCenter since govmomi 0.56; 0.24.2 ignored it), with nothing
/// else set.
fn plain_clone(name: &str, folder: MoRef, pool: MoRef) -> CloneSpec {
    CloneSpec {
        name: name.into(),
        folder,
        pool: Some(pool),
        instance_uuid: None,
        extra_config: Vec::new(),
        nics: Vec::new(),
        disk_resize: None,
        data_disks: Vec::new(),
        linked_clone: None,
        power_on: false,
        datastore: None,
        host: None,
        annotation: None,
        num_cpus: None,
        num_cores_per_socket: None,
        memory_mb: None,
    }
}

/// A vcsim with a child pool, a client, and a VM to clone with the folder and pool to clone it
/// into. With a child pool, vcsim puts the cluster's VMs there (`DC0_C0_RP1_VM*`), not in
/// `Resources`.
async fn clone_setup() -> (Vcsim, Client, MoRef, MoRef, MoRef) {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let c = client(&sim);
    let inv = c.inventory().await.unwrap();
    let source = moref_of(&inv, Wanted::VirtualMachine, "DC0_C0_RP1_VM0");
    let folder = moref_of(&inv, Wanted::Folder, "/DC0/vm");
    let pool = moref_of(&inv, Wanted::ResourcePool, "DC0_C0_RP1");
    (sim, c, source, folder, pool)
}

#[tokio::test]
async fn vm_clone_power_and_destroy() {
    let (_sim, c, source, folder, pool) = clone_setup().await;
    let uuid = "5029d0b0-1111-2222-3333-444455556666";
    let wait = Duration::from_secs(10);

    let task = c
        .clone_vm(
            &source,
            &CloneSpec {
                instance_uuid: Some(uuid.into()),
                extra_config: vec![("guestinfo.role".into(), "master".into())],
                ..plain_clone("machine-0", folder, pool.clone())
            },
        )
        .await
        .unwrap();
    let vm = c
        .wait_task(&task, wait)
        .await
        .unwrap()
        .expect("the clone in TaskInfo.result");
    assert!(matches!(
        c.task_state(&task).await.unwrap(),
        TaskState::Success { .. }
    ));
    let inv = c.inventory().await.unwrap();
    let e = inv.get(&vm).unwrap();
    assert_eq!(e.path, "/DC0/vm/machine-0");
    assert_eq!(e.vm.as_ref().unwrap().instance_uuid.as_deref(), Some(uuid));
    assert_eq!(e.vm.as_ref().unwrap().resource_pool.as_ref(), Some(&pool));

    let on = c.power_on_vm(&vm).await.unwrap();
    c.wait_task(&on, wait).await.unwrap();
    let again = c.power_on_vm(&vm).await.unwrap();
    let err = c.wait_task(&again, wait).await.unwrap_err();
    assert_eq!(
        err.fault().map(|f| &f.kind),
        Some(&VFault::InvalidPowerState),
        "{err}"
    );

    let off = c.power_off_vm(&vm).await.unwrap();
    c.wait_task(&off, wait).await.unwrap();
    let gone = c.destroy(&vm).await.unwrap();
    c.wait_task(&gone, wait).await.unwrap();
    let err = c.retrieve_one(&vm, &["name"]).await.unwrap_err();
    assert!(matches!(
        err.fault().map(|f| &f.kind),
        Some(VFault::ManagedObjectNotFound { .. })
    ));
}

/// Markup and quotes in a VM name and an extraConfig value reach vCenter (vcsim's Go XML
/// stack) as text and come back unchanged; a character XML cannot carry is refused before
/// anything is sent.
#[tokio::test]
async fn markup_in_names_and_values_reaches_vcenter_as_text() {
    let (sim, c, source, folder, pool) = clone_setup().await;
    let name = r#"m<0> & "q" 'a' ]]> ☃"#;
    let value = "<value>&amp;]]>\r\n\t\"'</value>";
    let key = "guestinfo.weird";
    let task = c
        .clone_vm(
            &source,
            &CloneSpec {
                extra_config: vec![(key.into(), value.into())],
                ..plain_clone(name, folder, pool)
            },
        )
        .await
        .unwrap();
    let vm = c
        .wait_task(&task, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the clone");
    assert_eq!(
        c.find_by_inventory_path(&format!("DC0/vm/{name}"))
            .await
            .unwrap(),
        Some(vm.clone())
    );
    let path = format!(r#"config.extraConfig["{key}"]"#);
    let props = c.retrieve_one(&vm, &["name", &path]).await.unwrap();
    assert_eq!(props.string_prop("name", &[]).unwrap(), Some(name));
    assert_eq!(props.option_value_prop(&path).unwrap(), Some(value));

    let before = sim.stats().await.soap("FindByInventoryPath");
    let err = c
        .find_by_inventory_path("DC0/vm/a\u{1}b")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "FindByInventoryPath was not sent to vCenter {}: the text of <inventoryPath> has the character U+0001, which XML 1.0 cannot carry",
            c.server()
        )
    );
    assert_eq!(
        sim.stats().await.soap("FindByInventoryPath"),
        before,
        "nothing was sent"
    );
}

#[tokio::test]
async fn tagging_categories_tags_and_attachments() {
    let sim = Vcsim::builder().clusters(2).hosts(1).start().await;
    let c = client(&sim);
    let inv = c.inventory().await.unwrap();
    let dc = moref_of(&inv, Wanted::Datacenter, "DC0");
    let c0 = moref_of(&inv, Wanted::ComputeCluster, "DC0_C0");
    let c1 = moref_of(&inv, Wanted::ComputeCluster, "DC0_C1");

    let spec = CategorySpec {
        name: "k8s-zone".into(),
        description: "zones".into(),
        cardinality: "SINGLE".into(),
        associable_types: vec!["ClusterComputeResource".into()],
    };
    let cat = c.create_category(&spec).await.unwrap();
    let err = c.create_category(&spec).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Rest {
                kind: RestErrorKind::AlreadyExists,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(c.list_categories().await.unwrap(), vec![cat.clone()]);
    let got = c.get_category(&cat).await.unwrap();
    assert_eq!(got.name, "k8s-zone");
    assert_eq!(got.associable_types, vec!["ClusterComputeResource"]);
    c.update_category_types(
        &cat,
        &["ClusterComputeResource".into(), "Datacenter".into()],
    )
    .await
    .unwrap();
    assert_eq!(
        c.get_category(&cat).await.unwrap().associable_types.len(),
        2
    );

    let tag = c.create_tag("zone-a", &cat, "").await.unwrap();
    assert_eq!(
        c.list_tags_for_category(&cat).await.unwrap(),
        vec![tag.clone()]
    );
    let t = c.get_tag(&tag).await.unwrap();
    assert_eq!(
        (t.name.as_str(), t.category_id.as_str()),
        ("zone-a", cat.as_str())
    );

    c.attach_tag(&tag, &c0).await.unwrap();
    c.attach_tag(&tag, &c0).await.unwrap(); // attaching twice is a no-op
    assert_eq!(c.list_attached_tags(&c0).await.unwrap(), vec![tag.clone()]);
    assert_eq!(
        c.list_attached_objects(&tag).await.unwrap(),
        vec![c0.clone()]
    );
    let on = c
        .list_attached_tags_on_objects(&[dc.clone(), c0.clone(), c1.clone()])
        .await
        .unwrap();
    let tags_of = |m: &MoRef| {
        on.iter()
            .find(|(o, _)| o == m)
            .map(|(_, t)| t.clone())
            .unwrap()
    };
    assert_eq!(tags_of(&c0), vec![tag.clone()]);
    assert!(tags_of(&c1).is_empty() && tags_of(&dc).is_empty());
    let by_tag = c
        .list_attached_objects_on_tags(std::slice::from_ref(&tag))
        .await
        .unwrap();
    assert_eq!(by_tag, vec![(tag.clone(), vec![c0.clone()])]);

    c.detach_tag(&tag, &c0).await.unwrap();
    assert!(c.list_attached_tags(&c0).await.unwrap().is_empty());

    let err = c
        .get_tag("urn:vmomi:InventoryServiceTag:00000000-0000-0000-0000-000000000000:GLOBAL")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Rest {
                kind: RestErrorKind::NotFound,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn rest_sessions_are_reestablished_once_on_401() {
    let sim = Vcsim::start_default().await;
    let c = client(&sim);
    c.list_categories().await.unwrap();
    sim.inject(FaultSpec::new(FaultKind::NotAuthenticated).method("tagging/category"))
        .await;
    c.list_categories().await.unwrap();
    let stats = sim.stats().await;
    // A REST-only server (vcsim reports API 6.5 < 7.0.2): /rest directly, again after the 401.
    assert_eq!(
        stats.rest_matching("POST /rest/com/vmware/cis/session"),
        2,
        "{:?}",
        stats.rest
    );
    assert_eq!(
        stats.rest_matching("/api/session"),
        0,
        "/api is not probed on a 6.5 server"
    );
}

#[tokio::test]
async fn logout_ends_both_sessions() {
    let sim = Vcsim::start_default().await;
    let c = client(&sim);
    c.login().await.unwrap();
    c.list_categories().await.unwrap();
    c.logout().await.unwrap();
    assert!(!c.has_session().await);
    let stats = sim.stats().await;
    assert_eq!(stats.soap("Logout"), 1);
    assert_eq!(
        stats.rest_matching("DELETE /rest/com/vmware/cis/session"),
        1
    );
    c.logout().await.unwrap(); // twice is fine
    assert_eq!(sim.stats().await.soap("Logout"), 1);
}

#[tokio::test]
async fn container_views_are_created_and_destroyed() {
    let sim = Vcsim::builder().clusters(2).hosts(1).start().await;
    let c = client(&sim);
    let root = c.service_content().await.unwrap().root_folder.clone();
    let clusters = c
        .retrieve_view(
            &root,
            &["ClusterComputeResource"],
            "ClusterComputeResource",
            &["name"],
        )
        .await
        .unwrap();
    let mut names: Vec<&str> = clusters.iter().map(|o| o.text("name").unwrap()).collect();
    names.sort();
    assert_eq!(names, ["DC0_C0", "DC0_C1"]);
    let stats = sim.stats().await;
    assert_eq!(stats.soap("CreateContainerView"), 1);
    assert_eq!(stats.soap("DestroyView"), 1);
}

#[tokio::test]
async fn doctor_reports_each_failure_class_in_one_line() {
    let run = |args: &[&str], password: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
            .arg("doctor")
            .args(args)
            .env("VSPHERE_USERNAME", "admin")
            .env("VSPHERE_PASSWORD", password)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let sim = Vcsim::builder().credentials("admin", "pw-ok").start().await;
    let (code, out) = run(&["--server", sim.url()], "pw-ok");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ok    tagging"), "{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.contains(" round trips (") && last.matches("round trips").count() == 1,
        "the last line counts the round trips, once: {out}"
    );

    let (code, out) = run(&["--server", sim.url()], "pw-bad-9876");
    assert_eq!(code, Some(1));
    assert!(
        out.contains("FAIL  login") && out.contains("wrong user name or password"),
        "{out}"
    );
    assert!(!out.contains("pw-bad-9876"));

    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let (code, out) = run(&["--server", &format!("http://127.0.0.1:{port}")], "x");
    assert_eq!(code, Some(1));
    assert!(
        out.contains("FAIL  connect") && out.to_lowercase().contains("refused"),
        "{out}"
    );

    let tls = Vcsim::builder().tls(true).start().await;
    let (code, out) = run(&["--server", tls.url()], "x");
    assert_eq!(code, Some(1));
    assert!(out.contains("FAIL  tls"), "{out}");
    assert!(
        out.contains(&tls.thumbprint_sha256().unwrap()),
        "shows the thumbprint to pin: {out}"
    );
    let (code, out) = run(
        &[
            "--server",
            tls.url(),
            "--thumbprint",
            &tls.thumbprint_sha256().unwrap(),
        ],
        "x",
    );
    assert_eq!(code, Some(0), "{out}");

    // A server without the tagging API: every REST call answers 503.
    let no_rest = Vcsim::start_default().await;
    no_rest
        .inject(
            FaultSpec::new(FaultKind::Http503)
                .method("/session")
                .count(1000),
        )
        .await;
    let (code, out) = run(&["--server", no_rest.url()], "x");
    assert_eq!(code, Some(1));
    assert!(out.contains("FAIL  tagging"), "{out}");

    let (code, _) = run(&[], "x");
    assert_eq!(code, Some(2), "missing --server is a usage error");
}

#[tokio::test]
async fn no_password_or_session_key_in_any_log_line() {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    let password = "Sup3r-Secret-Pa55";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
        .args(["--log-level", "trace", "doctor", "--server", sim.url()])
        .env("VSPHERE_USERNAME", "admin")
        .env("VSPHERE_PASSWORD", password)
        .output()
        .unwrap();
    assert!(out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("TRACE") || all.contains("DEBUG"),
        "trace logging is on"
    );
    assert!(!all.contains(password), "the password leaked");
}

/// A log sink shared with a test.
#[derive(Clone, Default)]
struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_session_key_in_any_log_line() {
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    // Other tests of this binary run on other threads with no subscriber. One of them can register
    // a client log callsite (e.g. "logged in") while this thread-local subscriber is being
    // registered, and cache a "never" interest that hides the event from it (a flake seen when
    // the tests overlap). By now those first registrations are over: recompute their interest.
    tracing::callsite::rebuild_interest_cache();
    let c = client(&sim);
    c.inventory().await.unwrap();
    c.list_categories().await.unwrap();
    sim.expire_sessions().await;
    c.current_time().await.unwrap();
    let sm = c.service_content().await.unwrap().session_manager.clone();
    let sess = c.retrieve_one(&sm, &["sessionList"]).await.unwrap();
    let keys: Vec<String> = sess
        .props
        .get("sessionList")
        .map(|v| {
            v.children
                .iter()
                .filter_map(|s| s.child_text("key").map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert!(!keys.is_empty(), "vcsim lists our live session");
    let logs = String::from_utf8_lossy(&sink.0.lock().unwrap()).to_string();
    // Our client's events were captured (which of them is not the point: a callsite registered
    // by a test on another thread may still hide one, e.g. "logged in", from this subscriber).
    assert!(
        logs.contains("vsphere_provider::vcenter"),
        "logging was captured: {logs}"
    );
    for k in keys {
        assert!(!logs.contains(&k), "session key {k} leaked into the logs");
    }
    assert!(!logs.contains("secret"), "the password leaked");
}
