//! One layer of settings (flags, environment, a config file) as [`Options`], combined with the layers below it by [`Combine`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toolsmith_executor::{BackendChoice, RunAs};
use toolsmith_registry::{
    FilesystemSetting, NetworkSetting, Profile, SandboxProfile, SecretName, SyscallsSetting,
    ToolName,
};

use crate::env_vars::EnvVars;
use crate::settings::combine::Combine;
use crate::settings::limits::{LIMIT_KEYS, LimitsOptions};
use crate::settings::values::{self, ValueError};

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
/// `--tools-dir` and `--no-cache` are applied in [`GlobalSettings::resolve`](crate::settings::GlobalSettings::resolve)).
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
    /// `[sandbox] profile`; never set by `[tools.NAME]`.
    pub(crate) profile: Option<SandboxProfile>,
    pub(crate) network: Option<NetworkSetting>,
    pub(crate) filesystem: Option<FilesystemSetting>,
    pub(crate) syscalls: Option<SyscallsSetting>,
    /// `[sandbox] user`, resolved; never set by `[tools.NAME]`.
    pub(crate) user: Option<RunAs>,
    /// `read_hide`, as written (`~` expanded at resolution). Layers merge their lists.
    pub(crate) read_hide: Option<Vec<String>>,
    /// `read_reveal`, as written (`~` expanded at resolution).
    pub(crate) read_reveal: Option<Vec<String>>,
}

impl Combine for SandboxOptions {
    fn combine(self, lower: SandboxOptions) -> SandboxOptions {
        // A higher layer adds masks, never drops a lower layer's.
        let read_hide = match (self.read_hide, lower.read_hide) {
            (Some(mut upper), Some(lower)) => {
                upper.extend(
                    lower
                        .into_iter()
                        .filter(|path| !upper.contains(path))
                        .collect::<Vec<_>>(),
                );
                Some(upper)
            }
            (upper, lower) => upper.or(lower),
        };
        SandboxOptions {
            profile: self.profile.combine(lower.profile),
            network: self.network.combine(lower.network),
            filesystem: self.filesystem.combine(lower.filesystem),
            syscalls: self.syscalls.combine(lower.syscalls),
            user: self.user.combine(lower.user),
            read_hide,
            read_reveal: self.read_reveal.combine(lower.read_reveal),
        }
    }
}

/// Where the generator writes, as one layer sets it (only the config file does).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct GeneratorOptions {
    /// `[generator] tools_dir`: where generated tools go.
    pub(crate) tools_dir: Option<ConfigDir>,
    /// `[generator] may_replace`: hand-written tools a request may replace.
    pub(crate) may_replace: Option<Vec<ToolName>>,
    /// `[generator] network`: the network of generated tools.
    pub(crate) network: Option<NetworkSetting>,
}

impl Combine for GeneratorOptions {
    fn combine(self, lower: GeneratorOptions) -> GeneratorOptions {
        GeneratorOptions {
            tools_dir: self.tools_dir.combine(lower.tools_dir),
            may_replace: self.may_replace.combine(lower.may_replace),
            network: self.network.combine(lower.network),
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
    /// `[tools.NAME] secrets`: the secrets granted to the tool.
    pub(crate) secrets: Option<Vec<SecretName>>,
}

impl Combine for ToolOptions {
    fn combine(self, lower: ToolOptions) -> ToolOptions {
        ToolOptions {
            limits: self.limits.combine(lower.limits),
            env: self.env.combine(lower.env),
            sandbox: self.sandbox.combine(lower.sandbox),
            disabled: self.disabled.combine(lower.disabled),
            secrets: self.secrets.combine(lower.secrets),
        }
    }
}

/// Where a secret's value comes from, as a config file defines it (`[secrets.NAME]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SecretOptions {
    /// `env = "VAR"`.
    Env(String),
    /// `file = "PATH"`, absolute (a relative path is taken from the file's directory).
    File(PathBuf),
    /// `command = ["argv", ...]`, never empty.
    Command(Vec<String>),
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
    /// `[secrets.NAME]`: the secrets defined, by name.
    pub(crate) secrets: BTreeMap<SecretName, SecretOptions>,
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
            secrets: {
                let mut secrets = lower.secrets;
                secrets.extend(self.secrets);
                secrets
            },
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

/// The limits set by `TOOLSMITH_*` variables, read through `lookup`.
fn limits_from_env(lookup: &dyn Fn(&str) -> Option<String>) -> Result<LimitsOptions, EnvError> {
    let mut limits = LimitsOptions::default();
    for key in LIMIT_KEYS {
        let Some(name) = key.env else {
            continue;
        };
        let Some(value) = lookup(name).filter(|value| !value.is_empty()) else {
            continue;
        };
        (key.parse)(&mut limits, &value).map_err(|source| EnvError {
            name,
            value,
            source,
        })?;
    }
    Ok(limits)
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
            limits: limits_from_env(lookup)?,
            executor: ExecutorOptions {
                backend: read(lookup, EnvVars::TOOLSMITH_BACKEND, &values::parse_backend)?,
                max_concurrent: read(
                    lookup,
                    EnvVars::TOOLSMITH_MAX_CONCURRENT,
                    &values::parse_max_concurrent,
                )?,
            },
            env: EnvOptions::default(),
            policy: PolicyOptions {
                profile: read(lookup, EnvVars::TOOLSMITH_PROFILE, &values::parse_profile)?,
                ..PolicyOptions::default()
            },
            sandbox: SandboxOptions::default(),
            tools: BTreeMap::new(),
            audit: None,
            discovery: DiscoveryOptions::default(),
            generator: GeneratorOptions::default(),
            secrets: BTreeMap::new(),
        })
    }
}

/// A directory named in `[discovery] dirs`, with the directory of the file that named it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConfigDir {
    /// The config file's directory, as the file was named (maybe relative to the current directory).
    pub(crate) base: PathBuf,
    /// The directory as written: absolute, `~/...`, or relative to `base`.
    pub(crate) dir: PathBuf,
}

impl ConfigDir {
    /// The absolute directory, with `~/` read as `home`.
    pub(crate) fn resolve(&self, cwd: &Path, home: Option<&Path>) -> PathBuf {
        let dir = match (self.dir.strip_prefix("~"), home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => cwd.join(&self.base).join(&self.dir),
        };
        std::path::absolute(&dir).unwrap_or(dir)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::settings::combine::Combine;
    use crate::settings::limits::LimitsOptions;
    use crate::settings::options::Options;
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
