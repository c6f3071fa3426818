//! What the settings are, for people: every effective value with its origin (`doctor`), and the JSON of `--show-settings`.

use std::collections::BTreeMap;

use serde_json::json;
use toolsmith_executor::{BackendChoice, Limits};
use toolsmith_registry::{Profile, ToolName, format_duration};

use crate::env_vars::EnvVars;
use crate::settings::limits::{LIMIT_KEYS, LimitKey};
use crate::settings::options::{Options, ToolOptions};
use crate::settings::resolve::GlobalSettings;

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
        let mut settings = self.effective_limits();
        let (file, user) = (&self.file_layer, &self.user_layer);
        let mut push = |key: &'static str, value: serde_json::Value, origin: Origin| {
            settings.push(Effective { key, value, origin });
        };
        push(
            "env.allow",
            json["env"]["allow"].clone(),
            self.origin(None, |layer| layer.env.allow.is_some()),
        );
        push(
            "env.set",
            json["env"]["set"].clone(),
            self.origin(None, |layer| layer.env.set.is_some()),
        );
        push(
            "executor.backend",
            json["executor"]["backend"].clone(),
            self.origin(Some(EnvVars::TOOLSMITH_BACKEND), |layer| {
                layer.executor.backend.is_some()
            }),
        );
        push(
            "executor.max_concurrent",
            json["executor"]["max_concurrent"].clone(),
            self.origin(Some(EnvVars::TOOLSMITH_MAX_CONCURRENT), |layer| {
                layer.executor.max_concurrent.is_some()
            }),
        );
        push(
            "policy.disabled",
            json["policy"]["disabled"].clone(),
            self.origin(None, |layer| layer.policy.disabled.is_some()),
        );
        push(
            "policy.allowed",
            json["policy"]["allowed"].clone(),
            self.origin(None, |layer| layer.policy.allowed.is_some()),
        );
        push(
            "policy.profile",
            json["policy"]["profile"].clone(),
            self.origin(Some(EnvVars::TOOLSMITH_PROFILE), |layer| {
                layer.policy.profile.is_some()
            }),
        );
        push(
            "sandbox.profile",
            json!(self.sandbox.profile.as_str()),
            self.origin(None, |layer| layer.sandbox.profile.is_some()),
        );
        push(
            "generator.network",
            self.sandbox.generated_network.to_json(),
            self.origin(None, |layer| layer.generator.network.is_some()),
        );
        push(
            "sandbox.network",
            self.sandbox.network.to_json(),
            self.origin(None, |layer| layer.sandbox.network.is_some()),
        );
        push(
            "sandbox.filesystem",
            self.sandbox.filesystem.to_json(),
            self.origin(None, |layer| layer.sandbox.filesystem.is_some()),
        );
        push(
            "sandbox.syscalls",
            json!(self.sandbox.syscalls.as_str()),
            self.origin(None, |layer| layer.sandbox.syscalls.is_some()),
        );
        push(
            "sandbox.user",
            json!(self.sandbox.user.map(|user| user.to_string())),
            self.origin(None, |layer| layer.sandbox.user.is_some()),
        );
        push(
            "audit.path",
            json["audit"].clone(),
            self.origin(None, |layer| layer.audit.is_some()),
        );
        push(
            "discovery.peers",
            json!(
                file.discovery
                    .peers
                    .or(user.discovery.peers)
                    .unwrap_or(false)
            ),
            self.origin(None, |layer| layer.discovery.peers.is_some()),
        );
        push(
            "discovery.cache",
            json!(!self.cache_disabled),
            if self.no_cache_flag {
                Origin::Flag("--no-cache")
            } else {
                self.origin(None, |layer| layer.discovery.cache.is_some())
            },
        );
        push(
            "discovery.dirs",
            json!(
                self.layers
                    .iter()
                    .filter(|layer_dir| layer_dir.layer.as_str() == "config")
                    .map(|layer_dir| &layer_dir.dir)
                    .collect::<Vec<_>>()
            ),
            if self.explicit_dirs {
                Origin::Flag("--tools-dir")
            } else {
                self.origin(None, |layer| layer.discovery.dirs.is_some())
            },
        );
        settings
    }

    /// Every limit with its effective value and origin, in `doctor`'s order.
    fn effective_limits(&self) -> Vec<Effective> {
        let mut keys: Vec<&LimitKey> = LIMIT_KEYS.iter().collect();
        keys.sort_by_key(|key| key.doctor_rank);
        keys.into_iter()
            .map(|key| Effective {
                key: key.config_key,
                value: match key.resolved {
                    Some(resolved) => json!(resolved(&self.limits)),
                    // `max_timeout` is the one limit that is not the executor's.
                    None => json!(format_duration(self.max_timeout)),
                },
                origin: self.origin(key.env, |layer| (key.is_set)(&layer.limits)),
            })
            .collect()
    }

    /// Where a value came from: `env` when that variable set it, else the highest config
    /// file in which `is_set`, else the default.
    fn origin(&self, env: Option<&'static str>, is_set: impl Fn(&Options) -> bool) -> Origin {
        match env {
            Some(name) if is_set(&self.env_layer) => Origin::Env(name),
            _ if is_set(&self.file_layer) => Origin::File,
            _ if is_set(&self.user_layer) => Origin::UserFile,
            _ => Origin::Default,
        }
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
                "profile": self.sandbox.profile.as_str(),
                "network": self.sandbox.network.to_json(),
                "generated_network": self.sandbox.generated_network.to_json(),
                "filesystem": self.sandbox.filesystem.to_json(),
                "syscalls": self.sandbox.syscalls.as_str(),
                "user": self.sandbox.user.map(|user| user.to_string()),
                "project_dir": self.project_dir,
                "project_source": self.project_source.as_str(),
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
    let mut object = serde_json::Map::new();
    for key in LIMIT_KEYS {
        if let Some(value) = (key.describe)(&tool.limits) {
            object.insert(key.name.to_owned(), json!(value));
        }
    }
    if let Some(network) = &tool.sandbox.network {
        object.insert("network".to_owned(), network.to_json());
    }
    if let Some(filesystem) = &tool.sandbox.filesystem {
        object.insert("filesystem".to_owned(), filesystem.to_json());
    }
    let mut put = |key: &str, value: Option<String>| {
        if let Some(value) = value {
            object.insert(key.to_owned(), json!(value));
        }
    };
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
    if let Some(secrets) = &tool.secrets {
        let names: Vec<&str> = secrets.iter().map(|name| name.as_str()).collect();
        object.insert("secrets".to_owned(), json!(names));
    }
    serde_json::Value::Object(object)
}

/// The limits of a call, as written in a file.
pub(crate) fn limits_json(limits: &Limits) -> serde_json::Value {
    let object = LIMIT_KEYS
        .iter()
        .filter_map(|key| {
            let resolved = key.resolved?;
            Some((key.name.to_owned(), json!(resolved(limits))))
        })
        .collect();
    serde_json::Value::Object(object)
}
