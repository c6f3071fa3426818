//! One `tools/call` request from its arrival to its audit line: an [`OpenCall`] is made before
//! anything else is decided about the request, and writes its line when it drops, so that no
//! way out of the handler (an answer, an error, a refusal, a cancellation, a client that went
//! away and had the handler's future dropped) leaves a call unaudited.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolsmith_registry::{AuditedCall, CallIdentity, Envelope, error_chain};

use crate::mcp::ServeContext;

/// What ended a call that has no envelope, as its audit line says.
pub(super) mod outcome {
    /// The client sent `notifications/cancelled`.
    pub(crate) const CANCELLED: &str = "cancelled";
    /// The client's connection or session went away before the answer: the handler was
    /// cancelled with its transport closed, or dropped.
    pub(crate) const CLIENT_GONE: &str = "client_gone";
    /// Still running when the shutdown's grace period ended: killed.
    pub(crate) const KILLED_AT_SHUTDOWN: &str = "killed_at_shutdown";
    /// Arrived after the shutdown began: not started.
    pub(crate) const REFUSED_SHUTTING_DOWN: &str = "refused_shutting_down";
    /// The tool could not be run for a reason of the server's (an executor failure).
    pub(crate) const INTERNAL_ERROR: &str = "internal_error";
}

/// A `tools/call` (of a tool, an unknown name or `custom_tool`) that is audited exactly once.
pub(super) struct OpenCall {
    shared: Arc<ServeContext>,
    /// `None` once written, or from the start when the server keeps no audit log.
    call: Option<AuditedCall>,
    /// The ids the tool receives, the call's recorded in its line.
    identity: CallIdentity,
    started: Instant,
}

impl OpenCall {
    /// The call of `tool` (as the client named it) with `arguments`, from `client`, in the
    /// session `identity` names.
    pub(super) fn start(
        shared: &Arc<ServeContext>,
        tool: &str,
        arguments: &Value,
        client: Option<String>,
        identity: CallIdentity,
    ) -> OpenCall {
        OpenCall {
            call: shared
                .audit
                .as_ref()
                .map(|_| AuditedCall::start(tool, arguments, client, identity.call_id())),
            identity,
            shared: Arc::clone(shared),
            started: Instant::now(),
        }
    }

    /// Records the call under `tool`, the name it resolved to.
    pub(super) fn name(&mut self, tool: &str) {
        self.call = self.call.take().map(|call| call.named(tool));
    }

    /// The ids the tool receives.
    pub(super) fn identity(&self) -> &CallIdentity {
        &self.identity
    }

    /// How long the call has run so far.
    pub(super) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Ends the call with the envelope of its run.
    pub(super) fn finish(mut self, envelope: &Envelope) {
        if let Some(call) = self.call.take() {
            let written = call.finish(self.shared.audit.as_ref(), envelope);
            report(written);
        }
    }

    /// Ends the call with `outcome` (one of [`outcome`], a refusal's, a generation's status).
    pub(super) fn finish_as(mut self, outcome: &str) {
        self.write(outcome);
    }

    fn write(&mut self, outcome: &str) {
        if let Some(call) = self.call.take() {
            let written = call.finish_as(self.shared.audit.as_ref(), outcome);
            report(written);
        }
    }
}

impl Drop for OpenCall {
    /// A call dropped unfinished is one whose handler rmcp dropped: its client is gone.
    fn drop(&mut self) {
        self.write(outcome::CLIENT_GONE);
    }
}

/// The call is real and was answered (or its client left): a line that cannot be written is
/// reported on stderr, loudly, and the server goes on.
fn report(written: Result<(), toolsmith_registry::AuditError>) {
    if let Err(error) = written {
        tracing::error!(error = %error_chain(&error), "a call could not be written to the audit log");
    }
}
