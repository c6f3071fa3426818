//! The calls in flight of one server, counted so that a shutdown can refuse new ones, wait for the running ones, and kill what is left.

/// The calls in flight, and whether the server still takes new ones.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    running: std::sync::atomic::AtomicUsize,
    draining: std::sync::atomic::AtomicBool,
    idle: tokio::sync::Notify,
    /// Cancelled when a shutdown's grace period is over: the calls still running are killed
    /// and each answers its client with an error that says so.
    pub(super) killing: tokio_util::sync::CancellationToken,
}

impl Calls {
    /// Kills every running call; each still answers its client, with an error that says
    /// the server shut down.
    pub(crate) fn kill_running(&self) {
        self.killing.cancel();
    }

    /// Refuses new calls from now on; the running ones go on.
    pub(crate) fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many calls are running.
    pub(crate) fn running(&self) -> usize {
        self.running.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until no call runs.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Counts a call until the guard drops (answered, failed or cancelled); `None` once
    /// draining.
    pub(super) fn start(&self) -> Option<CallGuard<'_>> {
        self.running
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let guard = CallGuard(self);
        (!self.draining.load(std::sync::atomic::Ordering::SeqCst)).then_some(guard)
    }
}

/// One call counted by [`Calls`].
pub(super) struct CallGuard<'a>(&'a Calls);

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if self
            .0
            .running
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.0.idle.notify_waiters();
        }
    }
}
