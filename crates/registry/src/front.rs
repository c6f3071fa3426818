//! The front door: one [`Toolsmith`] value holds the executor, the run configuration and the
//! policy, and everything an embedder (or toolsmith's own commands) does goes through it:
//! [`discover`](Toolsmith::discover) a catalog, keep one [`live`](Toolsmith::live), and
//! [`call`](Toolsmith::call) a tool, which checks policy, asks a Kodelet tool's pending
//! `config`, fills the defaults, validates, runs and reports progress, every refusal an
//! [`Envelope`] built in `call/invoke.rs` and nowhere else.

use std::future::{Future, IntoFuture};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolsmith_executor::{
    BackendChoice, DEFAULT_ENV_ALLOW, Executor, ExecutorConfig, Limits, ReportSink, filtered_env,
};

use crate::call::declared_tests::{CaseOutcome, run_cases};
use crate::call::identity::CallIdentity;
use crate::call::invoke::{Target, invoke_target};
use crate::call::learn::{Learning, learn_cases};
use crate::context::Context;
use crate::discovery::cache::DiscoveryCache;
use crate::discovery::catalog::Catalog;
use crate::discovery::discover::{DiscoveryProgress, discover_layers, discover_one};
use crate::discovery::layers::LayerDir;
use crate::discovery::live::{LiveRegistry, Watching};
use crate::discovery::validate::{FileReport, validate_dirs, validate_paths};
use crate::envelope::Envelope;
use crate::error::Error;
use crate::formats::declared_tests::TestCase;
use crate::masks::{ReadMasks, credential_paths, homes};
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::policy::Policy;
use crate::sandbox::{SandboxProfile, SandboxSettings, protected_paths};
use crate::tool::Tool;

/// The longest timeout a tool may ask for by default ([`RunConfig::max_timeout`]): five
/// minutes, as `toolsmith`'s `[limits] max_timeout`.
const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(300);

impl RunConfig {
    /// The run configuration of a program embedding toolsmith in `project_dir` (made absolute
    /// against the current directory), with the defaults of the `toolsmith` command without a
    /// config file:
    ///
    /// - tools run in `project_dir`, which `filesystem = "project"` tools may write;
    /// - the environment is `PATH`, `HOME`, `USER` and `LANG` from this process
    ///   ([`DEFAULT_ENV_ALLOW`]);
    /// - [`Limits::recommended`] (a 30 s timeout), and a tool may ask for at most 5 minutes;
    /// - the least-privilege sandbox ([`SandboxProfile::Default`]: writes only below the
    ///   project, network only to what a tool declares);
    /// - the usual credential files of every home directory (`.ssh`, `.aws`, ...) hidden;
    /// - the project's `.git`, `.toolsmith` and the peers' project directories read-only to
    ///   tools, whether or not they exist (and every tool's own directory, at its call);
    /// - no per-tool override, no secret, no tool cache, no project trust check.
    ///
    /// Change a field after, or use the [`Toolsmith`] builder's `with_*` methods.
    pub fn new(project_dir: impl AsRef<Path>) -> RunConfig {
        let project_dir = std::path::absolute(project_dir.as_ref())
            .unwrap_or_else(|_| project_dir.as_ref().to_path_buf());
        let allow: Vec<String> = DEFAULT_ENV_ALLOW
            .iter()
            .map(|&name| name.to_owned())
            .collect();
        RunConfig {
            cwd: project_dir.clone(),
            env: filtered_env(&allow, &[]),
            limits: Limits::recommended(),
            max_timeout: DEFAULT_MAX_TIMEOUT,
            overrides: Default::default(),
            sandbox: SandboxSettings::of_profile(SandboxProfile::Default),
            protected: protected_paths(&project_dir, &[], &[]),
            project_dir,
            project_gate: None,
            tool_caches: None,
            read_masks: ReadMasks {
                credentials: credential_paths(&homes(&[])),
                ..ReadMasks::none()
            },
            secrets: Default::default(),
        }
    }
}

/// toolsmith, embedded: the executor, the [`RunConfig`] and the [`Policy`] of every discovery
/// and call, in one value that is cheap to clone and share between tasks.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use toolsmith_registry::{Policy, Toolsmith};
///
/// let toolsmith = Toolsmith::new()?
///     .with_project_dir("/srv/project")
///     .with_policy(Policy::allow_all());
/// let catalog = toolsmith.discover(&["/srv/project/tools"]).await;
/// for tool in catalog.tools() {
///     println!("{}: {}", tool.name(), tool.description());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Toolsmith {
    context: Arc<Context>,
}

impl Toolsmith {
    /// toolsmith with its defaults: the strongest containment backend the kernel offers
    /// ([`BackendChoice::Auto`], no cap on concurrent runs), [`RunConfig::new`] in the current
    /// directory, and a policy that admits every tool ([`Policy::allow_all`]).
    ///
    /// Fails only when the executor cannot start (see [`Executor::new`]).
    pub fn new() -> Result<Toolsmith, Error> {
        let executor = Executor::new(ExecutorConfig {
            backend: BackendChoice::Auto,
            max_concurrent: None,
        })
        .map_err(|source| Error::Start { source })?;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Ok(Toolsmith::from_parts(
            Arc::new(executor),
            RunConfig::new(cwd),
            Policy::allow_all(),
        ))
    }

    /// toolsmith from parts its caller set up (as the `toolsmith` command does from its
    /// configuration).
    pub fn from_parts(executor: Arc<Executor>, config: RunConfig, policy: Policy) -> Toolsmith {
        Toolsmith {
            context: Arc::new(Context {
                executor,
                config,
                policy,
            }),
        }
    }

    /// This value with `policy` deciding which tools are listed, probed and called.
    #[must_use]
    pub fn with_policy(mut self, policy: Policy) -> Toolsmith {
        Arc::make_mut(&mut self.context).policy = policy;
        self
    }

    /// This value with tools running in `dir`, which is also the project
    /// `filesystem = "project"` tools may write.
    #[must_use]
    pub fn with_project_dir(mut self, dir: impl AsRef<Path>) -> Toolsmith {
        let fresh = RunConfig::new(dir);
        let config = &mut Arc::make_mut(&mut self.context).config;
        config.cwd = fresh.cwd;
        config.project_dir = fresh.project_dir;
        config.protected = fresh.protected;
        self
    }

    /// This value with `limits` for every call (`limits.timeout` for tools that ask for none).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Toolsmith {
        Arc::make_mut(&mut self.context).config.limits = limits;
        self
    }

    /// This value with `config` in place of its run configuration.
    #[must_use]
    pub fn with_config(mut self, config: RunConfig) -> Toolsmith {
        Arc::make_mut(&mut self.context).config = config;
        self
    }

    /// The executor every tool process runs through.
    pub fn executor(&self) -> &Arc<Executor> {
        &self.context.executor
    }

    /// How tool processes are run.
    pub fn config(&self) -> &RunConfig {
        &self.context.config
    }

    /// Which tools may be listed, probed and called.
    pub fn policy(&self) -> &Policy {
        &self.context.policy
    }

    /// Discovers the tools of `dirs` (relative ones against [`RunConfig::cwd`]), each an
    /// explicit layer, higher precedence last. A file the policy refuses is never run, not
    /// even to describe itself. Never fails: whatever cannot be loaded is a
    /// [`Problem`](crate::Problem) of the catalog.
    pub async fn discover<P: AsRef<Path>>(&self, dirs: &[P]) -> Catalog {
        let dirs: Vec<PathBuf> = dirs.iter().map(|dir| dir.as_ref().to_path_buf()).collect();
        let layers = LayerDir::explicit(&dirs);
        self.discover_layers(&layers, &mut DiscoveryCache::in_memory(), &|_| {})
            .await
    }

    /// Discovers `layers`, lowest precedence first, probing only the files `cache` does not
    /// know; `progress` hears of each probe (see [`DiscoveryProgress`]).
    pub async fn discover_layers(
        &self,
        layers: &[LayerDir],
        cache: &mut DiscoveryCache,
        progress: &(dyn Fn(DiscoveryProgress) + Sync),
    ) -> Catalog {
        discover_layers(
            self.executor(),
            layers,
            cache,
            self.config(),
            self.policy(),
            progress,
        )
        .await
    }

    /// Discovers only the files of `layers` that would provide `name`, so that calling one
    /// tool does not wait for every other tool's probe.
    pub async fn discover_one(
        &self,
        layers: &[LayerDir],
        cache: &mut DiscoveryCache,
        name: &ToolName,
    ) -> Catalog {
        discover_one(
            self.executor(),
            layers,
            cache,
            name,
            self.config(),
            self.policy(),
        )
        .await
    }

    /// Every check discovery applies to each of `paths` (files or directories), reported one
    /// by one (see [`FileReport`]), as `toolsmith validate PATH` prints them.
    pub async fn validate_paths(&self, paths: &[PathBuf]) -> Vec<FileReport> {
        validate_paths(self.executor(), paths, self.config(), self.policy()).await
    }

    /// Every check discovery applies to the files of `layers` (only those that would provide
    /// `only`, when given), reported one by one.
    pub async fn validate_dirs(
        &self,
        layers: &[LayerDir],
        only: Option<&ToolName>,
    ) -> Vec<FileReport> {
        validate_dirs(self.executor(), layers, only, self.config(), self.policy()).await
    }

    /// A catalog of `layers` that follows their changes while the program runs (see
    /// [`LiveRegistry`]), told of them as `watching` says, discovered once (with `cache`)
    /// before this returns.
    pub async fn live(
        &self,
        layers: Vec<LayerDir>,
        cache: DiscoveryCache,
        watching: Watching,
    ) -> Result<LiveRegistry, Error> {
        LiveRegistry::start((*self.context).clone(), layers, cache, watching).await
    }

    /// A call of the tool `name` of `catalog` (plain, `hello`, or exposed,
    /// `custom_tool_hello`) with `arguments`, to `.await`; see [`Call`] for what it checks and
    /// what may be set before.
    pub fn call<'a>(
        &'a self,
        catalog: &'a Catalog,
        name: &'a str,
        arguments: &'a Value,
    ) -> Call<'a> {
        self.call_target(Target::Named { catalog, name }, arguments)
    }

    /// A call of `tool` (from a catalog, or the generator's report) with `arguments`.
    pub fn call_tool<'a>(&'a self, tool: &'a Tool, arguments: &'a Value) -> Call<'a> {
        self.call_target(Target::Tool(tool), arguments)
    }

    fn call_target<'a>(&'a self, target: Target<'a>, arguments: &'a Value) -> Call<'a> {
        Call {
            toolsmith: self,
            target,
            arguments,
            identity: None,
            progress: None,
            live: None,
        }
    }

    /// Runs the tests `tool` declares, one call each (see [`Tool::tests`]).
    pub async fn run_tests(&self, tool: &Tool) -> Result<Vec<CaseOutcome>, Error> {
        run_cases(&self.context, tool, tool.tests()).await
    }

    /// Learns the narrowest sandbox declaration under which every test `tool` declares
    /// passes, within the operator's grant (see [`Learning`]).
    pub async fn learn(&self, tool: &Tool) -> Result<Learning, Error> {
        learn_cases(&self.context, tool, tool.tests()).await
    }

    /// Like [`learn`](Toolsmith::learn), from `cases` instead of the tool's own tests.
    pub async fn learn_cases(&self, tool: &Tool, cases: &[TestCase]) -> Result<Learning, Error> {
        learn_cases(&self.context, tool, cases).await
    }
}

/// One call of a tool, made by [`Toolsmith::call`] or [`Toolsmith::call_tool`], run by
/// `.await`ing it.
///
/// In order, and each refusal an envelope, nothing run: an unknown name is
/// `TOOL_NOT_FOUND` (naming a file of that name that failed to load); a tool the policy
/// denies, or of a project layer no longer trusted, is `POLICY_DENIED`; a Kodelet tool whose
/// `config` was never asked is asked now, once (an invalid answer is `TOOL_NOT_FOUND`); the
/// declared defaults are filled in and the arguments validated (`INVALID_PARAMS`, every
/// violation listed); what the tool declares beyond the operator's grant is `POLICY_DENIED`.
/// Then the tool runs, and the envelope says how it went. Only a failure of the executor's own
/// plumbing is an `Err`.
#[must_use = "a call runs when it is awaited"]
pub struct Call<'a> {
    toolsmith: &'a Toolsmith,
    target: Target<'a>,
    arguments: &'a Value,
    identity: Option<&'a CallIdentity>,
    progress: Option<ReportSink>,
    live: Option<&'a LiveRegistry>,
}

impl<'a> Call<'a> {
    /// The call belongs to `identity`'s session (its tool receives the ids); without it, the
    /// call is a session of its own ([`CallIdentity::alone`]).
    pub fn in_session(mut self, identity: &'a CallIdentity) -> Call<'a> {
        self.identity = Some(identity);
        self
    }

    /// Each line the tool writes on its progress descriptor (`TOOLSMITH_PROGRESS_FD`) is sent
    /// to `sink`, to read with [`Progress::parse`](crate::Progress::parse); the sender is
    /// dropped when the call ends. Without it, the variable is not set.
    pub fn with_progress(mut self, sink: ReportSink) -> Call<'a> {
        self.progress = Some(sink);
        self
    }

    /// A pending Kodelet `config` is asked through `live`'s discovery cache, so that the
    /// answer is kept (and saved) for the next calls of the same file.
    pub fn through(mut self, live: &'a LiveRegistry) -> Call<'a> {
        self.live = Some(live);
        self
    }
}

impl<'a> IntoFuture for Call<'a> {
    type Output = Result<Envelope, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Envelope, Error>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let alone = CallIdentity::alone();
            let identity = self.identity.unwrap_or(&alone);
            invoke_target(
                &self.toolsmith.context,
                self.target,
                self.arguments,
                identity,
                self.progress,
                self.live,
            )
            .await
        })
    }
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("arguments", self.arguments)
            .field("identity", &self.identity)
            .field("progress", &self.progress.is_some())
            .field("through_live", &self.live.is_some())
            .finish_non_exhaustive()
    }
}
