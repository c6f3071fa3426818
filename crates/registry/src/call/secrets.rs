//! The secrets of one call: checking what the tool declares against what the operator granted it, and reading each granted value.
//!
//! A call receives exactly the secrets granted to its tool (`[tools.NAME] secrets`; a
//! generated tool has none, see [`RunConfig::granted_secrets`]). A granted secret the tool
//! does not declare is still delivered: the grant is the operator's word about this tool. A
//! declared secret that is not granted fails the call with `POLICY_DENIED`, naming the key
//! that would grant it, before anything is read or run.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;
use std::sync::Arc;

use toolsmith_executor::Executor;

use crate::envelope::{Envelope, ErrorCode, Metadata};
use crate::grant::{DenialKind, SandboxDenial};
use crate::message::error_chain;
use crate::overrides::RunConfig;
use crate::sandbox::SandboxReport;
use crate::secrets::{SecretName, SecretValue};
use crate::tool::Tool;

/// The secrets read for one call, in the order they were granted.
#[derive(Debug, Default)]
pub(crate) struct CallSecrets {
    values: Vec<(SecretName, SecretValue)>,
}

impl CallSecrets {
    /// The names, for `metadata.sandbox.secrets` and the audit log.
    pub(crate) fn names(&self) -> Vec<String> {
        self.values
            .iter()
            .map(|(name, _)| name.as_str().to_owned())
            .collect()
    }

    /// The variables of the call: one per secret, of the secret's name.
    pub(crate) fn vars(&self) -> Vec<(OsString, OsString)> {
        self.values
            .iter()
            .map(|(name, value)| {
                (
                    OsString::from(name.as_str()),
                    OsString::from_vec(value.bytes().to_vec()),
                )
            })
            .collect()
    }
}

/// The secrets of a call of `tool`, or the envelope that refuses the call: `POLICY_DENIED`
/// for a declared secret that is not granted, `SPAWN_FAILED` for a granted one whose source
/// cannot be read (naming the secret and its source, never a value).
pub(crate) async fn for_call(
    executor: &Arc<Executor>,
    tool: &Tool,
    config: &RunConfig,
) -> Result<CallSecrets, Envelope> {
    let granted = config.granted_secrets(tool);
    let denied: Vec<SandboxDenial> = tool
        .sandbox()
        .secrets
        .iter()
        .filter(|name| !granted.contains(name))
        .map(|name| denial(tool, name, config))
        .collect();
    if !denied.is_empty() {
        let sentences: Vec<String> = denied
            .iter()
            .map(|denial| format!("{} ({}; {})", denial.target, denial.reason, denial.grant))
            .collect();
        let mut metadata = Metadata::not_started();
        metadata.sandbox = Some(SandboxReport::refused(denied));
        return Err(Envelope::failure(
            ErrorCode::PolicyDenied,
            format!(
                "Tool {} may not be called: it declares secrets that are not granted to it: {}.",
                tool.name(),
                sentences.join(", ")
            ),
            metadata,
        ));
    }
    let mut values = Vec::with_capacity(granted.len());
    for name in granted {
        match config.secrets.read(executor, name, &config.cwd).await {
            Ok(value) => values.push((name.clone(), value)),
            Err(error) => {
                return Err(Envelope::failure(
                    ErrorCode::SpawnFailed,
                    format!(
                        "Tool {} could not be started: {}.",
                        tool.name(),
                        error_chain(&error)
                    ),
                    Metadata::not_started(),
                ));
            }
        }
    }
    Ok(CallSecrets { values })
}

/// The refusal of a declared secret `name` that `tool` is not granted.
fn denial(tool: &Tool, name: &SecretName, config: &RunConfig) -> SandboxDenial {
    let defined = config.secrets.defined().contains_key(name);
    let (reason, grant) = if tool.generated() {
        (
            "a generated tool receives no secret".to_owned(),
            "none: only a hand-written tool can be granted a secret".to_owned(),
        )
    } else if defined {
        (
            "not granted to this tool".to_owned(),
            format!("[tools.{}] secrets = [\"{name}\"]", tool.name()),
        )
    } else {
        (
            format!("not granted to this tool, and no [secrets.{name}] defines it"),
            format!("[tools.{}] secrets = [\"{name}\"]", tool.name()),
        )
    };
    SandboxDenial {
        kind: DenialKind::Secret,
        target: name.as_str().to_owned(),
        reason,
        grant,
    }
}
