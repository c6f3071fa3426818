//! What the settings are, for people: every effective value with its origin (`doctor`), and the JSON of `--show-settings`.

use std::collections::BTreeMap;

use serde_json::json;
use toolsmith_executor::{BackendChoice, Limits};
use toolsmith_registry::{Profile, ToolName};

use crate::env_vars::EnvVars;
use crate::settings::options::ToolOptions;
use crate::settings::resolve::GlobalSettings;
use crate::settings::values::describe_cap;
use crate::units::{Cap, format_duration, format_size};

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
