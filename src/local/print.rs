//! Local-mode output: tables for people, YAML or JSON objects with status for tools.
use std::fmt::Write as _;

use super::driver::Report;
use super::store::Store;
use crate::api::conditions::{cluster, find_capi};

/// A fixed-width table; the last column is not padded.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n {
                out.push_str(c);
            } else {
                let _ = write!(out, "{c:<w$}  ", w = widths[i]);
            }
        }
        out.push('\n');
    };
    line(headers.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// The zone and cluster tables.
pub fn tables(store: &Store, report: &Report) -> String {
    let mut rows = Vec::new();
    for (name, z) in &store.zones {
        let verdict = report.verdicts.get(name);
        let ready = z.status.as_ref().and_then(|s| s.ready);
        let (reason, message) = verdict
            .and_then(|v| v.first_problem())
            .map(|(r, m)| (r.to_string(), m.to_string()))
            .unwrap_or_default();
        rows.push(vec![
            name.clone(),
            match ready {
                Some(true) => "True".into(),
                Some(false) => "False".into(),
                None => "Unknown".into(),
            },
            z.spec.failure_domain.clone().unwrap_or_default(),
            z.spec.server.clone().unwrap_or_default(),
            reason,
            message,
        ]);
    }
    let mut out = table(
        &[
            "NAME",
            "READY",
            "FAILURE-DOMAIN",
            "SERVER",
            "REASON",
            "MESSAGE",
        ],
        &rows,
    );
    if !store.clusters.is_empty() {
        let rows: Vec<Vec<String>> = store
            .clusters
            .iter()
            .map(|(k, c)| {
                let status = c.status.as_ref();
                let fds = status
                    .and_then(|s| s.failure_domains.as_ref())
                    .map(|m| m.keys().cloned().collect::<Vec<_>>().join(","))
                    .unwrap_or_default();
                let cond = status
                    .and_then(|s| s.conditions.as_deref())
                    .and_then(|c| find_capi(c, cluster::FAILURE_DOMAINS_AVAILABLE))
                    .map(|c| {
                        let mut s = c.status.clone();
                        if let Some(r) = &c.reason {
                            s.push_str(&format!(" ({r})"));
                        }
                        s
                    })
                    .unwrap_or_else(|| "-".into());
                vec![
                    k.clone(),
                    if fds.is_empty() { "<none>".into() } else { fds },
                    cond,
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &["CLUSTER", "FAILURE-DOMAINS", "FAILURE-DOMAINS-AVAILABLE"],
            &rows,
        ));
    }
    out
}

/// One line: what changed in vCenter and what it cost.
pub fn summary(report: &Report, dry_run: bool) -> String {
    let ready = report.verdicts.values().filter(|v| v.ready()).count();
    let changes = if dry_run {
        format!("{} change(s) would be made", report.pending.len())
    } else {
        let mut s = format!("{} vCenter change(s) made", report.applied.len());
        if !report.failed.is_empty() {
            s.push_str(&format!(", {} refused", report.failed.len()));
        }
        s
    };
    format!(
        "{ready}/{} zone(s) ready; {changes}; {}",
        report.verdicts.len(),
        report.round_trips.summary()
    )
}

/// The changes, one per line (`would:` on a dry run).
pub fn changes(report: &Report, dry_run: bool) -> String {
    let mut out = String::new();
    if dry_run {
        for s in &report.pending {
            let _ = writeln!(out, "would: {s}");
        }
    } else {
        for s in &report.applied {
            let _ = writeln!(out, "done: {s}");
        }
    }
    for (_, e) in &report.failed {
        // The executor's error already names the step.
        let _ = writeln!(out, "refused: {e}");
    }
    out
}

/// Objects local mode reconciled, with status (never Secrets).
fn objects(store: &Store) -> Vec<serde_json::Value> {
    let mut v = Vec::new();
    v.extend(
        store
            .failure_domains
            .values()
            .filter_map(|o| serde_json::to_value(o).ok()),
    );
    v.extend(
        store
            .zones
            .values()
            .filter_map(|o| serde_json::to_value(o).ok()),
    );
    v.extend(
        store
            .clusters
            .values()
            .filter_map(|o| serde_json::to_value(o).ok()),
    );
    v
}

pub fn json(store: &Store) -> String {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects(store)});
    serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"
}

pub fn yaml(store: &Store) -> String {
    objects(store)
        .iter()
        .filter_map(|o| serde_saphyr::to_string(o).ok())
        .map(|doc| format!("---\n{doc}"))
        .collect()
}
