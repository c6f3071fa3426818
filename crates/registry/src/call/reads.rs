//! A call's attempts to read its read masks (`masks.rs`), as the executor's mask server saw
//! them ([`Outcome::reads_denied`](toolsmith_executor::Outcome)): each is a `kind: "read"`
//! refusal in `metadata.sandbox.denied` (and the audit line) naming the `read_reveal` line
//! that would allow it, or saying that toolsmith's own state is never revealed.

use std::path::{Path, PathBuf};

use toolsmith_executor::ReadAttempt;

use crate::grant::{DenialKind, SandboxDenial, toml_string};
use crate::sandbox::SandboxReport;
use crate::tool::Tool;

/// The `grant` of a read of toolsmith's own state, which no configuration reveals.
pub(crate) const OWN_STATE_GRANT: &str = "none: toolsmith's own state (config, trust store, caches, audit log, token and key files, history) is never revealed to a tool";

/// The section whose `read_reveal` reveals a path to `tool`: `[tools.NAME]`, or `[sandbox]`
/// for a generated tool, which no `[tools.NAME]` applies to (issue 25, finding 5).
pub(crate) fn section(tool: &Tool) -> String {
    if tool.generated() {
        "[sandbox]".to_owned()
    } else {
        format!("[tools.{}]", tool.name())
    }
}

/// The denial of one attempt to read below the mask `attempt.hidden`, revealed by
/// `section`'s `read_reveal`.
fn denial(section: &str, attempt: &ReadAttempt, own_state: &[PathBuf]) -> SandboxDenial {
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
            "{section} read_reveal = [{}]",
            toml_string(&attempt.hidden.to_string_lossy())
        ),
    }
}

/// Adds a run's attempts on its masks to its report's `denied`, once per path (the executor
/// keeps at most [`toolsmith_executor::MAX_READ_ATTEMPTS`] of them).
pub(crate) fn report(
    report: &mut SandboxReport,
    section: &str,
    attempts: &[ReadAttempt],
    own_state: &[PathBuf],
) {
    for attempt in attempts {
        let denial = denial(section, attempt, own_state);
        let known = report
            .denied
            .iter()
            .any(|other| other.kind == DenialKind::Read && other.target == denial.target);
        if !known {
            report.denied.push(denial);
        }
    }
}

/// The denial of a `read_reveal` that a tool declares and the operator does not grant in
/// `section`.
pub(crate) fn declared(section: &str, path: &Path) -> SandboxDenial {
    SandboxDenial {
        kind: DenialKind::Read,
        target: path.display().to_string(),
        reason: "the tool declares read_reveal of it, which the operator does not grant".to_owned(),
        grant: format!(
            "{section} read_reveal = [{}]",
            toml_string(&path.to_string_lossy())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::annotations::Annotations;
    use crate::formats::format::Runner;
    use crate::layer::Layer;
    use crate::name::ToolName;
    use crate::sandbox::SandboxDeclaration;
    use crate::schema::InputSchema;
    use crate::tool::ToolParts;

    /// A generated tool takes no `[tools.NAME]` override: its reveal is `[sandbox]`'s.
    #[test]
    fn a_generated_tools_reads_are_revealed_in_sandbox() {
        let tool = Tool::from_parts(ToolParts {
            name: ToolName::new("demo").unwrap(),
            description: "d".to_owned(),
            input_schema: InputSchema::new(serde_json::json!({"type": "object"})).unwrap(),
            output_schema: None,
            annotations: Annotations::undeclared(),
            requested_timeout: None,
            config_pending: false,
            sandbox: SandboxDeclaration::default(),
            path: PathBuf::from("/tools/demo"),
            source: PathBuf::from("/tools"),
            layer: Layer::Explicit,
            tests: Vec::new(),
            runner: Runner::Kodelet,
            env_arguments: false,
        });
        assert_eq!(section(&tool), "[tools.demo]");
        assert_eq!(section(&tool.as_generated()), "[sandbox]");
        assert_eq!(
            declared("[sandbox]", Path::new("/root/.npmrc")).grant,
            "[sandbox] read_reveal = [\"/root/.npmrc\"]"
        );
    }

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
            "[tools.t]",
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
