//! `toolsmith serve`: follow the tool directories with a live registry and serve the tools over MCP on stdin/stdout, or over Streamable HTTP (`--http`).

use std::sync::Arc;

use anyhow::Context;
use toolsmith_executor::Executor;
use toolsmith_registry::{AuditLog, Toolsmith, Watching};

use crate::admission::{ClientLimits, PerClient};
use crate::args::ServeArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::http::{HttpServer, HttpSettings};
use crate::mcp::{self, ServeContext};
use crate::settings::GlobalSettings;

/// How many tool processes `serve` runs at once when `max_concurrent` is not configured.
const DEFAULT_RUNS_PER_CORE: usize = 4;

/// The executor's bound for `serve`: the configured one, or a few runs per core.
///
/// One MCP connection may send hundreds of calls at once; without a bound each would start
/// its process at once, so the rest wait for a permit instead (cancelled while waiting, they
/// never start).
pub(crate) fn max_concurrent(global: &GlobalSettings) -> Option<usize> {
    global.max_concurrent.or_else(|| {
        std::thread::available_parallelism()
            .ok()
            .map(|cores| cores.get() * DEFAULT_RUNS_PER_CORE)
    })
}

/// Serves until the client closes stdin (over HTTP: until SIGTERM or SIGINT); the status is
/// success then.
///
/// The audit log is opened and the first discovery done before the first message is read,
/// so a configuration that cannot work fails at once (status 2). Over HTTP the address is
/// bound first, so that `/healthz` answers while the tools are discovered.
pub(crate) async fn serve(
    args: &ServeArgs,
    http: Option<HttpSettings>,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let http = match http {
        Some(settings) => Some(HttpServer::bind(settings).await?.start()),
        None => None,
    };
    let context = match context(args, global, executor).await {
        Ok(context) => context,
        Err(error) => {
            if let Some(running) = http {
                running.abort();
            }
            return Err(error);
        }
    };
    // A server runs calls in a loop: each call's sandbox is set up while the
    // previous one runs (`Executor::keep_prepared`). Discovery's probes, above,
    // run before this, each in a sandbox of its own made at once.
    executor.keep_prepared(true);
    let served = match http {
        Some(running) => running.serve(context, args.shutdown_grace).await,
        None => mcp::serve(context).await,
    };
    // What waits prepared goes now: its init and its TMPDIR.
    executor.keep_prepared(false);
    served?;
    Ok(ExitStatus::Success)
}

/// The audit log, the live registry after its first discovery, and the rest of what the MCP
/// handler needs.
async fn context(
    args: &ServeArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ServeContext> {
    let mut config = global.run_config(&global.cwd, None);
    // The bearer token and the TLS key and certificate are toolsmith's own state too: a tool
    // that rewrote them would choose the next server's token or certificate.
    config.protected.extend(
        [&args.token_file, &args.tls_cert, &args.tls_key]
            .into_iter()
            .flatten()
            .map(|file| global.cwd.join(file)),
    );
    // And hidden from every tool (issue 23, Why 1: a tool read the token and took the server).
    config.read_masks.own_state.extend(
        [&args.token_file, &args.tls_cert, &args.tls_key]
            .into_iter()
            .flatten()
            .map(|file| global.cwd.join(file)),
    );
    let policy = global.policy(args.profile);
    let audit = global
        .audit_path
        .as_deref()
        .map(AuditLog::open)
        .transpose()?;
    let discovery = std::time::Instant::now();
    let toolsmith = Toolsmith::from_parts(Arc::clone(executor), config, policy);
    let watching = match args.poll_interval {
        None => Watching::Events,
        Some(interval) => Watching::Polls(interval),
    };
    let registry = toolsmith
        .live(
            global.layers.clone(),
            discover::discovery_cache(global),
            watching,
        )
        .await
        .context("cannot watch the tool directories")?;
    let metrics = crate::metrics::Metrics::default();
    metrics.started(
        discovery.elapsed().as_secs_f64(),
        executor.backend().as_str(),
    );
    let catalog = registry.snapshot();
    tracing::info!(
        tools = catalog.tools().len(),
        problems = catalog.problems().len(),
        "the first discovery is done"
    );
    for problem in catalog.problems() {
        tracing::warn!(
            "{} is not served: {}",
            problem.path.display(),
            problem.message()
        );
    }
    // `custom_tool` obeys policy like every tool: the lists by its name, the profiles by
    // what it is (writing and running code is neither read-only nor approval-free).
    let generator = toolsmith
        .policy()
        .check_meta_tool()
        .is_ok()
        .then(|| crate::commands::generate::generator_config(global));
    Ok(ServeContext {
        toolsmith,
        registry,
        prefix: args.prefix.clone(),
        audit,
        definitions: std::sync::Mutex::new(discover::definitions(global)),
        generator,
        generator_refusal: crate::trust::untrusted_generation(global)
            .map(|refusal| {
                let hint = refusal.hint().unwrap_or_default();
                format!("{refusal}\nhint: {hint}")
            })
            .or_else(|| unread_generator_dir(global)),
        calls: mcp::Calls::default(),
        metrics,
        per_client: Some(ClientLimits::new(
            args.max_calls_per_client,
            args.max_call_rate,
        ))
        .filter(|limits| args.http.is_some() && limits.any())
        .map(PerClient::new),
    })
}

/// Why `custom_tool` refuses every request when the generator's directory is none of the
/// tool directories this server reads: a tool written there could not be called in the
/// session, and `registered` would be a lie (issue 25, finding 1).
fn unread_generator_dir(global: &GlobalSettings) -> Option<String> {
    let generator_dir = crate::trust::resolved_beneath(&global.generator_tools_dir);
    let read = global
        .layers
        .iter()
        .any(|layer| crate::trust::resolved_beneath(&layer.dir) == generator_dir);
    (!read).then(|| {
        format!(
            "this server reads no tools from the generator's directory {}, so a tool generated there could not be called\nhint: add it to the tool directories (`[discovery] dirs`, or `--tools-dir`), or leave `[generator] tools_dir` unset to generate into the project's .toolsmith/tools",
            global.generator_tools_dir.display()
        )
    })
}
