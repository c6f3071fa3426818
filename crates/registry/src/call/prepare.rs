//! Preparing a tool started by a package runner (`toolsmith prepare`): one run, with the
//! network, that fills the tool's own cache with its dependencies, so that its probes and
//! calls then run offline.
//!
//! A uv script with a PEP 723 block is prepared with `uv sync --script FILE`: uv resolves and
//! installs what the block names into the script's environment in the tool's cache, and the
//! script's own code does not run. Any other package-runner script (a uv script without a
//! block, `npx`, `bunx`, `uvx`, ...) is prepared by running its probe with the network: the
//! runner fetches the package, then the program prints its description.
//!
//! The step runs in the probes' sandbox (read-only filesystem but its TMPDIR and the tool's
//! cache, no other process, the system-call filter) with one difference: the network. Until
//! toolsmith has per-host egress, that is the host's network, whole; [`PrepareStep::index`]
//! names the one host the step needs (the package index), so that an egress proxy can grant
//! exactly that later.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolsmith_executor::{Command, Executor, LimitKind, Network, Termination};

use crate::discovery::catalog::Catalog;
use crate::discovery::discover::file_tool_name;
use crate::formats::format::Format;
use crate::formats::package_runner::{HEAD_BYTES, PackageRunner, package_runner};
use crate::formats::{ikigai, kodelet};
use crate::message::first_line;
use crate::name::ToolName;
use crate::oob;
use crate::overrides::RunConfig;
use crate::regular_file::{Links, read_start};
use crate::sandbox::probe_sandbox;
use crate::tool_cache::{Index, ToolCache};

/// The longest a preparation may take: a download of the dependencies.
pub(crate) const PREPARE_TIMEOUT: Duration = Duration::from_secs(300);

/// The default index of uv and pip, when the environment names none.
pub(crate) const DEFAULT_PYTHON_INDEX: &str = "https://pypi.org/simple";

/// The default registry of npm, when the environment names none.
pub(crate) const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org";

/// A tool file that needs preparing: started by a package runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preparation {
    /// The tool's name (the file's, for a file that does not load yet).
    pub name: ToolName,
    /// The tool file.
    pub path: PathBuf,
    /// The runner that starts it.
    pub runner: PackageRunner,
}

/// What a preparation runs, and the network it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareStep {
    /// The command, as a user would type it (`uv sync --script FILE`, `FILE description`).
    pub command: String,
    /// The package index the step fetches from (`UV_INDEX_URL`, `UV_DEFAULT_INDEX`,
    /// `PIP_INDEX_URL` of the tools' environment, else PyPI; `npm_config_registry`, else
    /// npm's registry). The step is granted the whole network until toolsmith has per-host
    /// egress (issue 23); this is the host such a grant would name.
    pub index: String,
}

/// Why a preparation failed.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// toolsmith knows no cache directory (no `XDG_CACHE_HOME`, no `HOME`).
    #[error("toolsmith has no cache directory to prepare the tool in (set XDG_CACHE_HOME or HOME)")]
    NoCacheDirectory,
    /// The runner is not on the tools' `PATH`.
    #[error("`{program}` is not on the tools' PATH")]
    RunnerNotFound {
        /// The program looked for.
        program: &'static str,
    },
    /// The step could not be started.
    #[error("`{command}` could not be started")]
    Spawn {
        /// The step's command.
        command: String,
        /// The executor's error.
        #[source]
        source: toolsmith_executor::Error,
    },
    /// The step exited with a non-zero status, was killed, or hit a limit.
    #[error("`{command}` {how}{}", stderr.as_ref().map(|line| format!(" (stderr: {line})")).unwrap_or_default())]
    Failed {
        /// The step's command.
        command: String,
        /// How it ended, e.g. `exited with status 2`.
        how: String,
        /// The last non-empty line of its stderr, if any.
        stderr: Option<String>,
    },
}

/// Every file of `catalog` (its tools and its problems) started by a package runner, in the
/// catalog's order.
pub fn preparations(catalog: &Catalog) -> Vec<Preparation> {
    let tools = catalog
        .tools()
        .iter()
        .map(|tool| (Some(tool.name().clone()), tool.path()));
    let problems = catalog
        .problems()
        .iter()
        .map(|problem| (None, problem.path.as_path()));
    tools
        .chain(problems)
        .filter_map(|(name, path)| {
            let name = name.or_else(|| {
                path.file_name()
                    .and_then(|file_name| file_tool_name(&file_name.to_string_lossy()))
            })?;
            let head = read_start(path, Links::Follow, HEAD_BYTES).ok()?;
            let runner = package_runner(&head)?;
            Some(Preparation {
                name,
                path: path.to_path_buf(),
                runner,
            })
        })
        .collect()
}

impl Preparation {
    /// The step that prepares this tool under `config` (its command and package index).
    pub fn step(&self, config: &RunConfig) -> PrepareStep {
        let env = tool_env(config);
        let lookup = |name: &str| {
            env.iter()
                .find(|(variable, _)| variable == name)
                .map(|(_, value)| value.to_string_lossy().into_owned())
                .filter(|value| !value.is_empty())
        };
        let python_index = || {
            lookup("UV_INDEX_URL")
                .or_else(|| lookup("UV_DEFAULT_INDEX"))
                .or_else(|| lookup("PIP_INDEX_URL"))
                .unwrap_or_else(|| DEFAULT_PYTHON_INDEX.to_owned())
        };
        let path = self.path.display();
        match &self.runner {
            PackageRunner::UvScript { metadata: true, .. } => PrepareStep {
                command: format!("uv sync --script {path}"),
                index: python_index(),
            },
            PackageRunner::UvScript { .. } => PrepareStep {
                command: format!("{path} {}", probe_arg(&self.path)),
                index: python_index(),
            },
            PackageRunner::Fetching { runner } => PrepareStep {
                command: format!("{path} {}", probe_arg(&self.path)),
                index: if runner.starts_with("uv") || runner.starts_with("pipx") {
                    python_index()
                } else {
                    lookup("npm_config_registry")
                        .or_else(|| lookup("NPM_CONFIG_REGISTRY"))
                        .unwrap_or_else(|| DEFAULT_NPM_REGISTRY.to_owned())
                },
            },
        }
    }

    /// Runs the preparation (see the module's documentation): `Ok` when its step exited 0.
    /// Whether the tool then loads offline is discovery's to say.
    pub async fn run(
        &self,
        executor: &Arc<Executor>,
        config: &RunConfig,
    ) -> Result<(), PrepareError> {
        let caches = config
            .tool_caches
            .as_deref()
            .ok_or(PrepareError::NoCacheDirectory)?;
        let cache = ToolCache::of_file(caches, &self.path);
        let mut env = tool_env(config);
        env.extend(cache.env(Index::Reachable));
        let step = self.step(config);
        let spawn_error = |source| PrepareError::Spawn {
            command: step.command.clone(),
            source,
        };
        let mut command = match &self.runner {
            PackageRunner::UvScript { metadata: true, .. } => {
                let uv = find_program("uv", &env)
                    .ok_or(PrepareError::RunnerNotFound { program: "uv" })?;
                let mut command = Command::new(&uv, &config.cwd).map_err(spawn_error)?;
                command
                    .arg(OsStr::new("sync"))
                    .arg(OsStr::new("--script"))
                    .arg(self.path.as_os_str());
                command.envs(env);
                command
            }
            _ if is_ikigai(&self.path) => {
                ikigai::schema_command(&self.path, &config.cwd, &env).map_err(spawn_error)?
            }
            _ => {
                kodelet::description_command(&self.path, &config.cwd, &env).map_err(spawn_error)?
            }
        };
        let mut sandbox = probe_sandbox(config.read_masks.for_probes());
        sandbox.network = Network::Allow;
        sandbox.own_dir = Some(cache.dir().to_path_buf());
        command.sandbox(sandbox);
        let mut limits = config.limits.clone();
        limits.timeout = PREPARE_TIMEOUT;
        let outcome = executor.run(&command, &limits).await.map_err(spawn_error)?;
        let how = match (outcome.limit, outcome.termination) {
            (Some(LimitKind::Timeout), _) => format!("did not finish within {PREPARE_TIMEOUT:?}"),
            (Some(limit), _) => format!("was killed by the {limit} limit"),
            (None, Termination::Exited(0)) => return Ok(()),
            (None, Termination::Exited(code)) => format!("exited with status {code}"),
            (None, Termination::Signaled(signal)) => format!("was killed by signal {signal}"),
        };
        let stderr = outcome.stderr.text_lossy();
        Err(PrepareError::Failed {
            command: step.command,
            how,
            stderr: stderr
                .lines()
                .rev()
                .find(|line| !line.trim().is_empty())
                .and_then(first_line),
        })
    }
}

/// The environment the tools get, without toolsmith's own variables.
fn tool_env(config: &RunConfig) -> Vec<(OsString, OsString)> {
    let mut env = config.env.clone();
    env.retain(|(name, _)| !oob::is_toolsmith_var(name));
    env
}

/// The probe that asks the file at `path` what it is: `--schema` for an ikigai file.
fn probe_arg(path: &Path) -> &'static str {
    if is_ikigai(path) {
        ikigai::SCHEMA_ARG
    } else {
        kodelet::DESCRIPTION_ARG
    }
}

fn is_ikigai(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| Format::of_file(&name.to_string_lossy()).ok())
        .is_some_and(|(_, format)| format == Format::Ikigai)
}

/// `program` in the `PATH` of `env`, as the tool's `#!/usr/bin/env` would find it.
fn find_program(program: &str, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = env.iter().find(|(name, _)| name == "PATH")?.1.clone();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            candidate.metadata().is_ok_and(|metadata| {
                metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
            })
        })
}
