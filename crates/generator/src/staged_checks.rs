//! The checks of a staged tool from `registry` on: discovery loads the staged file as it
//! would any tool, and the sandbox checks call it as its first caller would.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use toolsmith_executor::Executor;
use toolsmith_registry::{
    DiscoveryCache, Envelope, ErrorCode, LayerDir, Policy, Problem, RunConfig, Tool, ToolName,
    discover_layers, invoke, load_answered, resolve_config, run_cases, run_tests,
};

use crate::pipeline::CheckReport;
use crate::{Error, Request};

/// The checks of the staged file from `registry` on: discovery loads it as any tool (its
/// `description` probe), and [`check_in_sandbox`] calls it as its first caller would (its
/// `config` answered, then its runs).
///
/// A file rendered from an embedded template answers its probes what the generator rendered
/// (`answers`: the description, and the request's timeout for `config`), so the registry's
/// own loader turns those answers into the tool at once and the sandbox checks run while
/// discovery probes the file. They count only if discovery then loads the very same tool from
/// the file; when it does not, its `config` is asked and the checks run again on the tool
/// discovery loaded. Without `answers` (a manifest, which discovery reads without running
/// anything; an overriding template, whose answers only the file knows) the file's
/// `config` is asked after its description and the checks run on discovery's tool.
/// When discovery refuses the file, the `registry` check says why and the runs still under
/// way are dropped (the executor kills them).
pub(crate) async fn check_staged(
    executor: &Arc<Executor>,
    staging_dir: &Path,
    staged: &Path,
    request: &Request,
    answers: Option<(String, String)>,
    run_config: &RunConfig,
    probes: &mut DiscoveryCache,
) -> Result<Vec<CheckReport>, Error> {
    // A staged tool is a generated tool: it gets no `[tools.NAME]` grant, whatever its name
    // (the live registry does the same by its history ref, `Tool::generated`), so a request
    // named like a tool the operator granted a secret cannot read it in its test report.
    // Nor any secret's definition: a staged tool's runs cannot read one by any name.
    let run_config = &RunConfig {
        overrides: Default::default(),
        secrets: Default::default(),
        ..run_config.clone()
    };
    let answered = answers.and_then(|(description, config)| {
        load_answered(staged, description.as_bytes(), config.as_bytes())
            .ok()
            .flatten()
    });
    let Some(answered) = answered else {
        let discovered =
            match discover_staged(executor, staging_dir, &request.name, run_config, probes).await {
                Ok(tool) => configured(executor, &tool, run_config, probes).await,
                Err(problem) => Err(problem),
            };
        return match discovered {
            Ok(tool) => with_registry(check_in_sandbox(executor, &tool, request, run_config).await),
            Err(problem) => Ok(vec![CheckReport::failed("registry", problem)]),
        };
    };
    let (discovered, early) = {
        let discovery = discover_staged(executor, staging_dir, &request.name, run_config, probes);
        let early = check_in_sandbox(executor, &answered, request, run_config);
        tokio::pin!(discovery, early);
        tokio::select! {
            discovered = &mut discovery => match discovered {
                Ok(tool) => (tool, early.await),
                Err(problem) => return Ok(vec![CheckReport::failed("registry", problem)]),
            },
            early = &mut early => match discovery.await {
                Ok(tool) => (tool, early),
                Err(problem) => return Ok(vec![CheckReport::failed("registry", problem)]),
            },
        }
    };
    match described_difference(&discovered, &answered) {
        None => with_registry(early),
        Some(field) => {
            tracing::debug!(
                field,
                "discovery loaded another tool than the generator rendered; checking it instead"
            );
            match configured(executor, &discovered, run_config, probes).await {
                Ok(tool) => {
                    with_registry(check_in_sandbox(executor, &tool, request, run_config).await)
                }
                Err(problem) => Ok(vec![CheckReport::failed("registry", problem)]),
            }
        }
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
        Ok(tool) => tool,
        Err(problem) => return Ok(vec![CheckReport::failed("registry", problem)]),
    };
    let mut checks = vec![CheckReport::passed("registry", None)];
    let outcomes = run_tests(executor, &tool, run_config, &Policy::allow_all()).await?;
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

/// The passed `registry` check followed by `checks`.
fn with_registry(checks: Result<Vec<CheckReport>, Error>) -> Result<Vec<CheckReport>, Error> {
    let mut all = vec![CheckReport::passed("registry", None)];
    all.extend(checks?);
    Ok(all)
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
) -> Result<Vec<CheckReport>, Error> {
    let policy = Policy::allow_all();
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

    let outcomes = run_cases(executor, tool, &request.tests, run_config, &policy).await?;
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
        let envelope = invoke(
            executor,
            tool,
            &Value::Object(arguments),
            run_config,
            &policy,
        )
        .await?;
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
        let envelope = invoke(
            executor,
            tool,
            &Value::Object(Map::new()),
            run_config,
            &policy,
        )
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

    checks.push(network_check(request, &envelopes));
    Ok(checks)
}

/// `network`: every run had the network the request asks for (`deny` unless
/// `requires_network`); passes, saying so, when no run started.
fn network_check(request: &Request, envelopes: &[Envelope]) -> CheckReport {
    let wanted = if request.wants_network() {
        "allow"
    } else {
        "deny"
    };
    let applied: Vec<&str> = envelopes
        .iter()
        .filter_map(|envelope| envelope.metadata.sandbox.as_ref()?.applied.as_ref())
        .map(|sandbox| sandbox.network)
        .collect();
    if applied.is_empty() {
        // Every run was refused before it started (say, a schema that refuses `{}`):
        // there is no sandbox to observe, and a call gets the network of every call.
        CheckReport::passed(
            "network",
            Some(format!("no run started; calls get network {wanted}")),
        )
    } else if applied.iter().all(|network| *network == wanted) {
        CheckReport::passed("network", Some(format!("network {wanted} in every run")))
    } else {
        CheckReport::failed(
            "network",
            format!(
                "every run should have network {wanted} (requires_network: {}), the runs had {applied:?}; generated tools reach the network only where the operator grants it: [generator] network = \"any\" or a list of destinations",
                request.requires_network
            ),
        )
    }
}
