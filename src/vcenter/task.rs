//! Tasks. Long operations return a [`TaskRef`] at once; reconcilers record it and look again
//! later (never blocking a reconcile), while CLI paths may [`Client::wait_task`].
use std::time::{Duration, Instant};

use super::client::Client;
use super::model::error::{Error, Result};
use super::model::fault::{Fault, FaultKind};
use super::model::moref::MoRef;
use super::model::task::{TaskRef, TaskState};
use super::soap::Node;
use super::stats::CallKind;

/// Read a `TaskInfo` element.
pub fn parse_task_info(info: &Node) -> TaskState {
    match info.child_text("state").unwrap_or_default() {
        "success" => TaskState::Success {
            result: info.child("result").and_then(MoRef::from_node),
        },
        "error" => TaskState::Error(
            info.child("error")
                .map(Fault::from_localized)
                .unwrap_or_else(|| Fault::untyped("task failed without an error")),
        ),
        "running" => TaskState::Running {
            progress: info.child_text("progress").and_then(|p| p.parse().ok()),
        },
        _ => TaskState::Queued,
    }
}

impl Client {
    /// Start a `*_Task` method and return its task reference.
    pub(crate) async fn start_task(&self, method: &str, body: &str) -> Result<TaskRef> {
        let node = self.call(method, CallKind::Write, body).await?;
        let task = node
            .child("returnval")
            .and_then(MoRef::from_node)
            .ok_or_else(|| Error::Decode {
                server: self.server(),
                method: method.to_string(),
                reason: "no task in the answer".into(),
            })?;
        Ok(TaskRef {
            task,
            operation: method.to_string(),
        })
    }

    /// One look at a task (one round trip).
    pub async fn task_state(&self, task: &TaskRef) -> Result<TaskState> {
        let c = self.retrieve_one(&task.task, &["info"]).await?;
        let info = c.props.get("info").ok_or_else(|| Error::Decode {
            server: self.server(),
            method: "RetrievePropertiesEx".into(),
            reason: format!("task {} has no info", task.task),
        })?;
        Ok(parse_task_info(info))
    }

    /// The state of several tasks in one round trip. A task vCenter no longer knows (tasks
    /// expire some minutes after they end) maps to `None`; the caller decides from what the
    /// inventory shows instead.
    pub async fn task_states(
        &self,
        tasks: &[MoRef],
    ) -> Result<std::collections::BTreeMap<MoRef, Option<TaskState>>> {
        let mut wanted: Vec<MoRef> = tasks.to_vec();
        wanted.sort();
        wanted.dedup();
        let mut out: std::collections::BTreeMap<MoRef, Option<TaskState>> =
            wanted.iter().map(|t| (t.clone(), None)).collect();
        // A missing object fails the whole read (ManagedObjectNotFound naming it): drop it and
        // read the rest again, at most once per missing task.
        for _ in 0..=wanted.len() {
            if wanted.is_empty() {
                break;
            }
            match self.retrieve_objects(&wanted, "Task", &["info"]).await {
                Ok(contents) => {
                    for c in contents {
                        if let Some(info) = c.props.get("info") {
                            out.insert(c.moref().clone(), Some(parse_task_info(info)));
                        }
                    }
                    break;
                }
                Err(e) => {
                    let missing = match e.fault().map(|f| &f.kind) {
                        Some(FaultKind::ManagedObjectNotFound { obj: Some(obj) }) => obj.clone(),
                        _ => return Err(e),
                    };
                    if !wanted.contains(&missing) {
                        return Err(e);
                    }
                    wanted.retain(|t| *t != missing);
                }
            }
        }
        Ok(out)
    }

    /// A queued or running task on `entity`, if any, as `task-12 (description)` (two reads:
    /// `recentTask`, then their states).
    pub async fn running_task(&self, entity: &MoRef) -> Result<Option<String>> {
        let recent = self.retrieve_one(entity, &["recentTask"]).await?;
        let tasks: Vec<MoRef> = recent
            .props
            .get("recentTask")
            .map(|v| v.children.iter().filter_map(MoRef::from_node).collect())
            .unwrap_or_default();
        if tasks.is_empty() {
            return Ok(None);
        }
        let states = self
            .retrieve_objects(&tasks, "Task", &["info.state", "info.descriptionId"])
            .await?;
        Ok(states.iter().find_map(|t| {
            matches!(t.text("info.state"), Some("queued" | "running")).then(|| {
                format!(
                    "{} ({})",
                    t.moref().value,
                    t.text("info.descriptionId").unwrap_or("task")
                )
            })
        }))
    }

    /// Poll until the task ends (backoff 100 ms → 2 s) or `timeout` passes; a task error is
    /// [`Error::Task`]. For CLI paths and tests; reconcilers use [`Client::task_state`].
    pub async fn wait_task(&self, task: &TaskRef, timeout: Duration) -> Result<Option<MoRef>> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            match self.task_state(task).await? {
                TaskState::Success { result } => return Ok(result),
                TaskState::Error(fault) => {
                    return Err(Error::Task {
                        task: task.task.value.clone(),
                        operation: task.operation.clone(),
                        fault: Box::new(fault),
                    });
                }
                _ if started.elapsed() >= timeout => {
                    return Err(Error::TaskTimeout {
                        task: task.task.value.clone(),
                        operation: task.operation.clone(),
                        seconds: timeout.as_secs(),
                    });
                }
                _ => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::soap::xml::parse;

    #[test]
    fn task_info_states_parse() {
        let ok = parse(r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><key>task-117</key><state>success</state><result xsi:type="ManagedObjectReference" type="VirtualMachine">vm-119</result></val>"#).unwrap();
        assert_eq!(
            parse_task_info(&ok),
            TaskState::Success {
                result: Some(MoRef::new("VirtualMachine", "vm-119"))
            }
        );
        let err = parse(r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><state>error</state><error><fault xsi:type="InvalidArgument"></fault><localizedMessage>*types.InvalidArgument</localizedMessage></error></val>"#).unwrap();
        match parse_task_info(&err) {
            TaskState::Error(f) => assert!(matches!(f.kind, FaultKind::InvalidArgument { .. })),
            other => panic!("{other:?}"),
        }
        let running = parse("<val><state>running</state><progress>40</progress></val>").unwrap();
        assert_eq!(
            parse_task_info(&running),
            TaskState::Running { progress: Some(40) }
        );
    }
}
