//! The `toolsmith` command line: argument parsing, settings resolution, output formats and exit codes.
//!
//! [`main`] parses a `Cli` (clap), resolves `GlobalSettings` and the
//! subcommand's settings from flags, [`EnvVars`] and the config file (in that
//! order of precedence, decided only in the `settings` module), creates one
//! `toolsmith_executor::Executor`, runs the subcommand on a tokio runtime and
//! maps the outcome to an [`ExitStatus`].
//!
//! Data goes to stdout, everything else (logs, errors and their `hint:`
//! lines) to stderr.
//!
//! ```no_run
//! // The whole of `crates/cli/src/main.rs`:
//! fn main() -> std::process::ExitCode {
//!     toolsmith_cli::main()
//! }
//! ```
#![warn(missing_docs)]

mod admission;
mod args;
mod commands;
mod env_vars;
mod exit;
mod export;
mod http;
mod logging;
mod mcp;
mod metrics;
mod output;
mod progress;
mod settings;
mod tighten;
mod trust;
mod units;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use toolsmith_executor::{Executor, ExecutorConfig, Limits};
use toolsmith_registry::{Links, error_chain};

pub use crate::env_vars::EnvVars;
pub use crate::exit::ExitStatus;

use crate::args::{Cli, Commands, CompletionsArgs, GlobalArgs, ManArgs, TokenCommand};
use crate::settings::{
    ConfigError, ConfigFile, ConfigLayers, GlobalSettings, Options, Project, RunSettings,
};
use crate::trust::{TrustError, TrustOptions, TrustReport, TrustStore};

/// Whether toolsmith's initial environment was blanked at start (see
/// `toolsmith_executor::seal_initial_environment`); `doctor` reports it.
static ENVIRON_SEALED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// Whether toolsmith made itself non-dumpable at start (see
/// `toolsmith_executor::forbid_dumping`); `doctor` reports it.
static NOT_DUMPABLE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// How many variables were dropped from toolsmith's environment once the
/// settings were resolved (see `toolsmith_executor::scrub_environment`).
static ENVIRON_DROPPED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// `TOOLSMITH_EGRESS_HOSTS`, read before the environment is scrubbed: the hosts file the
/// egress proxy resolves names from instead of the system resolver.
static EGRESS_HOSTS: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// The clap definition of the command line, for generated artefacts (man
/// pages, completions) that must match the binary exactly.
pub fn command() -> clap::Command {
    Cli::command()
}

/// The JSON Schema of the config file, derived from the structs it is parsed into: every
/// section and key has its doc comment as its description. `cargo xtask codegen` writes
/// docs/config.md from it.
pub fn config_schema() -> serde_json::Value {
    settings::config_schema()
}

/// The reference table of the limit keys (Markdown), one row per row of their one declaration
/// (`toolsmith_registry::with_limit_keys!`): `cargo xtask codegen` writes it into
/// docs/operators.md.
pub fn limits_reference() -> String {
    settings::limits_reference(settings::LIMIT_KEYS)
}

/// Runs `toolsmith` with the process's arguments and environment.
pub fn main() -> ExitCode {
    // First, while the process has one thread and nothing holds a pointer into
    // the environment: a tool must not find toolsmith's secrets in
    // /proc/<pid>/environ, even where it cannot get a private /proc.
    // SAFETY: no other thread exists yet and nothing has called getenv.
    let sealed = unsafe { toolsmith_executor::seal_initial_environment() };
    let _ignored = ENVIRON_SEALED.set(sealed.map(|_| ()).map_err(|error| error_chain(&error)));
    // Not dumpable: a tool of the same uid (root without CAP_SYS_PTRACE
    // included) can neither attach to toolsmith nor read its /proc/<pid>/mem.
    let not_dumpable = toolsmith_executor::forbid_dumping().map_err(|error| error_chain(&error));
    let _ignored = NOT_DUMPABLE.set(not_dumpable);
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `--color` is read before parsing, so that help and usage errors obey it too.
    let mut command = Cli::command();
    if let Some(choice) = color_flag(&arguments) {
        command = command.color(choice);
    }
    let parsed = command
        .try_get_matches_from(&arguments)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with status 0, usage errors to stderr with 2.
            let _ignored = error.print();
            return if error.use_stderr() {
                ExitStatus::Error.into()
            } else {
                ExitStatus::Success.into()
            };
        }
    };
    output::init_color(cli.global.color);
    logging::init(cli.global.log_format);
    match run(cli) {
        Ok(status) => status.into(),
        Err(error) if is_broken_pipe(&error) => ExitStatus::Success.into(),
        Err(error) => {
            report(&error);
            ExitStatus::Error.into()
        }
    }
}

/// The last `--color WHEN` or `--color=WHEN` before a lone `--`, if its value is valid.
fn color_flag(arguments: &[std::ffi::OsString]) -> Option<clap::ColorChoice> {
    let mut choice = None;
    let mut iter = arguments.iter().skip(1).map(|argument| argument.to_str());
    while let Some(argument) = iter.next() {
        let value = match argument {
            Some("--") => break,
            Some("--color") => iter.next().flatten(),
            Some(argument) => argument.strip_prefix("--color="),
            None => None,
        };
        if let Some(parsed) = value
            .and_then(|value| <clap::ColorChoice as clap::ValueEnum>::from_str(value, false).ok())
        {
            choice = Some(parsed);
        }
    }
    choice
}

/// The one dispatch from the command line to a subcommand. Everything a subcommand needs is
/// resolved before any process runs, so that bad input is exit 2 without side effects.
fn run(cli: Cli) -> anyhow::Result<ExitStatus> {
    match &cli.command {
        // These read no config at all.
        Commands::Completions(args) => completions(args),
        Commands::Man(args) => man_pages(args),
        Commands::Token(TokenCommand::New) => token_new(),
        // These read no config above the user's: they decide whether the project's is read.
        Commands::Trust(args) => {
            let before = BeforeProject::read(&cli.global)?;
            commands::trust::trust(
                args,
                &before.cwd,
                &before.project,
                before.state_dir.as_deref(),
                &before.trust_options,
            )
        }
        Commands::Untrust(args) => {
            let before = BeforeProject::read(&cli.global)?;
            commands::trust::untrust(
                args,
                &before.cwd,
                &before.project,
                before.state_dir.as_deref(),
                &before.trust_options,
            )
        }
        Commands::Run(args) => {
            let global = Session::start(&cli)?.global;
            let settings = RunSettings::resolve(args, &global);
            if cli.global.show_settings {
                return show_settings(&global, &settings.limits);
            }
            let arguments = commands::run::read_input(&args.input, &global.cwd)?;
            print_trust_notices(&global.trust);
            on_runtime(&global, global.max_concurrent, async |executor| {
                commands::run::run(args, &arguments, &global, &settings, executor).await
            })
        }
        Commands::List(args) => reading_tools(&cli, async |global, executor| {
            commands::list::list(args, global, executor).await
        }),
        Commands::Show(args) => reading_tools(&cli, async |global, executor| {
            commands::show::show(args, global, executor).await
        }),
        Commands::Validate(args) => reading_tools(&cli, async |global, executor| {
            commands::validate::validate(args, global, executor).await
        }),
        Commands::Export(args) => reading_tools(&cli, async |global, executor| {
            commands::export::export(args, global, executor).await
        }),
        Commands::Doctor(args) => reading_tools(&cli, async |global, executor| {
            commands::doctor::doctor(args, global, executor).await
        }),
        Commands::Test(args) => reading_tools(&cli, async |global, executor| {
            commands::test::test(args, global, executor).await
        }),
        Commands::Learn(args) => reading_tools(&cli, async |global, executor| {
            commands::learn::learn(args, global, executor).await
        }),
        Commands::Prepare(args) => reading_tools(&cli, async |global, executor| {
            commands::prepare::prepare(args, global, executor).await
        }),
        Commands::Serve(args) => {
            let Session { global, env_token } = Session::start(&cli)?;
            let http = http::HttpSettings::resolve(args, env_token.as_deref(), &global.cwd)?;
            if cli.global.show_settings {
                return show_settings(&global, &global.limits);
            }
            print_trust_notices(&global.trust);
            let max_concurrent = commands::serve::max_concurrent(&global);
            on_runtime(&global, max_concurrent, async |executor| {
                commands::serve::serve(args, http, &global, executor).await
            })
        }
        Commands::Generate(args) => {
            let global = Session::start(&cli)?.global;
            if args.print_schema {
                return commands::generate::print_schema();
            }
            let request = commands::generate::read_request(args, &global)?;
            if cli.global.show_settings {
                return show_settings(&global, &global.limits);
            }
            print_trust_notices(&global.trust);
            on_runtime(&global, global.max_concurrent, async |executor| {
                commands::generate::generate(args, &request, &global, executor).await
            })
        }
        // These run no tool process: no executor is set up for them.
        Commands::New(args) => {
            let global = Session::start(&cli)?.global;
            if cli.global.show_settings {
                return show_settings(&global, &global.limits);
            }
            commands::generate::new(args, &global)
        }
        Commands::History(args) => {
            let global = Session::start(&cli)?.global;
            if cli.global.show_settings {
                return show_settings(&global, &global.limits);
            }
            commands::generate::history(args, &global)
        }
        // It reads no tool directory, so it prints no trust notice; it runs the restored
        // version's checks in the sandbox.
        Commands::Rollback(args) => {
            let global = Session::start(&cli)?.global;
            if cli.global.show_settings {
                return show_settings(&global, &global.limits);
            }
            on_runtime(&global, global.max_concurrent, async |executor| {
                commands::generate::rollback(args, &global, executor).await
            })
        }
    }
}

/// A subcommand that reads the tool directories: `--show-settings`, else the trust notices
/// (what of the project was skipped, what was not applied) before any tool is probed, then
/// the subcommand on the runtime.
fn reading_tools(
    cli: &Cli,
    command: impl AsyncFnOnce(&GlobalSettings, &Arc<Executor>) -> anyhow::Result<ExitStatus>,
) -> anyhow::Result<ExitStatus> {
    let global = Session::start(cli)?.global;
    if cli.global.show_settings {
        return show_settings(&global, &global.limits);
    }
    print_trust_notices(&global.trust);
    on_runtime(&global, global.max_concurrent, async |executor| {
        command(&global, executor).await
    })
}

/// `--show-settings`: the resolved settings as JSON on stdout, with `limits` those of the call.
fn show_settings(global: &GlobalSettings, limits: &Limits) -> anyhow::Result<ExitStatus> {
    output::write_json(&global.to_json(limits))?;
    Ok(ExitStatus::Success)
}

/// Sets up the executor and the async runtime, and runs `command` on them.
fn on_runtime(
    global: &GlobalSettings,
    max_concurrent: Option<usize>,
    command: impl AsyncFnOnce(&Arc<Executor>) -> anyhow::Result<ExitStatus>,
) -> anyhow::Result<ExitStatus> {
    let executor = Arc::new(
        Executor::new(ExecutorConfig {
            backend: global.backend,
            max_concurrent,
        })
        .context("cannot set up the executor")?
        .with_egress_hosts(EGRESS_HOSTS.get().cloned().flatten()),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(command(&executor))
}

/// What is read before the project is looked at: the environment layer, the user config,
/// a file named with `--config` or `TOOLSMITH_CONFIG`, and what they say about trust.
struct BeforeProject {
    cwd: PathBuf,
    project: Project,
    env_options: Options,
    home: Option<PathBuf>,
    user_file: Option<ConfigFile>,
    explicit_file: Option<ConfigFile>,
    trust_options: TrustOptions,
    state_dir: Option<PathBuf>,
}

impl BeforeProject {
    fn read(args: &GlobalArgs) -> anyhow::Result<BeforeProject> {
        let cwd = std::env::current_dir().context("cannot determine the current directory")?;
        let lookup = |name: &str| std::env::var(name).ok();
        let env_options = Options::from_env(&lookup)?;
        let project = Project::resolve(args.project.as_deref(), &lookup, &cwd)?;
        let explicit_config = args.config.clone().or_else(|| {
            lookup(EnvVars::TOOLSMITH_CONFIG)
                .filter(|path| !path.is_empty())
                .map(Into::into)
        });
        let non_empty = |name: &str| {
            lookup(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        let home = non_empty(EnvVars::HOME);
        let toolsmith_home = non_empty(EnvVars::TOOLSMITH_HOME).map(|dir| cwd.join(dir));
        // The user config is the user's own: always read. A file named with --config or
        // TOOLSMITH_CONFIG is trusted by that act; the project's is read only when trusted.
        // Either must be a regular file (a FIFO or a device is an error, not a silent skip),
        // but may be a link anywhere: dotfile managers (stow, chezmoi, home-manager) link the
        // user's config from a repository, and no tool can write below ~/.config/toolsmith.
        let user_file = settings::user_config_path(toolsmith_home.as_deref(), home.as_deref())
            .filter(|path| path.symlink_metadata().is_ok())
            .map(|path| settings::load(&path, Links::Follow))
            .transpose()?;
        let explicit_file = explicit_config
            .as_deref()
            .map(|path| settings::load(path, Links::Follow))
            .transpose()?;
        let trust_options = trust::trust_options(
            &[
                user_file.as_ref().and_then(|file| file.trust.as_ref()),
                explicit_file.as_ref().and_then(|file| file.trust.as_ref()),
            ],
            &cwd,
            home.as_deref(),
        );
        let state_dir = trust::state_dir(&lookup);
        Ok(BeforeProject {
            cwd,
            project,
            env_options,
            home,
            user_file,
            explicit_file,
            trust_options,
            state_dir,
        })
    }
}

/// The resolved settings of a command that may read the project, with the bearer token of
/// `serve` read before the environment is scrubbed.
struct Session {
    global: GlobalSettings,
    env_token: Option<String>,
}

impl Session {
    /// Reads the config files (the project's when trusted), resolves the settings, then drops
    /// from toolsmith's environment every variable that no tool receives and toolsmith does
    /// not read.
    fn start(cli: &Cli) -> anyhow::Result<Session> {
        let BeforeProject {
            cwd,
            project,
            env_options,
            home,
            user_file,
            explicit_file,
            trust_options,
            state_dir,
        } = BeforeProject::read(&cli.global)?;
        let lookup = |name: &str| std::env::var(name).ok();
        let store = load_trust_store(state_dir.as_deref())?;
        let mut trust_report = trust::assess_project(&project.dir, &store, &trust_options);
        let upper = match explicit_file {
            // The named file replaces the project's, which is then not read at all.
            Some(file) => Some(file),
            // `$HOME` or `/` is no project unless named: its `.toolsmith/config.toml` is not read.
            None if !project.is_usable(home.as_deref()) => None,
            None => {
                let user_options = user_file
                    .as_ref()
                    .map(|file| file.options.clone())
                    .unwrap_or_default();
                trust::project_config(
                    &mut trust_report,
                    project.config_dir(&cwd),
                    &store,
                    &trust_options,
                    &user_options,
                    home.as_deref(),
                )?
            }
        };
        // Without the binary's path there is no system layer; the other layers still work.
        let binary = std::env::current_exe().ok();
        let global = GlobalSettings::resolve(
            &cli.global,
            ConfigLayers {
                user: user_file,
                upper,
                trust: trust_report,
            },
            env_options,
            &cwd,
            &project,
            binary,
            &lookup,
        );
        tracing::debug!(?global, "resolved settings");
        global.check_read_reveal()?;
        global.make_state_dirs();
        global.check_secrets()?;
        // Every variable that no tool receives and toolsmith does not read is
        // dropped (its heap copy zeroed), so that a tool that could read
        // toolsmith's memory would not find the operator's secrets in it.
        // Read before the scrub below drops it: the token stays in toolsmith's memory only.
        let env_token = matches!(cli.command, Commands::Serve(_))
            .then(|| lookup(EnvVars::TOOLSMITH_TOKEN))
            .flatten();
        let _ignored = EGRESS_HOSTS.set(lookup(EnvVars::TOOLSMITH_EGRESS_HOSTS).map(PathBuf::from));
        let keep = global.kept_environment();
        // SAFETY: the process still has one thread: no executor, runtime or
        // progress bar exists yet, and the logger writes from the caller's thread.
        let dropped = unsafe { toolsmith_executor::scrub_environment(&|name| keep(name)) };
        tracing::debug!(?dropped, "dropped variables no tool receives");
        let mut global = global;
        global.with_secret_command_env(std::env::vars_os().collect());
        let _ignored = ENVIRON_DROPPED.set(dropped.len());
        Ok(Session { global, env_token })
    }
}
/// The trust store, or an empty one (nothing trusted) when there is no state directory.
fn load_trust_store(state_dir: Option<&Path>) -> Result<TrustStore, TrustError> {
    match state_dir {
        Some(dir) => TrustStore::load(Some(dir)),
        None => Ok(TrustStore::empty()),
    }
}

/// One line each on stderr: a skipped project layer with its `hint:`, a refused value.
fn print_trust_notices(report: &TrustReport) {
    let mut text = String::new();
    for line in report.notices() {
        let painted = if let Some(rest) = line.strip_prefix("hint:") {
            format!("{}{rest}", output::Paint::Warn.paint("hint:"))
        } else if let Some(rest) = line.strip_prefix("warning:") {
            format!("{}{rest}", output::Paint::Warn.paint("warning:"))
        } else {
            line
        };
        text.push_str(&painted);
        text.push('\n');
    }
    output::write_stderr(&text);
}

/// `toolsmith completions SHELL`: the script on stdout, generated from the clap definition.
fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitStatus> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "toolsmith", &mut script);
    output::write_text(&String::from_utf8_lossy(&script))?;
    Ok(ExitStatus::Success)
}

/// `toolsmith man --out DIR` (hidden): the man pages, generated from the clap definition, and
/// their paths on stdout, one a line.
fn man_pages(args: &ManArgs) -> anyhow::Result<ExitStatus> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    clap_mangen::generate_to(Cli::command(), &args.out)
        .with_context(|| format!("cannot write man pages into {}", args.out.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&args.out)
        .with_context(|| format!("cannot read {}", args.out.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("toolsmith") && name.ends_with(".1"))
        })
        .collect();
    pages.sort();
    let listing: String = pages
        .iter()
        .map(|page| format!("{}\n", page.display()))
        .collect();
    output::write_text(&listing)?;
    Ok(ExitStatus::Success)
}

/// `toolsmith token new`: a fresh bearer token for `serve --http` on stdout.
fn token_new() -> anyhow::Result<ExitStatus> {
    output::write_text(&format!("{}\n", http::Token::generate()?.as_str()))?;
    Ok(ExitStatus::Success)
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io_error| io_error.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Prints `error: <message>: <cause>: ...` and an optional `hint:` line to stderr.
fn report(error: &anyhow::Error) {
    let message: Vec<String> = error.chain().map(ToString::to_string).collect();
    if logging::format() == logging::LogFormat::Json {
        let hint = hint(error);
        tracing::error!(target: logging::ANNOUNCE_TARGET, hint, "{}", message.join(": "));
        return;
    }
    let mut text = format!(
        "{} {}\n",
        output::Paint::Bad.paint("error:"),
        message.join(": ")
    );
    if let Some(hint) = hint(error) {
        text.push_str(&format!("{} {hint}\n", output::Paint::Warn.paint("hint:")));
    }
    output::write_stderr(&text);
}

fn hint(error: &anyhow::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        if let Some(config_error) = cause.downcast_ref::<ConfigError>() {
            return config_error.hint();
        }
        if let Some(trust_error) = cause.downcast_ref::<TrustError>() {
            return trust_error.hint();
        }
        if let Some(toolsmith_executor::Error::BackendUnavailable { .. }) =
            cause.downcast_ref::<toolsmith_executor::Error>()
        {
            return Some(format!(
                "set {}=auto or `[executor] backend = \"auto\"` to use the strongest available backend; `toolsmith doctor` shows what this kernel allows",
                EnvVars::TOOLSMITH_BACKEND
            ));
        }
        if cause.downcast_ref::<serde_json::Error>().is_some() {
            return Some("pass a JSON object, e.g. --input '{\"name\": \"Ada\"}'".to_owned());
        }
        None
    })
}
