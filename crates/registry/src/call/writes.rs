//! A call's refused creations, as the executor's supervisor saw them
//! ([`Outcome::writes_denied`](toolsmith_executor::Outcome)): each is a `kind: "write"`
//! refusal in `metadata.sandbox.denied` (and the audit line) naming what would allow it.

use toolsmith_executor::{WriteAttempt, WriteRefusal};

use crate::grant::{DenialKind, SandboxDenial};
use crate::sandbox::SandboxReport;

/// The denial of one refused creation; `section` is where the tool's grants are written.
fn denial(section: &str, attempt: &WriteAttempt) -> SandboxDenial {
    let reason = match attempt.reason {
        WriteRefusal::Repository => {
            "a repository's name (.git, HEAD) or a name inside a .git, in a writable root: git \
             would run what it holds (core.fsmonitor, hooks) at the user's next command there"
        }
        WriteRefusal::Protected => {
            "a protected path (toolsmith's layers and config, a peer's tool directory, \
             toolsmith's own state) that does not exist yet: no tool creates it"
        }
    };
    SandboxDenial {
        kind: DenialKind::Write,
        target: attempt.path.display().to_string(),
        reason: reason.to_owned(),
        grant: format!("{section} filesystem = \"full\""),
    }
}

/// Adds a run's refused creations to its report's `denied`, once per path.
pub(crate) fn report(report: &mut SandboxReport, section: &str, attempts: &[WriteAttempt]) {
    for attempt in attempts {
        let denial = denial(section, attempt);
        let known = report
            .denied
            .iter()
            .any(|other| other.kind == DenialKind::Write && other.target == denial.target);
        if !known {
            report.denied.push(denial);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_refused_repository_names_the_grant_and_is_listed_once() {
        let mut report = SandboxReport::refused(Vec::new());
        let attempt = WriteAttempt {
            path: PathBuf::from("/work/project/docs/.git"),
            reason: WriteRefusal::Repository,
        };
        super::report(&mut report, "[tools.demo]", &[attempt.clone(), attempt]);
        assert_eq!(report.denied.len(), 1);
        let denial = &report.denied[0];
        assert_eq!(denial.kind, DenialKind::Write);
        assert_eq!(denial.target, "/work/project/docs/.git");
        assert_eq!(denial.grant, "[tools.demo] filesystem = \"full\"");
        assert!(denial.reason.contains("repository"), "{}", denial.reason);
    }
}
