//! The checks of a staged tool from `registry` on: discovery loads the staged file as it
//! would any tool, and the sandbox checks call it as its first caller would.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use toolsmith_executor::Executor;
use toolsmith_registry::{
    CaseOutcome, DiscoveryCache, Envelope, ErrorCode, LayerDir, Learning, NetworkSetting,
    NetworkTarget, Policy, Problem, RunConfig, SandboxDeclaration, Tool, ToolName, Toolsmith,
    discover_layers, load_answered, resolve_config,
};

use crate::pipeline::CheckReport;
use crate::render::{self, RenderedTool};
use crate::staging::{sync_file, write_unsynced};
use crate::{Error, Request};

/// The checks of the staged file before its learned declaration is written: discovery loads
/// it as any tool (its `description` probe, the `registry` check), and [`check_in_sandbox`]
/// calls it as its first caller would (its `config` answered, then its runs).
///
/// A file rendered from an embedded template answers its probes what the generator rendered
/// (`answers`: the description, and the request's timeout for `config`), so the registry's
/// own loader turns those answers into the predicted tool and the sandbox checks run on it
/// with nothing probed: when they all pass and a declaration was learned, the result is
/// [`Sandboxed::predicted`], without a `registry` line, and [`carry_learned`] probes the file
/// once, rewritten with that declaration, and compares. When a check fails, the file is probed
/// now all the same, so the rejected report says whether discovery loads it; the checks count
/// only if discovery loads the very same tool, and are run again on discovery's tool (its
/// `config` asked) when it does not. Without `answers` (a manifest, which discovery reads
/// without running anything; an overriding template, whose answers only the file knows) the
/// file's `config` is asked after its description and the checks run on discovery's tool.
/// When discovery refuses the file, the `registry` check says why and nothing else is
/// reported.
pub(crate) async fn check_staged(
    executor: &Arc<Executor>,
    staging_dir: &Path,
    staged: &Path,
    request: &Request,
    answers: Option<(String, String)>,
    run_config: &RunConfig,
    probes: &mut DiscoveryCache,
) -> Result<Sandboxed, Error> {
    let run_config = &staged_run_config(run_config);
    let answered = answers.and_then(|(description, config)| {
        load_answered(staged, description.as_bytes(), config.as_bytes())
            .ok()
            .flatten()
    });
    let Some(answered) = answered else {
        return match discover_staged(executor, staging_dir, &request.name, run_config, probes).await
        {
            Ok(tool) => checked(executor, &tool, request, run_config, probes).await,
            Err(problem) => Ok(Sandboxed::refused(problem)),
        };
    };
    let early = check_in_sandbox(executor, &answered, request, run_config).await?;
    if early.learned.is_some() && early.checks.iter().all(|check| check.ok) {
        return Ok(Sandboxed {
            predicted: Some(answered),
            ..early
        });
    }
    match discover_staged(executor, staging_dir, &request.name, run_config, probes).await {
        Ok(tool) => match described_difference(&tool, &answered) {
            None => with_registry(Ok(early)),
            Some(field) => {
                tracing::debug!(
                    field,
                    "discovery loaded another tool than the generator rendered; checking it instead"
                );
                checked(executor, &tool, request, run_config, probes).await
            }
        },
        Err(problem) => Ok(Sandboxed::refused(problem)),
    }
}

/// The run configuration of a staged tool's probes and runs. A staged tool is a generated
/// tool: it gets no `[tools.NAME]` grant, whatever its name (the live registry does the same
/// by its history ref, `Tool::generated`), so a request named like a tool the operator granted
/// a secret cannot read it in its test report. Nor any secret's definition: a staged tool's
/// runs cannot read one by any name.
fn staged_run_config(run_config: &RunConfig) -> RunConfig {
    RunConfig {
        overrides: Default::default(),
        secrets: Default::default(),
        ..run_config.clone()
    }
}

/// The checks of `tool`, which discovery loaded from the staged file: its `config` asked (the
/// answer recorded in `probes`), then the passed `registry` check and the sandbox checks; or
/// the failed `registry` check when it cannot be called.
async fn checked(
    executor: &Arc<Executor>,
    tool: &Tool,
    request: &Request,
    run_config: &RunConfig,
    probes: &mut DiscoveryCache,
) -> Result<Sandboxed, Error> {
    match configured(executor, tool, run_config, probes).await {
        Ok(tool) => with_registry(check_in_sandbox(executor, &tool, request, run_config).await),
        Err(problem) => Ok(Sandboxed::refused(problem)),
    }
}

/// The checks of a version restored by a rollback, in the staging directory, before it goes
/// live: the same code as a registration's, without the request (which the history does not
/// keep): discovery loads the file as any tool (the `registry` check, its `config` asked as
/// at its first call), then every test case the tool declares runs in the sandbox of every
/// later call (`test: ...`), and no run may leave a process behind (`no_leftovers`). The
/// request's own checks (`schema`, `missing_required`, `network`) are not repeated: the file is
/// the one that passed them, and its declared sandbox still applies to every run.
pub(crate) async fn check_restored(
    executor: &Arc<Executor>,
    staging_dir: &Path,
    name: &ToolName,
    run_config: &RunConfig,
    probes: &mut DiscoveryCache,
) -> Result<Vec<CheckReport>, Error> {
    let discovered = match discover_staged(executor, staging_dir, name, run_config, probes).await {
        Ok(tool) => configured(executor, &tool, run_config, probes).await,
        Err(problem) => Err(problem),
    };
    let tool = match discovered {
        Ok(tool) => tool.as_generated(),
        Err(problem) => return Ok(vec![CheckReport::failed("registry", problem)]),
    };
    let mut checks = vec![CheckReport::passed("registry", None)];
    // The checks' calls are the generator's own: no operator's policy lists decide them.
    let toolsmith = Toolsmith::from_parts(
        Arc::clone(executor),
        run_config.clone(),
        Policy::allow_all(),
    );
    let outcomes = toolsmith.run_tests(&tool).await?;
    let mut leftovers = 0;
    for outcome in outcomes {
        let name = format!("test: {}", outcome.name);
        checks.push(match &outcome.mismatch {
            None => CheckReport::passed(&name, None),
            Some(mismatch) => CheckReport::failed(&name, mismatch.clone()),
        });
        leftovers += outcome.envelope.metadata.leftovers_killed.unwrap_or(0);
    }
    checks.push(if leftovers == 0 {
        CheckReport::passed("no_leftovers", None)
    } else {
        CheckReport::failed(
            "no_leftovers",
            format!("the tool left {leftovers} process(es) running after it ended (killed)"),
        )
    });
    Ok(checks)
}

/// Rewrites the staged file with the declaration `sandboxed` learned (the request's own
/// otherwise: nothing was learned only when a check already failed), probes it, and returns
/// the checks from `registry` on, `declaration` last: the registered file declares what its
/// tests passed under, in whatever place its format declares `sandbox`.
///
/// This probe is the registration's only one when the checks ran on the predicted tool
/// ([`Sandboxed::predicted`]): discovery must load from the rewritten file, in full
/// ([`described_difference`]), the tool predicted from the answers rendered with the learned
/// declaration, which is also the tool the checks ran on (under that declaration). Then the checks stand (`registry` passes), and the predicted `config` answer
/// is recorded with the probe in `probes`, which the registration hands to the live registry:
/// the tool's first call asks nothing. Otherwise the prediction was wrong and proves nothing:
/// the file's `config` is asked and every check runs again on the tool discovery loaded, as
/// for an overriding template, so a wrong prediction never registers an unchecked tool.
pub(crate) async fn carry_learned(
    executor: &Arc<Executor>,
    tera: &tera::Tera,
    (request, implementation): (&Request, &str),
    sandboxed: Sandboxed,
    (staging_dir, staged): (&Path, &Path),
    (run_config, probes): (&RunConfig, &mut DiscoveryCache),
) -> Result<(RenderedTool, Vec<CheckReport>), Error> {
    let Sandboxed {
        mut checks,
        learned,
        predicted,
    } = sandboxed;
    let learned_request = Request {
        learned: learned.clone(),
        ..request.clone()
    };
    let rendered = render::render(tera, &learned_request, implementation)?;
    let Some(learned) = learned else {
        checks.push(declaration_check(Err(&String::new()), None));
        return Ok((rendered, checks));
    };
    std::fs::remove_file(staged).map_err(|source| Error::Io {
        path: staged.to_path_buf(),
        source,
    })?;
    write_unsynced(staged, &rendered)?;
    let path = staged.to_path_buf();
    match tokio::task::spawn_blocking(move || sync_file(&path)).await {
        Ok(synced) => synced?,
        Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
    }
    let run_config = &staged_run_config(run_config);
    let discovered =
        discover_staged(executor, staging_dir, &request.name, run_config, probes).await;
    let Some(checked_tool) = predicted else {
        checks.push(declaration_check(
            discovered.as_ref().map(Tool::sandbox),
            Some(&learned),
        ));
        return Ok((rendered, checks));
    };
    let tool = match discovered {
        Ok(tool) => tool,
        Err(problem) => return Ok((rendered, Sandboxed::refused(problem).checks)),
    };
    let prediction = render::kodelet_answers(&learned_request).and_then(|(description, config)| {
        let tool = load_answered(staged, description.as_bytes(), config.as_bytes()).ok()??;
        Some((tool, config))
    });
    // The file must be the tool predicted now, and the tool the checks ran on (whose runs
    // were under the learned declaration): a prediction that changed meanwhile proves nothing.
    let difference = match &prediction {
        Some((predicted, _)) => described_difference(&tool, predicted)
            .or_else(|| described_difference(&tool, &checked_tool.with_sandbox(learned.clone()))),
        None => Some("everything (nothing was predicted)"),
    };
    match (difference, prediction) {
        (None, Some((_, config))) if *tool.sandbox() == learned => {
            probes.record_config(staged, config.as_bytes());
            let mut all = vec![CheckReport::passed("registry", None)];
            all.append(&mut checks);
            all.push(declaration_check(Ok(tool.sandbox()), Some(&learned)));
            Ok((rendered, all))
        }
        (difference, _) => {
            tracing::debug!(
                field = difference.unwrap_or("sandbox"),
                "discovery loaded another tool than the generator predicted; checking it instead"
            );
            let rechecked = checked(executor, &tool, request, run_config, probes).await?;
            let mut all = rechecked.checks;
            all.push(declaration_check(
                Ok(tool.sandbox()),
                rechecked.learned.as_ref(),
            ));
            Ok((rendered, all))
        }
    }
}

/// `declaration`: the file declares (`declared`, or why discovery refused it) exactly what
/// its tests passed under (`learned`).
fn declaration_check(
    declared: Result<&SandboxDeclaration, &String>,
    learned: Option<&SandboxDeclaration>,
) -> CheckReport {
    match (declared, learned) {
        (_, None) => CheckReport::failed("declaration", "no declaration was learned".to_owned()),
        (Ok(declared), Some(learned)) if declared == learned => CheckReport::passed(
            "declaration",
            Some(format!("the file declares {}", learned.to_json())),
        ),
        (Ok(declared), Some(learned)) => CheckReport::failed(
            "declaration",
            format!(
                "the file declares {}, not the learned {}",
                declared.to_json(),
                learned.to_json()
            ),
        ),
        (Err(problem), Some(_)) => CheckReport::failed("declaration", problem.clone()),
    }
}

/// The checks of a staged tool, and the declaration learned from its tests when they pass
/// under one.
pub(crate) struct Sandboxed {
    /// The checks from `registry` on; without `registry` when `predicted`.
    pub(crate) checks: Vec<CheckReport>,
    pub(crate) learned: Option<SandboxDeclaration>,
    /// The tool predicted from an embedded template's answers, when the checks ran on it with
    /// nothing probed yet: only when every check passed and a declaration was learned, so that
    /// [`carry_learned`]'s probe of the final file is the only one, and decides `registry`.
    pub(crate) predicted: Option<Tool>,
}

impl Sandboxed {
    /// Discovery refused the staged file: the failed `registry` check, nothing learned.
    fn refused(problem: String) -> Sandboxed {
        Sandboxed {
            checks: vec![CheckReport::failed("registry", problem)],
            learned: None,
            predicted: None,
        }
    }
}

/// The passed `registry` check followed by the checks of `sandboxed`.
fn with_registry(sandboxed: Result<Sandboxed, Error>) -> Result<Sandboxed, Error> {
    let sandboxed = sandboxed?;
    let mut checks = vec![CheckReport::passed("registry", None)];
    checks.extend(sandboxed.checks);
    Ok(Sandboxed {
        checks,
        learned: sandboxed.learned,
        predicted: None,
    })
}

/// The tool `name` as discovery loads it from the staging directory; or why not, for the
/// `registry` check. What the probe printed is recorded in `probes`, which the registration
/// hands to the live registry with the file (one probe per registration, issue 25).
pub(crate) async fn discover_staged(
    executor: &Arc<Executor>,
    staging_dir: &Path,
    name: &ToolName,
    run_config: &RunConfig,
    probes: &mut DiscoveryCache,
) -> Result<Tool, String> {
    let catalog = discover_layers(
        executor,
        &LayerDir::explicit(&[staging_dir.to_path_buf()]),
        probes,
        run_config,
        &Policy::allow_all(),
        &|_| {},
    )
    .await;
    match (catalog.get(name), catalog.problems().first()) {
        (Some(tool), None) => Ok(tool.clone()),
        (_, Some(problem)) => Err(problem.message()),
        (None, None) => Err(format!(
            "discovery found no tool `{name}` in the staged file"
        )),
    }
}

/// `tool` with its `config` asked, as at its first call (the answer recorded in `probes`);
/// or why it cannot be called, for the `registry` check.
pub(crate) async fn configured(
    executor: &Arc<Executor>,
    tool: &Tool,
    run_config: &RunConfig,
    probes: &mut DiscoveryCache,
) -> Result<Tool, String> {
    resolve_config(executor, tool, probes, run_config)
        .await
        .map_err(|error| {
            Problem {
                path: tool.path().to_path_buf(),
                error,
            }
            .message()
        })
}

/// The first property that a Kodelet tool's description determines in which two tools
/// differ; `None` when, their `config` aside, a call of one runs exactly as a call of the
/// other.
pub(crate) fn described_difference(left: &Tool, right: &Tool) -> Option<&'static str> {
    let output_schema = |tool: &Tool| tool.output_schema().map(|schema| schema.as_json().clone());
    [
        ("name", left.name() == right.name()),
        ("description", left.description() == right.description()),
        (
            "input schema",
            left.input_schema().as_json() == right.input_schema().as_json(),
        ),
        ("output schema", output_schema(left) == output_schema(right)),
        ("annotations", left.annotations() == right.annotations()),
        ("sandbox", left.sandbox() == right.sandbox()),
        ("path", left.path() == right.path()),
        ("source", left.source() == right.source()),
        ("layer", left.layer() == right.layer()),
        ("kind", left.kind() == right.kind()),
        ("tests", left.tests() == right.tests()),
        (
            "env arguments",
            left.env_arguments() == right.env_arguments(),
        ),
        ("shell", left.manifest_shell() == right.manifest_shell()),
    ]
    .into_iter()
    .find(|(_, same)| !same)
    .map(|(field, _)| field)
}

/// The checks that run the staged tool: its schema is the request's, every test case
/// passes, a call without a required argument is `INVALID_PARAMS`, no run leaves a
/// process behind, and the network was denied to it unless the request says
/// `requires_network`.
///
/// The runs get exactly the sandbox of every later call (a private PID namespace
/// included: toolsmith's init outlives the tool, so the executor counts what it
/// leaves behind there too).
///
/// Each check is one block pushing one [`CheckReport`]; a new check is one more block
/// here, using `tool`, `request` and `envelopes` (every envelope of the runs so far).
pub(crate) async fn check_in_sandbox(
    executor: &Arc<Executor>,
    tool: &Tool,
    request: &Request,
    run_config: &RunConfig,
) -> Result<Sandboxed, Error> {
    // The checks' calls are the generator's own: no operator's policy lists decide them.
    let toolsmith = Toolsmith::from_parts(
        Arc::clone(executor),
        run_config.clone(),
        Policy::allow_all(),
    );
    let generated = tool.as_generated();
    let mut checks = Vec::new();
    let mut envelopes: Vec<Envelope> = Vec::new();

    let expected = request.input_schema();
    let declared = tool.input_schema().as_json();
    if *declared == expected {
        checks.push(CheckReport::passed("schema", None));
    } else {
        checks.push(CheckReport::failed(
            "schema",
            format!("expected the input schema {expected}, the tool declares {declared}"),
        ));
    }

    // The declaration is learned from the tests, within the grant of generated tools, and
    // the tests' checks are their runs under it: the registered file carries it.
    let learning = toolsmith.learn_cases(&generated, &request.tests).await?;
    let (outcomes, learned) = learned_check(learning, &mut checks);
    let tool = &match &learned {
        Some(declaration) => generated.with_sandbox(declaration.clone()),
        None => generated,
    };
    for outcome in outcomes {
        let name = format!("test: {}", outcome.name);
        checks.push(match &outcome.mismatch {
            None => CheckReport::passed(&name, None),
            Some(mismatch) => CheckReport::failed(&name, mismatch.clone()),
        });
        envelopes.push(outcome.envelope);
    }

    if let Some(missing) = request
        .parameters
        .iter()
        .find(|parameter| parameter.required)
    {
        let mut arguments = request
            .tests
            .first()
            .map(|case| case.input.clone())
            .unwrap_or_default();
        arguments.remove(&missing.name);
        let envelope = toolsmith.call_tool(tool, &Value::Object(arguments)).await?;
        checks.push(match envelope.error_code() {
            Some(ErrorCode::InvalidParams) => CheckReport::passed(
                "missing_required",
                Some(format!(
                    "a call without `{}` is INVALID_PARAMS",
                    missing.name
                )),
            ),
            _ => CheckReport::failed(
                "missing_required",
                format!(
                    "a call without `{}` should be INVALID_PARAMS, got {}",
                    missing.name,
                    serde_json::to_string(&envelope).unwrap_or_default()
                ),
            ),
        });
        envelopes.push(envelope);
    }

    if envelopes.is_empty() {
        // No test case and no required parameter: nothing has run yet, and the checks
        // below judge runs. One call without arguments (valid: nothing is required) gives
        // them a run to judge; its result is the tool's business, not a check.
        let envelope = toolsmith
            .call_tool(tool, &Value::Object(Map::new()))
            .await?;
        envelopes.push(envelope);
    }

    let leftovers: u64 = envelopes
        .iter()
        .filter_map(|envelope| envelope.metadata.leftovers_killed)
        .sum();
    checks.push(if leftovers == 0 {
        CheckReport::passed("no_leftovers", None)
    } else {
        CheckReport::failed(
            "no_leftovers",
            format!("the tool left {leftovers} process(es) running after it ended (killed)"),
        )
    });

    checks.push(network_check(request, learned.as_ref(), &envelopes));
    Ok(Sandboxed {
        checks,
        learned,
        predicted: None,
    })
}

/// `learned`: passes with the declaration every test passed under, or fails saying why
/// there is none; returns the runs to judge (under that declaration when there is one).
fn learned_check(
    learning: Learning,
    checks: &mut Vec<CheckReport>,
) -> (Vec<CaseOutcome>, Option<SandboxDeclaration>) {
    match learning {
        Learning::Learned {
            declaration,
            outcomes,
        } => {
            checks.push(CheckReport::passed(
                "learned",
                Some(format!(
                    "every test passes under the declaration {}",
                    declaration.to_json()
                )),
            ));
            (outcomes, Some(declaration))
        }
        Learning::FailedRecording { outcomes } => {
            checks.push(CheckReport::failed(
                    "learned",
                    "a test fails even in the recording sandbox (the grant of generated tools: `[generator] network` and the filesystem grant), so there is no declaration to learn".to_owned(),
                ));
            (outcomes, None)
        }
        Learning::FailedNarrowed {
            declaration,
            outcomes,
        } => {
            checks.push(CheckReport::failed(
                    "learned",
                    format!(
                        "the tests pass while recording but not under the widest declaration the record allows, {}",
                        declaration.to_json()
                    ),
                ));
            (outcomes, None)
        }
    }
}

/// `network`: no run had the host's network, and the tests reached no destination beyond
/// what the request allows itself (its declared `network`; else `requires_network`); passes,
/// saying what was learned.
fn network_check(
    request: &Request,
    learned: Option<&SandboxDeclaration>,
    envelopes: &[Envelope],
) -> CheckReport {
    let host_network = envelopes
        .iter()
        .filter_map(|envelope| envelope.metadata.sandbox.as_ref()?.applied.as_ref())
        .any(|sandbox| sandbox.network == "allow");
    let network = learned.and_then(|declaration| declaration.network.as_ref());
    let reached: &[NetworkTarget] = match network {
        Some(NetworkSetting::Only(targets)) => targets,
        _ => &[],
    };
    let declared = request
        .declared_sandbox
        .as_ref()
        .and_then(|declaration| declaration.network.as_ref());
    let beyond: Vec<String> = reached
        .iter()
        .filter(|target| match declared {
            Some(NetworkSetting::Only(allowed)) => {
                !allowed.iter().any(|entry| entry.covers(target))
            }
            Some(NetworkSetting::Allow | NetworkSetting::AnyPublic | NetworkSetting::Declared) => {
                false
            }
            Some(NetworkSetting::Deny | NetworkSetting::DenyIfPossible) => true,
            None => !request.requires_network,
        })
        .map(ToString::to_string)
        .collect();
    let shown = network.map_or_else(|| "nothing learned".to_owned(), ToString::to_string);
    if host_network {
        CheckReport::failed(
            "network",
            "a run had the host's network; a generated tool's runs go through the egress proxy or have none".to_owned(),
        )
    } else if !beyond.is_empty() {
        CheckReport::failed(
            "network",
            format!(
                "the tests reached {} beyond what the request declares (requires_network: {}, sandbox.network: {})",
                beyond.join(", "),
                request.requires_network,
                declared.map_or_else(|| "not declared".to_owned(), ToString::to_string)
            ),
        )
    } else {
        CheckReport::passed("network", Some(format!("network {shown}")))
    }
}
