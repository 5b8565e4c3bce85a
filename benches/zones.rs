//! Round trips of zone verification with a warm session and tag cache — the in-cluster steady
//! state, where the controller keeps its vCenter session and tag ids between reconciles —
//! next to the cold cost a fresh process pays (what `hack/bench.sh` measures through the CLI).
//!
//!   cargo bench --bench zones            (needs the vcsim binary: hack/vcsim/build.sh)
//!
//! Not a timed test: it prints a table and asserts nothing about wall time.
#[path = "../tests/support/vcsim.rs"]
mod vcsim;

use std::collections::BTreeMap;
use std::time::Instant;

use secrecy::SecretString;
use vsphere_provider::api::deployment_zone::{
    PlacementConstraint, VSphereDeploymentZone, VSphereDeploymentZoneSpec,
};
use vsphere_provider::api::failure_domain::{
    FailureDomain, FailureDomainType, Topology, VSphereFailureDomain, VSphereFailureDomainSpec,
};
use vsphere_provider::reconcile::zones::reconcile_server;
use vsphere_provider::vcenter::stats::CallKind;
use vsphere_provider::vcenter::tags::TagCatalog;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials};

fn zones(
    n: usize,
) -> (
    Vec<VSphereDeploymentZone>,
    BTreeMap<String, VSphereFailureDomain>,
) {
    let side = |name: String, t, cat: &str| FailureDomain {
        name,
        type_: t,
        tag_category: cat.into(),
        auto_configure: Some(true),
    };
    let mut zs = Vec::new();
    let mut fds = BTreeMap::new();
    for i in 0..n {
        let name = format!("zone-{i}");
        fds.insert(
            name.clone(),
            VSphereFailureDomain::new(
                &name,
                VSphereFailureDomainSpec {
                    region: side(
                        "region-a".into(),
                        FailureDomainType::Datacenter,
                        "k8s-region",
                    ),
                    zone: side(name.clone(), FailureDomainType::ComputeCluster, "k8s-zone"),
                    topology: Topology {
                        datacenter: "DC0".into(),
                        compute_cluster: Some(format!("DC0_C{i}")),
                        datastore: Some("LocalDS_0".into()),
                        networks: Some(vec!["VM Network".into()]),
                        ..Topology::default()
                    },
                },
            ),
        );
        zs.push(VSphereDeploymentZone::new(
            &name,
            VSphereDeploymentZoneSpec {
                server: Some("127.0.0.1".into()),
                failure_domain: Some(name.clone()),
                control_plane: None,
                placement_constraint: PlacementConstraint {
                    resource_pool: Some(format!("DC0_C{i}_RP1")),
                    folder: Some("vm".into()),
                },
            },
        ));
    }
    (zs, fds)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("| zones | run | round trips | writes | per zone | ms |");
    println!("|---:|---|---:|---:|---:|---:|");
    for n in [1usize, 10, 100] {
        let sim = vcsim::Vcsim::builder()
            .clusters(n as u32)
            .hosts(1)
            .pools(1)
            .vms(0)
            .standalone_hosts(0)
            .delay_ms(10)
            .start()
            .await;
        let client = Client::new(
            sim.url(),
            Credentials::new("bench", SecretString::from("bench-password")),
            ClientOptions::default(),
        )
        .unwrap();
        let (zs, fds) = zones(n);
        let refs: Vec<&VSphereDeploymentZone> = zs.iter().collect();
        let mut tags = TagCatalog::default();
        for run in ["configure (cold)", "verify (warm)", "verify (warm)"] {
            let before = client.stats().snapshot();
            let started = Instant::now();
            let result = reconcile_server(&client, &refs, &fds, &mut tags, false).await;
            let ms = started.elapsed().as_millis();
            let d = client.stats().snapshot().since(&before);
            assert!(
                result.verdicts.values().all(|v| v.ready()),
                "{n} zones not ready"
            );
            println!(
                "| {n} | {run} | {} | {} | {:.2} | {ms} |",
                d.total(),
                d.kind(CallKind::Write),
                d.total() as f64 / n as f64
            );
        }
        client.logout().await.unwrap();
    }
}
