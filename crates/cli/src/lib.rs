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
#[cfg(test)]
mod config_reference;
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

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use toolsmith_executor::{Executor, ExecutorConfig};

pub use crate::env_vars::EnvVars;
pub use crate::exit::ExitStatus;

use crate::args::{
    Cli, Commands, CompletionsArgs, DoctorArgs, ExportArgs, GenerateArgs, HistoryArgs, ListArgs,
    NewArgs, RollbackArgs, RunArgs, ServeArgs, ShowArgs, TestArgs, TokenCommand, ValidateArgs,
};
use crate::settings::ConfigError;
use crate::settings::{ConfigLayers, GlobalSettings, Options, RunSettings};
use crate::trust::{TrustError, TrustReport, TrustStore};

/// Whether toolsmith's initial environment was blanked at start (see
/// `toolsmith_executor::seal_initial_environment`); `doctor` reports it.
static ENVIRON_SEALED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// Whether toolsmith made itself non-dumpable at start (see
/// `toolsmith_executor::forbid_dumping`); `doctor` reports it.
static NOT_DUMPABLE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

/// How many variables were dropped from toolsmith's environment once the
/// settings were resolved (see `toolsmith_executor::scrub_environment`).
static ENVIRON_DROPPED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// The clap definition of the command line, for generated artefacts (man
/// pages, completions) that must match the binary exactly.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `toolsmith` with the process's arguments and environment.
pub fn main() -> ExitCode {
    // First, while the process has one thread and nothing holds a pointer into
    // the environment: a tool must not find toolsmith's secrets in
    // /proc/<pid>/environ, even where it cannot get a private /proc.
    // SAFETY: no other thread exists yet and nothing has called getenv.
    let sealed = unsafe { toolsmith_executor::seal_initial_environment() };
    let _ignored = ENVIRON_SEALED.set(sealed.map(|_| ()).map_err(|error| {
        let mut message = error.to_string();
        if let Some(source) = std::error::Error::source(&error) {
            message.push_str(&format!(": {source}"));
        }
        message
    }));
    // Not dumpable: a tool of the same uid (root without CAP_SYS_PTRACE
    // included) can neither attach to toolsmith nor read its /proc/<pid>/mem.
    let not_dumpable = toolsmith_executor::forbid_dumping().map_err(|error| {
        let mut message = error.to_string();
        if let Some(source) = std::error::Error::source(&error) {
            message.push_str(&format!(": {source}"));
        }
        message
    });
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

fn run(cli: Cli) -> anyhow::Result<ExitStatus> {
    if let Commands::Completions(args) = &cli.command {
        return completions(args);
    }
    if let Commands::Token(TokenCommand::New) = &cli.command {
        return token_new();
    }
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let lookup = |name: &str| std::env::var(name).ok();
    let env_options = Options::from_env(&lookup)?;
    let explicit_config = cli.global.config.clone().or_else(|| {
        lookup(EnvVars::TOOLSMITH_CONFIG)
            .filter(|path| !path.is_empty())
            .map(Into::into)
    });
    let non_empty = |name: &str| {
        lookup(name)
            .filter(|value| !value.is_empty())
            .map(std::path::PathBuf::from)
    };
    let home = non_empty(EnvVars::HOME);
    let toolsmith_home = non_empty(EnvVars::TOOLSMITH_HOME).map(|dir| cwd.join(dir));
    // The user config is the user's own: always read. A file named with --config or
    // TOOLSMITH_CONFIG is trusted by that act; the project's is read only when trusted.
    let user_file = settings::user_config_path(toolsmith_home.as_deref(), home.as_deref())
        .filter(|path| path.is_file())
        .map(|path| settings::load(&path))
        .transpose()?;
    let explicit_file = explicit_config.as_deref().map(settings::load).transpose()?;
    let trust_options = trust::trust_options(
        &[
            user_file.as_ref().and_then(|file| file.trust.as_ref()),
            explicit_file.as_ref().and_then(|file| file.trust.as_ref()),
        ],
        &cwd,
        home.as_deref(),
    );
    let state_dir = trust::state_dir(&lookup);
    match &cli.command {
        Commands::Trust(args) => {
            return commands::trust::trust(args, &cwd, state_dir.as_deref(), &trust_options);
        }
        Commands::Untrust(args) => {
            return commands::trust::untrust(args, &cwd, state_dir.as_deref(), &trust_options);
        }
        _ => {}
    }
    let project = toolsmith_registry::project_dir(&cwd);
    let store = load_trust_store(state_dir.as_deref())?;
    let mut trust_report = trust::assess_project(&project, &store, &trust_options);
    let upper = match explicit_file {
        // The named file replaces the project's, which is then not read at all.
        Some(file) => Some(file),
        None => {
            let user_options = user_file
                .as_ref()
                .map(|file| file.options.clone())
                .unwrap_or_default();
            trust::project_config(
                &mut trust_report,
                &cwd,
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
        binary,
        &lookup,
    );
    tracing::debug!(?global, "resolved settings");
    // Every variable that no tool receives and toolsmith does not read is
    // dropped (its heap copy zeroed), so that a tool that could read
    // toolsmith's memory would not find the operator's secrets in it.
    // Read before the scrub below drops it: the token stays in toolsmith's memory only.
    let env_token = matches!(cli.command, Commands::Serve(_))
        .then(|| lookup(EnvVars::TOOLSMITH_TOKEN))
        .flatten();
    let keep = global.kept_environment();
    // SAFETY: the process still has one thread: no executor, runtime or
    // progress bar exists yet, and the logger writes from the caller's thread.
    let dropped = unsafe { toolsmith_executor::scrub_environment(&|name| keep(name)) };
    tracing::debug!(?dropped, "dropped variables no tool receives");
    let _ignored = ENVIRON_DROPPED.set(dropped.len());

    // Everything a subcommand needs is resolved before any process runs, so
    // that bad input is exit 2 without side effects.
    let prepared = match &cli.command {
        Commands::Run(args) => {
            let settings = RunSettings::resolve(args, &global);
            if cli.global.show_settings {
                output::write_json(&global.to_json(&settings.limits))?;
                return Ok(ExitStatus::Success);
            }
            let arguments = commands::run::read_input(&args.input, &cwd)?;
            Prepared::Run {
                args,
                settings,
                arguments,
            }
        }
        Commands::List(args) => Prepared::List(args),
        Commands::Show(args) => Prepared::Show(args),
        Commands::Validate(args) => Prepared::Validate(args),
        Commands::Export(args) => Prepared::Export(args),
        Commands::Doctor(args) => Prepared::Doctor(args),
        Commands::Serve(args) => Prepared::Serve(
            args,
            http::HttpSettings::resolve(args, env_token.as_deref(), &cwd)?,
        ),
        Commands::Completions(args) => return completions(args),
        // Handled before any config is read; repeated so the match is whole.
        Commands::Token(TokenCommand::New) => return token_new(),
        Commands::Generate(args) if args.print_schema => {
            return commands::generate::print_schema();
        }
        Commands::Generate(args) => {
            let request = commands::generate::read_request(args, &global)?;
            Prepared::Generate { args, request }
        }
        Commands::New(args) => Prepared::New(args),
        Commands::Test(args) => Prepared::Test(args),
        Commands::History(args) => Prepared::History(args),
        Commands::Rollback(args) => Prepared::Rollback(args),
        // Handled before any config above the user's is read; repeated so the match is whole.
        Commands::Trust(args) => {
            return commands::trust::trust(args, &cwd, state_dir.as_deref(), &trust_options);
        }
        Commands::Untrust(args) => {
            return commands::trust::untrust(args, &cwd, state_dir.as_deref(), &trust_options);
        }
    };
    if cli.global.show_settings {
        output::write_json(&global.to_json(&global.limits))?;
        return Ok(ExitStatus::Success);
    }
    // Before any tool is probed: what of the project was skipped, and what was not applied.
    if reads_tools(&prepared) {
        print_trust_notices(&global.trust);
    }
    // These run no tool process: no executor is set up for them.
    match prepared {
        Prepared::New(args) => return commands::generate::new(args, &global),
        Prepared::History(args) => return commands::generate::history(args, &global),
        _ => {}
    }

    let executor = Arc::new(
        Executor::new(ExecutorConfig {
            backend: global.backend,
            max_concurrent: match prepared {
                Prepared::Serve(..) => commands::serve::max_concurrent(&global),
                _ => global.max_concurrent,
            },
        })
        .context("cannot set up the executor")?,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match prepared {
            Prepared::Run {
                args,
                settings,
                arguments,
            } => commands::run::run(args, &arguments, &global, &settings, &executor).await,
            Prepared::List(args) => commands::list::list(args, &global, &executor).await,
            Prepared::Show(args) => commands::show::show(args, &global, &executor).await,
            Prepared::Validate(args) => {
                commands::validate::validate(args, &global, &executor).await
            }
            Prepared::Export(args) => commands::export::export(args, &global, &executor).await,
            Prepared::Doctor(args) => commands::doctor::doctor(args, &global, &executor).await,
            Prepared::Serve(args, http) => {
                commands::serve::serve(args, http, &global, &executor).await
            }
            Prepared::Generate { args, request } => {
                commands::generate::generate(args, &request, &global, &executor).await
            }
            Prepared::Test(args) => commands::test::test(args, &global, &executor).await,
            Prepared::Rollback(args) => commands::generate::rollback(args, &global).await,
            Prepared::New(args) => commands::generate::new(args, &global),
            Prepared::History(args) => commands::generate::history(args, &global),
        }
    })
}

/// A subcommand with its settings resolved and its input read.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one value per process, built once and consumed at once"
)]
enum Prepared<'a> {
    Run {
        args: &'a RunArgs,
        settings: RunSettings,
        arguments: serde_json::Value,
    },
    List(&'a ListArgs),
    Show(&'a ShowArgs),
    Validate(&'a ValidateArgs),
    Export(&'a ExportArgs),
    Doctor(&'a DoctorArgs),
    Serve(&'a ServeArgs, Option<http::HttpSettings>),
    Generate {
        args: &'a GenerateArgs,
        request: serde_json::Value,
    },
    New(&'a NewArgs),
    Test(&'a TestArgs),
    History(&'a HistoryArgs),
    Rollback(&'a RollbackArgs),
}

/// Whether the subcommand reads the tool directories (and so may skip an untrusted project).
fn reads_tools(prepared: &Prepared<'_>) -> bool {
    !matches!(
        prepared,
        Prepared::New(_) | Prepared::History(_) | Prepared::Rollback(_)
    )
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
    let color = output::colors().stderr;
    let mut text = String::new();
    for line in report.notices() {
        let painted = if let Some(rest) = line.strip_prefix("hint:") {
            format!("{}{rest}", output::Paint::Warn.paint("hint:", color))
        } else if let Some(rest) = line.strip_prefix("warning:") {
            format!("{}{rest}", output::Paint::Warn.paint("warning:", color))
        } else {
            line
        };
        text.push_str(&painted);
        text.push('\n');
    }
    use std::io::Write;
    let _ignored = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `toolsmith completions SHELL`: the script on stdout, generated from the clap definition.
fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitStatus> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "toolsmith", &mut script);
    output::write_text(&String::from_utf8_lossy(&script))?;
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
    let color = output::colors().stderr;
    let mut text = format!(
        "{} {}\n",
        output::Paint::Bad.paint("error:", color),
        message.join(": ")
    );
    if let Some(hint) = hint(error) {
        text.push_str(&format!(
            "{} {hint}\n",
            output::Paint::Warn.paint("hint:", color)
        ));
    }
    use std::io::Write;
    let _ignored = std::io::stderr().lock().write_all(text.as_bytes());
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
