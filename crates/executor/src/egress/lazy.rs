//! A supervisor that starts only when its run first needs it (`unix.rs` is
//! the supervisor itself).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use super::unix::UnixSupervisor;
use crate::creations::{Creations, WriteAttempt};
use crate::{EgressEvent, Error};

/// A supervisor started only when its run first needs it: most runs make no
/// call the filter sends to it (a tool that only reads and prints), and a
/// thread per run would cost every call. A task of the runtime waits for the
/// listener to become readable (a notification, or every process gone), then
/// starts the [`UnixSupervisor`] on it.
#[derive(Debug)]
pub(crate) struct LazySupervisor {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Option<UnixSupervisor>>,
}

impl LazySupervisor {
    pub(crate) fn start(
        listener: OwnedFd,
        granted: Vec<PathBuf>,
        creations: Option<Arc<Creations>>,
    ) -> Result<Self, Error> {
        // SAFETY: the registration is dropped (in the task) before `listener`
        // is handed on or closed.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                listener.as_raw_fd(),
                tokio::io::Interest::READABLE,
            )
        }
        .map_err(|source| Error::Sys {
            call: "registering the seccomp listener with the runtime",
            source: io::Error::from(source),
        })?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            // A notification makes the listener readable; the end of every
            // process of the run only closes it (`EPOLLHUP`), which needs no supervisor.
            let needed = tokio::select! {
                biased;
                _ = stopped => false,
                ready = registered.readable() => {
                    ready.is_ok_and(|guard| guard.ready().is_readable())
                }
            };
            drop(registered);
            if !needed {
                return None;
            }
            UnixSupervisor::start(listener, granted, creations).ok()
        });
        Ok(LazySupervisor { stop, task })
    }

    /// Stops the supervisor, if it started, and returns what it recorded.
    pub(crate) async fn finish(self) -> (Vec<EgressEvent>, Vec<WriteAttempt>) {
        let _ignored = self.stop.send(());
        match self.task.await {
            Ok(Some(supervisor)) => supervisor.finish().await,
            _ => (Vec::new(), Vec::new()),
        }
    }
}
