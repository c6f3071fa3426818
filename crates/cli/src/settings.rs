//! Resolved settings: flags, environment, config file and defaults combined in one place.
//!
//! Precedence, highest first: command-line flags, `TOOLSMITH_*` environment
//! variables, the config file, then the defaults (`Limits::recommended()`,
//! `DEFAULT_ENV_ALLOW`, backend `auto`). Each layer is read into the same
//! [`Options`] shape, and [`Combine`] merges them; nothing else decides precedence.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use toolsmith_executor::{BackendChoice, DEFAULT_ENV_ALLOW, Limits};

use crate::args::{GlobalArgs, RunArgs};
use crate::config::{self, ConfigFile, ValueError, describe_cap};
use crate::env_vars::EnvVars;
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

/// Everything one layer can set.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Options {
    pub(crate) limits: LimitsOptions,
    pub(crate) executor: ExecutorOptions,
    pub(crate) env: EnvOptions,
}

impl Combine for Options {
    fn combine(self, lower: Options) -> Options {
        Options {
            limits: self.limits.combine(lower.limits),
            executor: self.executor.combine(lower.executor),
            env: self.env.combine(lower.env),
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
        })
    }
}

/// The settings every subcommand shares.
#[derive(Debug, Clone)]
pub(crate) struct GlobalSettings {
    /// The directory tool processes run in and relative paths are taken from.
    pub(crate) cwd: PathBuf,
    /// The tool directories, lowest precedence first.
    pub(crate) tool_dirs: Vec<PathBuf>,
    /// The config file that was read, if any.
    pub(crate) config_file: Option<PathBuf>,
    pub(crate) backend: BackendChoice,
    pub(crate) max_concurrent: Option<usize>,
    pub(crate) env_allow: Vec<String>,
    pub(crate) env_set: Vec<(String, String)>,
    /// Limits after env and file, before any subcommand flags.
    pub(crate) limits_options: LimitsOptions,
    pub(crate) limits: Limits,
    /// The ceiling of tool-requested timeouts.
    pub(crate) max_timeout: Duration,
}

impl GlobalSettings {
    /// Combines `--tools-dir`, the environment and the config file.
    pub(crate) fn resolve(
        args: &GlobalArgs,
        file: Option<ConfigFile>,
        env: Options,
        cwd: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> GlobalSettings {
        let (config_file, file_options) = match file {
            Some(file) => (Some(file.path), file.options),
            None => (None, Options::default()),
        };
        let combined = env.combine(file_options);
        let tool_dirs = if args.tools_dir.is_empty() {
            default_tool_dirs(cwd, lookup)
        } else {
            args.tools_dir
                .iter()
                .map(|dir| std::path::absolute(cwd.join(dir)).unwrap_or_else(|_| cwd.join(dir)))
                .collect()
        };
        GlobalSettings {
            cwd: cwd.to_path_buf(),
            tool_dirs,
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
            "tool_dirs": self.tool_dirs,
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
        })
    }
}

fn limits_json(limits: &Limits) -> serde_json::Value {
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
    })
}

/// The user tool directory, then the project one, each only if it exists.
///
/// Full layering (system dir, config-named dirs) comes with the layered
/// discovery issue.
fn default_tool_dirs(cwd: &Path, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let user_home = lookup(EnvVars::TOOLSMITH_HOME)
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            lookup(EnvVars::HOME)
                .filter(|home| !home.is_empty())
                .map(|home| Path::new(&home).join(".config").join("toolsmith"))
        });
    let user_dir = user_home.map(|home| cwd.join(home).join("tools"));
    let project_dir = cwd.join(".toolsmith").join("tools");
    user_dir
        .into_iter()
        .chain([project_dir])
        .filter(|dir| dir.is_dir())
        .collect()
}

/// The settings of `toolsmith run`.
#[derive(Debug, Clone)]
pub(crate) struct RunSettings {
    pub(crate) limits: Limits,
    pub(crate) cwd: PathBuf,
}

impl RunSettings {
    /// Puts the flags of `run` above the global layers.
    pub(crate) fn resolve(args: &RunArgs, global: &GlobalSettings) -> RunSettings {
        let flags = LimitsOptions {
            timeout: args.timeout,
            cpu: args.cpu,
            memory: args.memory,
            max_output: args.max_output,
            ..LimitsOptions::default()
        };
        let cwd = match &args.cwd {
            Some(dir) => {
                std::path::absolute(global.cwd.join(dir)).unwrap_or_else(|_| global.cwd.join(dir))
            }
            None => global.cwd.clone(),
        };
        RunSettings {
            limits: flags.combine(global.limits_options.clone()).resolve(),
            cwd,
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
