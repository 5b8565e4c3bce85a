//! Tasks as planners see them: a started task's reference (recorded in status, read again on a
//! later pass) and its state. Read and started by `vcenter::task`.
use super::fault::Fault;
use super::moref::MoRef;

/// A started task.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskRef {
    pub task: MoRef,
    /// The operation, for messages (`CloneVM_Task`).
    pub operation: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskState {
    Queued,
    Running {
        progress: Option<u32>,
    },
    Success {
        result: Option<MoRef>,
        /// A `PowerOnMultiVM_Task`'s VMs that were not powered on, with why
        /// (`ClusterPowerOnVmResult.notAttempted`); empty for every other task.
        not_attempted: Vec<(MoRef, Fault)>,
    },
    Error(Fault),
}

impl TaskState {
    pub fn is_done(&self) -> bool {
        matches!(self, TaskState::Success { .. } | TaskState::Error(_))
    }
}
