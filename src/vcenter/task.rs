//! Tasks. Long operations return a [`TaskRef`] at once; reconcilers record it and look again
//! later (never blocking a reconcile), while CLI paths may [`Client::wait_task`].
use std::time::{Duration, Instant};

use super::client::Client;
use super::model::error::{Error, Result};
use super::model::fault::{Fault, FaultKind};
use super::model::moref::MoRef;
use super::model::task::{TaskRef, TaskState};
use super::soap::Node;
use super::soap::decode::{Malformed, expect_type, optional_number, required, shown};
use super::stats::CallKind;

/// Read a `TaskInfo` element. `state` is required and must be one of the four states; a
/// `result` typed as a moref must be one (other result types are not read); `progress` must be
/// a number when present.
pub fn parse_task_info(info: &Node) -> Result<TaskState, Malformed> {
    expect_type(info, &["TaskInfo"], "task info")?;
    let state = required(info, "state", "TaskInfo")?;
    Ok(match state.text.trim() {
        "success" => TaskState::Success {
            result: match info.child("result") {
                Some(r) if r.xsi_type.as_deref() == Some("ManagedObjectReference") => {
                    Some(MoRef::decode(r, "TaskInfo result")?)
                }
                Some(r) if r.xsi_type.as_deref() == Some("ClusterPowerOnVmResult") => None,
                Some(r) => MoRef::from_node(r),
                None => None,
            },
            not_attempted: match info.child("result") {
                Some(r) if r.xsi_type.as_deref() == Some("ClusterPowerOnVmResult") => {
                    not_attempted(r)?
                }
                _ => Vec::new(),
            },
        },
        "error" => TaskState::Error(
            info.child("error")
                .map(Fault::from_localized)
                .unwrap_or_else(|| Fault::untyped("task failed without an error")),
        ),
        "running" => TaskState::Running {
            progress: optional_number(info, "progress", "TaskInfo progress")?,
        },
        "queued" => TaskState::Queued,
        other => {
            return Err(Malformed::new(format!(
                "TaskInfo state {} is not queued, running, success or error",
                shown(other)
            )));
        }
    })
}

/// The VMs a `PowerOnMultiVM_Task` did not power on (`notAttempted[]`: `vm` and `fault`, both
/// required), with the fault vCenter gave.
fn not_attempted(result: &Node) -> Result<Vec<(MoRef, Fault)>, Malformed> {
    result
        .children_named("notAttempted")
        .map(|n| {
            let vm = MoRef::decode(required(n, "vm", "notAttempted")?, "notAttempted vm")?;
            let fault = required(n, "fault", "notAttempted")?;
            Ok((vm, Fault::from_localized(fault)))
        })
        .collect()
}

/// The tasks of a `recentTask` value (`ArrayOfManagedObjectReference`); an entry that is not
/// a moref is an error, not a task less to wait for.
pub fn recent_tasks(val: &Node) -> Result<Vec<MoRef>, Malformed> {
    expect_type(val, &["ArrayOfManagedObjectReference"], "recentTask")?;
    val.children
        .iter()
        .map(|m| MoRef::decode(m, "recentTask entry"))
        .collect()
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
        parse_task_info(info).map_err(|m| m.into_error(self.server(), "RetrievePropertiesEx"))
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
                            let state = parse_task_info(info).map_err(|m| {
                                m.within(&c.obj.to_string())
                                    .into_error(self.server(), "RetrievePropertiesEx")
                            })?;
                            out.insert(c.obj, Some(state));
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
            .map(recent_tasks)
            .transpose()
            .map_err(|m| m.into_error(self.server(), "RetrievePropertiesEx"))?
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
                TaskState::Success { result, .. } => return Ok(result),
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
            parse_task_info(&ok).unwrap(),
            TaskState::Success {
                result: Some(MoRef::new("VirtualMachine", "vm-119")),
                not_attempted: vec![],
            }
        );
        let err = parse(r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><state>error</state><error><fault xsi:type="InvalidArgument"></fault><localizedMessage>*types.InvalidArgument</localizedMessage></error></val>"#).unwrap();
        match parse_task_info(&err).unwrap() {
            TaskState::Error(f) => assert!(matches!(f.kind, FaultKind::InvalidArgument { .. })),
            other => panic!("{other:?}"),
        }
        let running = parse("<val><state>running</state><progress>40</progress></val>").unwrap();
        assert_eq!(
            parse_task_info(&running).unwrap(),
            TaskState::Running { progress: Some(40) }
        );
    }

    fn info(inner: &str) -> Result<TaskState, Malformed> {
        let doc = format!(
            r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="TaskInfo"><key>task-1</key>{inner}</val>"#
        );
        parse_task_info(&parse(&doc).unwrap())
    }

    #[test]
    fn malformed_task_infos_are_decode_errors() {
        let cases = [
            ("", "TaskInfo without state"),
            (
                "<state>done</state>",
                r#"TaskInfo state "done" is not queued"#,
            ),
            ("<state></state>", r#"TaskInfo state "" is not queued"#),
            (
                "<state>running</state><progress>forty</progress>",
                r#"TaskInfo progress "forty" is not a number"#,
            ),
            (
                "<state>running</state><progress>-1</progress>",
                r#"TaskInfo progress "-1" is not a number"#,
            ),
            (
                "<state>running</state><progress>99999999999999999999</progress>",
                "is not a number in range",
            ),
            (
                r#"<state>success</state><result xsi:type="ManagedObjectReference">vm-1</result>"#,
                "TaskInfo result is not a managed object reference (no type)",
            ),
        ];
        for (inner, expected) in cases {
            let e = info(inner).unwrap_err().to_string();
            assert!(e.contains(expected), "{inner}: {e}");
        }
        let wrong = parse(r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="xsd:string">success</val>"#).unwrap();
        assert_eq!(
            parse_task_info(&wrong).unwrap_err().to_string(),
            "task info is a string, not a TaskInfo"
        );
        // A result of another type is not read (it is not a moref), and not an error.
        assert_eq!(
            info(r#"<state>success</state><result xsi:type="xsd:string">ok</result>"#).unwrap(),
            TaskState::Success {
                result: None,
                not_attempted: vec![]
            }
        );
        assert_eq!(info("<state>queued</state>").unwrap(), TaskState::Queued);
    }

    #[test]
    fn a_task_read_without_obj_fails_to_decode_instead_of_panicking() {
        // What `task_states` reads for the machine sweep, with `obj` left out.
        let body = crate::vcenter::property::tests::reply(
            r#"<objects><propSet><name>info</name><val xsi:type="TaskInfo"><state>running</state></val></propSet></objects>"#,
        );
        match crate::vcenter::property::tests::read(&body) {
            Err(Error::Decode { reason, method, .. }) => {
                assert_eq!(method, "RetrievePropertiesEx");
                assert!(reason.contains("without obj"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn recent_tasks_must_be_morefs() {
        let ok = parse(r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="ArrayOfManagedObjectReference"><ManagedObjectReference type="Task">task-1</ManagedObjectReference></val>"#).unwrap();
        assert_eq!(
            recent_tasks(&ok).unwrap(),
            vec![MoRef::new("Task", "task-1")]
        );
        let bad =
            parse(r#"<val><ManagedObjectReference>task-1</ManagedObjectReference></val>"#).unwrap();
        assert!(recent_tasks(&bad).is_err());
    }

    /// A `PowerOnMultiVM_Task` that succeeded names the VMs it did not power on; the others
    /// were attempted (their own tasks, when not under DRS, are not awaited).
    #[test]
    fn a_multi_power_on_result_names_the_vms_not_powered_on() {
        let doc = r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="TaskInfo"><state>success</state><result xsi:type="ClusterPowerOnVmResult"><attempted><vm type="VirtualMachine">vm-1</vm><task type="Task">task-9</task></attempted><notAttempted><vm type="VirtualMachine">vm-2</vm><fault><fault xsi:type="InvalidPowerState"/><localizedMessage>The attempted operation cannot be performed in the current state (Powered on).</localizedMessage></fault></notAttempted></result></val>"#;
        let state = parse_task_info(&parse(doc).unwrap()).unwrap();
        let TaskState::Success {
            result,
            not_attempted,
        } = state
        else {
            panic!("{state:?}")
        };
        assert_eq!(result, None);
        assert_eq!(not_attempted.len(), 1);
        assert_eq!(not_attempted[0].0, MoRef::new("VirtualMachine", "vm-2"));
        assert_eq!(not_attempted[0].1.kind, FaultKind::InvalidPowerState);
        // A notAttempted entry without its VM is a decode error, not a VM less to retry.
        let bad = doc.replace(r#"<vm type="VirtualMachine">vm-2</vm>"#, "");
        assert!(parse_task_info(&parse(&bad).unwrap()).is_err());
    }
}
