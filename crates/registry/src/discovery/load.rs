//! Loading probed candidates: each format's parser turns what its probe printed into the parts
//! of a [`Tool`], then the checks every format shares register it.

use std::io;
use std::path::Path;
use std::sync::Arc;

use toolsmith_executor::Executor;

use crate::discovery::cache::{ConfigAnswer, ProbeRecord, Probed};
use crate::discovery::catalog::ProblemError;
use crate::discovery::discover::Candidate;
use crate::discovery::probe::{ask_configs, probe_all, probe_stdout};
use crate::discovery::scan::classify;
use crate::formats::annotations::Annotations;
use crate::formats::format::{Format, Protocol, Runner};
use crate::formats::{ikigai, kodelet, manifest};
use crate::layer::Layer;
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::tool::{MAX_DESCRIPTION_BYTES, Tool, ToolParts};

/// Loads one candidate in its format from its probes' records, then applies the checks every
/// format shares.
pub(crate) fn load(probed: &Probed, candidate: &Candidate) -> Result<Tool, ProblemError> {
    // The protocol that answered decides: a manifest's record is always its reading, and a
    // Kodelet-format file that only answered `--schema` is filed under ikigai's protocol.
    let parts = match probed.protocol {
        Protocol::ManifestRead => load_manifest(
            probe_stdout(manifest::model::READ, &probed.record)?,
            candidate,
        )?,
        Protocol::IkigaiSchema => {
            load_ikigai(probe_stdout(ikigai::SCHEMA_ARG, &probed.record)?, candidate)?
        }
        Protocol::KodeletDescription => match load_kodelet(probed, candidate) {
            Ok(parts) => parts,
            Err(description) => {
                let Some(schema) = &probed.fallback else {
                    return Err(description);
                };
                let schema_error = match probe_stdout(ikigai::SCHEMA_ARG, schema)
                    .and_then(|stdout| load_ikigai(stdout, candidate))
                {
                    // A fallback that answers is filed under ikigai's protocol, so this
                    // cannot happen; should it, the answer is taken.
                    Ok(parts) => return register(parts, &candidate.expected),
                    Err(error) => error,
                };
                return Err(ProblemError::NeitherProtocol {
                    description: Box::new(description),
                    schema: Box::new(schema_error),
                });
            }
        },
    };
    register(parts, &candidate.expected)
}

/// The tool the Kodelet executable at `path` is, had its `description` probe printed
/// `description` and its `config` probe printed `config`: the same classification, parsing
/// and registration checks as [`discover_layers`](crate::discovery::discover::discover_layers) applies to a probed file (in [`Layer::Explicit`],
/// from the file's directory), with nothing run. `Ok(None)` when discovery would not probe
/// the file as a Kodelet tool (a manifest, an ikigai `NAME-tool`, a skipped file).
///
/// For a caller that wrote the file and knows what it answers (the generator), so that it
/// can call the tool while discovery's own probes of the file run. It proves nothing about
/// what the file really answers: compare the result with the tool [`discover_layers`](crate::discovery::discover::discover_layers) loads.
pub fn load_answered(
    path: &Path,
    description: &[u8],
    config: &[u8],
) -> Result<Option<Tool>, ProblemError> {
    let Some(classified) = classify(path)? else {
        return Ok(None);
    };
    if classified.format != Format::Kodelet {
        return Ok(None);
    }
    let candidate = Candidate {
        path: path.to_path_buf(),
        source: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        layer: Layer::Explicit,
        expected: classified.name,
        format: classified.format,
        fingerprint: classified.fingerprint,
    };
    let probed = Probed {
        config: ConfigAnswer::Printed(config.to_vec()),
        ..Probed::only(
            Protocol::KodeletDescription,
            ProbeRecord::Output(description.to_vec()),
        )
    };
    load(&probed, &candidate).map(Some)
}

/// Probes the candidates (ignoring any cache) and loads each: what `validate` reports.
pub(crate) async fn load_fresh(
    executor: &Arc<Executor>,
    candidates: &[&Candidate],
    config: &RunConfig,
) -> Vec<Result<Tool, ProblemError>> {
    let mut results: Vec<Result<Probed, ProblemError>> =
        probe_all(executor, candidates, config, &|_| {})
            .await
            .into_iter()
            .map(|(result, _probed_at)| result)
            .collect();
    ask_configs(executor, candidates, &mut results, config).await;
    results
        .into_iter()
        .zip(candidates)
        .map(|(result, candidate)| result.and_then(|probed| load(&probed, candidate)))
        .collect()
}

pub(crate) fn load_kodelet(
    probed: &Probed,
    candidate: &Candidate,
) -> Result<ToolParts, ProblemError> {
    let stdout = probe_stdout(kodelet::DESCRIPTION_ARG, &probed.record)?;
    let description = kodelet::parse_description(stdout)
        .map_err(|source| ProblemError::Description { source })?;
    let requested_timeout = match &probed.config {
        ConfigAnswer::Printed(config) => {
            kodelet::parse_config(config).map_err(|source| ProblemError::Config { source })?
        }
        ConfigAnswer::NotImplemented | ConfigAnswer::NotAsked => None,
    };
    Ok(ToolParts {
        name: description.name,
        description: description.description,
        input_schema: description.input_schema,
        output_schema: description.output_schema,
        annotations: description.annotations,
        requested_timeout,
        config_pending: probed.config == ConfigAnswer::NotAsked,
        sandbox: description.sandbox,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        layer: candidate.layer,
        runner: Runner::Kodelet,
        tests: description.tests,
        env_arguments: description.env_arguments,
    })
}

fn load_ikigai(stdout: &[u8], candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let schema =
        ikigai::parse_schema(stdout).map_err(|source| ProblemError::SchemaOutput { source })?;
    Ok(ToolParts {
        name: schema.name,
        description: schema.description,
        input_schema: schema.input_schema,
        output_schema: schema.output_schema,
        annotations: schema.annotations,
        requested_timeout: None,
        config_pending: false,
        sandbox: schema.sandbox,
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        layer: candidate.layer,
        runner: Runner::Ikigai,
        tests: Vec::new(),
        env_arguments: schema.env_arguments,
    })
}

/// Reads and parses a manifest; nothing is run.
fn load_manifest(contents: &[u8], candidate: &Candidate) -> Result<ToolParts, ProblemError> {
    let text = std::str::from_utf8(contents).map_err(|_| ProblemError::ReadManifest {
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    })?;
    let file_name = candidate
        .path
        .file_name()
        .and_then(|file_name| file_name.to_str())
        .and_then(|file_name| Format::of_file(file_name).ok())
        .map(|(name, _)| name);
    let manifest = manifest::frontmatter::parse(text, file_name.as_ref())?;
    Ok(ToolParts {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        input_schema: manifest.input_schema.clone(),
        output_schema: manifest.output_schema.clone(),
        annotations: Annotations {
            title: None,
            approval: manifest.approval,
            read_only: manifest.read_only,
            declared: true,
        },
        requested_timeout: Some(manifest.timeout),
        config_pending: false,
        sandbox: manifest.sandbox.clone(),
        path: candidate.path.clone(),
        source: candidate.source.clone(),
        layer: candidate.layer,
        tests: manifest.tests.clone(),
        env_arguments: true,
        runner: Runner::Manifest(Box::new(manifest)),
    })
}

/// The checks of registration that do not depend on the format: the name
/// the tool declares is the one discovery filed it under (its file's; a manifest's frontmatter
/// `name`, read as the directory was scanned), and it says what it does.
pub(crate) fn register(parts: ToolParts, expected: &ToolName) -> Result<Tool, ProblemError> {
    if &parts.name != expected {
        return Err(ProblemError::NameMismatch {
            declared: parts.name,
            expected: expected.clone(),
        });
    }
    if parts.description.trim().is_empty() {
        return Err(ProblemError::EmptyDescription);
    }
    if parts.description.len() > MAX_DESCRIPTION_BYTES {
        return Err(ProblemError::DescriptionTooLong {
            bytes: parts.description.len(),
        });
    }
    Ok(Tool::from_parts(parts))
}
