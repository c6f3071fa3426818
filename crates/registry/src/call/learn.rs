//! Learned grants: the narrowest sandbox declaration under which a tool's declared tests pass
//! (`toolsmith learn NAME`, and the generator before it registers a tool).
//!
//! The tests run once in a recording sandbox: the operator's filesystem grant for the tool,
//! and every public destination the operator's network grant allows, through the egress
//! proxy, which records each connection it let through. The destinations it let through
//! (`host:port` as the tool asked) become the declared `network` list (`"none"` when there
//! were none). Then the tests run again under each filesystem level, narrowest first
//! (`read-only`, `project`, the operator's grant), with that network list: the first level
//! under which every case passes is the learned `filesystem`. So the declaration is proven,
//! not guessed: every case passed under exactly it.
//!
//! Learning never exceeds the operator: the recording sandbox is the operator's grant for the
//! tool (with `"any"` narrowed to public destinations through the proxy, so that they are
//! recorded), and a private address is reached only when the operator's list names it.

use std::collections::BTreeSet;
use std::path::Path;

use toolsmith_executor::EgressVerdict;

use crate::access::{FilesystemSetting, NetworkSetting};
use crate::call::declared_tests::{CaseOutcome, run_cases};
use crate::context::Context;
use crate::error::Error;
use crate::formats::declared_tests::TestCase;
use crate::grant::NetworkTarget;
use crate::overrides::RunConfig;
use crate::sandbox::SandboxDeclaration;
use crate::tool::Tool;

/// What learning a tool's declaration found.
#[derive(Debug, Clone)]
pub enum Learning {
    /// The narrowest declaration, and the runs of every case under it (all passed).
    Learned {
        /// The declaration: a `network` (`"none"` or a list) and a `filesystem` level.
        declaration: SandboxDeclaration,
        /// The cases as they ran under `declaration`.
        outcomes: Vec<CaseOutcome>,
    },
    /// A case failed in the recording sandbox itself (the operator's grant): there is no
    /// declaration to learn.
    FailedRecording {
        /// Every case as it ran in the recording sandbox.
        outcomes: Vec<CaseOutcome>,
    },
    /// Every case passed while recording, but not under the widest declaration the record
    /// allows (a test that needs a destination the proxy refused, or a flaky test).
    FailedNarrowed {
        /// The widest declaration tried.
        declaration: SandboxDeclaration,
        /// The cases as they ran under it.
        outcomes: Vec<CaseOutcome>,
    },
}

/// Learns the narrowest declaration under which every one of `cases` passes for `tool`,
/// within the operator's grant in the context's configuration (see the module
/// documentation). A tool with no case learns the narrowest declaration there is: `"none"`
/// and `"read-only"`.
pub(crate) async fn learn_cases(
    context: &Context,
    tool: &Tool,
    cases: &[TestCase],
) -> Result<Learning, Error> {
    let config = &context.config;
    let recording = tool.with_sandbox(SandboxDeclaration {
        network: Some(NetworkSetting::Allow),
        filesystem: None,
        read_hide: tool.sandbox().read_hide.clone(),
        read_reveal: tool.sandbox().read_reveal.clone(),
        secrets: tool.sandbox().secrets.clone(),
    });
    let recorded = run_cases(
        &context.with_config(recording_config(config)),
        &recording,
        cases,
    )
    .await?;
    if recorded.iter().any(|outcome| !outcome.passed()) {
        return Ok(Learning::FailedRecording { outcomes: recorded });
    }
    let destinations = allowed_destinations(&recorded);
    let network = if destinations.is_empty() {
        NetworkSetting::Deny
    } else {
        NetworkSetting::Only(destinations)
    };
    let granted = config
        .call_config(&tool.with_sandbox(SandboxDeclaration::default()))
        .sandbox
        .filesystem;
    let mut last = None;
    for filesystem in filesystem_candidates(&granted, &config.project_dir) {
        let declaration = SandboxDeclaration {
            network: Some(network.clone()),
            filesystem: Some(filesystem),
            read_hide: tool.sandbox().read_hide.clone(),
            read_reveal: tool.sandbox().read_reveal.clone(),
            secrets: tool.sandbox().secrets.clone(),
        };
        let outcomes = run_cases(context, &tool.with_sandbox(declaration.clone()), cases).await?;
        if outcomes.iter().all(CaseOutcome::passed) {
            return Ok(Learning::Learned {
                declaration,
                outcomes,
            });
        }
        last = Some((declaration, outcomes));
    }
    let (declaration, outcomes) = last.unwrap_or_default();
    Ok(Learning::FailedNarrowed {
        declaration,
        outcomes,
    })
}

/// `config` with the network of every grant that would give the host's network (`"any"`)
/// narrowed to every public destination through the egress proxy, so that the proxy records
/// what the tests reach. Lists and `"none"` stay as the operator wrote them.
fn recording_config(config: &RunConfig) -> RunConfig {
    fn through_proxy(network: &mut NetworkSetting) {
        if *network == NetworkSetting::Allow {
            *network = NetworkSetting::AnyPublic;
        }
    }
    let mut recording = config.clone();
    through_proxy(&mut recording.sandbox.network);
    through_proxy(&mut recording.sandbox.generated_network);
    for tool_override in recording.overrides.values_mut() {
        if let Some(network) = &mut tool_override.network {
            through_proxy(network);
        }
        if let Some(network) = tool_override
            .for_generated
            .as_mut()
            .and_then(|generated| generated.network.as_mut())
        {
            through_proxy(network);
        }
    }
    recording
}

/// The destinations the proxy let through in `outcomes`, as the tool asked for them
/// (`host:port`, an IPv6 literal in brackets), sorted and without repeats.
fn allowed_destinations(outcomes: &[CaseOutcome]) -> Vec<NetworkTarget> {
    let entries: BTreeSet<String> = outcomes
        .iter()
        .flat_map(|outcome| &outcome.envelope.metadata.egress)
        .filter(|event| event.verdict == EgressVerdict::Allowed)
        .filter_map(|event| {
            if event.destination.starts_with("unix:") {
                // A Unix socket connect the supervisor allowed: granted by its path.
                return NetworkTarget::parse(&event.destination)
                    .ok()
                    .map(|target| target.to_string());
            }
            let host = if event.destination.contains(':') {
                format!("[{}]", event.destination)
            } else {
                event.destination.clone()
            };
            NetworkTarget::parse(&format!("{host}:{}", event.port))
                .ok()
                .map(|target| target.to_string())
        })
        .collect();
    entries
        .iter()
        .filter_map(|entry| NetworkTarget::parse(entry).ok())
        .collect()
}

/// The filesystem levels to try, narrowest first: `read-only`, `project`, then the
/// operator's grant as a tool declares it (without `-if-possible`), each only when the grant
/// includes it.
fn filesystem_candidates(
    granted: &FilesystemSetting,
    project_dir: &Path,
) -> Vec<FilesystemSetting> {
    let declared_form = match granted {
        FilesystemSetting::ProjectIfPossible => FilesystemSetting::Project,
        FilesystemSetting::ReadOnlyIfPossible => FilesystemSetting::ReadOnly,
        other => other.clone(),
    };
    let mut candidates: Vec<FilesystemSetting> = Vec::new();
    for candidate in [
        FilesystemSetting::ReadOnly,
        FilesystemSetting::Project,
        declared_form,
    ] {
        if candidate.within(granted, project_dir) && !candidates.contains(&candidate) {
            candidates.push(candidate);
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::access::FilesystemSetting;
    use crate::call::learn::filesystem_candidates;

    fn check(granted: FilesystemSetting, expect: &[&str]) {
        let shown: Vec<String> = filesystem_candidates(&granted, Path::new("/work/p"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, expect, "{granted}");
    }

    #[test]
    fn candidates_are_narrowest_first_and_within_the_grant() {
        check(FilesystemSetting::Full, &["read-only", "project", "full"]);
        check(FilesystemSetting::Project, &["read-only", "project"]);
        check(
            FilesystemSetting::ProjectIfPossible,
            &["read-only", "project"],
        );
        check(FilesystemSetting::ReadOnly, &["read-only"]);
        check(
            FilesystemSetting::Paths(vec![PathBuf::from("/srv/out")]),
            &["read-only", "[\"/srv/out\"]"],
        );
        check(
            FilesystemSetting::Paths(vec![PathBuf::from("/work")]),
            &["read-only", "project", "[\"/work\"]"],
        );
    }
}
