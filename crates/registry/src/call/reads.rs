//! A call's attempts to read its read masks (`masks.rs`), as the executor's mask server saw
//! them ([`Outcome::reads_denied`](toolsmith_executor::Outcome)): each is a `kind: "read"`
//! refusal in `metadata.sandbox.denied` (and the audit line) naming the `read_reveal` line
//! that would allow it, or saying that toolsmith's own state is never revealed.

use std::path::{Path, PathBuf};

use toolsmith_executor::ReadAttempt;

use crate::grant::{DenialKind, SandboxDenial, toml_string};
use crate::sandbox::SandboxReport;

/// The `grant` of a read of toolsmith's own state, which no configuration reveals.
pub(crate) const OWN_STATE_GRANT: &str = "none: toolsmith's own state (config, trust store, caches, audit log, token and key files, history) is never revealed to a tool";

/// The denial of one attempt of `tool` to read below the mask `attempt.hidden`.
fn denial(tool: &str, attempt: &ReadAttempt, own_state: &[PathBuf]) -> SandboxDenial {
    let target = attempt.path.display().to_string();
    let own = own_state
        .iter()
        .any(|state| attempt.hidden.starts_with(state) || state.starts_with(&attempt.hidden));
    if own {
        return SandboxDenial {
            kind: DenialKind::Read,
            target,
            reason: format!(
                "{} is toolsmith's own state, hidden from every tool",
                attempt.hidden.display()
            ),
            grant: OWN_STATE_GRANT.to_owned(),
        };
    }
    SandboxDenial {
        kind: DenialKind::Read,
        target,
        reason: format!(
            "{} is masked (a credential location or `read_hide`): the tool saw it empty",
            attempt.hidden.display()
        ),
        grant: format!(
            "[tools.{tool}] read_reveal = [{}]",
            toml_string(&attempt.hidden.to_string_lossy())
        ),
    }
}

/// Adds a run's attempts on its masks to its report's `denied`, once per path (the executor
/// keeps at most [`toolsmith_executor::MAX_READ_ATTEMPTS`] of them).
pub(crate) fn report(
    report: &mut SandboxReport,
    tool: &str,
    attempts: &[ReadAttempt],
    own_state: &[PathBuf],
) {
    for attempt in attempts {
        let denial = denial(tool, attempt, own_state);
        let known = report
            .denied
            .iter()
            .any(|other| other.kind == DenialKind::Read && other.target == denial.target);
        if !known {
            report.denied.push(denial);
        }
    }
}

/// The denial of a `read_reveal` that `tool` declares and the operator does not grant.
pub(crate) fn declared(tool: &str, path: &Path) -> SandboxDenial {
    SandboxDenial {
        kind: DenialKind::Read,
        target: path.display().to_string(),
        reason: "the tool declares read_reveal of it, which the operator does not grant".to_owned(),
        grant: format!(
            "[tools.{tool}] read_reveal = [{}]",
            toml_string(&path.to_string_lossy())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(hidden: &str, path: &str) -> ReadAttempt {
        ReadAttempt {
            hidden: PathBuf::from(hidden),
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn each_path_once_with_its_grant_and_own_state_never_revealed() {
        let mut sandbox = SandboxReport::refused(Vec::new());
        let own = [PathBuf::from("/root/.config/toolsmith")];
        report(
            &mut sandbox,
            "t",
            &[
                attempt("/root/.aws", "/root/.aws"),
                attempt("/root/.ssh", "/root/.ssh/id_rsa"),
                attempt("/root/.ssh", "/root/.ssh/id_rsa"),
                attempt(
                    "/root/.config/toolsmith",
                    "/root/.config/toolsmith/config.toml",
                ),
            ],
            &own,
        );
        let shown: Vec<(&str, &str)> = sandbox
            .denied
            .iter()
            .map(|denial| (denial.target.as_str(), denial.grant.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("/root/.aws", "[tools.t] read_reveal = [\"/root/.aws\"]"),
                (
                    "/root/.ssh/id_rsa",
                    "[tools.t] read_reveal = [\"/root/.ssh\"]"
                ),
                ("/root/.config/toolsmith/config.toml", OWN_STATE_GRANT),
            ]
        );
        assert!(
            sandbox
                .denied
                .iter()
                .all(|denial| denial.kind == DenialKind::Read)
        );
    }
}
