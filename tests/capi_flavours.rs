//! CAPV v1.17's `-ignition` and `-node-ipam` cluster templates, applied unchanged (filled by
//! `clusterctl generate cluster --from`, variables only, plus the failure-domain edits of
//! [`capi_world::zonal`]), on the real API server with Cluster API v1.14.2's own controllers,
//! ours, vcsim and our three zones. Each flavour must give: the Cluster's infrastructure
//! provisioned; CAPI's copy of the failure domains equal to ours; every machine's VM in the zone
//! of its failure domain, carrying the flavour's bootstrap data (Ignition in
//! `guestinfo.ignition.config.data`; for node IPAM, the addresses its IPAddressClaims were bound
//! to, in `guestinfo.metadata`), and booting from it.
//!
//! What stands in for what:
//! * vcsim is the vCenter; VMs are read over raw SOAP ([`process::Readback`]).
//! * The guests are the workload-cluster simulator (hack/workload-sim): it boots a VM only from
//!   the guestinfo we wrote, CABPK's Ignition included, so KCP initializes and the workers join.
//! * **The IPAM provider is this test** ([`Ipam`]): cluster-api-ipam-provider-in-cluster is not
//!   on the Go module proxy here, so the test binds each IPAddressClaim naming its pool to the
//!   next address, as that provider does (an `IPAddress` named after the claim, then the claim's
//!   `status.addressRef`). Its pool CRD is the test-only one in tests/fixtures/crds; the claim
//!   and address CRDs and their webhooks are Cluster API's own.
//! * The Ignition format is behind Cluster API's `KubeadmBootstrapFormatIgnition` gate, which the
//!   managers get as an admin enables it at `clusterctl init`.
//!
//! Gated on `CAPI_BIN_DIR` and `WORKLOAD_SIM_BIN` (hack/test.sh sets both).
#[path = "support/admin_setup.rs"]
mod admin_setup;
#[path = "support/capi.rs"]
mod capi;
#[path = "support/capi_world.rs"]
mod capi_world;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;
#[path = "support/workload_sim.rs"]
mod workload_sim;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use capi::{apply_retrying, capi_bin_dir, free_port};
use capi_world::{
    ADMIN, CLUSTERS, MACHINES, World, ZONES, assert_in_zone_resized, b64, generate, is_true, list,
    name_of, readback, world_gated, zonal,
};
use serde_json::{Value, json};
use workload_sim::WorkloadSim;

const VSPHERE_CLUSTERS: &str = "vsphereclusters.v1beta2.infrastructure.cluster.x-k8s.io";
const CLAIMS: &str = "ipaddressclaims.v1beta2.ipam.cluster.x-k8s.io";
const ADDRESSES: &str = "ipaddresses.v1beta2.ipam.cluster.x-k8s.io";
const POOL: &str = "nodes";
const NAMESERVER: &str = "10.100.0.2";
const GATEWAY: &str = "10.100.0.1";

/// The two flavours, each its own Cluster in its own namespace.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Flavour {
    Ignition,
    NodeIpam,
}

impl Flavour {
    fn cluster(self) -> &'static str {
        match self {
            Flavour::Ignition => "ign",
            Flavour::NodeIpam => "ipam",
        }
    }

    fn template(self) -> &'static str {
        match self {
            Flavour::Ignition => "cluster-template-ignition.yaml",
            Flavour::NodeIpam => "cluster-template-node-ipam.yaml",
        }
    }
}

/// Cluster-api-ipam-provider-in-cluster's part, played by the test (see the module doc): binds
/// every claim of `ns` naming pool [`POOL`] to the next free address of 10.100.0.0/24.
struct Ipam {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ipam {
    fn start(w: &World, ns: &str) -> Ipam {
        let stop = Arc::new(AtomicBool::new(false));
        let (cp, ns, s) = (w.cp, ns.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut next = 10;
            while !s.load(Ordering::SeqCst) {
                let claims = capi::get(cp, &[CLAIMS, "-n", &ns]);
                for c in claims["items"].as_array().into_iter().flatten() {
                    let name = name_of(c);
                    let name = name.as_str();
                    let bound = c["status"]["addressRef"]["name"].is_string();
                    if bound || c["spec"]["poolRef"]["name"] != POOL {
                        continue;
                    }
                    let address = json!({
                        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
                        "metadata": {"name": name, "namespace": ns, "ownerReferences": [{
                            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
                            "name": name, "uid": c["metadata"]["uid"]}]},
                        "spec": {"claimRef": {"name": name}, "poolRef": c["spec"]["poolRef"],
                            "address": format!("10.100.0.{next}"), "prefix": 24, "gateway": GATEWAY},
                    });
                    next += 1;
                    apply_retrying(cp, &address.to_string());
                    let status = json!({"status": {"addressRef": {"name": name}}}).to_string();
                    // A refused patch is tried again at the next pass: the claim stays unbound.
                    let _ = cp
                        .kubectl(
                            ADMIN,
                            &[
                                "patch",
                                CLAIMS,
                                name,
                                "-n",
                                &ns,
                                "--subresource=status",
                                "--type=merge",
                                "-p",
                                &status,
                            ],
                        )
                        .check();
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        Ipam {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ipam {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

/// The pool kinds of cluster-api-ipam-provider-in-cluster, from the test-only CRDs (the claim
/// and address CRDs in that file are left out: Cluster API installed its own).
fn install_pool_crds(w: &World) {
    let text = std::fs::read_to_string(
        realapi::repo().join("tests/fixtures/crds/ipam.cluster.x-k8s.io.test-only.yaml"),
    )
    .unwrap();
    let pools: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| {
            d["spec"]["names"]["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("IPPool"))
        })
        .collect();
    assert_eq!(pools.len(), 2, "InClusterIPPool and GlobalInClusterIPPool");
    apply_retrying(w.cp, &list(pools));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capvs_ignition_and_node_ipam_templates_boot_machines_in_their_zones() {
    let (Some(capi), Some(sim_bin)) = (capi_bin_dir(), workload_sim::bin()) else {
        eprintln!(
            "skipped: CAPI_BIN_DIR and WORKLOAD_SIM_BIN are not both set (hack/test.sh sets them)"
        );
        return;
    };
    let started = Instant::now();
    let w = world_gated(
        capi,
        true,
        &["--feature-gates=KubeadmBootstrapFormatIgnition=true"],
        &[],
    )
    .await;
    let flavours = [Flavour::Ignition, Flavour::NodeIpam];
    let ports: Vec<u16> = flavours.iter().map(|_| free_port()).collect();
    let (user, password) = w.sim.credentials();
    let port_list: Vec<String> = ports.iter().map(u16::to_string).collect();
    let sim = WorkloadSim::start(
        &sim_bin,
        w.home.path(),
        w.sim.url(),
        user,
        password,
        &port_list.join(","),
    );
    w.three_ready_zones().await;
    install_pool_crds(&w);

    let mut namespaces = BTreeMap::new();
    for (flavour, port) in flavours.iter().zip(&ports) {
        let ns = w.cp.namespace(flavour.cluster());
        let extra: Vec<(&'static str, String)> = match flavour {
            Flavour::Ignition => vec![],
            Flavour::NodeIpam => vec![
                ("NODE_IPAM_POOL_API_GROUP", "ipam.cluster.x-k8s.io".into()),
                ("NODE_IPAM_POOL_KIND", "InClusterIPPool".into()),
                ("NODE_IPAM_POOL_NAME", POOL.into()),
                ("NAMESERVER", NAMESERVER.into()),
            ],
        };
        let docs = generate(
            &w,
            flavour.template(),
            flavour.cluster(),
            &ns,
            *port,
            1,
            1,
            &extra,
        );
        if *flavour == Flavour::NodeIpam {
            let pool = json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
                "metadata": {"name": POOL, "namespace": ns},
                "spec": {"addresses": ["10.100.0.10-10.100.0.99"], "prefix": 24, "gateway": GATEWAY}});
            apply_retrying(w.cp, &pool.to_string());
        }
        apply_retrying(w.cp, &list(zonal(docs, flavour.cluster())));
        namespaces.insert(flavour.cluster(), ns);
    }
    let _ipam = Ipam::start(&w, &namespaces[Flavour::NodeIpam.cluster()]);
    let logs = || {
        let events = sim.events();
        format!(
            "{}\n--- workload-sim (tail):\n{}",
            w.logs(),
            events[events.len().saturating_sub(30)..].join("\n")
        )
    };

    // One control plane Machine and a worker per zone, per flavour, Running with a Node.
    let expected = 1 + ZONES;
    let mut machines = BTreeMap::new();
    for flavour in flavours {
        let ns = &namespaces[flavour.cluster()];
        let running = capi_world::until_or(
            &format!("{flavour:?}: {expected} Machines Running with a Node"),
            Duration::from_secs(420),
            logs,
            async || {
                let ms = w.items(MACHINES, ns);
                let running: Vec<Value> = ms
                    .iter()
                    .filter(|m| {
                        m["status"]["phase"] == "Running"
                            && m["status"]["nodeRef"]["name"].is_string()
                    })
                    .cloned()
                    .collect();
                if running.len() == expected {
                    Ok(running)
                } else {
                    let phases: Vec<String> = ms
                        .iter()
                        .map(|m| format!("{} {}", name_of(m), m["status"]["phase"]))
                        .collect();
                    Err(format!("{phases:?}"))
                }
            },
        )
        .await;
        eprintln!(
            "capi_flavours: {flavour:?} up at {:.0} s",
            started.elapsed().as_secs_f64()
        );
        machines.insert(flavour.cluster(), running);
    }

    let vms: BTreeMap<String, process::VmDetail> = readback(&w.sim)
        .vm_details()
        .await
        .into_iter()
        .map(|v| (v.name.clone(), v))
        .collect();
    let groups = readback(&w.sim).vm_groups().await;
    let zones: BTreeSet<String> = (0..ZONES).map(|i| format!("zone-{i}")).collect();
    for flavour in flavours {
        let (cluster_name, ns) = (flavour.cluster(), &namespaces[flavour.cluster()]);
        // The Cluster's infrastructure provisioned, and CAPI's failure domains ours.
        let cluster = w.find(CLUSTERS, cluster_name, ns).unwrap();
        assert_eq!(
            cluster["status"]["initialization"]["infrastructureProvisioned"], true,
            "{flavour:?}: {}",
            cluster["status"]
        );
        assert!(
            is_true(&cluster, "InfrastructureReady"),
            "{}",
            cluster["status"]
        );
        let ours = w.find(VSPHERE_CLUSTERS, cluster_name, ns).unwrap();
        assert_eq!(
            cluster["status"]["failureDomains"], ours["status"]["failureDomains"],
            "{flavour:?}: Cluster API copies the failure domains we publish"
        );
        let published: BTreeSet<String> = ours["status"]["failureDomains"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(published, zones, "{flavour:?}");

        let mut domains = BTreeSet::new();
        for m in &machines[cluster_name] {
            let name = name_of(m);
            let name = name.as_str();
            let fd = m["spec"]["failureDomain"]
                .as_str()
                .unwrap_or_else(|| panic!("{name} has no failure domain"));
            domains.insert(fd.to_string());
            let vm = vms.get(name).unwrap_or_else(|| panic!("no VM {name}"));
            let i: usize = fd.strip_prefix("zone-").unwrap().parse().unwrap();
            let home = readback(&w.sim)
                .vm_props(&vm.moref, &["config.files.vmPathName"])
                .await;
            assert_in_zone_resized(&groups, vm, i, &home);
            // The bootstrap data the VM carries is the Secret CABPK wrote for its Machine.
            let secret = w.get(&[
                "secret",
                m["spec"]["bootstrap"]["dataSecretName"].as_str().unwrap(),
                "-n",
                ns,
            ]);
            let data = b64(secret["data"]["value"].as_str().unwrap());
            let x = &vm.extra_config;
            let metadata = b64(&x["guestinfo.metadata"]);
            match flavour {
                Flavour::Ignition => {
                    assert_eq!(b64(secret["data"]["format"].as_str().unwrap()), "ignition");
                    assert!(!x.contains_key("guestinfo.userdata"), "{name}: {x:?}");
                    assert_eq!(
                        x.get("guestinfo.ignition.config.data.encoding")
                            .map(String::as_str),
                        Some("base64")
                    );
                    assert_eq!(b64(&x["guestinfo.ignition.config.data"]), data, "{name}");
                    let ignition: Value = serde_json::from_str(&data).unwrap();
                    assert!(ignition["ignition"]["version"].is_string(), "{name}");
                }
                Flavour::NodeIpam => {
                    assert_eq!(b64(&x["guestinfo.userdata"]), data, "{name}");
                    // One claim per device and pool, bound; its address is in the metadata.
                    let claims: Vec<Value> = w
                        .items(CLAIMS, ns)
                        .into_iter()
                        .filter(|c| name_of(c).starts_with(&format!("{name}-")))
                        .collect();
                    assert_eq!(claims.len(), 1, "{name}: {claims:#?}");
                    let address = w
                        .find(ADDRESSES, &name_of(&claims[0]), ns)
                        .unwrap_or_else(|| panic!("no IPAddress for {name}"));
                    let cidr = format!("{}/24", address["spec"]["address"].as_str().unwrap());
                    for wanted in [cidr.as_str(), GATEWAY, NAMESERVER] {
                        assert!(
                            metadata.contains(wanted),
                            "{name}: {wanted} not in\n{metadata}"
                        );
                    }
                    assert!(!metadata.contains("dhcp4: true"), "{metadata}");
                }
            }
        }
        assert_eq!(
            domains, zones,
            "{flavour:?}: the workers, one MachineDeployment per zone, cover every zone"
        );
    }

    // Deleting the Clusters takes every VM, and every address claim with it.
    for (cluster, ns) in &namespaces {
        w.cp.kubectl(
            ADMIN,
            &["delete", CLUSTERS, cluster, "-n", ns, "--wait=false"],
        )
        .ok();
    }
    capi_world::until_or(
        "both Clusters, their VMs and claims gone",
        Duration::from_secs(300),
        logs,
        async || {
            let left: Vec<String> = readback(&w.sim)
                .vm_details()
                .await
                .into_iter()
                .map(|v| v.name)
                .filter(|n| namespaces.keys().any(|c| n.starts_with(&format!("{c}-"))))
                .collect();
            let claims = w.items(CLAIMS, &namespaces[Flavour::NodeIpam.cluster()]);
            if left.is_empty() && claims.is_empty() {
                Ok(())
            } else {
                Err(format!("VMs {left:?}, {} claims", claims.len()))
            }
        },
    )
    .await;
    eprintln!(
        "capi_flavours: whole test {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        !w.ours.log().contains(password),
        "the manager logged the password"
    );
}
