//! Resolved settings: flags, environment, config file and defaults combined in one place.
//!
//! Precedence, highest first: command-line flags, `TOOLSMITH_*` environment
//! variables, the config file, then the defaults (`Limits::recommended()`,
//! `DEFAULT_ENV_ALLOW`, backend `auto`). Each layer is read into the same
//! [`Options`] shape, and [`Combine`] merges them; nothing else decides precedence.
//!
//! The limits of a call to one tool add the tool's `[tools.NAME]` section as
//! a layer between the flags and the environment:
//! `run` flags, then `[tools.NAME]`, then `TOOLSMITH_*`, then `[limits]`, then the defaults.
//! The flags and the tool's section
//! become the registry's `ToolOverride` for that tool, so they also beat the
//! timeout the tool requests for itself (an operator's decision about this
//! tool), while the environment and `[limits]` are the base that a requested
//! timeout (capped by `max_timeout`) replaces. A tool's `env.allow` replaces
//! the global list, as `[env] allow` replaces the default one; its `env.set`
//! is laid over `[env] set` key by key.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolsmith_executor::{BackendChoice, DEFAULT_ENV_ALLOW, Executor, Limits, RunAs};
use toolsmith_registry::{
    Catalog, DiscoveryCache, DiscoveryProgress, FilesystemSetting, Layer, LayerDir, LayerInputs,
    NetworkSetting, Policy, Profile, RunConfig, SandboxSettings, SyscallsSetting, ToolName,
    ToolOverride, layer_dirs, project_dir,
};

use crate::args::{GlobalArgs, ProfileArg, RunArgs};
use crate::config::{self, ConfigDir, ConfigFile, ValueError, describe_cap};
use crate::env_vars::EnvVars;
use crate::trust::TrustReport;
use crate::units::{self, Cap, format_duration, format_size};

/// Merges two layers of options; `self` is the higher layer and wins.
pub(crate) trait Combine {
    fn combine(self, lower: Self) -> Self;
}

impl<T> Combine for Option<T> {
    fn combine(self, lower: Option<T>) -> Option<T> {
        self.or(lower)
    }
}

/// Resource limits as one layer sets them; `None` leaves a limit to lower layers.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct LimitsOptions {
    pub(crate) timeout: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    pub(crate) cpu: Option<Cap<Duration>>,
    pub(crate) memory: Option<Cap<u64>>,
    pub(crate) max_processes: Option<Cap<u64>>,
    pub(crate) max_file_size: Option<Cap<u64>>,
    pub(crate) max_open_files: Option<Cap<u64>>,
    pub(crate) max_output: Option<u64>,
    /// The size of the private TMPDIR (a tmpfs) of a filesystem-restricted call.
    pub(crate) tmp_size: Option<Cap<u64>>,
    /// The ceiling of a timeout a tool asks for itself; not an executor limit.
    pub(crate) max_timeout: Option<Duration>,
}

/// The longest timeout a tool may ask for when the operator sets no
/// `max_timeout`: the most a Nanocoder manifest may declare.
pub(crate) const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(300);

impl Combine for LimitsOptions {
    fn combine(self, lower: LimitsOptions) -> LimitsOptions {
        LimitsOptions {
            timeout: self.timeout.combine(lower.timeout),
            grace: self.grace.combine(lower.grace),
            cpu: self.cpu.combine(lower.cpu),
            memory: self.memory.combine(lower.memory),
            max_processes: self.max_processes.combine(lower.max_processes),
            max_file_size: self.max_file_size.combine(lower.max_file_size),
            max_open_files: self.max_open_files.combine(lower.max_open_files),
            max_output: self.max_output.combine(lower.max_output),
            tmp_size: self.tmp_size.combine(lower.tmp_size),
            max_timeout: self.max_timeout.combine(lower.max_timeout),
        }
    }
}

impl LimitsOptions {
    /// The limits, with `Limits::recommended()` for whatever no layer set.
    fn resolve(self) -> Limits {
        let defaults = Limits::recommended();
        let cap = |option: Option<Cap<u64>>, default: Option<u64>| match option {
            Some(cap) => cap.into_option(),
            None => default,
        };
        Limits {
            timeout: self.timeout.unwrap_or(defaults.timeout),
            grace: self.grace.unwrap_or(defaults.grace),
            cpu: match self.cpu {
                Some(cap) => cap.into_option(),
                None => defaults.cpu,
            },
            memory: cap(self.memory, defaults.memory),
            max_processes: cap(self.max_processes, defaults.max_processes),
            max_file_size: cap(self.max_file_size, defaults.max_file_size),
            max_open_files: cap(self.max_open_files, defaults.max_open_files),
            max_output: self.max_output.unwrap_or(defaults.max_output),
            tmp_size: cap(self.tmp_size, defaults.tmp_size),
        }
    }
}

/// How the executor is set up, as one layer sets it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ExecutorOptions {
    pub(crate) backend: Option<BackendChoice>,
    pub(crate) max_concurrent: Option<usize>,
}

impl Combine for ExecutorOptions {
    fn combine(self, lower: ExecutorOptions) -> ExecutorOptions {
        ExecutorOptions {
            backend: self.backend.combine(lower.backend),
            max_concurrent: self.max_concurrent.combine(lower.max_concurrent),
        }
    }
}

/// The environment policy of tool processes, as one layer sets it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct EnvOptions {
    /// Variables passed through from toolsmith's environment; replaces the default list.
    pub(crate) allow: Option<Vec<String>>,
    /// Variables set to fixed values.
    pub(crate) set: Option<Vec<(String, String)>>,
}

impl Combine for EnvOptions {
    fn combine(self, lower: EnvOptions) -> EnvOptions {
        EnvOptions {
            allow: self.allow.combine(lower.allow),
            set: self.set.combine(lower.set),
        }
    }
}

/// Which tools may be listed and called, as one layer sets it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct PolicyOptions {
    pub(crate) disabled: Option<Vec<ToolName>>,
    pub(crate) allowed: Option<Vec<ToolName>>,
    /// `Some(None)` lifts a profile set by a lower layer (`--profile none`).
    pub(crate) profile: Option<Option<Profile>>,
}

impl Combine for PolicyOptions {
    fn combine(self, lower: PolicyOptions) -> PolicyOptions {
        PolicyOptions {
            disabled: self.disabled.combine(lower.disabled),
            allowed: self.allowed.combine(lower.allowed),
            profile: self.profile.combine(lower.profile),
        }
    }
}

/// How tools are discovered, as one layer sets it (only the config file does; the flags
/// `--tools-dir` and `--no-cache` are applied in [`GlobalSettings::resolve`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct DiscoveryOptions {
    /// `[discovery] dirs`: extra directories, above the project layer.
    pub(crate) dirs: Option<Vec<ConfigDir>>,
    /// `[discovery] peers`: read the peers' tool directories too.
    pub(crate) peers: Option<bool>,
    /// `[discovery] cache`: reuse probe results of unchanged tools.
    pub(crate) cache: Option<bool>,
}

impl Combine for DiscoveryOptions {
    fn combine(self, lower: DiscoveryOptions) -> DiscoveryOptions {
        DiscoveryOptions {
            dirs: self.dirs.combine(lower.dirs),
            peers: self.peers.combine(lower.peers),
            cache: self.cache.combine(lower.cache),
        }
    }
}

/// The sandbox of tools, as one layer sets it (`[sandbox]`, or the same keys in `[tools.NAME]`).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct SandboxOptions {
    pub(crate) network: Option<NetworkSetting>,
    pub(crate) filesystem: Option<FilesystemSetting>,
    pub(crate) syscalls: Option<SyscallsSetting>,
    /// `[sandbox] user`, resolved; never set by `[tools.NAME]`.
    pub(crate) user: Option<RunAs>,
}

impl Combine for SandboxOptions {
    fn combine(self, lower: SandboxOptions) -> SandboxOptions {
        SandboxOptions {
            network: self.network.combine(lower.network),
            filesystem: self.filesystem.combine(lower.filesystem),
            syscalls: self.syscalls.combine(lower.syscalls),
            user: self.user.combine(lower.user),
        }
    }
}

/// Where the generator writes, as one layer sets it (only the config file does).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct GeneratorOptions {
    /// `[generator] tools_dir`: where generated tools go.
    pub(crate) tools_dir: Option<ConfigDir>,
}

impl Combine for GeneratorOptions {
    fn combine(self, lower: GeneratorOptions) -> GeneratorOptions {
        GeneratorOptions {
            tools_dir: self.tools_dir.combine(lower.tools_dir),
        }
    }
}

/// One tool's `[tools.NAME]` section.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ToolOptions {
    /// `max_timeout` is always `None`: the ceiling is for every tool.
    pub(crate) limits: LimitsOptions,
    pub(crate) env: EnvOptions,
    pub(crate) sandbox: SandboxOptions,
    pub(crate) disabled: Option<bool>,
}

impl Combine for ToolOptions {
    fn combine(self, lower: ToolOptions) -> ToolOptions {
        ToolOptions {
            limits: self.limits.combine(lower.limits),
            env: self.env.combine(lower.env),
            sandbox: self.sandbox.combine(lower.sandbox),
            disabled: self.disabled.combine(lower.disabled),
        }
    }
}

impl Combine for BTreeMap<ToolName, ToolOptions> {
    fn combine(
        self,
        mut lower: BTreeMap<ToolName, ToolOptions>,
    ) -> BTreeMap<ToolName, ToolOptions> {
        for (name, options) in self {
            let merged = match lower.remove(&name) {
                Some(lower_options) => options.combine(lower_options),
                None => options,
            };
            lower.insert(name, merged);
        }
        lower
    }
}

/// Everything one layer can set.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Options {
    pub(crate) limits: LimitsOptions,
    pub(crate) executor: ExecutorOptions,
    pub(crate) env: EnvOptions,
    pub(crate) policy: PolicyOptions,
    pub(crate) sandbox: SandboxOptions,
    pub(crate) tools: BTreeMap<ToolName, ToolOptions>,
    /// The audit log file; no log when unset.
    pub(crate) audit: Option<PathBuf>,
    pub(crate) discovery: DiscoveryOptions,
    pub(crate) generator: GeneratorOptions,
}

impl Combine for Options {
    fn combine(self, lower: Options) -> Options {
        Options {
            limits: self.limits.combine(lower.limits),
            executor: self.executor.combine(lower.executor),
            env: self.env.combine(lower.env),
            policy: self.policy.combine(lower.policy),
            sandbox: self.sandbox.combine(lower.sandbox),
            tools: self.tools.combine(lower.tools),
            audit: self.audit.combine(lower.audit),
            discovery: self.discovery.combine(lower.discovery),
            generator: self.generator.combine(lower.generator),
        }
    }
}

/// A `TOOLSMITH_*` variable with a value that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid value {value:?} for environment variable {name}")]
pub(crate) struct EnvError {
    name: &'static str,
    value: String,
    #[source]
    source: ValueError,
}

impl Options {
    /// The options set by `TOOLSMITH_*` variables, read through `lookup`.
    pub(crate) fn from_env(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Options, EnvError> {
        fn read<T>(
            lookup: &dyn Fn(&str) -> Option<String>,
            name: &'static str,
            parse: &dyn Fn(&str) -> Result<T, ValueError>,
        ) -> Result<Option<T>, EnvError> {
            let Some(value) = lookup(name).filter(|value| !value.is_empty()) else {
                return Ok(None);
            };
            parse(&value).map(Some).map_err(|source| EnvError {
                name,
                value,
                source,
            })
        }
        Ok(Options {
            limits: LimitsOptions {
                timeout: read(lookup, EnvVars::TOOLSMITH_TIMEOUT, &|text| {
                    Ok(units::parse_duration(text)?)
                })?,
                cpu: read(lookup, EnvVars::TOOLSMITH_CPU, &|text| {
                    Ok(units::parse_cap(text, units::parse_duration)?)
                })?,
                memory: read(lookup, EnvVars::TOOLSMITH_MEMORY, &|text| {
                    Ok(units::parse_cap(text, units::parse_size)?)
                })?,
                max_output: read(lookup, EnvVars::TOOLSMITH_MAX_OUTPUT, &|text| {
                    Ok(units::parse_size(text)?)
                })?,
                ..LimitsOptions::default()
            },
            executor: ExecutorOptions {
                backend: read(lookup, EnvVars::TOOLSMITH_BACKEND, &config::parse_backend)?,
                max_concurrent: read(
                    lookup,
                    EnvVars::TOOLSMITH_MAX_CONCURRENT,
                    &config::parse_max_concurrent,
                )?,
            },
            env: EnvOptions::default(),
            policy: PolicyOptions {
                profile: read(lookup, EnvVars::TOOLSMITH_PROFILE, &config::parse_profile)?,
                ..PolicyOptions::default()
            },
            sandbox: SandboxOptions::default(),
            tools: BTreeMap::new(),
            audit: None,
            discovery: DiscoveryOptions::default(),
            generator: GeneratorOptions::default(),
        })
    }
}

/// The settings every subcommand shares.
#[derive(Debug, Clone)]
pub(crate) struct GlobalSettings {
    /// The directory tool processes run in and relative paths are taken from.
    pub(crate) cwd: PathBuf,
    /// The tool directories with their layers, lowest precedence first, existing or not.
    pub(crate) layers: Vec<LayerDir>,
    /// Whether `layers` are exactly the `--tools-dir` directories.
    pub(crate) explicit_dirs: bool,
    /// Where the discovery cache lives, or `None` when it is off (or no cache directory is known).
    pub(crate) cache_dir: Option<PathBuf>,
    /// Whether the cache was switched off (`--no-cache`, `[discovery] cache = false`).
    pub(crate) cache_disabled: bool,
    /// The config file read above the user's (the trusted project's, or the one named with
    /// `--config`/`TOOLSMITH_CONFIG`), if any.
    pub(crate) config_file: Option<PathBuf>,
    /// The user config file that was read, if any.
    pub(crate) user_config_file: Option<PathBuf>,
    /// What project trust decided: what was skipped, what was not applied.
    pub(crate) trust: TrustReport,
    /// Where trust is recorded (`$XDG_STATE_HOME/toolsmith`), if known.
    pub(crate) state_dir: Option<PathBuf>,
    pub(crate) backend: BackendChoice,
    pub(crate) max_concurrent: Option<usize>,
    pub(crate) env_allow: Vec<String>,
    pub(crate) env_set: Vec<(String, String)>,
    /// Limits after env and file, before any subcommand flags.
    pub(crate) limits_options: LimitsOptions,
    pub(crate) limits: Limits,
    /// The ceiling of tool-requested timeouts.
    pub(crate) max_timeout: Duration,
    /// The policy after env and file, before any `--profile`.
    pub(crate) policy_options: PolicyOptions,
    /// The `[tools.NAME]` sections.
    pub(crate) tools: BTreeMap<ToolName, ToolOptions>,
    /// The audit log file (absolute), if one is set.
    pub(crate) audit_path: Option<PathBuf>,
    /// The sandbox of every tool (`[sandbox]`), before `[tools.NAME]`.
    pub(crate) sandbox: SandboxSettings,
    /// The project directory: the git work tree enclosing `cwd`, else `cwd`.
    /// A `filesystem = "project"` tool may write below it.
    pub(crate) project_dir: PathBuf,
    /// What the environment set, to tell where each effective value came from.
    env_layer: Options,
    /// What the config file set.
    file_layer: Options,
    /// What the user config file set.
    user_layer: Options,
    /// Whether `--no-cache` was given.
    no_cache_flag: bool,
    /// Where generated tools go: `[generator] tools_dir`, default `<project>/.toolsmith/tools`.
    pub(crate) generator_tools_dir: PathBuf,
    /// Where scaffolded drafts go: `<project>/.toolsmith/drafts`.
    pub(crate) drafts_dir: PathBuf,
    /// `$TOOLSMITH_HOME/templates`, whose templates replace the embedded ones, when
    /// `TOOLSMITH_HOME` is set.
    pub(crate) templates_dir: Option<PathBuf>,
}

/// The config files of one command, lowest first, and the trust decision that chose them.
#[derive(Debug)]
pub(crate) struct ConfigLayers {
    /// The user config (`$TOOLSMITH_HOME/config.toml`).
    pub(crate) user: Option<ConfigFile>,
    /// The file above it: named with `--config`/`TOOLSMITH_CONFIG`, else the trusted
    /// project's, already tightened.
    pub(crate) upper: Option<ConfigFile>,
    pub(crate) trust: TrustReport,
}

/// Where the effective value of a setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A command-line flag.
    Flag(&'static str),
    /// A `TOOLSMITH_*` variable.
    Env(&'static str),
    /// The config file above the user's: the trusted project's, or the one named with
    /// `--config` or `TOOLSMITH_CONFIG`.
    File,
    /// The user config file (`$TOOLSMITH_HOME/config.toml`).
    UserFile,
    /// Nothing set it.
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Env(name) => write!(f, "env {name}"),
            Origin::File => f.write_str("config file"),
            Origin::UserFile => f.write_str("user config"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// One setting as `doctor` shows it: the config key, its effective value, and its origin.
#[derive(Debug, Clone)]
pub(crate) struct Effective {
    pub(crate) key: &'static str,
    pub(crate) value: serde_json::Value,
    pub(crate) origin: Origin,
}

impl GlobalSettings {
    /// Combines `--tools-dir`, the environment and the config files; `binary` is the running
    /// executable, which the system layer is found relative to. The project's tool
    /// directories are left out unless `files.trust` trusts the project.
    pub(crate) fn resolve(
        args: &GlobalArgs,
        files: ConfigLayers,
        env: Options,
        cwd: &Path,
        binary: Option<PathBuf>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> GlobalSettings {
        let ConfigLayers {
            user,
            upper,
            mut trust,
        } = files;
        let (user_config_file, user_options) = match user {
            Some(file) => (Some(file.path), file.options),
            None => (None, Options::default()),
        };
        let (config_file, file_options) = match upper {
            Some(file) => (Some(file.path), file.options),
            None => (None, Options::default()),
        };
        let env_layer = env.clone();
        let file_layer = file_options.clone();
        let user_layer = user_options.clone();
        let combined = env.combine(file_options.combine(user_options));
        let home = non_empty_path(lookup, EnvVars::HOME);
        let explicit_dirs = !args.tools_dir.is_empty();
        let project = project_dir(cwd);
        let layers = if explicit_dirs {
            let dirs: Vec<PathBuf> = args
                .tools_dir
                .iter()
                .map(|dir| std::path::absolute(cwd.join(dir)).unwrap_or_else(|_| cwd.join(dir)))
                .collect();
            LayerDir::explicit(&dirs)
        } else {
            let config_dirs = combined
                .discovery
                .dirs
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|dir| dir.resolve(cwd, home.as_deref()))
                .collect();
            layer_dirs(&LayerInputs {
                binary,
                toolsmith_home: non_empty_path(lookup, EnvVars::TOOLSMITH_HOME)
                    .map(|dir| cwd.join(dir)),
                home: home.clone(),
                project: project.clone(),
                config_dirs,
                peers: combined.discovery.peers.unwrap_or(false),
            })
        };
        let mut layers = layers;
        if !explicit_dirs && !trust.project_trusted() {
            let in_project = |layer: Layer| matches!(layer, Layer::Project | Layer::PeerProject(_));
            let skipped: Vec<PathBuf> = layers
                .iter()
                .filter(|layer_dir| in_project(layer_dir.layer) && layer_dir.dir.exists())
                .map(|layer_dir| layer_dir.dir.clone())
                .collect();
            // A project with no layer at all keeps its (missing) directories, so that `serve`
            // sees the tools its generator writes there; one with a layer loses them.
            if !skipped.is_empty() || !trust.units[0].skipped.is_empty() {
                layers.retain(|layer_dir| !in_project(layer_dir.layer));
            }
            let unit = &mut trust.units[0];
            for dir in skipped {
                let dir = dir.canonicalize().unwrap_or(dir);
                unit.skipped.insert(0, dir);
            }
        }
        let project = project_dir(cwd);
        let generator_tools_dir = match &combined.generator.tools_dir {
            Some(dir) => dir.resolve(cwd, home.as_deref()),
            None => project.join(".toolsmith").join("tools"),
        };
        let drafts_dir = project.join(".toolsmith").join("drafts");
        let templates_dir = non_empty_path(lookup, EnvVars::TOOLSMITH_HOME)
            .map(|dir| cwd.join(dir).join("templates"));
        let cache_disabled = args.no_cache || combined.discovery.cache == Some(false);
        let cache_dir = if cache_disabled {
            None
        } else {
            cache_dir(lookup, home.as_deref())
        };
        GlobalSettings {
            cwd: cwd.to_path_buf(),
            layers,
            user_config_file,
            user_layer,
            trust,
            state_dir: crate::trust::state_dir(lookup),
            explicit_dirs,
            cache_dir,
            cache_disabled,
            config_file,
            backend: combined.executor.backend.unwrap_or(BackendChoice::Auto),
            max_concurrent: combined.executor.max_concurrent,
            env_allow: combined.env.allow.unwrap_or_else(|| {
                DEFAULT_ENV_ALLOW
                    .iter()
                    .map(|name| (*name).to_owned())
                    .collect()
            }),
            env_set: combined.env.set.unwrap_or_default(),
            limits: combined.limits.clone().resolve(),
            max_timeout: combined.limits.max_timeout.unwrap_or(DEFAULT_MAX_TIMEOUT),
            limits_options: combined.limits,
            policy_options: combined.policy,
            tools: combined.tools,
            audit_path: combined.audit.map(|path| {
                std::path::absolute(cwd.join(&path)).unwrap_or_else(|_| cwd.join(path))
            }),
            env_layer,
            file_layer,
            no_cache_flag: args.no_cache,
            sandbox: SandboxSettings {
                network: combined.sandbox.network.unwrap_or(NetworkSetting::Allow),
                filesystem: combined
                    .sandbox
                    .filesystem
                    .unwrap_or(FilesystemSetting::Full),
                private_pids: true,
                syscalls: combined.sandbox.syscalls.unwrap_or(SyscallsSetting::Filter),
                user: combined.sandbox.user,
            },
            project_dir: project,
            generator_tools_dir,
            drafts_dir,
            templates_dir,
        }
    }

    /// Every global setting with its effective value and where it came from
    /// (flags, environment, config file or default), in config-file order.
    /// Per-tool `[tools.NAME]` sections are not included: `show NAME` gives a tool's limits.
    pub(crate) fn effective(&self) -> Vec<Effective> {
        let json = self.to_json(&self.limits);
        let (env, file, user) = (&self.env_layer, &self.file_layer, &self.user_layer);
        let origin =
            |env_name: Option<&'static str>, in_env: bool, in_file: bool, in_user: bool| {
                match env_name {
                    Some(name) if in_env => Origin::Env(name),
                    _ if in_file => Origin::File,
                    _ if in_user => Origin::UserFile,
                    _ => Origin::Default,
                }
            };
        let limit = |key: &'static str,
                     env_name: Option<&'static str>,
                     in_env: bool,
                     in_file: bool,
                     in_user: bool| {
            Effective {
                key,
                value: json["limits"][key.trim_start_matches("limits.")].clone(),
                origin: origin(env_name, in_env, in_file, in_user),
            }
        };
        let (el, fl, ul) = (&env.limits, &file.limits, &user.limits);
        let mut settings = vec![
            limit(
                "limits.timeout",
                Some(EnvVars::TOOLSMITH_TIMEOUT),
                el.timeout.is_some(),
                fl.timeout.is_some(),
                ul.timeout.is_some(),
            ),
            limit(
                "limits.grace",
                None,
                false,
                fl.grace.is_some(),
                ul.grace.is_some(),
            ),
            limit(
                "limits.cpu",
                Some(EnvVars::TOOLSMITH_CPU),
                el.cpu.is_some(),
                fl.cpu.is_some(),
                ul.cpu.is_some(),
            ),
            limit(
                "limits.memory",
                Some(EnvVars::TOOLSMITH_MEMORY),
                el.memory.is_some(),
                fl.memory.is_some(),
                ul.memory.is_some(),
            ),
            limit(
                "limits.max_output",
                Some(EnvVars::TOOLSMITH_MAX_OUTPUT),
                el.max_output.is_some(),
                fl.max_output.is_some(),
                ul.max_output.is_some(),
            ),
            Effective {
                key: "limits.max_timeout",
                value: json["max_timeout"].clone(),
                origin: origin(
                    None,
                    false,
                    fl.max_timeout.is_some(),
                    ul.max_timeout.is_some(),
                ),
            },
            limit(
                "limits.max_processes",
                None,
                false,
                fl.max_processes.is_some(),
                ul.max_processes.is_some(),
            ),
            limit(
                "limits.max_file_size",
                None,
                false,
                fl.max_file_size.is_some(),
                ul.max_file_size.is_some(),
            ),
            limit(
                "limits.max_open_files",
                None,
                false,
                fl.max_open_files.is_some(),
                ul.max_open_files.is_some(),
            ),
            limit(
                "limits.tmp_size",
                None,
                false,
                fl.tmp_size.is_some(),
                ul.tmp_size.is_some(),
            ),
            Effective {
                key: "env.allow",
                value: json["env"]["allow"].clone(),
                origin: origin(
                    None,
                    false,
                    file.env.allow.is_some(),
                    user.env.allow.is_some(),
                ),
            },
            Effective {
                key: "env.set",
                value: json["env"]["set"].clone(),
                origin: origin(None, false, file.env.set.is_some(), user.env.set.is_some()),
            },
            Effective {
                key: "executor.backend",
                value: json["executor"]["backend"].clone(),
                origin: origin(
                    Some(EnvVars::TOOLSMITH_BACKEND),
                    env.executor.backend.is_some(),
                    file.executor.backend.is_some(),
                    user.executor.backend.is_some(),
                ),
            },
            Effective {
                key: "executor.max_concurrent",
                value: json["executor"]["max_concurrent"].clone(),
                origin: origin(
                    Some(EnvVars::TOOLSMITH_MAX_CONCURRENT),
                    env.executor.max_concurrent.is_some(),
                    file.executor.max_concurrent.is_some(),
                    user.executor.max_concurrent.is_some(),
                ),
            },
            Effective {
                key: "policy.disabled",
                value: json["policy"]["disabled"].clone(),
                origin: origin(
                    None,
                    false,
                    file.policy.disabled.is_some(),
                    user.policy.disabled.is_some(),
                ),
            },
            Effective {
                key: "policy.allowed",
                value: json["policy"]["allowed"].clone(),
                origin: origin(
                    None,
                    false,
                    file.policy.allowed.is_some(),
                    user.policy.allowed.is_some(),
                ),
            },
            Effective {
                key: "policy.profile",
                value: json["policy"]["profile"].clone(),
                origin: origin(
                    Some(EnvVars::TOOLSMITH_PROFILE),
                    env.policy.profile.is_some(),
                    file.policy.profile.is_some(),
                    user.policy.profile.is_some(),
                ),
            },
            Effective {
                key: "sandbox.network",
                value: json!(self.sandbox.network.as_str()),
                origin: origin(
                    None,
                    false,
                    file.sandbox.network.is_some(),
                    user.sandbox.network.is_some(),
                ),
            },
            Effective {
                key: "sandbox.filesystem",
                value: json!(self.sandbox.filesystem.as_str()),
                origin: origin(
                    None,
                    false,
                    file.sandbox.filesystem.is_some(),
                    user.sandbox.filesystem.is_some(),
                ),
            },
            Effective {
                key: "sandbox.syscalls",
                value: json!(self.sandbox.syscalls.as_str()),
                origin: origin(
                    None,
                    false,
                    file.sandbox.syscalls.is_some(),
                    user.sandbox.syscalls.is_some(),
                ),
            },
            Effective {
                key: "sandbox.user",
                value: json!(self.sandbox.user.map(|user| user.to_string())),
                origin: origin(
                    None,
                    false,
                    file.sandbox.user.is_some(),
                    user.sandbox.user.is_some(),
                ),
            },
            Effective {
                key: "audit.path",
                value: json["audit"].clone(),
                origin: origin(None, false, file.audit.is_some(), user.audit.is_some()),
            },
            Effective {
                key: "discovery.peers",
                value: json!(
                    file.discovery
                        .peers
                        .or(user.discovery.peers)
                        .unwrap_or(false)
                ),
                origin: origin(
                    None,
                    false,
                    file.discovery.peers.is_some(),
                    user.discovery.peers.is_some(),
                ),
            },
            Effective {
                key: "discovery.cache",
                value: json!(!self.cache_disabled),
                origin: if self.no_cache_flag {
                    Origin::Flag("--no-cache")
                } else {
                    origin(
                        None,
                        false,
                        file.discovery.cache.is_some(),
                        user.discovery.cache.is_some(),
                    )
                },
            },
        ];
        settings.push(Effective {
            key: "discovery.dirs",
            value: json!(
                self.layers
                    .iter()
                    .filter(|layer_dir| layer_dir.layer.as_str() == "config")
                    .map(|layer_dir| &layer_dir.dir)
                    .collect::<Vec<_>>()
            ),
            origin: if self.explicit_dirs {
                Origin::Flag("--tools-dir")
            } else {
                origin(
                    None,
                    false,
                    file.discovery.dirs.is_some(),
                    user.discovery.dirs.is_some(),
                )
            },
        });
        settings
    }

    /// The policy, with `--profile` (when given) above the other layers.
    /// Disabled tools are those of `[policy] disabled` and of every
    /// `[tools.NAME]` with `disabled = true`.
    pub(crate) fn policy(&self, profile_flag: Option<ProfileArg>) -> Policy {
        let flag = PolicyOptions {
            profile: profile_flag.map(ProfileArg::profile),
            ..PolicyOptions::default()
        };
        let options = flag.combine(self.policy_options.clone());
        let mut disabled = options.disabled.unwrap_or_default();
        for (name, tool) in &self.tools {
            if tool.disabled == Some(true) && !disabled.contains(name) {
                disabled.push(name.clone());
            }
        }
        Policy {
            disabled,
            allowed: options.allowed,
            profile: options.profile.flatten(),
        }
    }

    /// How tools are run from `cwd`, with every `[tools.NAME]` section as an
    /// override; `call` puts a call's flags above the section of its tool.
    pub(crate) fn run_config(
        &self,
        cwd: &Path,
        call: Option<(&ToolName, &LimitsOptions)>,
    ) -> RunConfig {
        let mut tools = self.tools.clone();
        if let Some((name, flags)) = call {
            let tool = tools.remove(name).unwrap_or_default();
            let flags = ToolOptions {
                limits: flags.clone(),
                ..ToolOptions::default()
            };
            tools.insert(name.clone(), flags.combine(tool));
        }
        let overrides = tools
            .into_iter()
            .map(|(name, tool)| {
                let tool_override = self.tool_override(tool);
                (name, tool_override)
            })
            .collect();
        RunConfig {
            cwd: cwd.to_path_buf(),
            env: self.tool_env(),
            limits: self.limits.clone(),
            max_timeout: self.max_timeout,
            overrides,
            sandbox: self.sandbox,
            project_dir: self.project_dir.clone(),
            protected: self.protected_paths(),
        }
    }

    /// What stays read-only to `filesystem = "project"` tools besides the
    /// project's `.git`, `.toolsmith` and peers' directories: every tool
    /// directory and the config file, where inside the project.
    fn protected_paths(&self) -> Vec<PathBuf> {
        self.layers
            .iter()
            .map(|layer| layer.dir.clone())
            .chain([self.generator_tools_dir.clone()])
            .chain(self.config_file.clone())
            .collect()
    }

    fn tool_override(&self, tool: ToolOptions) -> ToolOverride {
        let limits = tool.limits;
        let env = (tool.env.allow.is_some() || tool.env.set.is_some()).then(|| {
            let allow = tool.env.allow.unwrap_or_else(|| self.env_allow.clone());
            let mut set = self.env_set.clone();
            for (key, value) in tool.env.set.unwrap_or_default() {
                set.retain(|(existing, _)| existing != &key);
                set.push((key, value));
            }
            toolsmith_executor::filtered_env(&allow, &set)
        });
        ToolOverride {
            timeout: limits.timeout,
            grace: limits.grace,
            cpu: limits.cpu.map(Cap::into_option),
            memory: limits.memory.map(Cap::into_option),
            max_processes: limits.max_processes.map(Cap::into_option),
            max_file_size: limits.max_file_size.map(Cap::into_option),
            max_open_files: limits.max_open_files.map(Cap::into_option),
            max_output: limits.max_output,
            tmp_size: limits.tmp_size.map(Cap::into_option),
            env,
            network: tool.sandbox.network,
            filesystem: tool.sandbox.filesystem,
            syscalls: tool.sandbox.syscalls,
        }
    }

    /// The discovery cache: the one stored in the cache directory, or one in memory only when
    /// the cache is off.
    pub(crate) fn discovery_cache(&self) -> DiscoveryCache {
        match &self.cache_dir {
            Some(dir) => DiscoveryCache::load(dir),
            None => DiscoveryCache::in_memory(),
        }
    }

    /// Discovers every tool of the layers through the discovery cache, then saves the cache.
    /// A file `policy` refuses is never run: it is in the catalog's `denied`.
    pub(crate) async fn discover(
        &self,
        executor: &Arc<Executor>,
        config: &RunConfig,
        policy: &Policy,
        progress: &(dyn Fn(DiscoveryProgress) + Sync),
    ) -> Catalog {
        let mut cache = self.discovery_cache();
        let catalog = toolsmith_registry::discover_layers(
            executor,
            &self.layers,
            &mut cache,
            config,
            policy,
            progress,
        )
        .await;
        self.save_discovery_cache(&mut cache);
        catalog
    }

    /// Discovers only the files that would provide `name` (asking a Kodelet tool's `config`
    /// if it never was), through the discovery cache, then saves the cache.
    pub(crate) async fn discover_tool(
        &self,
        executor: &Arc<Executor>,
        name: &ToolName,
        config: &RunConfig,
        policy: &Policy,
    ) -> Catalog {
        let mut cache = self.discovery_cache();
        let catalog = toolsmith_registry::discover_one(
            executor,
            &self.layers,
            &mut cache,
            name,
            config,
            policy,
        )
        .await;
        self.save_discovery_cache(&mut cache);
        catalog
    }

    /// Writes `cache` back. A cache that cannot be written costs probes next time, not this
    /// command, so the failure is a warning.
    fn save_discovery_cache(&self, cache: &mut DiscoveryCache) {
        if let Err(error) = cache.save() {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message.push_str(": ");
                message.push_str(&cause.to_string());
                source = cause.source();
            }
            tracing::warn!("{message}; unchanged tools will be probed again next time");
        }
    }

    /// The tool directories, lowest precedence first.
    pub(crate) fn tool_dirs(&self) -> Vec<PathBuf> {
        self.layers
            .iter()
            .map(|layer_dir| layer_dir.dir.clone())
            .collect()
    }

    /// Which variables toolsmith keeps in its own environment once the
    /// settings are resolved: those some tool may receive (`[env] allow`,
    /// every `[tools.NAME] env.allow`, and `${NAME}` in a manifest of the
    /// tool directories, expanded at call time), and those toolsmith or its
    /// libraries read (its own `TOOLSMITH_*`, XDG and locale variables,
    /// `PATH`, `HOME`, `TMPDIR`, the terminal's, the dynamic loader's). The
    /// others, the operator's secrets among them, are dropped from memory.
    ///
    /// A manifest added to a directory while `serve` runs can only expand
    /// variables kept at start.
    pub(crate) fn kept_environment(&self) -> impl Fn(&str) -> bool + use<> {
        let mut names: std::collections::BTreeSet<String> = self
            .env_allow
            .iter()
            .chain(
                self.tools
                    .values()
                    .filter_map(|tool| tool.env.allow.as_ref())
                    .flatten(),
            )
            .cloned()
            .collect();
        names.extend(toolsmith_registry::manifest_env_references(
            &self.tool_dirs(),
        ));
        names.extend(
            [
                EnvVars::HOME,
                EnvVars::NO_COLOR,
                EnvVars::CLICOLOR_FORCE,
                "PATH",
                "TMPDIR",
                "TERM",
                "COLUMNS",
                "LINES",
                "USER",
                "LOGNAME",
                "SHELL",
                "LANG",
                "LANGUAGE",
                "TZ",
                "RUST_LOG",
                "RUST_BACKTRACE",
                "RUST_MIN_STACK",
                "GLIBC_TUNABLES",
            ]
            .map(str::to_owned),
        );
        const PREFIXES: [&str; 4] = ["TOOLSMITH_", "XDG_", "LC_", "LD_"];
        move |name: &str| {
            names.contains(name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
        }
    }

    /// The exact environment of tool processes.
    pub(crate) fn tool_env(&self) -> Vec<(OsString, OsString)> {
        toolsmith_executor::filtered_env(&self.env_allow, &self.env_set)
    }

    /// The settings as JSON, for `--show-settings`.
    pub(crate) fn to_json(&self, limits: &Limits) -> serde_json::Value {
        json!({
            "cwd": self.cwd,
            "config_file": self.config_file,
            "user_config_file": self.user_config_file,
            "layers": self.layers.iter().map(|layer_dir| json!({
                "layer": layer_dir.layer.as_str(),
                "path": layer_dir.dir,
            })).collect::<Vec<_>>(),
            "cache_dir": self.cache_dir,
            "executor": {
                "backend": match self.backend {
                    BackendChoice::Auto => "auto".to_owned(),
                    BackendChoice::Only(backend) => backend.to_string(),
                },
                "max_concurrent": self.max_concurrent,
            },
            "env": {
                "allow": self.env_allow,
                "set": self.env_set.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            },
            "limits": limits_json(limits),
            "max_timeout": format_duration(self.max_timeout),
            "policy": {
                "disabled": names_json(self.policy_options.disabled.as_deref()),
                "allowed": names_json(self.policy_options.allowed.as_deref()),
                "profile": self.policy_options.profile.flatten().map(Profile::as_str),
            },
            "sandbox": {
                "network": self.sandbox.network.as_str(),
                "filesystem": self.sandbox.filesystem.as_str(),
                "syscalls": self.sandbox.syscalls.as_str(),
                "user": self.sandbox.user.map(|user| user.to_string()),
                "project_dir": self.project_dir,
            },
            "tools": self
                .tools
                .iter()
                .map(|(name, tool)| (name.as_str(), tool_json(tool)))
                .collect::<BTreeMap<_, _>>(),
            "audit": self.audit_path,
        })
    }
}

fn names_json(names: Option<&[ToolName]>) -> serde_json::Value {
    json!(names.map(|names| names.iter().map(ToolName::as_str).collect::<Vec<_>>()))
}

/// The keys a `[tools.NAME]` section sets, as written in the file.
fn tool_json(tool: &ToolOptions) -> serde_json::Value {
    let limits = &tool.limits;
    let mut object = serde_json::Map::new();
    let mut put = |key: &str, value: Option<String>| {
        if let Some(value) = value {
            object.insert(key.to_owned(), json!(value));
        }
    };
    put("timeout", limits.timeout.map(format_duration));
    put("grace", limits.grace.map(format_duration));
    put(
        "cpu",
        limits.cpu.map(|cap| describe_cap(cap, format_duration)),
    );
    put(
        "memory",
        limits.memory.map(|cap| describe_cap(cap, format_size)),
    );
    put(
        "max_processes",
        limits
            .max_processes
            .map(|cap| describe_cap(cap, |count| count.to_string())),
    );
    put(
        "max_file_size",
        limits
            .max_file_size
            .map(|cap| describe_cap(cap, format_size)),
    );
    put(
        "max_open_files",
        limits
            .max_open_files
            .map(|cap| describe_cap(cap, |count| count.to_string())),
    );
    put("max_output", limits.max_output.map(format_size));
    put(
        "network",
        tool.sandbox
            .network
            .map(|setting| setting.as_str().to_owned()),
    );
    put(
        "filesystem",
        tool.sandbox
            .filesystem
            .map(|setting| setting.as_str().to_owned()),
    );
    put(
        "syscalls",
        tool.sandbox
            .syscalls
            .map(|setting| setting.as_str().to_owned()),
    );
    if tool.env.allow.is_some() || tool.env.set.is_some() {
        object.insert(
            "env".to_owned(),
            json!({
                "allow": tool.env.allow,
                "set": tool.env.set.as_ref().map(|set| set.iter().cloned().collect::<BTreeMap<_, _>>()),
            }),
        );
    }
    if let Some(disabled) = tool.disabled {
        object.insert("disabled".to_owned(), json!(disabled));
    }
    serde_json::Value::Object(object)
}

pub(crate) fn limits_json(limits: &Limits) -> serde_json::Value {
    let cap_size =
        |value: Option<u64>| describe_cap(value.map_or(Cap::Unlimited, Cap::At), format_size);
    let cap_count = |value: Option<u64>| {
        describe_cap(value.map_or(Cap::Unlimited, Cap::At), |count| {
            count.to_string()
        })
    };
    json!({
        "timeout": format_duration(limits.timeout),
        "grace": format_duration(limits.grace),
        "cpu": describe_cap(limits.cpu.map_or(Cap::Unlimited, Cap::At), format_duration),
        "memory": cap_size(limits.memory),
        "max_processes": cap_count(limits.max_processes),
        "max_file_size": cap_size(limits.max_file_size),
        "max_open_files": cap_count(limits.max_open_files),
        "max_output": format_size(limits.max_output),
        "tmp_size": cap_size(limits.tmp_size),
    })
}

/// The value of the variable `name` as a path, if it is set and not empty.
fn non_empty_path(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<PathBuf> {
    lookup(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_CACHE_HOME/toolsmith`, else `~/.cache/toolsmith`.
///
/// The XDG base directory specification says a relative `XDG_CACHE_HOME` is invalid and must
/// be ignored, so it falls back to the home directory too.
fn cache_dir(lookup: &dyn Fn(&str) -> Option<String>, home: Option<&Path>) -> Option<PathBuf> {
    non_empty_path(lookup, EnvVars::XDG_CACHE_HOME)
        .filter(|dir| dir.is_absolute())
        .or_else(|| home.map(|home| home.join(".cache")))
        .map(|dir| dir.join("toolsmith"))
}

/// The settings of `toolsmith run`.
#[derive(Debug, Clone)]
pub(crate) struct RunSettings {
    /// The limits of the call before the tool's own requested timeout, for `--show-settings`.
    pub(crate) limits: Limits,
    /// The tool called, when the name is valid.
    pub(crate) tool: Option<ToolName>,
    /// How the call is run: the flags are the override of `tool`.
    pub(crate) run_config: RunConfig,
    pub(crate) policy: Policy,
}

impl RunSettings {
    /// Puts the flags of `run` above the global layers.
    pub(crate) fn resolve(args: &RunArgs, global: &GlobalSettings) -> RunSettings {
        let flags = LimitsOptions {
            timeout: args.timeout,
            cpu: args.cpu,
            memory: args.memory,
            max_output: args.max_output,
            tmp_size: args.tmp_size,
            ..LimitsOptions::default()
        };
        let cwd = match &args.cwd {
            Some(dir) => {
                std::path::absolute(global.cwd.join(dir)).unwrap_or_else(|_| global.cwd.join(dir))
            }
            None => global.cwd.clone(),
        };
        let tool = ToolName::from_exposed_or_plain(&args.name).ok();
        let tool_limits = match &tool {
            Some(name) => flags.clone().combine(
                global
                    .tools
                    .get(name)
                    .map(|tool| tool.limits.clone())
                    .unwrap_or_default(),
            ),
            None => flags.clone(),
        };
        let run_config = global.run_config(&cwd, tool.as_ref().map(|name| (name, &flags)));
        RunSettings {
            limits: tool_limits.combine(global.limits_options.clone()).resolve(),
            tool,
            run_config,
            policy: global.policy(args.profile),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::settings::{Combine, LimitsOptions, Options};
    use crate::units::Cap;

    fn check(env: &[(&str, &str)], expect: Result<LimitsOptions, &str>) {
        let lookup = |name: &str| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        };
        let actual = Options::from_env(&lookup)
            .map(|options| options.limits)
            .map_err(|error| {
                let source = std::error::Error::source(&error).map(ToString::to_string);
                format!("{error}: {}", source.unwrap_or_default())
            });
        assert_eq!(actual, expect.map_err(str::to_owned));
    }

    #[test]
    fn env_layer() {
        check(
            &[
                ("TOOLSMITH_TIMEOUT", "5s"),
                ("TOOLSMITH_MEMORY", "unlimited"),
            ],
            Ok(LimitsOptions {
                timeout: Some(Duration::from_secs(5)),
                memory: Some(Cap::Unlimited),
                ..LimitsOptions::default()
            }),
        );
    }

    #[test]
    fn env_layer_bad_value() {
        check(
            &[("TOOLSMITH_CPU", "fast")],
            Err(
                "invalid value \"fast\" for environment variable TOOLSMITH_CPU: expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)",
            ),
        );
    }

    #[test]
    fn higher_layer_wins() {
        let flags = LimitsOptions {
            timeout: Some(Duration::from_secs(1)),
            ..LimitsOptions::default()
        };
        let file = LimitsOptions {
            timeout: Some(Duration::from_secs(60)),
            cpu: Some(Cap::At(Duration::from_secs(3))),
            ..LimitsOptions::default()
        };
        let limits = flags.combine(file).resolve();
        assert_eq!(limits.timeout, Duration::from_secs(1));
        assert_eq!(limits.cpu, Some(Duration::from_secs(3)));
        assert_eq!(limits.memory, Some(1 << 30));
    }
}
