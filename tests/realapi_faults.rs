//! Issue 17's "Bad input and faults" on the REAL API server (Kubernetes' own kube-apiserver
//! v1.37.2 + etcd v3.7.0, tests/support/realapi.rs), with `vsphere-provider run` as a process:
//!
//! * an API server that does not answer at start: the log names its URL, the check is repeated
//!   at 1 s, 2 s, 4 s …, the process stays up (`/healthz` 200, `/readyz` 503) and starts the
//!   controllers once the server answers (a TCP relay opened on that port by the test);
//! * a CustomResourceDefinition missing: named with the command that installs it, waited for the
//!   same way, the controllers started once it is applied;
//! * a webhook serving certificate whose subjectAltNames do not match the URL the webhook
//!   configuration calls: the user's `kubectl apply` fails with the API server's x509 error,
//!   the manager logs that the caller refused its certificate and what to fix, and a matching
//!   certificate written into the directory is served without a restart;
//! * a Forbidden answer (a copy of config/rbac's ClusterRole without one verb, bound to another
//!   ServiceAccount): without `watch` on nodes, or on zones, the watch's first request
//!   (the start-up check makes none per kind) names who was refused which verb on which
//!   resource, retries at 1 s, 2 s, 4 s, `/readyz` names it, and starts once it is granted;
//!   without
//!   `patch` on zones, every attempt is logged naming the verb, the resource and the zone,
//!   retried at 5 s, 10 s, 20 s (the error metric counts them), and the zone converges once the
//!   verb is granted.
//!
//! Why the manager does not exit in the first two cases (a Deployment would turn exits into a
//! crash loop): see src/controllers/startup.rs. No timing is asserted: the backoff is read from
//! the `retry_in=` the manager logs.
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use process::{Manager, wait_for};
use realapi::{ControlPlane, Identity, control_plane, repo};
use serde_json::{Value, json};

const ADMIN: &Identity = &Identity::Admin;
const LOG_WAIT: Duration = Duration::from_secs(120);

/// One test at a time: one removes a CRD, one registers a cluster-wide webhook.
static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn work_dir(cp: &ControlPlane, ns: &str) -> PathBuf {
    let dir = cp.dir.join(ns);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn manager_args(work: &Path) -> Vec<String> {
    vec![
        "--metrics-addr".into(),
        "127.0.0.1:0".into(),
        "--webhook-cert-dir".into(),
        work.display().to_string(),
        "--leader-elect=false".into(),
    ]
}

fn spawn(name: &str, kubeconfig: &Path, work: &Path, args: &[String]) -> Manager {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Manager::spawn(name, kubeconfig, &work.join(name), &args)
}

/// `GET http://ADDR/PATH`: status and body.
async fn http_get(addr: &str, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The `retry_in=` values of the lines with `needle`, in order.
fn retries(m: &Manager, needle: &str) -> Vec<String> {
    m.lines_with(&[needle])
        .iter()
        .filter_map(|l| Manager::field(l, "retry_in"))
        .collect()
}

/// Waits until `n` lines contain `needle`.
async fn wait_lines(m: &Manager, needle: &str, n: usize) -> Vec<String> {
    wait_for(&format!("{n} log lines with {needle:?}"), LOG_WAIT, || {
        let lines = m.lines_with(&[needle]);
        (lines.len() >= n).then_some(lines)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_at_start_is_named_retried_with_backoff_and_joined_later() {
    let _one = ONE.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("unreachable");
    let work = work_dir(cp, &ns);
    // A port nothing listens on (yet), in a copy of the controller's kubeconfig.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("https://127.0.0.1:{closed}");
    let kubeconfig = work.join("closed-port.kubeconfig");
    std::fs::write(
        &kubeconfig,
        std::fs::read_to_string(&cp.controller_kubeconfig)
            .unwrap()
            .replace(&cp.server, &url),
    )
    .unwrap();
    let mut m = spawn("manager-0", &kubeconfig, &work, &manager_args(&work));
    let admin =
        Manager::field(&m.wait_line("admin endpoints listening", LOG_WAIT), "addr").unwrap();
    let lines = wait_lines(&m, "cannot reach the Kubernetes API server", 3).await;
    for l in &lines {
        assert!(l.contains(&format!("at {url}/")), "names the server: {l}");
        assert!(l.contains("Connection refused"), "says why: {l}");
    }
    let delays = retries(&m, "cannot reach the Kubernetes API server");
    assert_eq!(delays[..3], ["1s", "2s", "4s"], "{lines:?}");
    assert!(m.is_running(), "{}", m.log());
    assert_eq!(http_get(&admin, "/healthz").await, (200, "ok".into()));
    let (status, why) = http_get(&admin, "/readyz").await;
    assert_eq!(status, 503, "{why}");
    assert!(
        why.contains("waiting for the Kubernetes API server"),
        "{why}"
    );
    eprintln!("realapi_faults: {}", lines[0]);

    // The server becomes reachable at that address: a TCP relay to the real one (TLS passes
    // through; its certificate names 127.0.0.1).
    let target = cp.server.trim_start_matches("https://").to_string();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", closed))
        .await
        .unwrap();
    let relay = tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    m.wait_line("controllers started", LOG_WAIT);
    assert!(
        m.lines_with(&["serves every kind the controllers watch"])
            .len()
            == 1
    );
    assert_eq!(http_get(&admin, "/readyz").await.0, 200);
    assert_eq!(m.terminate(), Some(0), "{}", m.log());
    relay.abort();
}

/// Reinstalls a CRD however the test ends (the other tests of this binary need it).
struct Reinstall(&'static str);

impl Drop for Reinstall {
    fn drop(&mut self) {
        let cp = control_plane();
        cp.kubectl(ADMIN, &["apply", "-f", self.0]);
        cp.kubectl(
            ADMIN,
            &[
                "wait",
                "--for=condition=Established",
                "crd/machinehealthchecks.machine.openshift.io",
                "--timeout=60s",
            ],
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_is_named_with_its_fix_and_waited_for_until_installed() {
    let _one = ONE.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("missing-crd");
    let work = work_dir(cp, &ns);
    let file = "crds/machine.openshift.io_machinehealthchecks.yaml";
    let reinstall = Reinstall(file);
    // config without one CRD: as if `kubectl apply -f crds/` had not reached it yet.
    cp.kubectl(
        ADMIN,
        &["delete", "-f", file, "--wait=true", "--timeout=60s"],
    )
    .ok();

    let mut m = spawn(
        "manager-0",
        &cp.controller_kubeconfig,
        &work,
        &manager_args(&work),
    );
    let admin =
        Manager::field(&m.wait_line("admin endpoints listening", LOG_WAIT), "addr").unwrap();
    let needle = "the CustomResourceDefinition machinehealthchecks.machine.openshift.io \
                  (MachineHealthCheck) is not installed";
    let lines = wait_lines(&m, needle, 3).await;
    assert!(
        lines[0].contains("vsphere-provider crds | kubectl apply -f -"),
        "says how to install it: {}",
        lines[0]
    );
    assert_eq!(retries(&m, needle)[..3], ["1s", "2s", "4s"], "{lines:?}");
    assert!(m.is_running(), "{}", m.log());
    let (status, why) = http_get(&admin, "/readyz").await;
    assert_eq!(status, 503, "{why}");
    assert!(
        why.contains(needle),
        "/readyz says what it waits for: {why}"
    );
    assert!(
        m.lines_with(&["controllers started"]).is_empty(),
        "{}",
        m.log()
    );
    eprintln!("realapi_faults: {}", lines[0]);

    drop(reinstall);
    m.wait_line("controllers started", LOG_WAIT);
    assert_eq!(http_get(&admin, "/readyz").await.0, 200);
    m.assert_never_forbidden();
    assert_eq!(m.terminate(), Some(0), "{}", m.log());
}

/// Deletes the webhook configuration however the test ends (`failurePolicy: Fail` would refuse
/// every later failure domain).
struct Unregister(String);

impl Drop for Unregister {
    fn drop(&mut self) {
        control_plane().kubectl(
            ADMIN,
            &[
                "delete",
                "validatingwebhookconfiguration",
                &self.0,
                "--ignore-not-found",
            ],
        );
    }
}

/// config/webhook's failure domain validation, alone, calling `url` with `ca` as caBundle.
fn failure_domain_webhook(name: &str, url: &str, ca: &Path) -> Value {
    let text = std::fs::read_to_string(repo().join("config/webhook/manifests.yaml")).unwrap();
    let configs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut hook = configs
        .iter()
        .filter(|c| c["kind"] == "ValidatingWebhookConfiguration")
        .flat_map(|c| c["webhooks"].as_array().unwrap().clone())
        .find(|w| w["name"] == "vvspherefailuredomain.infrastructure.cluster.x-k8s.io")
        .expect("config/webhook validates failure domains");
    let path = hook["clientConfig"]["service"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    hook["clientConfig"] = json!({
        "url": format!("{url}{path}"),
        "caBundle": base64::engine::general_purpose::STANDARD.encode(std::fs::read(ca).unwrap()),
    });
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [hook]
    })
}

fn failure_domain(name: &str) -> String {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereFailureDomain",
        "metadata": {"name": name},
        "spec": {
            "region": {"name": "region-a", "type": "Datacenter", "tagCategory": "k8s-region"},
            "zone": {"name": "zone-x", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
            "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0"}
        }
    })
    .to_string()
}

/// Writes a serving certificate for `sans`, signed by the harness CA, as DIR/tls.{crt,key}.
fn serving_certificate(cp: &ControlPlane, dir: &Path, name: &str, sans: &[&str]) {
    let (crt, key) = cp.issue_certificate(&dir.join("issued"), name, sans);
    std::fs::rename(crt, dir.join("tls.crt")).unwrap();
    std::fs::rename(key, dir.join("tls.key")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_certificate_that_does_not_match_reaches_the_user_and_the_log_says_what_to_fix() {
    let _one = ONE.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("webhook-cert");
    let work = work_dir(cp, &ns);
    let certs = work.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    // Signed by the right CA, for the wrong name: the configuration calls 127.0.0.1.
    serving_certificate(
        cp,
        &certs,
        &format!("{ns}-wrong"),
        &["DNS:wrong.example", "IP:127.0.0.2"],
    );
    let mut args = manager_args(&work);
    args[3] = certs.display().to_string();
    args.extend(["--webhook-addr".into(), "127.0.0.1:0".into()]);
    let mut m = spawn("manager-0", &cp.controller_kubeconfig, &work, &args);
    let addr = Manager::field(
        &m.wait_line("admission webhooks listening", LOG_WAIT),
        "addr",
    )
    .unwrap();
    let config = format!("realapi-{ns}");
    let _unregister = Unregister(config.clone());
    cp.apply_text(
        ADMIN,
        &failure_domain_webhook(&config, &format!("https://{addr}"), &cp.ca_cert).to_string(),
        None,
    )
    .ok();

    // What the user sees: kubectl's error carries the API server's, naming both names.
    let fd = format!("{ns}-fd");
    let refused = wait_for("the webhook called", LOG_WAIT, || {
        let out = cp.kubectl_stdin(ADMIN, &["apply", "-f", "-"], Some(&failure_domain(&fd)));
        (!out.success && out.stderr.contains("failed calling webhook")).then_some(out.stderr)
    })
    .await;
    eprintln!("realapi_faults: kubectl apply said: {}", refused.trim());
    assert!(
        refused.contains("vvspherefailuredomain.infrastructure.cluster.x-k8s.io"),
        "names the webhook: {refused}"
    );
    assert!(
        refused.contains("x509: certificate is valid for") && refused.contains("not 127.0.0.1"),
        "says why: {refused}"
    );
    // What the manager logs: the caller refused its certificate, which file, what to fix.
    let line = m.wait_line(
        "the webhook's caller refused its serving certificate",
        LOG_WAIT,
    );
    eprintln!("realapi_faults: {line}");
    assert!(line.contains("alert=BadCertificate"), "{line}");
    assert!(
        line.contains(&format!("cert={}", certs.join("tls.crt").display())),
        "{line}"
    );
    assert!(line.contains("subjectAltNames"), "{line}");

    // The fix: a certificate for the name called, written where the manager reads it (as
    // cert-manager would); it is picked up without a restart.
    std::thread::sleep(Duration::from_millis(1100)); // a new modification time
    serving_certificate(cp, &certs, &format!("{ns}-right"), &["IP:127.0.0.1"]);
    wait_for(
        "the webhook accepting with the new certificate",
        LOG_WAIT,
        || {
            cp.kubectl_stdin(ADMIN, &["apply", "-f", "-"], Some(&failure_domain(&fd)))
                .success
                .then_some(())
        },
    )
    .await;
    m.assert_never_forbidden();
    assert_eq!(m.terminate(), Some(0), "{}", m.log());
}

/// config/rbac's ClusterRole without one verb on one resource, bound to a ServiceAccount of
/// its own (`partial-controller` in the test's namespace).
struct PartialRole {
    kubeconfig: PathBuf,
    /// `system:serviceaccount:NS:partial-controller`.
    subject: String,
    /// The role with every verb, under the copy's name.
    granted: Value,
}

impl PartialRole {
    async fn bind(cp: &ControlPlane, ns: &str, resource: &str, verb: &str) -> PartialRole {
        let sa = "partial-controller";
        let kubeconfig = cp.service_account_kubeconfig(ns, sa).unwrap();
        let text = std::fs::read_to_string(repo().join("config/rbac/role.yaml")).unwrap();
        let mut granted: Value = serde_saphyr::from_str(&text).unwrap();
        let role_name = format!("realapi-{ns}");
        granted["metadata"]["name"] = json!(role_name);
        let mut role = granted.clone();
        let mut removed = 0;
        for rule in role["rules"].as_array_mut().unwrap() {
            if rule["resources"] == json!([resource]) {
                rule["verbs"].as_array_mut().unwrap().retain(|v| v != verb);
                removed += 1;
            }
        }
        assert_eq!(removed, 1, "role.yaml has one rule for {resource}");
        cp.apply_text(ADMIN, &role.to_string(), None).ok();
        cp.apply_text(
            ADMIN,
            &json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role_name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
            })
            .to_string(),
            None,
        )
        .ok();
        let subject = format!("system:serviceaccount:{ns}:{sa}");
        wait_for("the binding in force", LOG_WAIT, || {
            let out = cp.kubectl(
                ADMIN,
                &[
                    "auth",
                    "can-i",
                    "list",
                    "vsphereclusters.infrastructure.cluster.x-k8s.io",
                    &format!("--as={subject}"),
                ],
            );
            (out.stdout.trim() == "yes").then_some(())
        })
        .await;
        PartialRole {
            kubeconfig,
            subject,
            granted,
        }
    }

    /// The missing verb granted again.
    fn grant(&self, cp: &ControlPlane) {
        cp.apply_text(ADMIN, &self.granted.to_string(), None).ok();
    }
}

/// A watch refused at start (no `watch` on nodes, a kind with no CRD to read): the manager
/// names the resource, the verb and who was refused, checks again at 1 s, 2 s, 4 s …, and
/// starts once it is granted. (Without `list` alone it starts: the watch streams its initial
/// list, which the API server authorizes as `watch`; `list` is what a server that does not
/// stream initial lists needs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_nodes_refused_at_start_is_named_and_retried_until_granted() {
    refused_at_start("refused-nodes", "nodes", "watch", "nodes").await;
}

/// The same for one of our kinds (no `watch` on zones): its CRD read passes, the watch's first
/// request finds the refusal (the startup check makes no request per kind) and tells it as the
/// check would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_zones_refused_at_start_is_named_and_retried_until_granted() {
    refused_at_start(
        "refused-zones",
        "vspheredeploymentzones",
        "watch",
        "vspheredeploymentzones.infrastructure.cluster.x-k8s.io",
    )
    .await;
}

/// The manager under config/rbac's ClusterRole without `verb` on `resource` (named
/// `qualified` in messages): it names the resource, the verb and who was refused, checks again
/// at 1 s, 2 s, 4 s …, is not ready meanwhile, and starts once the verb is granted.
async fn refused_at_start(name: &str, resource: &str, verb: &str, qualified: &str) {
    let _one = ONE.lock().await;
    let cp = control_plane();
    let ns = cp.namespace(name);
    let work = work_dir(cp, &ns);
    let partial = PartialRole::bind(cp, &ns, resource, verb).await;
    let mut m = spawn(
        "manager-0",
        &partial.kubeconfig,
        &work,
        &manager_args(&work),
    );
    let admin =
        Manager::field(&m.wait_line("admin endpoints listening", LOG_WAIT), "addr").unwrap();
    let needle = format!("the Kubernetes API server refuses to {verb} {qualified}");
    let lines = wait_lines(&m, &needle, 3).await;
    eprintln!("realapi_faults: {}", lines[0]);
    for l in &lines {
        assert!(
            l.contains(&format!(
                "User \"{}\" cannot {verb} resource \"{resource}\"",
                partial.subject
            )),
            "names who, the verb and the resource: {l}"
        );
        assert!(
            l.contains("bind the manager's ServiceAccount with config/rbac"),
            "{l}"
        );
    }
    assert_eq!(retries(&m, &needle)[..3], ["1s", "2s", "4s"], "{lines:?}");
    assert!(m.is_running(), "{}", m.log());
    let (status, why) = http_get(&admin, "/readyz").await;
    assert_eq!(status, 503, "{why}");
    assert!(
        why.contains(&needle),
        "/readyz says what it waits for: {why}"
    );
    partial.grant(cp);
    m.wait_line("controllers started", LOG_WAIT);
    assert_eq!(http_get(&admin, "/readyz").await.0, 200);
    assert_eq!(m.terminate(), Some(0), "{}", m.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_write_names_verb_and_object_and_is_retried_with_backoff_until_granted() {
    let _one = ONE.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("refused");
    let work = work_dir(cp, &ns);
    let partial = PartialRole::bind(cp, &ns, "vspheredeploymentzones", "patch").await;
    let (kubeconfig, subject) = (partial.kubeconfig.clone(), partial.subject.clone());

    let mut m = spawn("manager-0", &kubeconfig, &work, &manager_args(&work));
    let admin =
        Manager::field(&m.wait_line("admin endpoints listening", LOG_WAIT), "addr").unwrap();
    m.wait_line("controllers started", LOG_WAIT);
    let zone = format!("{ns}-zone");
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            serde_json::from_str::<Value>(&failure_domain(&zone)).unwrap(),
            {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "VSphereDeploymentZone",
                "metadata": {"name": zone},
                "spec": {"server": "https://127.0.0.1:1/sdk", "failureDomain": zone, "controlPlane": true,
                         "placementConstraint": {"resourcePool": "DC0_C0_RP1", "folder": "vm"}}
            }
        ]})
        .to_string(),
        None,
    )
    .ok();

    // Each attempt: one line naming the object, the verb and the resource; 5 s, 10 s, 20 s.
    let refusal = "cannot patch resource \"vspheredeploymentzones\"";
    let lines = wait_lines(&m, refusal, 3).await;
    for l in &lines {
        assert!(
            l.contains(&format!("object=\"{zone}\"")),
            "names the zone: {l}"
        );
        assert!(l.contains(&subject), "names who was refused: {l}");
    }
    assert_eq!(retries(&m, refusal)[..3], ["5s", "10s", "20s"], "{lines:?}");
    eprintln!("realapi_faults: {}", lines[0]);
    let metrics = http_get(&admin, "/metrics").await.1;
    let errors: u64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("vsphere_provider_reconcile_errors_total{")
                && l.contains("controller=\"vspheredeploymentzone\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(errors >= 3, "{metrics}");

    // Granted: the next retry adds the finalizer.
    partial.grant(cp);
    wait_for("the zone's finalizer", Duration::from_secs(300), || {
        let z = cp
            .kubectl(
                ADMIN,
                &[
                    "get",
                    "vspheredeploymentzones.v1beta1.infrastructure.cluster.x-k8s.io",
                    &zone,
                    "-o",
                    "json",
                ],
            )
            .ok()
            .json();
        z["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
            .then_some(())
    })
    .await;
    assert_eq!(m.terminate(), Some(0), "{}", m.log());
}
