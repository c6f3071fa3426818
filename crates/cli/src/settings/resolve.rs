//! Resolving the settings of a command: [`GlobalSettings`], shared by every subcommand, and [`RunSettings`], those of `run`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolsmith_executor::{BackendChoice, DEFAULT_ENV_ALLOW, Limits};
use toolsmith_registry::{
    FilesystemSetting, Layer, LayerDir, LayerInputs, NameError, NetworkSetting, Policy, ReadMasks,
    RunConfig, SandboxProfile, SandboxSettings, SecretName, SecretSource, Secrets, SyscallsSetting,
    TOOL_CACHES_DIR, ToolName, ToolOverride, layer_dirs, snapshot_value,
};

use crate::args::{GlobalArgs, ProfileArg, RunArgs};
use crate::env_vars::EnvVars;
use crate::settings::combine::Combine;
use crate::settings::file::ConfigFile;
use crate::settings::limits::{DEFAULT_MAX_TIMEOUT, LimitsOptions};
use crate::settings::options::{
    Options, PolicyOptions, SandboxOptions, SecretOptions, ToolOptions,
};
use crate::settings::project::{Project, ProjectSource};
use crate::trust::TrustReport;

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
    /// Where the tools' own caches live (`$XDG_CACHE_HOME/toolsmith/tool-cache`), whether
    /// the discovery cache is on or not: a uv script needs its cache to start at all.
    pub(crate) tool_caches: Option<PathBuf>,
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
    /// The project directory: named with `--project`/`TOOLSMITH_PROJECT`, else the git work
    /// tree enclosing `cwd`, else `cwd`. A `filesystem = "project"` tool may write below it.
    pub(crate) project_dir: PathBuf,
    /// Where `project_dir` came from.
    pub(crate) project_source: ProjectSource,
    /// Whether the user named `$HOME`, `/` or another ancestor of `$HOME` as the project:
    /// allowed, since the user said so, and `doctor` warns about it.
    pub(crate) project_named_over_home: bool,
    /// False when `project_dir` is `$HOME`, `/` or another ancestor of `$HOME` (started
    /// there outside a repository, or in a repository of the home directory) and the user did
    /// not name it (`--project`, `TOOLSMITH_PROJECT`): that is not a
    /// project, so no project layer or config is read and `filesystem = "project"` grants
    /// writes nowhere but the call's TMPDIR (issue 22, finding 3).
    pub(crate) has_project: bool,
    /// What the environment set, to tell where each effective value came from.
    pub(super) env_layer: Options,
    /// What the config file set.
    pub(super) file_layer: Options,
    /// What the user config file set.
    pub(super) user_layer: Options,
    /// Whether `--no-cache` was given.
    pub(super) no_cache_flag: bool,
    /// Where generated tools go: `[generator] tools_dir`, default `<project>/.toolsmith/tools`.
    pub(crate) generator_tools_dir: PathBuf,
    /// `[generator] may_replace`: the hand-written tools a request may replace.
    pub(crate) generator_may_replace: Vec<ToolName>,
    /// Where scaffolded drafts go: `<project>/.toolsmith/drafts`.
    pub(crate) drafts_dir: PathBuf,
    /// `$TOOLSMITH_HOME/templates`, whose templates replace the embedded ones, when
    /// `TOOLSMITH_HOME` is set.
    pub(crate) templates_dir: Option<PathBuf>,
    /// toolsmith's own directories, whether this command reads them or not (see [`own_state`]).
    pub(crate) own_state: Vec<PathBuf>,
    /// `$HOME`, for `~` in `read_hide` and `read_reveal`.
    pub(crate) home: Option<PathBuf>,
    /// The user directory (`$TOOLSMITH_HOME`, else `~/.config/toolsmith`), if known.
    pub(crate) user_dir: Option<PathBuf>,
    /// The trust store's and the caches' directories, hidden whole from tools.
    pub(crate) state_dirs: Vec<PathBuf>,
    /// The read masks of every call and probe (`settings/masks.rs`).
    pub(crate) read_masks: ReadMasks,
    /// `[secrets.NAME]`, each `env` source read at start (see [`secrets_at_start`]); the
    /// environment their commands run with is set once the process environment is scrubbed
    /// ([`GlobalSettings::with_secret_command_env`]).
    pub(crate) secrets: Arc<Secrets>,
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

/// `[env] allow` when no layer sets it.
fn default_env_allow() -> Vec<String> {
    DEFAULT_ENV_ALLOW
        .iter()
        .map(|name| (*name).to_owned())
        .collect()
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
        project: &Project,
        binary: Option<PathBuf>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> GlobalSettings {
        let ConfigLayers {
            user,
            upper,
            mut trust,
        } = files;
        let (user_config_file, user_options) = path_and_options(user);
        let (config_file, file_options) = path_and_options(upper);
        let env_layer = env.clone();
        let file_layer = file_options.clone();
        let user_layer = user_options.clone();
        let combined = env.combine(file_options.combine(user_options));
        let masks_options = combined.sandbox.clone();
        let home = non_empty_path(lookup, EnvVars::HOME);
        let explicit_dirs = !args.tools_dir.is_empty();
        let (has_project, project_named_over_home) = (
            project.is_usable(home.as_deref()),
            project.named_over_home(home.as_deref()),
        );
        let (project_source, project) = (project.source, project.dir.clone());
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
            let layers = layer_dirs(&LayerInputs {
                binary,
                toolsmith_home: non_empty_path(lookup, EnvVars::TOOLSMITH_HOME)
                    .map(|dir| cwd.join(dir)),
                home: home.clone(),
                project: project.clone(),
                config_dirs,
                peers: combined.discovery.peers.unwrap_or(false),
            });
            no_project_left_out(untrusted_project_left_out(layers, &mut trust), has_project)
        };
        let generator_tools_dir = match &combined.generator.tools_dir {
            Some(dir) => dir.resolve(cwd, home.as_deref()),
            None => project.join(".toolsmith").join("tools"),
        };
        let drafts_dir = project.join(".toolsmith").join("drafts");
        let templates_dir = non_empty_path(lookup, EnvVars::TOOLSMITH_HOME)
            .map(|dir| cwd.join(dir).join("templates"));
        let cache_disabled = args.no_cache || combined.discovery.cache == Some(false);
        let tool_caches = cache_dir(lookup, home.as_deref()).map(|dir| dir.join(TOOL_CACHES_DIR));
        let all_caches = cache_dir(lookup, home.as_deref());
        let cache_dir = all_caches.clone().filter(|_| !cache_disabled);
        let mut global = GlobalSettings {
            cwd: cwd.to_path_buf(),
            layers,
            user_config_file,
            user_layer,
            trust,
            state_dir: crate::trust::state_dir(lookup),
            explicit_dirs,
            cache_dir,
            cache_disabled,
            tool_caches,
            config_file,
            backend: combined.executor.backend.unwrap_or(BackendChoice::Auto),
            max_concurrent: combined.executor.max_concurrent,
            env_allow: combined.env.allow.unwrap_or_else(default_env_allow),
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
            sandbox: sandbox_settings(&combined.sandbox, combined.generator.network.clone()),
            project_dir: project,
            project_source,
            project_named_over_home,
            has_project,
            generator_tools_dir,
            generator_may_replace: combined.generator.may_replace.clone().unwrap_or_default(),
            drafts_dir,
            templates_dir,
            own_state: own_state(lookup, home.as_deref(), cwd),
            user_dir: user_dir(lookup, home.as_deref(), cwd),
            state_dirs: crate::trust::state_dir(lookup)
                .into_iter()
                .chain(all_caches)
                .collect(),
            home,
            read_masks: ReadMasks::none(),
            secrets: secrets_at_start(&combined.secrets, lookup),
        };
        global.read_masks = global.resolve_read_masks(&masks_options);
        global
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
        let mut call_flags = None;
        if let Some((name, flags)) = call {
            let tool = tools.remove(name).unwrap_or_default();
            let flags = ToolOptions {
                limits: flags.clone(),
                ..ToolOptions::default()
            };
            call_flags = Some((name.clone(), self.tool_override(flags.clone())));
            tools.insert(name.clone(), flags.combine(tool));
        }
        let mut overrides: BTreeMap<ToolName, ToolOverride> = tools
            .into_iter()
            .map(|(name, tool)| {
                let mut tool_override = self.tool_override(tool);
                if !self.has_project {
                    tool_override.filesystem = tool_override.filesystem.map(without_project);
                }
                (name, tool_override)
            })
            .collect();
        // A generated tool of the name gets the call's flags alone, never `[tools.NAME]`.
        if let Some((name, flags)) = call_flags
            && let Some(tool_override) = overrides.get_mut(&name)
        {
            tool_override.for_generated = Some(Box::new(flags));
        }
        let mut sandbox = self.sandbox.clone();
        if !self.has_project {
            sandbox.filesystem = without_project(sandbox.filesystem);
        }
        RunConfig {
            cwd: cwd.to_path_buf(),
            env: self.tool_env(),
            limits: self.limits.clone(),
            max_timeout: self.max_timeout,
            overrides,
            sandbox,
            project_dir: self.project_dir.clone(),
            protected: self.protected_paths(),
            project_gate: crate::trust::project_gate(self),
            tool_caches: self.tool_caches.clone(),
            read_masks: self.read_masks.clone(),
            secrets: Arc::clone(&self.secrets),
        }
    }

    /// What stays read-only to `filesystem = "project"` tools besides the
    /// project's `.git`, `.toolsmith` and peers' directories: every tool
    /// directory and the config file, where inside the project.
    ///
    /// toolsmith's own state is among them wherever it lies in the project: the user config
    /// (file and directory), the trust store's directory, the discovery cache and the audit
    /// log, so that no tool rewrites what decides the next call's sandbox (issue 22,
    /// finding 3).
    fn protected_paths(&self) -> Vec<PathBuf> {
        let user_dir = self.user_layer_dir();
        self.layers
            .iter()
            .map(|layer| layer.dir.clone())
            .chain([self.generator_tools_dir.clone()])
            .chain(self.config_file.clone())
            .chain(self.user_config_file.clone())
            .chain(user_dir)
            .chain(self.state_dir.clone())
            .chain(self.cache_dir.clone())
            .chain(self.tool_caches.clone())
            .chain(self.audit_path.clone())
            .chain(self.own_state.iter().cloned())
            .collect()
    }

    /// The directory of the user layer and config (`$TOOLSMITH_HOME`, `~/.config/toolsmith`).
    fn user_layer_dir(&self) -> Option<PathBuf> {
        self.layers
            .iter()
            .find(|layer_dir| layer_dir.layer == Layer::User)
            .and_then(|layer_dir| layer_dir.dir.parent().map(Path::to_path_buf))
            .or_else(|| {
                self.user_config_file
                    .as_ref()
                    .and_then(|file| file.parent().map(Path::to_path_buf))
            })
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
            self.without_secrets(toolsmith_executor::filtered_env(&allow, &set))
        });
        let mut tool_override = ToolOverride {
            env,
            network: tool.sandbox.network,
            filesystem: tool.sandbox.filesystem,
            syscalls: tool.sandbox.syscalls,
            read_hide: crate::settings::masks::expand(
                tool.sandbox.read_hide.as_deref().unwrap_or_default(),
                self.home.as_deref(),
                &self.cwd,
            ),
            read_reveal: crate::settings::masks::expand(
                tool.sandbox.read_reveal.as_deref().unwrap_or_default(),
                self.home.as_deref(),
                &self.cwd,
            ),
            secrets: tool.secrets.unwrap_or_default(),
            for_generated: None,
            ..ToolOverride::default()
        };
        limits.set_override(&mut tool_override);
        tool_override
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
    /// every `[tools.NAME] env.allow`; a manifest's `${NAME}` expands only from
    /// the tool's own environment), and those toolsmith or its
    /// libraries read (its own `TOOLSMITH_*`, XDG and locale variables,
    /// `PATH`, `HOME`, `TMPDIR`, the terminal's, the dynamic loader's). The
    /// others, the operator's secrets among them, are dropped from memory.
    ///
    /// A secret's `env` source is never kept, whatever else says so: its value was read at
    /// start, and no tool receives it but through the secret.
    pub(crate) fn kept_environment(&self) -> impl Fn(&str) -> bool + use<> {
        let secrets = Arc::clone(&self.secrets);
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
            !secret_source(&secrets, name)
                && (names.contains(name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix)))
        }
    }

    /// The exact environment of tool processes: never a variable named as a secret, nor a
    /// secret's `env` source (see [`Secrets::reserves`]).
    pub(crate) fn tool_env(&self) -> Vec<(OsString, OsString)> {
        self.without_secrets(toolsmith_executor::filtered_env(
            &self.env_allow,
            &self.env_set,
        ))
    }

    fn without_secrets(&self, mut env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
        env.retain(|(name, _)| !self.secrets.reserves(name));
        env
    }

    /// Sets the environment the secrets' commands run with: toolsmith's own, read after the
    /// scrub (so only what toolsmith keeps), without its `TOOLSMITH_*` variables.
    pub(crate) fn with_secret_command_env(&mut self, env: Vec<(OsString, OsString)>) {
        let env = env
            .into_iter()
            .filter(|(name, _)| {
                !name.as_encoded_bytes().starts_with(b"TOOLSMITH_") && !self.secrets.reserves(name)
            })
            .collect();
        self.secrets = Arc::new(Secrets::new(self.secrets.defined().clone(), env));
    }

    /// Every secret granted in `[tools.NAME] secrets` is defined by a `[secrets.NAME]`.
    pub(crate) fn check_secrets(&self) -> anyhow::Result<()> {
        for (tool, options) in &self.tools {
            for name in options.secrets.iter().flatten() {
                if !self.secrets.defined().contains_key(name) {
                    anyhow::bail!(
                        "[tools.{tool}] secrets names {name}, which no [secrets.{name}] defines (secrets are defined in the user config)"
                    );
                }
            }
        }
        Ok(())
    }
}

/// Whether `name` is the `env` source of a secret.
fn secret_source(secrets: &Secrets, name: &str) -> bool {
    secrets
        .defined()
        .values()
        .any(|source| matches!(source, SecretSource::Env { variable, .. } if variable == name))
}

/// The secrets `options` defines, each `env` source read now through `lookup` (before the
/// process environment is scrubbed); their commands' environment is set after the scrub.
fn secrets_at_start(
    options: &BTreeMap<SecretName, SecretOptions>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Arc<Secrets> {
    let defined = options
        .iter()
        .map(|(name, option)| {
            let source = match option {
                SecretOptions::Env(variable) => SecretSource::Env {
                    variable: variable.clone(),
                    value: lookup(variable).map(|value| snapshot_value(OsString::from(value))),
                },
                SecretOptions::File(path) => SecretSource::File(path.clone()),
                SecretOptions::Command(argv) => SecretSource::Command(argv.clone()),
            };
            (name.clone(), source)
        })
        .collect();
    Arc::new(Secrets::new(defined, Vec::new()))
}

/// The layers without the project's when the project is not trusted, recording in `trust`
/// the directories left out.
fn untrusted_project_left_out(mut layers: Vec<LayerDir>, trust: &mut TrustReport) -> Vec<LayerDir> {
    if trust.project_trusted() {
        return layers;
    }
    let in_project = Layer::in_project;
    let skipped: Vec<PathBuf> = layers
        .iter()
        .filter(|layer_dir| in_project(layer_dir.layer) && layer_dir.dir.exists())
        .map(|layer_dir| layer_dir.dir.clone())
        .collect();
    // Every project directory goes, existing or not: one that a `git checkout` or a tool
    // creates while `serve` runs must not be read either (issue 22, finding 11). Nothing but
    // `toolsmith trust` or the user config makes the project's layer readable.
    layers.retain(|layer_dir| !in_project(layer_dir.layer));
    let unit = &mut trust.units[0];
    for dir in skipped {
        let dir = dir.canonicalize().unwrap_or(dir);
        unit.skipped.insert(0, dir);
    }
    layers
}

/// toolsmith's own directories, wherever they lie and whether or not this command uses them,
/// since a later command will: the user directory (`$TOOLSMITH_HOME`, else
/// `~/.config/toolsmith`: the user config, the user's tools, the overriding templates), even
/// when `--tools-dir` replaces the layers and no user config exists yet; the trust store's
/// directory; and the discovery cache's, even with the cache off for this command (issue 22,
/// finding 3: a tool under `filesystem = "project"` must not plant the state that decides the
/// next call).
fn own_state(
    lookup: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    cwd: &Path,
) -> Vec<PathBuf> {
    let user_dir = non_empty_path(lookup, EnvVars::TOOLSMITH_HOME)
        .map(|dir| cwd.join(dir))
        .or_else(|| home.map(|home| home.join(".config").join("toolsmith")));
    user_dir
        .into_iter()
        .chain(crate::trust::state_dir(lookup))
        .chain(cache_dir(lookup, home))
        .collect()
}

/// The user directory: `$TOOLSMITH_HOME`, else `~/.config/toolsmith`.
fn user_dir(
    lookup: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    cwd: &Path,
) -> Option<PathBuf> {
    non_empty_path(lookup, EnvVars::TOOLSMITH_HOME)
        .map(|dir| cwd.join(dir))
        .or_else(|| home.map(|home| home.join(".config").join("toolsmith")))
}

/// A config file's path and options; none and the defaults without a file.
fn path_and_options(file: Option<ConfigFile>) -> (Option<PathBuf>, Options) {
    match file {
        Some(file) => (Some(file.path), file.options),
        None => (None, Options::default()),
    }
}

/// `layers` without the project's (`.toolsmith/tools`, the peers') when there is no project.
fn no_project_left_out(mut layers: Vec<LayerDir>, has_project: bool) -> Vec<LayerDir> {
    if !has_project {
        layers.retain(|layer_dir| !layer_dir.layer.in_project());
    }
    layers
}

/// The operator's grant: what `[sandbox]` and `[generator] network` write, above the
/// defaults of `[sandbox] profile`.
fn sandbox_settings(
    options: &SandboxOptions,
    generated_network: Option<NetworkSetting>,
) -> SandboxSettings {
    let profile = options.profile.unwrap_or(SandboxProfile::Default);
    SandboxSettings {
        profile,
        network: options.network.clone().unwrap_or_else(|| profile.network()),
        generated_network: generated_network.unwrap_or_else(|| profile.generated_network()),
        filesystem: options
            .filesystem
            .clone()
            .unwrap_or_else(|| profile.filesystem()),
        private_pids: true,
        syscalls: options.syscalls.unwrap_or(SyscallsSetting::Filter),
        user: options.user,
    }
}

/// `setting` where there is no project: `project` becomes `read-only`.
fn without_project(setting: FilesystemSetting) -> FilesystemSetting {
    match setting {
        FilesystemSetting::Project => FilesystemSetting::ReadOnly,
        FilesystemSetting::ProjectIfPossible => FilesystemSetting::ReadOnlyIfPossible,
        other => other,
    }
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
    /// The tool called, or why its name is not one (parsed once, here).
    pub(crate) tool: Result<ToolName, NameError>,
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
        let tool = ToolName::from_exposed_or_plain(&args.name);
        let tool_limits = match &tool {
            Ok(name) => flags.clone().combine(
                global
                    .tools
                    .get(name)
                    .map(|tool| tool.limits.clone())
                    .unwrap_or_default(),
            ),
            Err(_) => flags.clone(),
        };
        let run_config = global.run_config(&cwd, tool.as_ref().ok().map(|name| (name, &flags)));
        RunSettings {
            limits: tool_limits.combine(global.limits_options.clone()).resolve(),
            tool,
            run_config,
            policy: global.policy(args.profile),
        }
    }
}
