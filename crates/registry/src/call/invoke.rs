//! Invoking a tool: validating the arguments, running it through the executor and mapping the outcome to an envelope.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use toolsmith_executor::{Executor, LimitKind, Limits, Network, Outcome, ReportSink, Termination};

use crate::context::Context;
use crate::discovery::live::LiveRegistry;

use crate::call::identity::CallIdentity;
use crate::call::progress::PROGRESS_FD_VAR;
use crate::call::secrets::{self, CallSecrets};
use crate::discovery::cache::DiscoveryCache;
use crate::discovery::catalog::Catalog;
use crate::discovery::discover::file_tool_name;
use crate::discovery::probe::resolve_config;
use crate::envelope::{Body, Envelope, ErrorCode, Metadata};
use crate::error::Error;
use crate::formats::format::Runner;
use crate::formats::ikigai;
use crate::formats::kodelet;
use crate::formats::manifest::error::CommandError;
use crate::message::format_duration;
use crate::message::{error_chain, first_line};
use crate::name::ToolName;
use crate::oob::{self, OutOfBand, PrepareError};
use crate::overrides::{CallConfig, RunConfig};
use crate::tool::Tool;
use crate::tool_cache::{Index, ToolCache};

/// What a call names: a tool in hand, or a name to look up in a catalog.
pub(crate) enum Target<'a> {
    /// A tool from a catalog, or the generator's report.
    Tool(&'a Tool),
    /// A name (plain, e.g. `hello`, or exposed, e.g. `custom_tool_hello`) in `catalog`.
    Named {
        /// Where the name is looked up.
        catalog: &'a Catalog,
        /// The name as the caller wrote it.
        name: &'a str,
    },
}

/// Calls `target` with `arguments`: the one path of every call (see [`Call`](crate::Call)).
/// An unknown name is a `TOOL_NOT_FOUND` envelope, not an error.
pub(crate) async fn invoke_target(
    context: &Context,
    target: Target<'_>,
    arguments: &Value,
    identity: &CallIdentity,
    progress: Option<ReportSink>,
    live: Option<&LiveRegistry>,
) -> Result<Envelope, Error> {
    let tool = match target {
        Target::Tool(tool) => tool,
        Target::Named { catalog, name } => {
            let Ok(tool_name) = ToolName::from_exposed_or_plain(name) else {
                return Ok(Envelope::failure(
                    ErrorCode::ToolNotFound,
                    not_found_sentence(name, None, catalog),
                    Metadata::not_started(),
                ));
            };
            match catalog.get(&tool_name) {
                Some(tool) => tool,
                None => return Ok(unavailable(catalog, &tool_name, name)),
            }
        }
    };
    invoke_tool(context, tool, arguments, identity, progress, live).await
}

/// The envelope of a call of `name` (as the caller wrote it: `shown`) that `catalog` has no
/// callable tool for: `POLICY_DENIED` when policy kept discovery from asking the file (the
/// reason said), else `TOOL_NOT_FOUND`, naming a file of that name that failed to load.
pub(crate) fn unavailable(catalog: &Catalog, name: &ToolName, shown: &str) -> Envelope {
    match catalog.get_denied(name) {
        // Discovery did not even ask the file for its description.
        Some(denied) => Envelope::failure(
            ErrorCode::PolicyDenied,
            format!("Tool {} may not be called: {}.", denied.name, denied.denial),
            Metadata::not_started(),
        ),
        None => Envelope::failure(
            ErrorCode::ToolNotFound,
            not_found_sentence(shown, Some(name), catalog),
            Metadata::not_started(),
        ),
    }
}

/// Calls `tool` with `arguments`, checking policy, the project's trust and a pending
/// Kodelet `config` (through `live`'s cache when given) once each, in that order.
///
/// The declared defaults are filled in next
/// ([`InputSchema::with_defaults`](crate::schema::InputSchema::with_defaults)), so a
/// required property with a default is satisfied. The completed arguments
/// are then checked against the tool's input schema; when they fail it,
/// nothing is run and the envelope is `INVALID_PARAMS`, listing every
/// violation with its JSON path. The tool receives exactly the arguments
/// that were checked, and `identity` in its environment (see [`CallIdentity`]); each line it
/// writes on its progress descriptor goes to `progress`.
/// Only a failure of the executor's own plumbing is an `Err`: everything the
/// tool does, including failing to start, is an envelope.
async fn invoke_tool(
    context: &Context,
    tool: &Tool,
    arguments: &Value,
    identity: &CallIdentity,
    progress: Option<ReportSink>,
    live: Option<&LiveRegistry>,
) -> Result<Envelope, Error> {
    let Context {
        executor,
        config,
        policy,
    } = context;
    if let Err(denial) = policy.check(tool) {
        return Ok(Envelope::failure(
            ErrorCode::PolicyDenied,
            format!("Tool {} may not be called: {denial}.", tool.name()),
            Metadata::not_started(),
        ));
    }
    // The catalog may be older than the project's trust: a config changed (or trust withdrawn,
    // or the directory replaced) since the last scan must not leave one more call to the
    // layer's tools.
    if let Some(gate) = &config.project_gate
        && tool.layer().in_project()
        && let Err(distrust) = gate.check()
    {
        return Ok(Envelope::failure(
            ErrorCode::PolicyDenied,
            format!(
                "Tool {} may not be called: the project layer of {} is skipped: {distrust}; run `toolsmith trust` in it again to use it.",
                tool.name(),
                gate.dir().display()
            ),
            Metadata::not_started(),
        ));
    }
    // A Kodelet tool from a listing has not been asked for its `config` yet: ask now, once, so
    // the timeout it requests applies, through the live registry's cache when the call came
    // through one (the answer is then kept for the next calls of the same file).
    let resolved;
    let tool = if tool.config_pending() {
        let answer = match live {
            Some(live) => live.ready_for_call(tool).await,
            None => resolve_config(executor, tool, &mut DiscoveryCache::in_memory(), config).await,
        };
        match answer {
            Ok(ready) => {
                resolved = ready;
                &resolved
            }
            Err(error) => {
                return Ok(Envelope::failure(
                    ErrorCode::ToolNotFound,
                    format!(
                        "Tool {} could not be loaded from {}: {}.",
                        tool.name(),
                        tool.path().display(),
                        error_chain(&error)
                    ),
                    Metadata::not_started(),
                ));
            }
        }
    } else {
        tool
    };
    // The secrets are read only now that nothing else refuses the call, and before anything
    // runs: a declared secret that is not granted, or a source that cannot be read, fails the
    // call with a sentence that names the secret, never its value.
    let call_secrets = match secrets::for_call(executor, tool, config).await {
        Ok(call_secrets) => call_secrets,
        Err(refused) => return Ok(refused),
    };
    let secret_names = call_secrets.names();
    // Validating, rendering and writing the files of large values take time in proportion to
    // the arguments (up to MAX_ARGUMENTS_BYTES) and block on the disk: never on a runtime
    // worker, where they would stall every other call and `/healthz`.
    let prepared = {
        let (tool, arguments, config) = (tool.clone(), arguments.clone(), config.clone());
        let identity = identity.clone();
        let preparing = tokio::task::spawn_blocking(move || {
            let arguments = tool.input_schema().with_defaults(&arguments);
            prepare(&tool, &arguments, &config, &identity, &call_secrets)
        });
        match preparing.await {
            Ok(prepared) => prepared?,
            // A blocking task is never cancelled: it ended by panicking, and so does this call.
            Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
        }
    };
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(refused) => return Ok(refused),
    };
    let Prepared {
        command,
        limits,
        reading,
        out_of_band,
    } = prepared;
    let (result, limits) = run(executor, command, limits, progress).await;
    // The files of large values are removed only now that the tool has ended.
    drop(out_of_band);
    let (reads, writes) = match &result {
        Ok(outcome) => (outcome.reads_denied.clone(), outcome.writes_denied.clone()),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let mut envelope = outcome(tool, reading, result, &limits)?;
    if let Some(sandbox) = &mut envelope.metadata.sandbox {
        sandbox.secrets = secret_names;
        let section = crate::call::reads::section(tool);
        crate::call::reads::report(sandbox, &section, &reads, &config.read_masks.own_state);
        crate::call::writes::report(sandbox, &section, &writes);
    }
    Ok(envelope)
}

/// A call ready to run: its command and limits, how its outcome is read, and the arguments
/// passed out of band (whose files must outlive the run).
struct Prepared {
    command: toolsmith_executor::Command,
    limits: Limits,
    reading: Reading,
    out_of_band: Option<OutOfBand>,
}

/// How the outcome of a call becomes its envelope, which depends on the tool's format.
enum Reading {
    /// An executable's stdout is its JSON result (or an error); see [`envelope_from_outcome`].
    Json,
    /// A manifest's stdout is text; see [`manifest_envelope`].
    Manifest {
        fail_on_exit: bool,
        json_result: bool,
    },
}

/// The `INVALID_PARAMS` envelope of arguments that do not meet the tool's input schema.
fn invalid_arguments(tool: &Tool, arguments: &Value) -> Option<Envelope> {
    let violations = tool.input_schema().violations(arguments);
    if violations.is_empty() {
        return None;
    }
    let details: Vec<String> = violations.iter().map(ToString::to_string).collect();
    Some(Envelope::failure(
        ErrorCode::InvalidParams,
        format!(
            "Invalid arguments for tool {}: {}.",
            tool.name(),
            details.join("; ")
        ),
        Metadata::not_started(),
    ))
}

/// The `POLICY_DENIED` envelope of a call whose tool declares what the operator does not
/// grant: the message names each line to add, and `metadata.sandbox.denied` lists them.
fn refused_by_grant(tool: &Tool, denied: Vec<crate::grant::SandboxDenial>) -> Envelope {
    let lines: Vec<&str> = denied.iter().map(|denial| denial.grant.as_str()).collect();
    let targets: Vec<&str> = denied.iter().map(|denial| denial.target.as_str()).collect();
    let mut metadata = Metadata::not_started();
    metadata.sandbox = Some(crate::sandbox::SandboxReport::refused(denied.clone()));
    Envelope::failure(
        ErrorCode::PolicyDenied,
        format!(
            "Tool {} declares {} that the operator does not grant; to grant it, add to the config: {}.",
            tool.name(),
            targets.join(", "),
            lines.join("; ")
        ),
        metadata,
    )
}

/// Whether a package index is reachable under `network`: through the proxy only when every
/// public destination is granted.
fn package_index(network: &Network) -> Index {
    match network {
        Network::Allow => Index::Reachable,
        Network::Proxy(egress) if egress.any_public => Index::Reachable,
        Network::Deny(_) | Network::Proxy(_) => Index::Offline,
    }
}

/// Validates the arguments and builds the tool's command with its limits, environment,
/// out-of-band arguments and sandbox. `Ok(Err(envelope))` when the call is refused before
/// anything runs (invalid arguments, no shell for a manifest).
fn prepare(
    tool: &Tool,
    arguments: &Value,
    config: &RunConfig,
    identity: &CallIdentity,
    call_secrets: &CallSecrets,
) -> Result<Result<Prepared, Envelope>, Error> {
    if let Some(refusal) = invalid_arguments(tool, arguments) {
        return Ok(Err(refusal));
    }
    let mut call = config.call_config(tool);
    let hidden = match read_masks(tool, &mut call) {
        Ok(hidden) => hidden,
        Err(denied) => return Ok(Err(*denied)),
    };
    if !call.denied.is_empty() {
        return Ok(Err(refused_by_grant(
            tool,
            std::mem::take(&mut call.denied),
        )));
    }
    // A variable of the operator's that looks like an argument must never pass for one, and
    // toolsmith's own (`TOOLSMITH_TOKEN`) never reach a tool, not even through a manifest's
    // `${VAR}`, which expands from this same list.
    call.env.retain(|(name, _)| !oob::is_toolsmith_var(name));
    with_secrets(&mut call.env, config, call_secrets);
    // The call's own ids, set by toolsmith after its own variables are gone: a tool sees the
    // ids of its call and nothing of toolsmith's. A Kodelet tool also gets its host's name for
    // the session, replacing any the operator passed through.
    let kodelet = matches!(tool.runner(), Runner::Kodelet);
    let identity_vars = identity.vars(kodelet);
    call.env
        .retain(|(name, _)| !identity_vars.iter().any(|(set, _)| set == name));
    call.env.extend(identity_vars);
    let out_of_band = if tool.env_arguments() {
        match OutOfBand::new(arguments, tool.runner().items()) {
            Ok(out_of_band) => Some(out_of_band),
            Err(PrepareError::Invalid(error)) => {
                return Ok(Err(Envelope::failure(
                    ErrorCode::InvalidParams,
                    format!("Invalid arguments for tool {}: {error}.", tool.name()),
                    Metadata::not_started(),
                )));
            }
            Err(PrepareError::File(error)) => return Err(error.into()),
        }
    } else {
        None
    };
    let executor_error = |source| Error::Executor {
        program: tool.path().to_path_buf(),
        source,
    };
    let (mut command, reading) = match tool.runner() {
        Runner::Kodelet => (
            kodelet::run_command(tool.path(), &config.cwd, &call.env, arguments)
                .map_err(executor_error)?,
            Reading::Json,
        ),
        Runner::Ikigai => (
            ikigai::run_command(tool.path(), &config.cwd, &call.env, arguments)
                .map_err(executor_error)?,
            Reading::Json,
        ),
        Runner::Manifest(manifest) => {
            let in_file = |variable: &str| {
                out_of_band
                    .as_ref()
                    .is_some_and(|out_of_band| out_of_band.in_file(variable))
            };
            let command = match manifest.command(arguments, &in_file, &config.cwd, &call.env) {
                Ok(command) => command,
                Err(error @ CommandError::NoShell { .. }) => {
                    return Ok(Err(Envelope::failure(
                        ErrorCode::SpawnFailed,
                        format!("Tool {} could not be started: {error}.", tool.name()),
                        Metadata::not_started(),
                    )));
                }
                Err(CommandError::Executor(source)) => return Err(executor_error(source)),
            };
            let reading = Reading::Manifest {
                fail_on_exit: manifest.fail_on_exit,
                json_result: manifest.output_schema.is_some(),
            };
            (command, reading)
        }
    };
    // After the manifest's own `env`, so that a manifest cannot shadow an argument.
    for (name, value) in out_of_band.iter().flat_map(OutOfBand::vars) {
        command.env(name, value);
    }
    let mut sandbox = call
        .sandbox
        .to_executor(&config.project_dir, &own_layer_protected(config, tool));
    if let Some(caches) = &config.tool_caches {
        // Set by toolsmith after the operator's environment and the manifest's `env`: the
        // tool's cache is the one directory it may write outside its grant, so the variables
        // that name it must name it.
        let cache = ToolCache::of_file(caches, tool.path());
        for (variable, value) in cache.env(package_index(&sandbox.network)) {
            command.env(&variable, &value);
        }
        sandbox.own_dir = Some(cache.dir().to_path_buf());
    }
    sandbox.hidden = hidden;
    command.sandbox(sandbox);
    Ok(Ok(Prepared {
        command,
        limits: call.limits,
        reading,
        out_of_band,
    }))
}

/// The paths a call hides, or `POLICY_DENIED` when the tool declares a `read_reveal` the
/// operator did not grant: `metadata.sandbox.denied` lists it as `kind: "read"` with the
/// line to add.
fn read_masks(tool: &Tool, call: &mut CallConfig) -> Result<Vec<PathBuf>, Box<Envelope>> {
    std::mem::replace(&mut call.hidden, Ok(Vec::new())).map_err(|denied| {
        let mut envelope = Envelope::failure(
            ErrorCode::PolicyDenied,
            format!("Tool {} may not be called: {denied}.", tool.name()),
            Metadata::not_started(),
        );
        envelope.metadata.sandbox = Some(crate::sandbox::SandboxReport::refused(vec![
            crate::call::reads::declared(&crate::call::reads::section(tool), &denied.path),
        ]));
        Box::new(envelope)
    })
}

/// Puts the call's secrets in `env`. A variable named as a secret, or a secret's `env`
/// source, never travels in the general environment (`[env] allow`, `set`): only a call
/// granted the secret gets it, from its source, and a manifest's `${NAME}` expands from this
/// same list.
fn with_secrets(
    env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>,
    config: &RunConfig,
    call_secrets: &CallSecrets,
) {
    env.retain(|(name, _)| !config.secrets.reserves(name));
    env.extend(call_secrets.vars());
}

/// Runs `command`, its progress lines sent to `progress`; the limits come back with the
/// result for the envelope.
async fn run(
    executor: &Arc<Executor>,
    mut command: toolsmith_executor::Command,
    limits: Limits,
    progress: Option<ReportSink>,
) -> (Result<Outcome, toolsmith_executor::Error>, Limits) {
    let result = match progress {
        Some(sink) => {
            command.env(
                OsStr::new(PROGRESS_FD_VAR),
                OsStr::new(&toolsmith_executor::REPORT_FD.to_string()),
            );
            executor.run_reporting(&command, &limits, sink).await
        }
        None => executor.run(&command, &limits).await,
    };
    (result, limits)
}

/// The envelope of a finished run, or of a run the executor could not start.
fn outcome(
    tool: &Tool,
    reading: Reading,
    result: Result<Outcome, toolsmith_executor::Error>,
    limits: &Limits,
) -> Result<Envelope, Error> {
    match result {
        Ok(outcome) => {
            let envelope = match reading {
                Reading::Json => envelope_from_outcome(tool.name(), &outcome, limits),
                Reading::Manifest {
                    fail_on_exit,
                    json_result,
                } => manifest_envelope(tool.name(), fail_on_exit, json_result, &outcome, limits),
            };
            Ok(check_output(tool, envelope))
        }
        Err(toolsmith_executor::Error::Spawn { stage, source, .. }) => Ok(Envelope::failure(
            ErrorCode::SpawnFailed,
            format!(
                "Tool {} could not be started ({stage} failed: {source}).",
                tool.name()
            ),
            Metadata::not_started(),
        )),
        Err(toolsmith_executor::Error::SandboxUnavailable {
            requirement,
            mechanism,
            reason,
        }) => Ok(Envelope::failure(
            ErrorCode::PolicyDenied,
            format!(
                "Tool {} was not run: {requirement} needs {mechanism}, which this kernel refused ({reason}); {}.",
                tool.name(),
                relax_hint(requirement)
            ),
            Metadata::not_started(),
        )),
        // Any other failure of the executor (its cgroup gone, say) is still the call's
        // answer: an envelope with a code, never a bare error that an MCP client sees as a
        // broken server.
        Err(error) => {
            tracing::warn!(tool = %tool.name(), error = %error_chain(&error), "the executor could not run a call");
            Ok(Envelope::failure(
                ErrorCode::SpawnFailed,
                format!(
                    "Tool {} could not be started: {}.",
                    tool.name(),
                    error_chain(&error)
                ),
                Metadata::not_started(),
            ))
        }
    }
}

/// How the operator can let a call run without a mechanism the kernel refuses.
fn relax_hint(requirement: &str) -> String {
    match requirement.split_once(" = ") {
        Some((key, value)) => format!(
            "set {key} = \"{value}-if-possible\" in [sandbox] or [tools.NAME] to run it without"
        ),
        None => "no setting relaxes it".to_owned(),
    }
}

/// Turns a successful envelope whose JSON result fails the tool's output
/// schema into `INVALID_OUTPUT`: the tool ran, but did not keep its promise.
///
/// An operation error (`{"error": "<message>", ...}`, e.g. ikigai's
/// `{"error": ..., "error_code": "MISSING_CREDENTIALS"}`) is exempt: the tool
/// ran and reports that the operation failed, which is `tool_success: true`
/// whatever the shape of its normal result.
fn check_output(tool: &Tool, envelope: Envelope) -> Envelope {
    let (Some(schema), Body::Success { result }) = (tool.output_schema(), &envelope.body) else {
        return envelope;
    };
    if structured_error(result).is_some() {
        return envelope;
    }
    let violations = schema.violations(result);
    if violations.is_empty() {
        return envelope;
    }
    let details: Vec<String> = violations.iter().map(ToString::to_string).collect();
    Envelope::failure(
        ErrorCode::InvalidOutput,
        format!(
            "Tool {} returned a result that does not match its output schema: {}.",
            tool.name(),
            details.join("; ")
        ),
        envelope.metadata,
    )
}

/// Maps a finished run of a manifest to its envelope.
///
/// A manifest's output is text, never parsed as JSON (the proposal returns
/// stdout as the result). A non-zero exit is information for the agent
/// (`grep` finding nothing, `kubectl` reporting a missing namespace), so it is
/// a success whose result carries the exit code, stdout and stderr, unless the
/// manifest says `fail_on_exit: true`. Signals and limits fail as for every tool.
/// A manifest's result: stdout as text, or as JSON when the manifest declares an output
/// schema (which [`check_output`] then applies).
fn manifest_envelope(
    name: &ToolName,
    fail_on_exit: bool,
    json_result: bool,
    outcome: &Outcome,
    limits: &Limits,
) -> Envelope {
    let code = match outcome.termination {
        Termination::Exited(code) if outcome.limit.is_none() => code,
        _ => return envelope_from_outcome(name, outcome, limits),
    };
    let stdout = Value::String(without_newline(&outcome.stdout.text_lossy()).to_owned());
    let result = match code {
        0 if json_result => parse_stdout(&outcome.stdout.bytes),
        0 => stdout,
        _ if fail_on_exit => return envelope_from_outcome(name, outcome, limits),
        _ => serde_json::json!({
            "exit_code": code,
            "stdout": stdout,
            "stderr": without_newline(&outcome.stderr.text_lossy()),
        }),
    };
    Envelope {
        body: Body::Success { result },
        metadata: metadata_of(name, outcome),
    }
}

/// The metadata of a finished run of `name`, with every connection its egress proxy saw
/// (`sandbox.egress`, each refusal in `sandbox.denied`). Every envelope of a run is built
/// from it, executables' and manifests' alike, so no kind of tool loses its egress report.
fn metadata_of(name: &ToolName, outcome: &Outcome) -> Metadata {
    let mut metadata = Metadata::from_outcome(outcome);
    if let Some(sandbox) = metadata.sandbox.as_mut() {
        crate::call::egress::report(sandbox, name.as_str(), &outcome.egress);
    }
    metadata
}

/// `text` without one trailing newline (`\n` or `\r\n`).
fn without_newline(text: &str) -> &str {
    text.strip_suffix('\n')
        .map(|text| text.strip_suffix('\r').unwrap_or(text))
        .unwrap_or(text)
}

/// Maps a finished run to its envelope.
fn envelope_from_outcome(name: &ToolName, outcome: &Outcome, limits: &Limits) -> Envelope {
    let metadata = metadata_of(name, outcome);
    let stdout = parse_stdout(&outcome.stdout.bytes);
    // A failed call still returns what the tool printed before, so an agent
    // sees how far it got (a timeout, a limit or a signal cut it short).
    let failure = |error_code: ErrorCode, error: String| {
        Envelope::failure(
            error_code,
            error,
            metadata.clone().with_partial_stdout(outcome),
        )
    };
    match outcome.limit {
        Some(LimitKind::Timeout) => {
            return failure(
                ErrorCode::ToolTimeout,
                format!(
                    "Tool {name} did not finish within {} and was killed.",
                    format_duration(limits.timeout)
                ),
            );
        }
        Some(LimitKind::Cpu) => {
            let budget = limits
                .cpu
                .map(|cpu| format!(" of {}", format_duration(cpu)))
                .unwrap_or_default();
            return failure(
                ErrorCode::CpuLimit,
                format!("Tool {name} used up its CPU time limit{budget} and was killed."),
            );
        }
        Some(LimitKind::Memory) => {
            let budget = limits
                .memory
                .map(|bytes| format!(" of {} MiB", bytes / (1024 * 1024)))
                .unwrap_or_default();
            return failure(
                ErrorCode::MemoryLimit,
                format!("Tool {name} exceeded its memory limit{budget} and was killed."),
            );
        }
        None => {}
    }
    let status = match outcome.termination {
        Termination::Exited(0) => {
            return Envelope {
                body: Body::Success { result: stdout },
                metadata,
            };
        }
        Termination::Exited(code) => format!("exited with status {code}"),
        Termination::Signaled(signal) => format!("was killed by signal {signal}"),
    };
    if let Some(message) = structured_error(&stdout) {
        return failure(ErrorCode::ToolCrashed, message.to_owned());
    }
    let stderr_hint = first_line(&outcome.stderr.text_lossy())
        .map(|line| format!(": {line}"))
        .unwrap_or_default();
    failure(
        ErrorCode::ToolCrashed,
        format!("Tool {name} {status}{stderr_hint}."),
    )
}

/// The tool's stdout without one trailing newline: JSON when it parses, else text.
fn parse_stdout(bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    let text = text
        .strip_suffix('\n')
        .map(|text| text.strip_suffix('\r').unwrap_or(text))
        .unwrap_or(&text);
    match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => Value::String(text.to_owned()),
    }
}

/// The message of a Kodelet structured error: stdout is `{"error": "<message>", ...}`.
fn structured_error(stdout: &Value) -> Option<&str> {
    stdout
        .as_object()?
        .get("error")?
        .as_str()
        .filter(|message| !message.trim().is_empty())
}

/// Why there is no tool `name` (`wanted`, when it is a valid name): a file of that name that
/// failed to load, or none at all.
fn not_found_sentence(name: &str, wanted: Option<&ToolName>, catalog: &Catalog) -> String {
    let problem = catalog.problems().iter().find(|problem| {
        let file_name = problem
            .path
            .file_name()
            .and_then(|file_name| file_name.to_str());
        let file_tool = file_name.and_then(file_tool_name);
        file_tool.is_some() && file_tool.as_ref() == wanted
    });
    match problem {
        Some(problem) => format!(
            "Tool {name} could not be loaded from {}: {}.",
            problem.path.display(),
            problem.message()
        ),
        None => format!("No tool named {name:?} was found in the tool directories."),
    }
}

/// The run configuration's protected paths, plus the directory `tool` was found in when it
/// lies in the project: whoever built the configuration (an embedder's `RunConfig::new`
/// knows no tool directory), a tool never rewrites its own layer, where it would plant code
/// that runs at the next call of any tool of that directory.
fn own_layer_protected(config: &RunConfig, tool: &Tool) -> Vec<PathBuf> {
    let mut protected = config.protected.clone();
    let source = tool.source();
    if !protected.iter().any(|path| source.starts_with(path)) {
        protected.extend(crate::sandbox::protected_paths(
            &config.project_dir,
            &[],
            &[source.to_path_buf()],
        ));
        protected.sort();
        protected.dedup();
    }
    protected
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use toolsmith_executor::{
        AppliedSandbox, Backend, Capture, LimitKind, Limits, Outcome, Termination,
    };

    use crate::call::invoke::{envelope_from_outcome, parse_stdout};
    use crate::envelope::Envelope;
    use crate::name::ToolName;

    fn capture(text: &str) -> Capture {
        Capture {
            bytes: text.as_bytes().to_vec(),
            total: text.len() as u64,
            truncated: false,
        }
    }

    fn outcome(
        termination: Termination,
        limit: Option<LimitKind>,
        stdout: &str,
        stderr: &str,
    ) -> Outcome {
        Outcome {
            termination,
            limit,
            escalated: false,
            wall_time: Duration::from_millis(12),
            cpu_time: Some(Duration::from_millis(3)),
            peak_memory: Some(4096 * 1024),
            stdout: capture(stdout),
            stderr: capture(stderr),
            leftovers_killed: None,
            stdin_unread: false,
            reads_denied: Vec::new(),
            reads_denied_more: 0,
            writes_denied: Vec::new(),
            backend: Backend::ProcessGroup,
            sandbox: AppliedSandbox::none(),
            egress: Vec::new(),
        }
    }

    /// Checks the envelope without its metadata, which has its own tests.
    fn check(outcome: Outcome, expect: Value) {
        let mut limits = Limits::recommended();
        limits.timeout = Duration::from_secs(2);
        limits.cpu = Some(Duration::from_millis(1500));
        limits.memory = Some(64 * 1024 * 1024);
        let envelope: Envelope =
            envelope_from_outcome(&ToolName::new("demo").unwrap(), &outcome, &limits);
        let mut actual = serde_json::to_value(&envelope).unwrap();
        actual.as_object_mut().unwrap().remove("metadata");
        assert_eq!(actual, expect);
    }

    #[test]
    fn json_result() {
        check(
            outcome(Termination::Exited(0), None, "{\"a\": 1}\n", ""),
            json!({"tool_success": true, "result": {"a": 1}}),
        );
    }

    #[test]
    fn text_result_loses_one_newline() {
        check(
            outcome(Termination::Exited(0), None, "Hello, Ada!\n\n", ""),
            json!({"tool_success": true, "result": "Hello, Ada!\n"}),
        );
    }

    #[test]
    fn operation_error_with_exit_zero_is_success() {
        check(
            outcome(
                Termination::Exited(0),
                None,
                "{\"error\": \"not a repo\"}",
                "",
            ),
            json!({"tool_success": true, "result": {"error": "not a repo"}}),
        );
    }

    #[test]
    fn structured_error_on_nonzero_exit() {
        check(
            outcome(
                Termination::Exited(1),
                None,
                "{\"error\": \"boom\", \"details\": \"x\"}\n",
                "trace",
            ),
            json!({"tool_success": false, "error": "boom", "error_code": "TOOL_CRASHED"}),
        );
    }

    #[test]
    fn plain_nonzero_exit() {
        check(
            outcome(
                Termination::Exited(3),
                None,
                "",
                "\nfatal: no such thing\nmore\n",
            ),
            json!({"tool_success": false, "error": "Tool demo exited with status 3: fatal: no such thing.", "error_code": "TOOL_CRASHED"}),
        );
    }

    #[test]
    fn signal() {
        check(
            outcome(Termination::Signaled(11), None, "", ""),
            json!({"tool_success": false, "error": "Tool demo was killed by signal 11.", "error_code": "TOOL_CRASHED"}),
        );
    }

    /// Issue 11: a failed call returns what the tool printed before, bounded; a success
    /// carries it as its result only.
    #[test]
    fn partial_stdout_of_failures() {
        let stdout_of = |outcome: Outcome| {
            let mut limits = Limits::recommended();
            limits.timeout = Duration::from_secs(2);
            let envelope =
                envelope_from_outcome(&ToolName::new("demo").unwrap(), &outcome, &limits);
            envelope.metadata.stdout
        };
        assert_eq!(
            stdout_of(outcome(
                Termination::Signaled(15),
                Some(LimitKind::Timeout),
                "step 1\n",
                ""
            )),
            Some("step 1\n".to_owned())
        );
        assert_eq!(
            stdout_of(outcome(Termination::Signaled(11), None, "half", "")),
            Some("half".to_owned())
        );
        assert_eq!(
            stdout_of(outcome(
                Termination::Signaled(9),
                Some(LimitKind::Memory),
                "",
                ""
            )),
            None
        );
        assert_eq!(
            stdout_of(outcome(Termination::Exited(0), None, "done\n", "")),
            None
        );
        let long = "é".repeat(crate::envelope::METADATA_STDOUT_LIMIT);
        let kept = stdout_of(outcome(
            Termination::Signaled(15),
            Some(LimitKind::Timeout),
            &long,
            "",
        ))
        .unwrap();
        assert!(kept.len() <= crate::envelope::METADATA_STDOUT_LIMIT && long.starts_with(&kept));
    }

    #[test]
    fn limits() {
        check(
            outcome(Termination::Signaled(9), Some(LimitKind::Timeout), "", ""),
            json!({"tool_success": false, "error": "Tool demo did not finish within 2s and was killed.", "error_code": "TOOL_TIMEOUT"}),
        );
        check(
            outcome(Termination::Signaled(9), Some(LimitKind::Cpu), "", ""),
            json!({"tool_success": false, "error": "Tool demo used up its CPU time limit of 1500ms and was killed.", "error_code": "CPU_LIMIT"}),
        );
        check(
            outcome(Termination::Signaled(9), Some(LimitKind::Memory), "", ""),
            json!({"tool_success": false, "error": "Tool demo exceeded its memory limit of 64 MiB and was killed.", "error_code": "MEMORY_LIMIT"}),
        );
    }

    #[test]
    fn stdout_parsing() {
        assert_eq!(parse_stdout(b"42\n"), json!(42));
        assert_eq!(parse_stdout(b"text\r\n"), json!("text"));
        assert_eq!(parse_stdout(b""), json!(""));
    }

    #[test]
    fn metadata_of_a_run() {
        let metadata = crate::envelope::Metadata::from_outcome(&outcome(
            Termination::Exited(0),
            None,
            "x",
            "warn",
        ));
        assert_eq!(
            serde_json::to_value(metadata).unwrap(),
            json!({
                "execution_time_ms": 12,
                "exit_code": 0,
                "stdout_truncated": false,
                "stderr": "warn",
                "stderr_truncated": false,
                "stdout_bytes": 1,
                "stderr_bytes": 4,
                "cpu_time_ms": 3,
                "peak_rss_kb": 4096,
                "escalated": false,
                "backend": "pgroup",
                "sandbox": {"network": "allow", "filesystem": "full", "pid_namespace": false,
                    "mount_namespace": false, "ipc_namespace": false,
                    "capabilities": "inherited", "syscalls": "unfiltered"}
            })
        );
    }
}
