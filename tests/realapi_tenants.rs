//! Multi-tenancy on the REAL API server (issue #26; security review F1/F2): `vsphere-provider
//! run` (the built binary) as the controller's ServiceAccount bound by config/rbac, against
//! Kubernetes' own kube-apiserver + etcd (tests/support/realapi.rs), with the manager's own
//! vCenter credentials bound to the platform's vCenter (`VSPHERE_SERVER`, as the clusterctl
//! Secret hands it over).
//!
//! The estate: the platform's vCenter (a vcsim, with the manager's account), two tenant
//! namespaces, each with a VSphereClusterIdentity allowed only for itself, and a "vCenter" a
//! tenant chose: a second vcsim behind a recording proxy (tests/support/latency_proxy.rs) that
//! keeps every byte sent to it, so the test sees whose credentials reached it.
//!
//! Stand-ins, said here: Cluster API's `Cluster` CRD (v1.14.2) is installed unmodified but no
//! CAPI controller runs; the test writes Clusters at v1beta2 and sets the VSphereClusters' owner
//! references (what CAPI's cluster controller sets). The VSphereVMs are created by the test, as a tenant may (it is a
//! namespaced CRD) and as our VSphereMachine controller does. No webhooks (tests/
//! capi_machine_webhooks.rs covers the server and tagIDs checks).
#[path = "support/capi_crds.rs"]
mod capi_crds;
#[path = "support/latency_proxy.rs"]
mod latency_proxy;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use latency_proxy::LatencyProxy;
use process::{Manager, Readback, wait_for};
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane};
use serde_json::{Value, json};
use vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;
const MANAGER_USER: &str = "platform-manager@vsphere.local";
const TENANT_USER: &str = "dev-own@tenant.example";
const TENANT_PASSWORD: &str = "dev-own-password-5c1e";
const WAIT: Duration = Duration::from_secs(90);

fn apply(cp: &ControlPlane, items: Vec<Value>) {
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
        None,
    )
    .ok();
}

fn secret(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
           "type": "Opaque", "stringData": data})
}

/// VSphereClusterIdentity `name` (its Secret `name` in the controller's namespace) allowed only
/// for namespaces labelled `tenant: <allowed>`.
fn identity(name: &str, allowed: &str) -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereClusterIdentity",
           "metadata": {"name": name},
           "spec": {"secretName": name,
                    "allowedNamespaces": {"selector": {"matchLabels": {"tenant": allowed}}}}})
}

/// Cluster `ns/name` and the VSphereCluster it owns, on `server`, with `identity_ref`.
fn owned_cluster(cp: &ControlPlane, ns: &str, name: &str, server: &str, identity_ref: Value) {
    apply(
        cp,
        vec![json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "VSphereCluster", "name": name}}
        })],
    );
    let uid = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                "cluster.cluster.x-k8s.io",
                name,
                "-n",
                ns,
                "-o",
                "jsonpath={.metadata.uid}",
            ],
        )
        .ok()
        .stdout;
    let mut spec = json!({"server": server,
                          "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443}});
    if !identity_ref.is_null() {
        spec["identityRef"] = identity_ref;
    }
    apply(
        cp,
        vec![json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
            "metadata": {"name": name, "namespace": ns,
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                     "name": name, "uid": uid}]},
            "spec": spec
        })],
    );
}

/// A VSphereVM of Cluster `cluster` in `ns`, cloning vcsim's `DC0_H0_VM0` on `server`.
fn vsphere_vm(ns: &str, name: &str, cluster: &str, server: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereVM",
        "metadata": {"name": name, "namespace": ns,
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {"server": server, "template": "DC0_H0_VM0", "datacenter": "DC0",
                 "datastore": "LocalDS_0", "resourcePool": "DC0_C0_RP1", "folder": "vm",
                 "numCPUs": 1, "memoryMiB": 512, "network": {"devices": []}}
    })
}

/// `kubectl get` of our `kind` at v1beta1, the version the controllers write (kubectl's default
/// is the newest served, v1beta2, which needs the conversion webhook this test does not run).
fn get(cp: &ControlPlane, kind: &str, ns: &str, name: &str) -> Option<Value> {
    let resource = match kind {
        "vspherecluster" => "vsphereclusters.v1beta1.infrastructure.cluster.x-k8s.io",
        "vspherevm" => "vspherevms.v1beta1.infrastructure.cluster.x-k8s.io",
        "vspheredeploymentzone" => "vspheredeploymentzones.v1beta1.infrastructure.cluster.x-k8s.io",
        other => other,
    };
    let mut args = vec!["get", resource, name, "-o", "json", "--ignore-not-found"];
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    let out = cp.kubectl(ADMIN, &args).ok();
    (!out.stdout.trim().is_empty()).then(|| out.json())
}

/// Waits until `kind ns/name`'s status, as text, says `words`; returns that text.
async fn status_says(cp: &ControlPlane, kind: &str, ns: &str, name: &str, words: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let status = get(cp, kind, ns, name).map_or_else(String::new, |o| o["status"].to_string());
        if status.contains(words) {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{kind} {ns}/{name} never said {words:?}; its status: {status}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_cross_a_namespace_or_reach_a_server_the_admin_did_not_name() {
    let cp = control_plane();
    capi_crds::install(cp);
    let prod = cp.namespace("tenant-prod");
    let dev = cp.namespace("tenant-dev");
    // Cluster-scoped names (identities, labels) unique to this run, and naming no namespace.
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    for (ns, label) in [(&prod, "prod"), (&dev, "dev")] {
        cp.kubectl(
            ADMIN,
            &["label", "namespace", ns, &format!("tenant={label}-{run}")],
        )
        .ok();
    }
    // The manager's password is unique to this run: finding it anywhere is a leak.
    let manager_password = format!("mgr-{}", uuid::Uuid::new_v4());
    let platform = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .credentials(MANAGER_USER, &manager_password)
        .start()
        .await;
    let tenant_sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .credentials(TENANT_USER, TENANT_PASSWORD)
        .start()
        .await;
    let tenant_addr: std::net::SocketAddr = url::Url::parse(tenant_sim.url())
        .unwrap()
        .socket_addrs(|| None)
        .unwrap()[0];
    let tenants_server = LatencyProxy::recording(tenant_addr);
    let tenant_url = tenants_server.url_for(tenant_sim.url());
    let platform_url = platform.url().to_string();

    // The admin: identities for each tenant (prod's is the platform account; dev's a wrong
    // one), and a zone on the platform vCenter acting as the manager (no identityRef).
    let (prod_id, dev_id) = (format!("prod-only-{run}"), format!("dev-only-{run}"));
    let zone = format!("zone-{run}");
    apply(
        cp,
        vec![
            secret(
                SA_NAMESPACE,
                &prod_id,
                json!({"username": MANAGER_USER, "password": manager_password}),
            ),
            secret(
                SA_NAMESPACE,
                &dev_id,
                json!({"username": "dev@vsphere.local", "password": "wrong-for-the-platform"}),
            ),
            identity(&prod_id, &format!("prod-{run}")),
            identity(&dev_id, &format!("dev-{run}")),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereFailureDomain",
                   "metadata": {"name": zone},
                   "spec": {"region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
                            "zone": {"name": zone, "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
                            "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0", "datastore": "LocalDS_0"}}}),
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereDeploymentZone",
                   "metadata": {"name": zone},
                   "spec": {"server": platform_url, "failureDomain": zone, "controlPlane": true,
                            "placementConstraint": {"resourcePool": "DC0_C0_RP1", "folder": "vm"}}}),
        ],
    );
    let home = cp.dir.join(&prod);
    let manager = Manager::spawn_env(
        "manager-0",
        &cp.controller_kubeconfig,
        &home,
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-cert-dir",
            home.to_str().unwrap(),
            "--leader-elect=false",
            "--namespace",
            SA_NAMESPACE,
        ],
        &[
            ("VSPHERE_USERNAME", MANAGER_USER),
            ("VSPHERE_PASSWORD", &manager_password),
            ("VSPHERE_SERVER", &platform_url),
        ],
    );

    // Tenants. dev's clusters come first by name ("tenant-dev…" < "tenant-prod…"): under the
    // old per-server choice a dev cluster's identity (or its broken one) would have been used
    // for prod's machines and the platform's zones.
    owned_cluster(
        cp,
        &prod,
        "c1",
        &platform_url,
        json!({"kind": "VSphereClusterIdentity", "name": prod_id}),
    );
    owned_cluster(
        cp,
        &dev,
        "broken",
        &platform_url,
        json!({"kind": "VSphereClusterIdentity", "name": dev_id}),
    );
    owned_cluster(
        cp,
        &dev,
        "borrow",
        &platform_url,
        json!({"kind": "VSphereClusterIdentity", "name": prod_id}),
    );
    owned_cluster(cp, &dev, "evil", &tenant_url, Value::Null);
    apply(
        cp,
        vec![secret(
            &dev,
            "own",
            json!({"username": TENANT_USER, "password": TENANT_PASSWORD}),
        )],
    );
    owned_cluster(
        cp,
        &dev,
        "own",
        &tenant_url,
        json!({"kind": "Secret", "name": "own"}),
    );
    apply(
        cp,
        vec![
            vsphere_vm(&prod, "prod-vm", "c1", &platform_url),
            vsphere_vm(&dev, "borrowed-vm", "borrow", &platform_url),
            vsphere_vm(&dev, "evil-vm", "evil", &tenant_url),
            // An OpenShift Machine naming the tenant's server, without a credentialsSecret of
            // its own: it would act as the manager, whose credentials are not for that server.
            json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                   "metadata": {"name": "evil-machine", "namespace": dev},
                   "spec": {"providerSpec": {"value": {
                       "apiVersion": "machine.openshift.io/v1beta1", "kind": "VSphereMachineProviderSpec",
                       "template": "DC0_H0_VM0", "numCPUs": 1, "memoryMiB": 512, "network": {"devices": []},
                       "workspace": {"server": tenant_url, "datacenter": "DC0", "datastore": "LocalDS_0",
                                     "folder": "/DC0/vm", "resourcePool": "/DC0/host/DC0_C0/Resources/DC0_C0_RP1"}}}}}),
        ],
    );

    // The platform's zone is verified as the manager, and prod's cluster with prod's identity,
    // whatever dev's clusters on the same server say.
    wait_for("the zone ready", WAIT, || {
        (get(cp, "vspheredeploymentzone", "", &zone)?["status"]["ready"] == true).then_some(())
    })
    .await;
    wait_for("prod's cluster ready", WAIT, || {
        (get(cp, "vspherecluster", &prod, "c1")?["status"]["ready"] == true).then_some(())
    })
    .await;
    // Prod's machine is cloned on the platform with prod's identity.
    let readback = Readback::new(
        platform.url(),
        platform.base_url(),
        MANAGER_USER,
        &manager_password,
    );
    let mut cloned = Vec::new();
    for _ in 0..180 {
        cloned = readback.vms().await;
        if cloned.iter().any(|v| v.name == "prod-vm") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        cloned.iter().any(|v| v.name == "prod-vm"),
        "prod's VM not cloned: {:?}\n{}",
        get(cp, "vspherevm", &prod, "prod-vm").map(|v| v["status"].clone()),
        manager.log()
    );

    // dev's broken identity breaks dev's cluster, and only it; its status names no user.
    let broken = status_says(
        cp,
        "vspherecluster",
        &dev,
        "broken",
        "wrong user name or password",
    )
    .await;
    assert!(!broken.contains("dev@vsphere.local"), "{broken}");
    // A dev cluster naming prod's identity is refused, naming the identity and the namespace;
    // so is its machine, and nothing is cloned for it.
    let refusal = format!("VSphereClusterIdentity {prod_id} does not allow namespace {dev}");
    status_says(cp, "vspherecluster", &dev, "borrow", &refusal).await;
    status_says(cp, "vspherevm", &dev, "borrowed-vm", &refusal).await;
    // The tenant's own server without an identityRef: no credentials, nothing sent.
    let no_credentials = format!(
        "no credentials for vCenter {}",
        tenant_url.trim_end_matches('/')
    );
    let says = status_says(cp, "vspherecluster", &dev, "evil", &no_credentials).await;
    assert!(says.contains("an identityRef"), "{says}");
    status_says(cp, "vspherevm", &dev, "evil-vm", &no_credentials).await;
    status_says(
        cp,
        "machines.machine.openshift.io",
        &dev,
        "evil-machine",
        &no_credentials,
    )
    .await;
    // With its own Secret, the tenant's cluster reaches its own server with its own account.
    wait_for("dev's own cluster ready", WAIT, || {
        (get(cp, "vspherecluster", &dev, "own")?["status"]["ready"] == true).then_some(())
    })
    .await;

    let sent = tenants_server.sent().join("\n");
    assert!(
        sent.contains(TENANT_USER),
        "the recording sees logins (the tenant's own): {} bytes",
        sent.len()
    );
    assert!(
        !sent.contains(&manager_password) && !sent.contains(MANAGER_USER),
        "the manager's credentials reached the tenant's server"
    );
    assert!(
        !readback.vms().await.iter().any(|v| v.name == "borrowed-vm"),
        "a dev machine was cloned with prod's identity"
    );
    // Nothing a tenant sees names the other tenant's namespace.
    for (kind, name) in [
        ("vspherecluster", "broken"),
        ("vspherecluster", "borrow"),
        ("vspherecluster", "evil"),
        ("vspherevm", "borrowed-vm"),
        ("vspherevm", "evil-vm"),
    ] {
        let status = get(cp, kind, &dev, name).unwrap()["status"].to_string();
        assert!(!status.contains(&prod), "{kind} {dev}/{name}: {status}");
        assert!(!status.contains(&manager_password), "{status}");
    }
    assert!(!manager.log().contains(&manager_password));
    manager.assert_never_forbidden();
}
