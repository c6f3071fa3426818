//! Running a discovery: the candidates of the layers, each answered by the cache or a probe,
//! loaded, and resolved by name into a [`Catalog`].

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolsmith_executor::Executor;

use crate::discovery::cache::{DiscoveryCache, Fingerprint, Probed};
use crate::discovery::catalog::{Catalog, DeniedTool, Problem, ProblemError, Shadowed};
use crate::discovery::layers::LayerDir;
use crate::discovery::load::load;
use crate::discovery::probe::{ask_configs, probe_all};
use crate::discovery::scan::scan_dirs;
use crate::formats::format::Format;
use crate::layer::Layer;
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::policy::{Denial, Policy};
use crate::sandbox::probe_sandbox_key;
use crate::tool::Tool;

/// The tool name a file of this name would provide, whatever its format.
pub(crate) fn file_tool_name(file_name: &str) -> Option<ToolName> {
    Format::of_file(file_name).ok().map(|(name, _)| name)
}

/// The wall-clock budget of one probe (`description`, `config`, `--schema`).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The budget of a probe's second run when its first timed out under [`PROBE_TIMEOUT`]: a
/// loaded machine, not the tool, is the likely cause of a one-second timeout.
pub(crate) const PROBE_RETRY_TIMEOUT: Duration = Duration::from_secs(3);

/// The budget of a probe of a script started by a package runner (`uv run --script`, `npx`):
/// before the script prints a line, the runner builds its environment in the tool's cache
/// (about a second for uv's first run of a script on a busy machine), offline.
pub(crate) const PROBE_RUNNER_TIMEOUT: Duration = Duration::from_secs(10);

/// The most output a `description` probe may print.
pub(crate) const PROBE_MAX_OUTPUT: u64 = 64 * 1024;

/// The longest grace period between SIGTERM and SIGKILL for a probe.
pub(crate) const PROBE_MAX_GRACE: Duration = Duration::from_millis(500);

/// A file that may be a tool.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) path: PathBuf,
    pub(crate) source: PathBuf,
    pub(crate) layer: Layer,
    pub(crate) expected: ToolName,
    pub(crate) format: Format,
    pub(crate) fingerprint: Fingerprint,
}

impl Candidate {
    /// Whether policy lets discovery look at this file: run it (an executable), or read it
    /// (a manifest); the profile check waits for what either declares.
    pub(crate) fn denial(&self, policy: &Policy) -> Result<(), Denial> {
        policy.check_unprobed(&self.expected)
    }
}

/// How far discovery has come: `probed` of `total` candidates answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveryProgress {
    /// Candidates whose probe has finished.
    pub probed: usize,
    /// Candidates that needed a probe (those the cache answered are not counted).
    pub total: usize,
}

/// How discovery treats files it has seen before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Reuse the cached result of every unchanged file.
    UseCache,
    /// Probe every file again (an explicit refresh), refilling the cache.
    ProbeAll,
    /// Reuse cached results, and leave a changed file modified less than this long ago for
    /// later: it may still be being written (the live registry's rescans).
    Settle(Duration),
}

/// What a discovery found, and when a file it left for later will have settled.
#[derive(Debug)]
pub(crate) struct Discovery {
    pub(crate) catalog: Catalog,
    /// The earliest moment a file left for later has settled, if any was.
    pub(crate) retry_at: Option<SystemTime>,
}

/// Scans the directories of `layers`, lowest precedence first, and probes every candidate
/// whose file changed since `cache` last saw it; the others spawn no process.
///
/// A missing directory is skipped, unless its layer is one the user named
/// ([`Layer::missing_is_problem`]). The cache is updated, not saved. `progress` is called
/// once the files to probe are known and after each probe, so that a long discovery can show
/// how far it is.
///
/// A file that `policy` would refuse to run is never run, not even to ask for its
/// description: it is one of the catalog's [`denied`](Catalog::denied) files.
pub async fn discover_layers(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    cache: &mut DiscoveryCache,
    config: &RunConfig,
    policy: &Policy,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Catalog {
    discover_matching(
        executor,
        layers,
        None,
        cache,
        Freshness::UseCache,
        config,
        policy,
        progress,
    )
    .await
    .catalog
}

/// Like [`discover_layers`], but looks only at the files that would provide `name`, so
/// that calling one tool does not wait for every other tool's probe.
///
/// Problems of other files are not reported; those of `name`'s files are.
pub async fn discover_one(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    cache: &mut DiscoveryCache,
    name: &ToolName,
    config: &RunConfig,
    policy: &Policy,
) -> Catalog {
    discover_matching(
        executor,
        layers,
        Some(name),
        cache,
        Freshness::UseCache,
        config,
        policy,
        &|_| {},
    )
    .await
    .catalog
}

#[expect(
    clippy::too_many_arguments,
    reason = "the internal entry point of the three public discoveries; each caller names every argument"
)]
pub(crate) async fn discover_matching(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    only: Option<&ToolName>,
    cache: &mut DiscoveryCache,
    freshness: Freshness,
    config: &RunConfig,
    policy: &Policy,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Discovery {
    let (candidates, problems) = scan_dirs(layers, only, config);
    let sandbox_key = probe_sandbox_key(executor.features());

    // Each candidate gets a record from the cache, from a fresh probe, or (when it is left
    // for later) the last record known for its path, which may be none.
    let now = SystemTime::now();
    let mut retry_at: Option<SystemTime> = None;
    let mut records: Vec<Option<Result<Probed, ProblemError>>> = Vec::new();
    let mut denials: Vec<Option<Denial>> = Vec::new();
    let mut to_probe = Vec::new();
    for (index, candidate) in candidates.iter().enumerate() {
        // Policy is checked before anything else, the cache included: a refused file is
        // neither run nor described, whatever an earlier discovery learnt of it.
        let denial = candidate.denial(policy).err();
        denials.push(denial);
        if denial.is_some() {
            records.push(None);
            continue;
        }
        let cached = match freshness {
            Freshness::ProbeAll => None,
            Freshness::UseCache | Freshness::Settle(_) => cache.get(
                &candidate.path,
                &candidate.fingerprint,
                candidate.format.protocols(),
                &sandbox_key,
            ),
        };
        if let Some(record) = cached {
            records.push(Some(Ok(record.clone())));
            continue;
        }
        // A modification time further in the future than the settle time is a skewed clock,
        // not a write in progress: waiting for it could take forever.
        if let Freshness::Settle(settle) = freshness
            && let Some(settled_at) = candidate
                .fingerprint
                .modified()
                .map(|modified| modified + settle)
                .filter(|settled_at| *settled_at > now && *settled_at <= now + settle)
        {
            retry_at = Some(retry_at.map_or(settled_at, |earlier| earlier.min(settled_at)));
            records.push(cache.last(&candidate.path).cloned().map(Ok));
            continue;
        }
        records.push(None);
        to_probe.push(index);
    }
    let probe_candidates: Vec<&Candidate> =
        to_probe.iter().map(|&index| &candidates[index]).collect();
    let probed = probe_all(executor, &probe_candidates, config, progress).await;
    for (index, (result, probed_at)) in to_probe.into_iter().zip(probed) {
        let candidate = &candidates[index];
        // The file may have been rewritten between the look at its metadata and the probe's
        // execve, in which case the probe saw some other content, perhaps half of it. Such a
        // result describes no version of the file: it is never cached, and the live registry
        // keeps what it had and looks again once the file settles.
        let unchanged = fs::metadata(&candidate.path)
            .is_ok_and(|metadata| Fingerprint::of(&metadata) == candidate.fingerprint);
        // ETXTBSY says the same in the kernel's words: someone had the file open for writing
        // at the probe's execve (a writer in this very process included, whose descriptor a
        // concurrent spawn may briefly hold too).
        if !unchanged || is_being_written(&result) {
            if let Freshness::Settle(settle) = freshness {
                let settled_at = SystemTime::now() + settle;
                retry_at = Some(retry_at.map_or(settled_at, |earlier| earlier.min(settled_at)));
                records[index] = cache.last(&candidate.path).cloned().map(Ok);
                continue;
            }
        } else if let Ok(probed) = &result {
            cache.insert(
                candidate.path.clone(),
                candidate.fingerprint,
                probed_at,
                sandbox_key.clone(),
                probed.clone(),
            );
        }
        records[index] = Some(result);
    }

    // A single tool is looked up to be called or shown: its `config` is asked now if it never
    // was, and the answer kept with its description.
    if only.is_some() {
        ask_pending_configs(executor, &candidates, &mut records, cache, config).await;
    }

    Discovery {
        catalog: resolve(candidates, records, denials, problems),
        retry_at,
    }
}

/// Asks the `config` of every loaded candidate that was never asked, and keeps each answer in
/// `records` and in the cache.
async fn ask_pending_configs(
    executor: &Arc<Executor>,
    candidates: &[Candidate],
    records: &mut [Option<Result<Probed, ProblemError>>],
    cache: &mut DiscoveryCache,
    config: &RunConfig,
) {
    let indices: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, record)| matches!(record, Some(Ok(_))))
        .map(|(index, _)| index)
        .collect();
    let answerable: Vec<&Candidate> = indices.iter().map(|&index| &candidates[index]).collect();
    let mut results: Vec<Result<Probed, ProblemError>> = indices
        .iter()
        .filter_map(|&index| match &records[index] {
            Some(Ok(probed)) => Some(Ok(probed.clone())),
            _ => None,
        })
        .collect();
    for answered in ask_configs(executor, &answerable, &mut results, config).await {
        let index = indices[answered];
        if let Ok(probed) = &results[answered] {
            cache.set_config(
                &candidates[index].path,
                &candidates[index].fingerprint,
                probed.config.clone(),
            );
            records[index] = Some(Ok(probed.clone()));
        }
    }
}

/// The catalog of the candidates' records: each loaded or refused by name, a later layer
/// shadowing an earlier one, and the failures added to `problems`.
fn resolve(
    candidates: Vec<Candidate>,
    records: Vec<Option<Result<Probed, ProblemError>>>,
    denials: Vec<Option<Denial>>,
    mut problems: Vec<Problem>,
) -> Catalog {
    let mut by_name: HashMap<ToolName, Resolved> = HashMap::new();
    let mut shadowed = Vec::new();
    for ((candidate, record), denial) in candidates.into_iter().zip(records).zip(denials) {
        let resolved = if let Some(denial) = denial {
            Resolved::Denied(DeniedTool {
                name: candidate.expected,
                path: candidate.path.clone(),
                source: candidate.source,
                layer: candidate.layer,
                denial,
            })
        } else {
            let Some(record) = record else {
                continue;
            };
            match record.and_then(|probed| load(&probed, &candidate)) {
                Ok(tool) => Resolved::Tool(Box::new(tool)),
                Err(error) => {
                    problems.push(Problem {
                        path: candidate.path,
                        error,
                    });
                    continue;
                }
            }
        };
        // A refused file hidden by a later one is dropped: it was never a tool to call.
        if let Some(Resolved::Tool(previous)) = by_name.insert(resolved.name().clone(), resolved) {
            shadowed.push(Shadowed {
                tool: *previous,
                by: candidate.path,
            });
        }
    }
    let mut tools = Vec::new();
    let mut denied = Vec::new();
    for resolved in by_name.into_values() {
        match resolved {
            Resolved::Tool(tool) => tools.push(*tool),
            Resolved::Denied(refused) => denied.push(refused),
        }
    }
    tools.sort_by(|left, right| left.name().cmp(right.name()));
    denied.sort_by(|left, right| left.name.cmp(&right.name));
    Catalog {
        tools,
        problems,
        shadowed,
        denied,
    }
}

/// What a tool name stands for after discovery: a tool, or a file policy refused to run.
enum Resolved {
    Tool(Box<Tool>),
    Denied(DeniedTool),
}

impl Resolved {
    fn name(&self) -> &ToolName {
        match self {
            Resolved::Tool(tool) => tool.name(),
            Resolved::Denied(denied) => &denied.name,
        }
    }
}

/// Whether the probe failed because the file was open for writing when it was run.
pub(crate) fn is_being_written(result: &Result<Probed, ProblemError>) -> bool {
    matches!(
        result,
        Err(ProblemError::Spawn {
            source: toolsmith_executor::Error::Spawn { source, .. },
            ..
        }) if source.kind() == io::ErrorKind::ExecutableFileBusy
    )
}

/// Whether `problem` is about a file that would provide `name`, or about a whole directory.
pub(crate) fn problem_concerns(problem: &Problem, name: &ToolName) -> bool {
    match &problem.error {
        ProblemError::ReadDir { .. } | ProblemError::LinkedLayer => true,
        ProblemError::Duplicate {
            name: duplicate, ..
        } => duplicate == name,
        _ => problem
            .path
            .file_name()
            .and_then(|file_name| file_name.to_str())
            .and_then(file_tool_name)
            .is_some_and(|file_tool| &file_tool == name),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use std::time::Duration;

    use crate::discovery::catalog::ProblemError;
    use crate::discovery::load::load_answered;
    use crate::discovery::scan::classify;
    use crate::message::first_line;

    fn check(file: &str, contents: Option<(&str, u32)>, expect: Result<Option<&str>, &str>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file);
        match contents {
            Some((text, mode)) => {
                fs::write(&path, text).unwrap();
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            }
            None => fs::create_dir(&path).unwrap(),
        }
        let actual = classify(&path)
            .map(|name| name.map(|classified| classified.name.as_str().to_owned()))
            .map_err(|error| error.to_string());
        let expect = expect
            .map(|name| name.map(str::to_owned))
            .map_err(str::to_owned);
        assert_eq!(actual, expect, "{file}");
    }

    #[test]
    fn executable_file_is_a_candidate() {
        check("hello", Some(("#!/bin/sh\n", 0o755)), Ok(Some("hello")));
        check(
            "file-read",
            Some(("#!/bin/sh\n", 0o700)),
            Ok(Some("file_read")),
        );
    }

    #[test]
    fn skipped_silently() {
        check("readme", Some(("text", 0o644)), Ok(None));
        check("data.json", Some(("{}", 0o644)), Ok(None));
        check("README.md", Some(("# My tools", 0o644)), Ok(None));
        check("changelog.md", Some(("# Changes", 0o644)), Ok(None));
        check(".hidden", Some(("#!/bin/sh\n", 0o755)), Ok(None));
        check("subdir", None, Ok(None));
    }

    #[test]
    fn script_without_the_execute_bit_is_a_problem() {
        check(
            "forgot",
            Some(("#!/bin/sh\n", 0o644)),
            Err("it starts with `#!` but is not executable (chmod +x it)"),
        );
    }

    #[test]
    fn invalid_file_name() {
        check(
            "Hello.py",
            Some(("#!/bin/sh\n", 0o755)),
            Err("file name is not a valid tool name"),
        );
    }

    #[test]
    fn broken_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(Path::new("/nonexistent/target"), &link).unwrap();
        let error = classify(&link).unwrap_err();
        assert_eq!(error.to_string(), "broken symbolic link");
    }

    #[test]
    fn symlink_to_executable() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real");
        fs::write(&target, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("linked");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(classify(&link).unwrap().unwrap().name.as_str(), "linked");
    }

    /// `load_answered` loads what discovery would from the same answers, and refuses what
    /// discovery would refuse, without running the file (which here would fail if run).
    #[test]
    fn answers_load_as_probes_would() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("say_hi");
        fs::write(&path, "#!/bin/sh\nexit 9\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        let description = br#"{"name": "say_hi", "description": "Says hi.", "input_schema": {"type": "object", "properties": {}}}"#;
        let tool = load_answered(&path, description, br#"{"timeout": "45s"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(tool.name().as_str(), "say_hi");
        assert_eq!(tool.description(), "Says hi.");
        assert_eq!(tool.requested_timeout(), Some(Duration::from_secs(45)));
        assert!(!tool.config_pending());
        assert_eq!(tool.source(), dir.path());

        let renamed = br#"{"name": "say_bye", "description": "Says bye.", "input_schema": {"type": "object"}}"#;
        let error = load_answered(&path, renamed, b"").unwrap_err();
        assert!(
            matches!(error, ProblemError::NameMismatch { .. }),
            "{error}"
        );

        let manifest = dir.path().join("say_hi.md");
        fs::write(&manifest, "---\nname: say_hi\n---\necho hi\n").unwrap();
        assert!(
            load_answered(&manifest, description, b"")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn first_stderr_line() {
        assert_eq!(first_line("\n  \n boom \nmore"), Some("boom".to_owned()));
        assert_eq!(first_line(""), None);
    }
}
