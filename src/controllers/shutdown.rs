//! A shutdown signal that many tasks can wait on: SIGTERM for the process, or the end of a
//! leadership term for the controllers. Waiting is cheap and can start after the trigger.
use tokio::sync::watch;

/// The waiting side; clone freely.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

/// The triggering side. Dropping it also counts as a shutdown, so a forgotten trigger cannot
/// leave tasks running forever.
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

/// A new untriggered signal.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }

    /// Another waiting side.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Shutdown {
    /// Resolves once triggered (immediately if it already was).
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|v| *v).await;
    }

    pub fn is_triggered(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_before_and_after_the_trigger_both_return() {
        let (trigger, shutdown) = channel();
        let early = tokio::spawn(shutdown.clone().wait());
        assert!(!shutdown.is_triggered());
        trigger.trigger();
        early.await.unwrap();
        shutdown.clone().wait().await;
        assert!(shutdown.is_triggered());
        let (trigger, shutdown) = channel();
        drop(trigger);
        shutdown.clone().wait().await;
        assert!(shutdown.is_triggered());
    }
}
