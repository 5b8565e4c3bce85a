//! `clusterctl init` of Cluster API's own release (v1.14.2, built from the Go module by
//! hack/capi/build.sh) installs CAPI core, the kubeadm bootstrap and control-plane providers and
//! this provider, offline, from the local repository hack/capi/repository.sh writes (CAPI's
//! components from the module's config/, ours from hack/release.sh), on the real kube-apiserver
//! of tests/support/realapi.rs.
//!
//! Gated on `CAPI_BIN_DIR` (hack/test.sh sets it from hack/capi/build.sh): without it the test
//! says so and returns, since the CAPI build is a separate cold build of several minutes.
//!
//! Where this stops, and what stands in for what:
//! * cert-manager: the repository holds cert-manager's CRDs only (hack/capi/repository.sh says
//!   why); clusterctl's own readiness check (create a test Issuer and Certificate) passes on them,
//!   but nothing issues certificates.
//! * There is no kubelet, so no Deployment ever runs a pod (asserted: none is available). As the
//!   issue's end-to-end plan says, the manager then runs as a process with the identity the
//!   Deployment would have: the ServiceAccount clusterctl installed and the credentials Secret's
//!   values as its environment. (The harness applied config/rbac before clusterctl did; clusterctl
//!   re-applied it from the components, which is checked by its labels.)
//! * CAPI's core manager then runs as a process too (as the admin: its ClusterRole is an
//!   aggregated one, and without kube-controller-manager nothing aggregates it), with its
//!   admission webhooks moved to `https://127.0.0.1:PORT` and the harness's CA, as envtest does:
//!   its validating webhook refuses a Cluster topology while ClusterTopology is off, and (since
//!   v1.11) a Cluster with no infrastructureRef, controlPlaneRef or topology. Its CRDs store
//!   v1beta2 and serve v1beta1 through its conversion webhook, also moved to loopback: the test
//!   writes Clusters at v1beta1 (the contract this provider implements) and reads them at both.
//!   Its Cluster controller then owns our VSphereCluster, copies our failure domains and endpoint,
//!   and `clusterctl describe cluster` shows our VSphereCluster as the Cluster's infrastructure.
#[path = "support/capi.rs"]
mod capi;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/samples.rs"]
mod samples;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::{Duration, Instant};

use base64::Engine;
use capi::{
    CapiManager, INIT_PROVIDERS, OurManager, apply_retrying, capi_bin_dir, capi_version,
    clusterctl, get, text,
};
use realapi::{Identity, SA_NAMESPACE, control_plane};
use serde_json::{Value, json};
use vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;
const IMAGE: &str = "localhost/vsphere-provider:e2e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterctl_init_installs_capi_and_this_provider_and_capi_consumes_our_failure_domains() {
    let Some(capi) = capi_bin_dir() else {
        eprintln!(
            "skipped: CAPI_BIN_DIR is not set (hack/test.sh sets it from hack/capi/build.sh)"
        );
        return;
    };
    let cp = control_plane();
    let work = tempfile::tempdir().unwrap();
    let home = work.path();
    // The offline repository, as a user would make it.
    let config = capi::repository(&capi, home, IMAGE);
    // clusterctl brings our CRDs with its own conversion webhook Service.
    cp.conversion_to_installer().unwrap();
    let mut init = vec!["init", "--config", &config];
    init.extend(INIT_PROVIDERS);
    // Without the credentials variables clusterctl refuses, naming both, before installing any
    // provider.
    let o = clusterctl(&capi, cp, home, &init, &[]);
    assert!(
        !o.status.success(),
        "init without credentials succeeded:\n{}",
        text(&o)
    );
    assert!(
        text(&o).contains(
            "value for variables [VSPHERE_PASSWORD, VSPHERE_SERVER, VSPHERE_USERNAME] is not set"
        ),
        "{}",
        text(&o)
    );

    let password = format!("pw-{}", uuid::Uuid::new_v4());
    let o = clusterctl(
        &capi,
        cp,
        home,
        &init,
        &[
            ("VSPHERE_USERNAME", "capi-user@vsphere.local"),
            ("VSPHERE_PASSWORD", &password),
            ("VSPHERE_SERVER", "vcenter.example.com"),
        ],
    );
    let out = text(&o);
    assert!(o.status.success(), "clusterctl init failed:\n{out}");
    assert!(
        out.contains("Your management cluster has been initialized successfully!"),
        "{out}"
    );
    assert!(!out.contains(&password), "clusterctl printed the password");

    // The template the release ships (templates/cluster-template.yaml), as README's install
    // section tells a user to fill it: `clusterctl generate cluster --infrastructure`.
    let generate = [
        "generate",
        "cluster",
        "prod",
        "--infrastructure",
        "vsphere-provider",
        "--config",
        &config,
        "--target-namespace",
        "prod",
        "--kubernetes-version",
        "v1.33.0",
        "--control-plane-machine-count",
        "3",
        "--worker-machine-count",
        "3",
    ];
    let o = clusterctl(
        &capi,
        cp,
        home,
        &generate,
        &[
            ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.20"),
            ("CPI_IMAGE_K8S_VERSION", "v1.33.0"),
            ("VSPHERE_SERVER", "vcenter.example.com"),
            ("VSPHERE_TLS_THUMBPRINT", ""),
            ("VSPHERE_USERNAME", "capi-user@vsphere.local"),
            ("VSPHERE_PASSWORD", &password),
            ("VSPHERE_DATACENTER", "DC0"),
            ("VSPHERE_RESOURCE_POOL", "DC0_C0_RP1"),
            ("VSPHERE_DATASTORE", "LocalDS_0"),
            ("VSPHERE_FOLDER", "vm"),
            ("VSPHERE_NETWORK", "VM Network"),
            ("VSPHERE_TEMPLATE", "ubuntu-2404-kube-v1.33.0"),
            ("VSPHERE_STORAGE_POLICY", ""),
            ("VSPHERE_SSH_AUTHORIZED_KEY", "ssh-ed25519 AAAA test"),
        ],
    );
    let generated = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "clusterctl generate cluster --infrastructure vsphere-provider:\n{}",
        text(&o)
    );
    assert!(
        generated.contains("  failureDomainSelector: {}")
            && generated.contains("kind: KubeadmControlPlane")
            && generated.contains("replicas: 3")
            && generated.contains("namespace: prod"),
        "{generated}"
    );

    // clusterctl's inventory: four providers at the versions of the repository, ours under the
    // contract of metadata.yaml (init validated that every provider shares it).
    let providers = get(cp, &["providers.clusterctl.cluster.x-k8s.io", "-A"]);
    let mut found: Vec<(String, String, String, String)> = providers["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["namespace"].as_str().unwrap().to_string(),
                p["type"].as_str().unwrap().to_string(),
                p["providerName"].as_str().unwrap().to_string(),
                p["version"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    let ours = format!("v{}", env!("CARGO_PKG_VERSION"));
    let v = capi_version(&capi);
    let s = |a: &str, b: &str, c: &str, d: &str| (a.into(), b.into(), c.into(), d.into());
    assert_eq!(
        found,
        vec![
            s(
                "capi-kubeadm-bootstrap-system",
                "BootstrapProvider",
                "kubeadm",
                &v
            ),
            s(
                "capi-kubeadm-control-plane-system",
                "ControlPlaneProvider",
                "kubeadm",
                &v
            ),
            s("capi-system", "CoreProvider", "cluster-api", &v),
            s(
                SA_NAMESPACE,
                "InfrastructureProvider",
                "vsphere-provider",
                &ours
            ),
        ]
    );

    // CAPI's API is served (its CRDs from the module's config/), and cert-manager's.
    cp.wait_established(&[
        "clusters.cluster.x-k8s.io",
        "machines.cluster.x-k8s.io",
        "machinesets.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
        "machinehealthchecks.cluster.x-k8s.io",
        "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
        "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "certificates.cert-manager.io",
    ]);

    // Our objects were installed by clusterctl: its label beside the provider label.
    for crd in [
        "vsphereclusters.infrastructure.cluster.x-k8s.io",
        "vspherefailuredomains.infrastructure.cluster.x-k8s.io",
        "vspheredeploymentzones.infrastructure.cluster.x-k8s.io",
    ] {
        let labels = &get(cp, &["crd", crd])["metadata"]["labels"];
        assert_eq!(
            labels["cluster.x-k8s.io/provider"], "infrastructure-vsphere-provider",
            "{crd}"
        );
        assert!(
            labels.get("clusterctl.cluster.x-k8s.io").is_some(),
            "{crd}: {labels}"
        );
    }
    let role = get(cp, &["clusterrole", "vsphere-provider-manager"]);
    assert_eq!(
        role["metadata"]["labels"]["cluster.x-k8s.io/provider"],
        "infrastructure-vsphere-provider"
    );

    // The Deployment, with the image asked for; no kubelet, so it never becomes available.
    let deploy = get(
        cp,
        &[
            "deployment",
            "vsphere-provider-controller-manager",
            "-n",
            SA_NAMESPACE,
        ],
    );
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "manager");
    assert_eq!(container["image"], IMAGE);
    assert!(
        deploy["status"]["availableReplicas"].is_null(),
        "no kubelet here, yet: {deploy}"
    );

    // The credentials variables landed in the Secret the Deployment reads.
    let secret = get(
        cp,
        &[
            "secret",
            "vsphere-provider-manager-bootstrap-credentials",
            "-n",
            SA_NAMESPACE,
        ],
    );
    let decode = |k: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][k].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(decode("username"), "capi-user@vsphere.local");
    assert_eq!(decode("password"), password);

    // The manager as the Deployment would run it: the installed ServiceAccount, the Secret's
    // values as environment, leader election in the installed namespace; it starts its
    // controllers and stops cleanly.
    assert_eq!(decode("servers"), "vcenter.example.com");
    let mut ours = OurManager::start(
        cp,
        home,
        &decode("username"),
        &decode("password"),
        &decode("servers"),
    );
    let lease = get(cp, &["lease", "-n", SA_NAMESPACE]);
    assert!(
        lease["items"].as_array().is_some_and(|l| !l.is_empty()),
        "no leader Lease in {SA_NAMESPACE}"
    );

    // CAPI's core manager, as installed by clusterctl but as a process.
    let capi_manager = CapiManager::start(
        &capi,
        cp,
        home,
        "manager",
        "capi-validating-webhook-configuration",
        "capi-mutating-webhook-configuration",
    );
    let capi_log = || capi_manager.log();

    let ns = cp.namespace("capi");
    let cluster = |name: &str, spec: Value| {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
               "metadata": {"name": name, "namespace": ns}, "spec": spec})
        .to_string()
    };
    // CAPI's webhook, not the schema, refuses a topology while the feature gate is off.
    let refused = cp
        .apply_text(
            ADMIN,
            &cluster(
                "topology",
                json!({"topology": {"class": "c", "version": "v1.33.0"}}),
            ),
            None,
        )
        .err();
    assert!(
        refused.contains("can be set only if the ClusterTopology feature flag is enabled"),
        "{refused}"
    );
    // A Cluster with neither infrastructureRef, controlPlaneRef nor topology: CAPI v1.10 took it
    // (and marked its infrastructure ready); v1.14's webhook refuses it. CAPI's webhook, reached
    // through its conversion of the v1beta1 object, says so.
    let refused = cp
        .apply_text(ADMIN, &cluster("plain", json!({})), None)
        .err();
    assert!(
        refused.contains(
            "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set"
        ),
        "{refused}"
    );
    // Cluster API consumes what we publish: a Cluster whose infrastructure is our VSphereCluster
    // over three zones on vcsim. CAPI's Cluster controller (its code, not ours) makes itself the
    // VSphereCluster's owner, waits for our `status.ready`, then marks the Cluster's
    // infrastructure ready and copies our `status.failureDomains` and endpoint onto it.
    // Our webhooks, and the conversion webhook of the two-version CRDs, point at our manager
    // on loopback with the harness's CA (what the Service and cert-manager's CA injection do in
    // a cluster).
    ours.wire_webhooks(cp);
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let names: Vec<String> = (0..3).map(|i| format!("{ns}-zone-{i}")).collect();
    let (sim_user, sim_password) = sim.credentials();
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    // The zones act as an admin-owned Secret in the manager's namespace: the manager's own
    // credentials are for vcenter.example.com only, and never reach the simulator.
    let identity = format!("{ns}-zones");
    let mut admin = samples::zones(sim.url(), &names, None, &identity);
    admin.push(samples::zone_credentials(
        SA_NAMESPACE,
        &identity,
        sim_user,
        sim_password,
    ));
    let domains = list(admin);
    let infra = list(samples::cluster(&ns, sim.url(), sim_user, sim_password));
    let apply = |objects: &Value| apply_retrying(cp, &objects.to_string());
    apply(&domains);
    apply(&infra);
    apply(
        &json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "demo", "namespace": ns},
        "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                       "kind": "VSphereCluster", "name": "demo"}}}),
    );
    // Read at v1beta2 (what CAPI v1.14 stores and kubectl shows): the failure domains are a list
    // sorted by name; at v1beta1 (still served, through CAPI's conversion webhook) the same map
    // we publish.
    let deadline = Instant::now() + Duration::from_secs(180);
    let (cluster, vsphere_cluster) = loop {
        let c = get(cp, &["cluster.cluster.x-k8s.io", "demo", "-n", &ns]);
        let v = get(cp, &["vspherecluster", "demo", "-n", &ns]);
        if c["status"]["initialization"]["infrastructureProvisioned"] == true
            && c["status"]["failureDomains"]
                .as_array()
                .is_some_and(|f| f.len() == 3)
        {
            break (c, v);
        }
        assert!(
            Instant::now() < deadline,
            "CAPI did not take our failure domains:\nCluster {c}\nVSphereCluster {v}\n{}\n{}",
            ours.log(),
            capi_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        cluster["status"]["failureDomains"],
        Value::from(
            sorted
                .iter()
                .map(|n| json!({"name": n, "controlPlane": true}))
                .collect::<Vec<_>>()
        ),
        "{cluster}"
    );
    let v1beta1 = get(
        cp,
        &["clusters.v1beta1.cluster.x-k8s.io", "demo", "-n", &ns],
    );
    assert_eq!(v1beta1["status"]["infrastructureReady"], true, "{v1beta1}");
    assert_eq!(
        v1beta1["status"]["failureDomains"], vsphere_cluster["status"]["failureDomains"],
        "the Cluster's failure domains (v1beta1) are what we published"
    );
    assert_eq!(
        cluster["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.0.10", "port": 6443}),
        "CAPI copied the VSphereCluster's endpoint"
    );
    assert_eq!(vsphere_cluster["status"]["ready"], true);
    let owners = vsphere_cluster["metadata"]["ownerReferences"]
        .as_array()
        .unwrap();
    assert!(
        owners
            .iter()
            .any(|o| o["kind"] == "Cluster" && o["name"] == "demo"),
        "CAPI made its Cluster the owner: {owners:?}"
    );
    assert!(
        cluster["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "cluster.cluster.x-k8s.io")),
        "CAPI's finalizer on its Cluster: {cluster}"
    );
    assert!(
        vsphere_cluster["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f
                .iter()
                .any(|f| f == "vspherecluster.infrastructure.cluster.x-k8s.io")),
        "{vsphere_cluster}"
    );

    // `clusterctl describe cluster`, which clusterctl v1.14 allows with its v1beta2 core (v1.10
    // refused it for a v1beta1 core): a user sees our VSphereCluster as the Cluster's
    // infrastructure, ready.
    let o = clusterctl(
        &capi,
        cp,
        home,
        &[
            "describe", "cluster", "demo", "-n", &ns, "--config", &config,
        ],
        &[],
    );
    let described = text(&o);
    assert!(
        o.status.success(),
        "clusterctl describe cluster:\n{described}"
    );
    eprintln!("clusterctl describe cluster demo:\n{described}");
    // v1.14's tree: the Cluster, then its infrastructure beneath it with our Ready condition
    // (STATUS True, REASON Ready).
    assert!(
        described
            .lines()
            .any(|l| l.starts_with(&format!("Cluster {ns}/demo "))),
        "{described}"
    );
    let infra_row = described
        .lines()
        .find(|l| l.contains(&format!("VSphereCluster {ns}/demo ")))
        .unwrap_or_else(|| panic!("no VSphereCluster in clusterctl describe:\n{described}"));
    let columns: Vec<&str> = infra_row.split_whitespace().collect();
    assert!(
        columns.contains(&"True") && columns.contains(&"Ready"),
        "our VSphereCluster is not shown ready: {infra_row}"
    );

    // Deleting the Cluster: CAPI deletes its VSphereCluster, we release it (no machines), and
    // CAPI then lets the Cluster go.
    cp.kubectl(
        ADMIN,
        &[
            "delete",
            "cluster.cluster.x-k8s.io",
            "demo",
            "-n",
            &ns,
            "--wait=true",
            "--timeout=120s",
        ],
    )
    .ok();
    let gone = cp.kubectl(ADMIN, &["get", "vspherecluster", "demo", "-n", &ns]);
    assert!(gone.stderr.contains("NotFound"), "{}", gone.stderr);

    let status = ours.terminate();
    let log = ours.log();
    assert_eq!(status, Some(0), "{log}");
    assert!(
        !log.contains("forbidden"),
        "the installed RBAC refused a call:\n{log}"
    );
    assert!(!log.contains(&password), "the manager logged the password");
    drop(capi_manager);
}
