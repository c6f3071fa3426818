//! Validation of single tool files: every check discovery applies, reported one by one.
//!
//! Validation does not re-implement discovery: it classifies files with discovery's
//! classification, loads them with discovery's loaders (in parallel, through the same probe),
//! and reads the outcome as a list of [`Check`]s. A failure ends a file's pipeline as it does in
//! discovery, so the checks after it are [`CheckStatus::Skipped`]. A new format plugs in by giving
//! its [`ProblemError`]s a [`CheckKind`] in [`failed_check`] and its wording in [`label`].

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolsmith_executor::Executor;

use crate::discovery::catalog::{Problem, ProblemError};
use crate::discovery::discover::Candidate;
use crate::discovery::layers::LayerDir;
use crate::discovery::load::load_fresh;
use crate::discovery::scan::{classify, scan_dirs};
use crate::formats::format::Format;
use crate::formats::ikigai::ToolSchemaError;
use crate::formats::kodelet::DescriptionError;
use crate::layer::Layer;
use crate::message::error_chain;
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::policy::Policy;
use crate::tool::Tool;

/// One thing validation checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckKind {
    /// The tool directory can be listed.
    Directory,
    /// The path is a file discovery would consider (executable, not hidden).
    File,
    /// The file name is a valid tool name.
    FileName,
    /// No earlier file in the same directory provides the same tool.
    Unique,
    /// The tool answered its probe (Kodelet: `description`).
    Probe,
    /// The answer parsed.
    Parse,
    /// The declared name is a valid tool name.
    DeclaredName,
    /// The input schema is a valid JSON Schema for an object.
    InputSchema,
    /// The output schema, if any, is a valid JSON Schema.
    OutputSchema,
    /// The declared name is the file's name.
    NameMatches,
    /// The description is not empty.
    Description,
    /// The timeout the tool asks for (Kodelet `config`), if any, is valid.
    RequestedTimeout,
    /// Policy lets discovery run the file. Reported only for a file policy refuses
    /// ([`CheckStatus::Denied`]): validation then stops, having run nothing.
    Policy,
}

impl CheckKind {
    /// A stable code for JSON output, e.g. `input_schema`.
    pub fn code(self) -> &'static str {
        match self {
            CheckKind::Directory => "directory",
            CheckKind::File => "file",
            CheckKind::FileName => "file_name",
            CheckKind::Unique => "unique",
            CheckKind::Probe => "probe",
            CheckKind::Parse => "parse",
            CheckKind::DeclaredName => "declared_name",
            CheckKind::InputSchema => "input_schema",
            CheckKind::OutputSchema => "output_schema",
            CheckKind::NameMatches => "name_matches",
            CheckKind::Description => "description",
            CheckKind::RequestedTimeout => "requested_timeout",
            CheckKind::Policy => "policy",
        }
    }
}

/// How a check went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckStatus {
    /// It passed.
    Passed,
    /// It failed, and why.
    Failed(String),
    /// It was not run because an earlier check failed.
    Skipped,
    /// Policy refuses to run the file, and why: the checks that need it to run are not made.
    /// Not a failure: the file may be a fine tool the operator turned off.
    Denied(String),
}

/// One check of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub kind: CheckKind,
    /// The check as a sentence fragment for people, e.g. `the input schema is valid`.
    pub label: &'static str,
    /// How it went.
    pub status: CheckStatus,
}

/// Every check of one file (or directory, when it cannot be listed).
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file checked.
    pub path: PathBuf,
    /// The tool the file provides, by its file name (a manifest: by its frontmatter's `name`),
    /// when that is valid.
    pub name: Option<ToolName>,
    /// The checks, in the order discovery applies them.
    pub checks: Vec<Check>,
    /// What passed but deserves a look: for a manifest, a name that differs from its file's,
    /// each key toolsmith ignores, and each second interpreter a value may reach (`line N: …`),
    /// which no check can rule out.
    pub warnings: Vec<String>,
}

impl FileReport {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        !self
            .checks
            .iter()
            .any(|check| matches!(check.status, CheckStatus::Failed(_)))
    }
}

/// Checks the files at `paths` (relative ones taken from `config.cwd`),
/// each as discovery would if it found it in a directory; a file `policy` refuses is not run.
pub(crate) async fn validate_paths(
    executor: &Arc<Executor>,
    paths: &[PathBuf],
    config: &RunConfig,
    policy: &Policy,
) -> Vec<FileReport> {
    let mut reports = Vec::new();
    let mut candidates = Vec::new();
    for path in paths {
        let path = config.cwd.join(path);
        match classify(&path) {
            Ok(Some(classified)) => candidates.push(Candidate {
                source: path.parent().map(Path::to_path_buf).unwrap_or_default(),
                path,
                layer: Layer::Explicit,
                expected: classified.name,
                format: classified.format,
                fingerprint: classified.fingerprint,
            }),
            Ok(None) => reports.push(report(
                path.clone(),
                None,
                Some(Format::Kodelet),
                false,
                Some((CheckKind::File, not_a_candidate_reason(&path))),
            )),
            Err(error) => reports.push(problem_report(&Problem { path, error }, false)),
        }
    }
    reports.extend(probe_reports(executor, candidates, config, policy, false).await);
    reports
}

/// Checks every candidate of the `layers` directories (only those providing
/// `only`, when given), including the files discovery reports as problems
/// before probing. A missing directory is reported only where discovery would
/// report it ([`Layer::missing_is_problem`]). A file `policy` refuses is not run.
pub(crate) async fn validate_dirs(
    executor: &Arc<Executor>,
    layers: &[LayerDir],
    only: Option<&ToolName>,
    config: &RunConfig,
    policy: &Policy,
) -> Vec<FileReport> {
    let (candidates, problems) = scan_dirs(layers, only, config);
    let mut reports: Vec<FileReport> = problems
        .iter()
        .map(|problem| problem_report(problem, true))
        .collect();
    reports.extend(probe_reports(executor, candidates, config, policy, true).await);
    reports.sort_by(|left, right| left.path.cmp(&right.path));
    reports
}

async fn probe_reports(
    executor: &Arc<Executor>,
    candidates: Vec<Candidate>,
    config: &RunConfig,
    policy: &Policy,
    in_directory: bool,
) -> Vec<FileReport> {
    let (candidates, refused): (Vec<Candidate>, Vec<Candidate>) = candidates
        .into_iter()
        .partition(|candidate| candidate.denial(policy).is_ok());
    let mut reports: Vec<FileReport> = refused
        .into_iter()
        .filter_map(|candidate| {
            let denial = candidate.denial(policy).err()?;
            Some(denied_report(candidate, &denial.to_string(), in_directory))
        })
        .collect();
    let references: Vec<&Candidate> = candidates.iter().collect();
    let results = load_fresh(executor, &references, config).await;
    let probed = candidates
        .into_iter()
        .zip(results)
        .map(|(candidate, result)| {
            let failure = result
                .as_ref()
                .err()
                .map(|error| (failed_check(error), error_chain(error)));
            // A file is checked as what it turned out to be (an executable named like a
            // Kodelet tool may answer the ikigai protocol), else as what its name says.
            let format = result.as_ref().map_or(candidate.format, Tool::kind);
            let mut file_report = report(
                candidate.path,
                Some(candidate.expected),
                Some(format),
                in_directory,
                failure,
            );
            if let Ok(tool) = &result {
                note_passed_tool(&mut file_report, tool);
            }
            file_report
        });
    reports.extend(probed);
    reports
}

/// The report of a file policy refuses: the checks made without running it, then the denial.
fn denied_report(candidate: Candidate, reason: &str, in_directory: bool) -> FileReport {
    let mut checks: Vec<Check> = pipeline(in_directory, Some(candidate.format))
        .take_while(|&kind| kind != CheckKind::Probe)
        .map(|kind| Check {
            kind,
            label: label(kind, Some(candidate.format)),
            status: CheckStatus::Passed,
        })
        .collect();
    checks.push(Check {
        kind: CheckKind::Policy,
        label: label(CheckKind::Policy, Some(candidate.format)),
        status: CheckStatus::Denied(reason.to_owned()),
    });
    FileReport {
        path: candidate.path,
        name: Some(candidate.expected),
        checks,
        warnings: Vec::new(),
    }
}

/// The report of a file discovery turned down before probing it.
fn problem_report(problem: &Problem, in_directory: bool) -> FileReport {
    let file_name = problem
        .path
        .file_name()
        .and_then(|file_name| file_name.to_str());
    let name = file_name.and_then(|file_name| ToolName::new(file_name).ok());
    // The kind its name gives it (`NAME.md` is a manifest), so that it is not checked for
    // what does not apply to it; unknown when the name says nothing.
    let format = file_name
        .and_then(|file_name| Format::of_file(file_name).ok())
        .map(|(_, format)| format);
    report(
        problem.path.clone(),
        name,
        format,
        in_directory,
        Some((failed_check(&problem.error), problem.message())),
    )
}

/// The checks of a file whose pipeline failed at `failure` (or passed, when `None`).
fn report(
    path: PathBuf,
    name: Option<ToolName>,
    format: Option<Format>,
    in_directory: bool,
    failure: Option<(CheckKind, String)>,
) -> FileReport {
    if let Some((CheckKind::Directory, reason)) = failure {
        return FileReport {
            path,
            name: None,
            checks: vec![Check {
                kind: CheckKind::Directory,
                label: label(CheckKind::Directory, format),
                status: CheckStatus::Failed(reason),
            }],
            warnings: Vec::new(),
        };
    }
    let mut failure = failure;
    let mut failed = false;
    let checks = pipeline(in_directory, format)
        .map(|kind| {
            let status = if failed {
                CheckStatus::Skipped
            } else if failure.as_ref().is_some_and(|(at, _)| *at == kind) {
                failed = true;
                let reason = failure.take().map(|(_, reason)| reason).unwrap_or_default();
                CheckStatus::Failed(reason)
            } else {
                CheckStatus::Passed
            };
            Check {
                kind,
                label: label(kind, format),
                status,
            }
        })
        .collect();
    FileReport {
        path,
        name,
        checks,
        warnings: Vec::new(),
    }
}

/// Keeps the output schema check honest when the tool declares none.
fn note_passed_tool(file_report: &mut FileReport, tool: &Tool) {
    if let Some(manifest) = tool.runner().manifest() {
        file_report.warnings = manifest.warnings.clone();
        file_report
            .warnings
            .extend_from_slice(manifest.body.warnings());
    }
    if tool.output_schema().is_none() {
        for check in &mut file_report.checks {
            if check.kind == CheckKind::OutputSchema {
                check.label = "no output schema is declared (optional)";
            }
        }
    }
}

/// The checks of a file of `format` (`None`: not known, every check), in the order discovery
/// applies them: only those that apply to its kind.
fn pipeline(in_directory: bool, format: Option<Format>) -> impl Iterator<Item = CheckKind> {
    all_checks(in_directory)
        .iter()
        .copied()
        .filter(move |&kind| applies(kind, format))
}

/// Whether check `kind` applies to a file of `format`: only a Kodelet tool is asked `config`
/// (an ikigai tool has no such subcommand, a manifest is never run).
fn applies(kind: CheckKind, format: Option<Format>) -> bool {
    match kind {
        CheckKind::RequestedTimeout => matches!(format, None | Some(Format::Kodelet)),
        // A manifest's frontmatter `name` names the tool, whatever its file is called (a
        // differing file name is a warning).
        CheckKind::NameMatches => format != Some(Format::Manifest),
        _ => true,
    }
}

/// Every check of a file, in the order discovery applies them.
fn all_checks(in_directory: bool) -> &'static [CheckKind] {
    const IN_DIRECTORY: &[CheckKind] = &[
        CheckKind::File,
        CheckKind::FileName,
        CheckKind::Unique,
        CheckKind::Probe,
        CheckKind::Parse,
        CheckKind::DeclaredName,
        CheckKind::InputSchema,
        CheckKind::OutputSchema,
        CheckKind::NameMatches,
        CheckKind::Description,
        CheckKind::RequestedTimeout,
    ];
    // A file named on its own has no directory siblings to clash with.
    const ON_ITS_OWN: &[CheckKind] = &[
        CheckKind::File,
        CheckKind::FileName,
        CheckKind::Probe,
        CheckKind::Parse,
        CheckKind::DeclaredName,
        CheckKind::InputSchema,
        CheckKind::OutputSchema,
        CheckKind::NameMatches,
        CheckKind::Description,
        CheckKind::RequestedTimeout,
    ];
    if in_directory {
        IN_DIRECTORY
    } else {
        ON_ITS_OWN
    }
}

/// The check a discovery problem fails.
pub(crate) fn failed_check(error: &ProblemError) -> CheckKind {
    match error {
        ProblemError::ReadDir { .. }
        | ProblemError::LinkedLayer
        | ProblemError::UntrustedLayer { .. } => CheckKind::Directory,
        ProblemError::BrokenLink { .. }
        | ProblemError::Metadata { .. }
        | ProblemError::NotRegular { .. }
        | ProblemError::NotExecutable => CheckKind::File,
        ProblemError::NonUtf8FileName | ProblemError::FileName { .. } => CheckKind::FileName,
        ProblemError::Duplicate { .. } => CheckKind::Unique,
        ProblemError::Spawn { .. }
        | ProblemError::Cancelled
        | ProblemError::Timeout { .. }
        | ProblemError::Limit { .. }
        | ProblemError::Exited { .. }
        | ProblemError::Signaled { .. }
        | ProblemError::OutputTooLarge { .. } => CheckKind::Probe,
        ProblemError::Description { source } => match source {
            DescriptionError::NotJson { .. }
            | DescriptionError::NotAnObject { .. }
            | DescriptionError::MissingField { .. }
            | DescriptionError::WrongType { .. }
            | DescriptionError::InvalidSandbox { .. }
            | DescriptionError::InvalidAnnotations { .. }
            | DescriptionError::InvalidTests { .. } => CheckKind::Parse,
            DescriptionError::InvalidName { .. } => CheckKind::DeclaredName,
            DescriptionError::InvalidSchema { .. }
            | DescriptionError::UnpassableProperty { .. } => CheckKind::InputSchema,
            DescriptionError::InvalidOutputSchema { .. } => CheckKind::OutputSchema,
        },
        ProblemError::SchemaOutput { source } => match source {
            ToolSchemaError::NotJson { .. }
            | ToolSchemaError::NotAnObject { .. }
            | ToolSchemaError::MissingField { .. }
            | ToolSchemaError::WrongType { .. }
            | ToolSchemaError::ParameterNotAnObject { .. }
            | ToolSchemaError::RequiredNotABoolean { .. }
            | ToolSchemaError::InvalidSandbox { .. }
            | ToolSchemaError::InvalidAnnotations { .. } => CheckKind::Parse,
            ToolSchemaError::InvalidName { .. } => CheckKind::DeclaredName,
            ToolSchemaError::InvalidParameters { .. }
            | ToolSchemaError::UnpassableProperty { .. } => CheckKind::InputSchema,
            ToolSchemaError::InvalidReturns { .. } => CheckKind::OutputSchema,
        },
        ProblemError::Config { .. } => CheckKind::RequestedTimeout,
        // Both protocols failed; the description's failure says where the
        // file went wrong first.
        ProblemError::NeitherProtocol { description, .. } => failed_check(description),
        ProblemError::ReadManifest { .. } => CheckKind::Probe,
        ProblemError::Manifest(_) => CheckKind::Parse,
        ProblemError::EmptyDescription | ProblemError::DescriptionTooLong { .. } => {
            CheckKind::Description
        }
        ProblemError::NameMismatch { .. } => CheckKind::NameMatches,
    }
}

/// How a check reads for a file of `format` (`None` when the format is not known yet).
fn label(kind: CheckKind, format: Option<Format>) -> &'static str {
    match (kind, format) {
        (CheckKind::Directory, _) => "the tool directory can be read",
        // A manifest is read, never run: it needs no execute bit.
        (CheckKind::File, Some(Format::Manifest)) => {
            "is a regular file (a manifest: read, never run)"
        }
        (CheckKind::File, _) => "is an executable file",
        (CheckKind::FileName, Some(Format::Manifest)) => {
            "the frontmatter's `name` (else the file name) is a valid tool name"
        }
        (CheckKind::FileName, _) => "the file name is a valid tool name",
        (CheckKind::Unique, _) => "no other file in its directory provides the same tool",
        (CheckKind::Probe, Some(Format::Kodelet)) => "`description` answered in time",
        (CheckKind::Probe, Some(Format::Manifest)) => "the manifest file can be read",
        (CheckKind::Probe, Some(Format::Ikigai)) => "`--schema` answered in time",
        (CheckKind::Probe, None) => "the tool describes itself",
        (CheckKind::Parse, Some(Format::Kodelet)) => {
            "the `description` output is a JSON object with the required fields"
        }
        (CheckKind::Parse, Some(Format::Ikigai)) => {
            "the `--schema` output is a JSON object with the required fields"
        }
        (CheckKind::Parse, Some(Format::Manifest)) => {
            "the frontmatter fields and the body's template tags are valid"
        }
        (CheckKind::Parse, None) => "the description parses",
        (CheckKind::DeclaredName, _) => "the declared name is a valid tool name",
        (CheckKind::InputSchema, _) => "the input schema is a valid JSON Schema for an object",
        (CheckKind::OutputSchema, _) => "the output schema is a valid JSON Schema",
        (CheckKind::NameMatches, _) => "the declared name matches the file name",
        (CheckKind::Description, _) => "the description is not empty",
        (CheckKind::RequestedTimeout, _) => {
            "the timeout the tool asks for (`config`), if any, is valid"
        }
        (CheckKind::Policy, _) => "the policy in force lets discovery run it",
    }
}

/// Why discovery would skip `path` silently.
fn not_a_candidate_reason(path: &Path) -> String {
    let hidden = path
        .file_name()
        .is_some_and(|file_name| file_name.as_encoded_bytes().starts_with(b"."));
    match fs::metadata(path) {
        Err(error) => format!("cannot read it: {error}"),
        Ok(_) if hidden => "its name starts with a dot, so discovery skips it".to_owned(),
        Ok(metadata) if metadata.is_dir() => "it is a directory".to_owned(),
        Ok(metadata) if !metadata.is_file() => "it is not a regular file".to_owned(),
        Ok(metadata) if metadata.permissions().mode() & 0o111 == 0 => {
            "it is not executable (chmod +x it)".to_owned()
        }
        Ok(_) => "discovery skips it".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::discovery::validate::{CheckKind, CheckStatus, report};

    fn check(in_directory: bool, failure: Option<CheckKind>, expect: &str) {
        let file_report = report(
            PathBuf::from("/tools/demo"),
            None,
            None,
            in_directory,
            failure.map(|kind| (kind, "why".to_owned())),
        );
        let actual: Vec<String> = file_report
            .checks
            .iter()
            .map(|check| {
                let mark = match &check.status {
                    CheckStatus::Passed => "+",
                    CheckStatus::Failed(_) => "x",
                    CheckStatus::Skipped => "-",
                    CheckStatus::Denied(_) => "!",
                };
                format!("{mark}{}", check.kind.code())
            })
            .collect();
        assert_eq!(actual.join(" "), expect);
        assert_eq!(file_report.passed(), failure.is_none());
    }

    #[test]
    fn all_passed() {
        check(
            true,
            None,
            "+file +file_name +unique +probe +parse +declared_name +input_schema +output_schema +name_matches +description +requested_timeout",
        );
    }

    #[test]
    fn a_failure_skips_the_rest() {
        check(
            false,
            Some(CheckKind::InputSchema),
            "+file +file_name +probe +parse +declared_name xinput_schema -output_schema -name_matches -description -requested_timeout",
        );
    }

    #[test]
    fn only_a_kodelet_tool_is_asked_config() {
        use crate::formats::format::Format;
        for (format, expect_config) in [
            (Some(Format::Kodelet), true),
            (None, true),
            (Some(Format::Ikigai), false),
            (Some(Format::Manifest), false),
        ] {
            let file_report = report(PathBuf::from("/tools/demo"), None, format, true, None);
            let asked = file_report
                .checks
                .iter()
                .any(|check| check.kind == CheckKind::RequestedTimeout);
            assert_eq!(asked, expect_config, "{format:?}");
            let file = &file_report.checks[0];
            assert_eq!(file.kind, CheckKind::File);
            assert_eq!(
                file.label.contains("executable"),
                format != Some(Format::Manifest),
                "{format:?}: {}",
                file.label
            );
        }
    }

    #[test]
    fn unreadable_directory_is_one_check() {
        check(true, Some(CheckKind::Directory), "xdirectory");
    }
}
