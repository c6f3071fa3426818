//! The TOML configuration file: finding it, parsing it strictly, and turning its values into settings options.
//!
//! ```toml
//! [limits]
//! timeout = "30s"        # durations: 500ms, 30s, 2m, 1h; a plain number is seconds
//! cpu = "10s"            # or "unlimited"
//! memory = "512MiB"      # sizes: 64KiB, 512MiB, 1GiB, 10MB; a plain number is bytes
//! max_output = "1MiB"
//! max_processes = 256
//! max_file_size = "1GiB"
//! max_open_files = 1024
//! tmp_size = "64MiB"     # the private TMPDIR (a tmpfs) of project and read-only calls
//! grace = "2s"
//! max_timeout = "5m"     # the most a tool may ask for itself (Kodelet `config`, manifest `timeout_ms`)
//!
//! [env]
//! allow = ["PATH", "HOME"]   # replaces the default PATH, HOME, USER, LANG
//! set = { LC_ALL = "C" }
//!
//! [executor]
//! backend = "auto"       # auto, cgroup, pidns, subreaper or pgroup
//! max_concurrent = 4
//!
//! [policy]
//! disabled = ["rm_rf"]       # never listed or called
//! allowed = ["hello"]        # when set, only these are listed and called
//! profile = "plan"           # plan (read-only tools only) or unattended (no tool that needs approval)
//!
//! [sandbox]                  # every tool's isolation (see docs/security.md)
//! network = "deny"           # allow (default), deny, or deny-if-possible
//! filesystem = "project"     # full (default), project, read-only, project-if-possible, read-only-if-possible
//! syscalls = "filter"        # filter (default), filter-if-possible, or unfiltered
//! user = "1000:1000"         # root toolsmith only: the uid:gid (or user name) tools run as
//!
//! [tools.hello]              # per-tool overrides: the keys of [limits] (but max_timeout) and of [sandbox] (but user), env, disabled
//! timeout = "5s"
//! env = { allow = ["PATH"], set = { GREETING = "hi" } }
//! network = "allow"
//! disabled = false
//! secrets = ["GITHUB_TOKEN"] # this tool's calls receive $GITHUB_TOKEN (user config only)
//!
//! [secrets.GITHUB_TOKEN]     # user config only; exactly one of env, file, command
//! env = "GH_PAT"             # or file = "/run/secrets/gh", or command = ["gh", "auth", "token"]
//!
//! [audit]
//! path = "audit.jsonl"       # relative to this file's directory; off when unset
//!
//! [discovery]
//! dirs = ["tools", "~/shared-tools"]  # extra tool dirs, highest precedence; relative to this file's directory
//! peers = false          # also read Kodelet's, ikigai's and Nanocoder's tool directories
//! cache = true           # reuse probe results of unchanged tools ($XDG_CACHE_HOME/toolsmith)
//!
//! [generator]
//! tools_dir = ".toolsmith/tools"  # where generated tools go; relative to this file's directory
//! may_replace = ["deploy"]        # hand-written tools custom_tool may replace (consent)
//!
//! [trust]                    # only in the user config (or a --config file): see docs/security.md
//! paths = ["~/work"]         # directories trusted with everything below them
//! project_may_loosen = false # whether a trusted project config may loosen these settings
//! ```
//!
//! Unknown keys are errors, so that a typo never silently falls back to a default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toolsmith_registry::{Links, MAX_CONFIG_BYTES, SecretName, ToolName, read_regular};

use crate::settings::limits::{LIMIT_KEYS, LimitKey};
use crate::settings::options::{
    ConfigDir, DiscoveryOptions, EnvOptions, ExecutorOptions, GeneratorOptions, Options,
    PolicyOptions, SandboxOptions, SecretOptions, ToolOptions,
};
use crate::settings::schema::{
    Grant, RawFile, RawPolicy, RawSandbox, RawSecret, RawTool, RawTrust, Scalar,
};
use crate::settings::values::{
    ValueError, parse_backend, parse_filesystem, parse_max_concurrent, parse_network,
    parse_profile, parse_sandbox_profile, parse_syscalls, parse_user,
};

/// The project configuration file, relative to the current directory.
pub(crate) const PROJECT_CONFIG: &str = ".toolsmith/config.toml";

/// The user configuration file, relative to the user directory (`$TOOLSMITH_HOME`, default
/// `~/.config/toolsmith`).
pub(crate) const USER_CONFIG: &str = "config.toml";

/// Why the configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}", path = path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("invalid config file {path}{location}: {message}", path = path.display())]
    Parse {
        path: PathBuf,
        location: String,
        message: String,
    },
    /// `[sandbox] secrets`: a secret is granted to a tool, never to every tool.
    #[error(
        "{origin}: [sandbox] secrets is refused: a secret is granted to one tool (`[tools.NAME] secrets = [\"NAME\"]`), never to every tool"
    )]
    SandboxSecrets { origin: String },
    /// A `[secrets.NAME]` that does not say where its value comes from, or says it twice.
    #[error("{origin}: [secrets.{name}] must have exactly one of env, file and command")]
    SecretSource { name: String, origin: String },
    /// A value has the wrong form.
    #[error("invalid value {value:?} for {key} in {origin}")]
    Value {
        value: String,
        key: String,
        origin: String,
        #[source]
        source: ValueError,
    },
}

impl ConfigError {
    /// A suggestion printed after the error.
    pub(crate) fn hint(&self) -> Option<String> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Parse { .. } => Some(
                "the sections are [limits], [env], [executor], [policy], [sandbox], [tools.NAME], [audit], [discovery], [generator], [trust] and [secrets.NAME]; see the key list in the message"
                    .to_owned(),
            ),
            ConfigError::Value { .. } => None,
            ConfigError::SandboxSecrets { .. } | ConfigError::SecretSource { .. } => Some(
                "define a secret once, e.g. [secrets.GITHUB_TOKEN] env = \"GITHUB_TOKEN\", and grant it per tool with [tools.NAME] secrets = [\"GITHUB_TOKEN\"]".to_owned(),
            ),
        }
    }
}

/// A loaded configuration file.
#[derive(Debug)]
pub(crate) struct ConfigFile {
    /// The file, as the user named it.
    pub(crate) path: PathBuf,
    /// What it sets.
    pub(crate) options: Options,
    /// Its `[trust]` section, if it has one; directories are as written (see [`ConfigDir`]).
    pub(crate) trust: Option<RawTrustOptions>,
}

/// A `[trust]` section as written: directories are resolved by the caller, who knows the
/// home directory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawTrustOptions {
    pub(crate) paths: Vec<ConfigDir>,
    pub(crate) project_may_loosen: Option<bool>,
}

/// The user config file: `$TOOLSMITH_HOME/config.toml`, else
/// `~/.config/toolsmith/config.toml`; `None` without either variable.
pub(crate) fn user_config_path(
    toolsmith_home: Option<&Path>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    match (toolsmith_home, home) {
        (Some(dir), _) => Some(dir.join(USER_CONFIG)),
        (None, Some(home)) => Some(home.join(".config/toolsmith").join(USER_CONFIG)),
        (None, None) => None,
    }
}

/// Reads and checks the file at `path`: a regular file of at most [`MAX_CONFIG_BYTES`], a
/// link only as `links` allows (a FIFO or a device is an error, never a wait).
pub(crate) fn load(path: &Path, links: Links) -> Result<ConfigFile, ConfigError> {
    let read_error = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let bytes = read_regular(path, links, MAX_CONFIG_BYTES).map_err(read_error)?;
    let text = String::from_utf8(bytes).map_err(|error| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            error.utf8_error(),
        ))
    })?;
    let (options, trust) = parse_with_trust(&text, path)?;
    Ok(ConfigFile {
        path: path.to_path_buf(),
        options,
        trust,
    })
}

/// Checks the file at `path` whose bytes the caller already read.
pub(crate) fn load_bytes(path: &Path, bytes: &[u8]) -> Result<ConfigFile, ConfigError> {
    let text = std::str::from_utf8(bytes).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
    })?;
    let (options, trust) = parse_with_trust(text, path)?;
    Ok(ConfigFile {
        path: path.to_path_buf(),
        options,
        trust,
    })
}

#[cfg(test)]
fn parse(text: &str, path: &Path) -> Result<Options, ConfigError> {
    parse_with_trust(text, path).map(|(options, _)| options)
}

/// The file's TOML as its raw sections, or where and why it does not parse.
fn parse_raw(text: &str, path: &Path) -> Result<RawFile, ConfigError> {
    toml::from_str(text).map_err(|error| {
        let location = error
            .span()
            .map(|span| {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!(" at line {line}")
            })
            .unwrap_or_default();
        ConfigError::Parse {
            path: path.to_path_buf(),
            location,
            message: error.message().trim().to_owned(),
        }
    })
}

fn parse_with_trust(
    text: &str,
    path: &Path,
) -> Result<(Options, Option<RawTrustOptions>), ConfigError> {
    let raw = parse_raw(text, path)?;
    let origin = path.display().to_string();
    let origin = origin.as_str();
    let limits = limits_options(
        LIMIT_KEYS,
        |key| Some((key.in_limits)(&raw.limits)),
        "limits.",
        origin,
    )?;
    let executor = ExecutorOptions {
        backend: field(
            "executor.backend",
            &raw.executor.backend,
            origin,
            parse_backend,
        )?,
        max_concurrent: field(
            "executor.max_concurrent",
            &raw.executor.max_concurrent,
            origin,
            parse_max_concurrent,
        )?,
    };
    let env = EnvOptions {
        allow: raw.env.allow,
        set: raw.env.set.map(|set| set.into_iter().collect()),
    };
    let policy = policy_options(raw.policy, origin)?;
    if raw.sandbox.secrets.is_some() {
        return Err(ConfigError::SandboxSecrets {
            origin: origin.to_owned(),
        });
    }
    let sandbox = sandbox_options(&raw.sandbox, origin)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let secrets = secret_options(raw.secrets, &base, origin)?;
    let mut tools = BTreeMap::new();
    for (name, raw_tool) in raw.tools {
        let tool_name = ToolName::new(&name).map_err(|source| ConfigError::Value {
            value: name.clone(),
            key: format!("tools.{name}"),
            origin: origin.to_owned(),
            source: source.into(),
        })?;
        tools.insert(tool_name, tool_options(&name, raw_tool, origin)?);
    }
    // A relative audit path is taken from the config file's directory, so the
    // log does not move when toolsmith is started from another directory.
    let audit = raw.audit.path.map(|audit_path| {
        path.parent()
            .map_or_else(|| audit_path.clone(), |dir| dir.join(&audit_path))
    });
    // Relative directories are taken from the config file's directory (`base`), so that a
    // file means the same whatever directory toolsmith is started in.
    let discovery = DiscoveryOptions {
        dirs: raw.discovery.dirs.map(|dirs| {
            dirs.into_iter()
                .map(|dir| ConfigDir {
                    base: base.clone(),
                    dir,
                })
                .collect()
        }),
        peers: raw.discovery.peers,
        cache: raw.discovery.cache,
    };
    let generator = GeneratorOptions {
        tools_dir: raw.generator.tools_dir.map(|dir| ConfigDir {
            base: base.clone(),
            dir,
        }),
        may_replace: tool_names("generator.may_replace", raw.generator.may_replace, origin)?,
        network: grant_field(
            "generator.network",
            &raw.generator.network,
            origin,
            parse_network,
        )?,
    };
    let trust = trust_options(raw.trust, &base);
    Ok((
        Options {
            limits,
            executor,
            env,
            policy,
            sandbox,
            tools,
            audit,
            discovery,
            generator,
            secrets,
        },
        trust,
    ))
}

/// The `[secrets.NAME]` sections: names are environment variable names, and each has
/// exactly one source; a relative `file` is taken from `base`, the file's directory.
fn secret_options(
    raw: BTreeMap<String, RawSecret>,
    base: &Path,
    origin: &str,
) -> Result<BTreeMap<SecretName, SecretOptions>, ConfigError> {
    let mut secrets = BTreeMap::new();
    for (name, raw_secret) in raw {
        let secret_name = secret_name(&name, &format!("secrets.{name}"), origin)?;
        let source = match (raw_secret.env, raw_secret.file, raw_secret.command) {
            (Some(variable), None, None) => {
                SecretName::new(&variable).map_err(|source| ConfigError::Value {
                    value: variable.clone(),
                    key: format!("secrets.{name}.env"),
                    origin: origin.to_owned(),
                    source: source.into(),
                })?;
                SecretOptions::Env(variable)
            }
            (None, Some(file), None) => SecretOptions::File(base.join(file)),
            (None, None, Some(argv)) if argv.first().is_some_and(|program| !program.is_empty()) => {
                SecretOptions::Command(argv)
            }
            _ => {
                return Err(ConfigError::SecretSource {
                    name,
                    origin: origin.to_owned(),
                });
            }
        };
        secrets.insert(secret_name, source);
    }
    Ok(secrets)
}

/// A secret's name, naming `key` on error.
fn secret_name(name: &str, key: &str, origin: &str) -> Result<SecretName, ConfigError> {
    SecretName::new(name).map_err(|source| ConfigError::Value {
        value: name.to_owned(),
        key: key.to_owned(),
        origin: origin.to_owned(),
        source: source.into(),
    })
}

/// The `[trust]` section, if it sets anything; relative paths from the file's directory.
fn trust_options(raw: RawTrust, base: &Path) -> Option<RawTrustOptions> {
    (raw.paths.is_some() || raw.project_may_loosen.is_some()).then(|| RawTrustOptions {
        paths: raw
            .paths
            .unwrap_or_default()
            .into_iter()
            .map(|dir| ConfigDir {
                base: base.to_path_buf(),
                dir,
            })
            .collect(),
        project_may_loosen: raw.project_may_loosen,
    })
}

/// The `[policy]` section.
fn policy_options(raw: RawPolicy, origin: &str) -> Result<PolicyOptions, ConfigError> {
    Ok(PolicyOptions {
        disabled: tool_names("policy.disabled", raw.disabled, origin)?,
        allowed: tool_names("policy.allowed", raw.allowed, origin)?,
        profile: raw
            .profile
            .map(|profile| {
                parse_profile(&profile).map_err(|source| ConfigError::Value {
                    value: profile.clone(),
                    key: "policy.profile".to_owned(),
                    origin: origin.to_owned(),
                    source,
                })
            })
            .transpose()?,
    })
}

/// The `[sandbox]` section.
fn sandbox_options(raw: &RawSandbox, origin: &str) -> Result<SandboxOptions, ConfigError> {
    let profile = raw.profile.clone().map(Scalar);
    Ok(SandboxOptions {
        profile: field("sandbox.profile", &profile, origin, parse_sandbox_profile)?,
        network: grant_field("sandbox.network", &raw.network, origin, parse_network)?,
        filesystem: grant_field(
            "sandbox.filesystem",
            &raw.filesystem,
            origin,
            parse_filesystem,
        )?,
        syscalls: field("sandbox.syscalls", &raw.syscalls, origin, parse_syscalls)?,
        user: field("sandbox.user", &raw.user, origin, parse_user)?,
        read_hide: raw.read_hide.clone(),
        read_reveal: raw.read_reveal.clone(),
    })
}

/// The limits a section sets: `scalar` gives a key's scalar in it, `None` where the section
/// has no such key; `prefix` is the section's, for errors.
pub(crate) fn limits_options<'raw, O: Default, R, T>(
    keys: &[LimitKey<O, R, T>],
    scalar: impl Fn(&LimitKey<O, R, T>) -> Option<&'raw Option<Scalar>>,
    prefix: &str,
    origin: &str,
) -> Result<O, ConfigError> {
    let mut limits = O::default();
    for key in keys {
        let Some(Some(scalar)) = scalar(key) else {
            continue;
        };
        (key.parse)(&mut limits, &scalar.0).map_err(|source| ConfigError::Value {
            value: scalar.0.clone(),
            key: format!("{prefix}{}", key.name),
            origin: origin.to_owned(),
            source,
        })?;
    }
    Ok(limits)
}

fn tool_options(name: &str, raw: RawTool, origin: &str) -> Result<ToolOptions, ConfigError> {
    let key = |field: &str| format!("tools.{name}.{field}");
    Ok(ToolOptions {
        limits: limits_options(
            LIMIT_KEYS,
            |key| key.in_tool.map(|in_tool| in_tool(&raw)),
            &format!("tools.{name}."),
            origin,
        )?,
        env: raw
            .env
            .map(|env| EnvOptions {
                allow: env.allow,
                set: env.set.map(|set| set.into_iter().collect()),
            })
            .unwrap_or_default(),
        sandbox: SandboxOptions {
            profile: None,
            network: grant_field(&key("network"), &raw.network, origin, parse_network)?,
            filesystem: grant_field(
                &key("filesystem"),
                &raw.filesystem,
                origin,
                parse_filesystem,
            )?,
            syscalls: field(&key("syscalls"), &raw.syscalls, origin, parse_syscalls)?,
            user: None,
            read_hide: raw.read_hide,
            read_reveal: raw.read_reveal,
        },
        disabled: raw.disabled,
        secrets: raw
            .secrets
            .map(|names| {
                let mut granted: Vec<SecretName> = Vec::new();
                for name in names {
                    let secret = secret_name(&name, &key("secrets"), origin)?;
                    if !granted.contains(&secret) {
                        granted.push(secret);
                    }
                }
                Ok(granted)
            })
            .transpose()?,
    })
}

/// Parses a list of tool names (plain or exposed), naming the key on error.
fn tool_names(
    key: &str,
    names: Option<Vec<String>>,
    origin: &str,
) -> Result<Option<Vec<ToolName>>, ConfigError> {
    names
        .map(|names| {
            names
                .iter()
                .map(|name| {
                    ToolName::in_policy_list(name).map_err(|source| ConfigError::Value {
                        value: name.clone(),
                        key: key.to_owned(),
                        origin: origin.to_owned(),
                        source: source.into(),
                    })
                })
                .collect()
        })
        .transpose()
}

/// Parses the value of `key`, if the file sets it.
fn field<T>(
    key: &str,
    scalar: &Option<Scalar>,
    origin: &str,
    parse: fn(&str) -> Result<T, ValueError>,
) -> Result<Option<T>, ConfigError> {
    let Some(scalar) = scalar else {
        return Ok(None);
    };
    parse(&scalar.0)
        .map(Some)
        .map_err(|source| ConfigError::Value {
            value: scalar.0.clone(),
            key: key.to_owned(),
            origin: origin.to_owned(),
            source,
        })
}

/// As [`field`], for a key whose value is a string or a list (`network`, `filesystem`).
fn grant_field<T>(
    key: &str,
    grant: &Option<Grant>,
    origin: &str,
    parse: fn(&serde_json::Value) -> Result<T, ValueError>,
) -> Result<Option<T>, ConfigError> {
    let Some(grant) = grant else {
        return Ok(None);
    };
    parse(&grant.0)
        .map(Some)
        .map_err(|source| ConfigError::Value {
            value: match &grant.0 {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            },
            key: key.to_owned(),
            origin: origin.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::settings::file::parse;
    use crate::units::Cap;

    fn check(text: &str, expect: Result<&str, &str>) {
        let actual = parse(text, Path::new("x.toml"))
            .map(|options| format!("{options:?}"))
            .map_err(|error| toolsmith_registry::error_chain(&error));
        match (&actual, expect) {
            (Ok(debug), Ok(fragment)) => assert!(debug.contains(fragment), "{debug}"),
            (Err(message), Err(expected)) => assert_eq!(message, expected),
            _ => panic!("{text:?}: got {actual:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn empty_file() {
        check("", Ok("timeout: None"));
    }

    #[test]
    fn limits_with_units() {
        let options = parse(
            "[limits]\ntimeout = \"2m\"\ncpu = \"unlimited\"\nmemory = \"512MiB\"\nmax_output = 1024\ngrace = 1\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(options.limits.timeout, Some(Duration::from_secs(120)));
        assert_eq!(options.limits.cpu, Some(Cap::Unlimited));
        assert_eq!(options.limits.memory, Some(Cap::At(512 << 20)));
        assert_eq!(options.limits.max_output, Some(1024));
        assert_eq!(options.limits.grace, Some(Duration::from_secs(1)));
    }

    #[test]
    fn bad_value_names_the_key() {
        check(
            "[limits]\ntimeout = \"5 parsecs\"\n",
            Err(
                "invalid value \"5 parsecs\" for limits.timeout in x.toml: expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)",
            ),
        );
    }

    #[test]
    fn unknown_key() {
        check(
            "[limits]\ntimeoutt = \"5s\"\n",
            Err(
                "invalid config file x.toml at line 2: unknown field `timeoutt`, expected one of `timeout`, `grace`, `cpu`, `memory`, `max_processes`, `max_file_size`, `max_open_files`, `max_output`, `max_timeout`, `tmp_size`",
            ),
        );
    }

    #[test]
    fn unknown_section() {
        check(
            "[limit]\n",
            Err(
                "invalid config file x.toml at line 1: unknown field `limit`, expected one of `limits`, `env`, `executor`, `policy`, `sandbox`, `tools`, `audit`, `discovery`, `generator`, `trust`, `secrets`",
            ),
        );
    }

    #[test]
    fn sandbox() {
        check(
            "[sandbox]\nnetwork = \"deny-if-possible\"\nfilesystem = \"project\"\n",
            Ok(
                "sandbox: SandboxOptions { profile: None, network: Some(DenyIfPossible), filesystem: Some(Project), syscalls: None, user: None, read_hide: None, read_reveal: None }",
            ),
        );
        check(
            "[tools.hello]\nnetwork = \"deny\"\nfilesystem = \"read-only-if-possible\"\n",
            Ok(
                "sandbox: SandboxOptions { profile: None, network: Some(Deny), filesystem: Some(ReadOnlyIfPossible), syscalls: None, user: None, read_hide: None, read_reveal: None }",
            ),
        );
        check(
            "[sandbox]\nnetwork = \"off\"\n",
            Err(
                "invalid value \"off\" for sandbox.network in x.toml: unknown network setting `off` (expected one of none, any, deny-if-possible (or the aliases deny and allow), or a list of destinations)",
            ),
        );
        check(
            "[sandbox]\nprofile = \"compat\"\nnetwork = \"none\"\nfilesystem = [\"/srv/out\"]\n",
            Ok(
                "sandbox: SandboxOptions { profile: Some(Compat), network: Some(Deny), filesystem: Some(Paths([\"/srv/out\"])), syscalls: None, user: None, read_hide: None, read_reveal: None }",
            ),
        );
        check(
            "[sandbox]\nfilesystem = [\"out\"]\n",
            Err(
                "invalid value \"[\\\"out\\\"]\" for sandbox.filesystem in x.toml: unknown filesystem setting `out` (expected one of full, project, read-only, project-if-possible, read-only-if-possible, or a list of absolute writable paths): a writable path is absolute, without `.` or `..`",
            ),
        );
        check(
            "[sandbox]\nnetwork = [\"http://a.test\"]\n",
            Err(
                "invalid value \"[\\\"http://a.test\\\"]\" for sandbox.network in x.toml: unknown network setting `http://a.test` (expected one of none, any, deny-if-possible (or the aliases deny and allow), or a list of destinations): `http://a.test` is not a destination (expected a host such as \"api.github.com\" or \"api.github.com:443\", a wildcard \"*.example.com\", an address \"127.0.0.1:8080\" or \"[::1]:8080\", a network \"10.0.0.0/8\", or \"unix:/absolute/path\")",
            ),
        );
        check(
            "[tools.hello]\nfilesystem = \"ro\"\n",
            Err(
                "invalid value \"ro\" for tools.hello.filesystem in x.toml: unknown filesystem setting `ro` (expected one of full, project, read-only, project-if-possible, read-only-if-possible, or a list of absolute writable paths)",
            ),
        );
        check(
            "[sandbox]\nproxy = \"http://x\"\n",
            Err(
                "invalid config file x.toml at line 2: unknown field `proxy`, expected one of `profile`, `network`, `filesystem`, `syscalls`, `user`, `read_hide`, `read_reveal`, `secrets`",
            ),
        );
    }

    #[test]
    fn backend() {
        check(
            "[executor]\nbackend = \"pgroup\"\n",
            Ok("Only(ProcessGroup)"),
        );
        check(
            "[executor]\nbackend = \"docker\"\n",
            Err(
                "invalid value \"docker\" for executor.backend in x.toml: unknown containment backend `docker` (expected auto, cgroup, pidns, subreaper or pgroup)",
            ),
        );
        check(
            "[executor]\nmax_concurrent = 0\n",
            Err(
                "invalid value \"0\" for executor.max_concurrent in x.toml: expected a whole number of at least 1",
            ),
        );
    }

    #[test]
    fn policy_section() {
        check(
            "[policy]\ndisabled = [\"rm-rf\", \"custom_tool_x\", \"custom_tool\"]\nprofile = \"plan\"\n",
            Ok(
                "disabled: Some([ToolName(\"rm_rf\"), ToolName(\"x\"), ToolName(\"custom_tool\")]), allowed: None, profile: Some(Some(Plan))",
            ),
        );
        check(
            "[policy]\nprofile = \"yolo\"\n",
            Err(
                "invalid value \"yolo\" for policy.profile in x.toml: unknown profile `yolo` (expected plan or unattended)",
            ),
        );
        check(
            "[policy]\nallowed = [\"Bad Name\"]\n",
            Err(
                "invalid value \"Bad Name\" for policy.allowed in x.toml: tool name `Bad Name` must start with a lowercase letter",
            ),
        );
    }

    #[test]
    fn discovery_section() {
        check(
            "[discovery]\ndirs = [\"a\", \"/b\"]\npeers = true\ncache = false\n",
            Ok("peers: Some(true), cache: Some(false)"),
        );
        check(
            "[discovery]\npeers = \"yes\"\n",
            Err(
                "invalid config file x.toml at line 2: invalid type: string \"yes\", expected a boolean",
            ),
        );
    }

    #[test]
    fn tool_sections() {
        check(
            "[tools.file-read]\ntimeout = \"5s\"\nmemory = \"unlimited\"\ndisabled = true\nenv = { allow = [\"PATH\"] }\n",
            Ok(
                "ToolName(\"file_read\"): ToolOptions { limits: LimitsOptions { timeout: Some(5s), grace: None, cpu: None, memory: Some(Unlimited)",
            ),
        );
        check(
            "[tools.hello]\ntimeout = \"soon\"\n",
            Err(
                "invalid value \"soon\" for tools.hello.timeout in x.toml: expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)",
            ),
        );
        check(
            "[tools.hello]\nmax_timeout = \"5s\"\n",
            Err(
                "invalid config file x.toml at line 2: unknown field `max_timeout`, expected one of `timeout`, `grace`, `cpu`, `memory`, `max_processes`, `max_file_size`, `max_open_files`, `max_output`, `env`, `network`, `filesystem`, `syscalls`, `read_hide`, `read_reveal`, `disabled`, `secrets`",
            ),
        );
    }

    #[test]
    fn audit_path_is_relative_to_the_config_file() {
        let options = parse(
            "[audit]\npath = \"logs/audit.jsonl\"\n",
            Path::new("conf/x.toml"),
        )
        .unwrap();
        assert_eq!(
            options.audit,
            Some(Path::new("conf/logs/audit.jsonl").to_path_buf())
        );
    }

    #[test]
    fn config_dirs_are_relative_to_the_file() {
        let options = parse(
            "[discovery]\ndirs = [\"tools\", \"/abs\", \"~/mine\"]\n",
            Path::new("conf/x.toml"),
        )
        .unwrap();
        let resolved: Vec<String> = options
            .discovery
            .dirs
            .unwrap()
            .iter()
            .map(|dir| {
                dir.resolve(Path::new("/work"), Some(Path::new("/home/ada")))
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(resolved, ["/work/conf/tools", "/abs", "/home/ada/mine"]);
    }

    #[test]
    fn env_section() {
        check(
            "[env]\nallow = [\"PATH\"]\nset = { B = \"2\", A = \"1\" }\n",
            Ok("set: Some([(\"A\", \"1\"), (\"B\", \"2\")])"),
        );
    }

    /// Parses `text` within a hang guard (not a speed claim); a rejection must be one
    /// non-empty line.
    fn check_no_panic(text: &str) {
        let started = std::time::Instant::now();
        let result = parse(text, Path::new("x.toml"));
        assert!(started.elapsed() < Duration::from_secs(5));
        if let Err(error) = result {
            let message = toolsmith_registry::error_chain(&error);
            assert!(!message.trim().is_empty());
            assert!(
                !message.contains('\n'),
                "{text:?} gave a message over several lines: {message:?}"
            );
        }
    }

    const SECTIONS: &[&str] = &[
        "[limits]",
        "[env]",
        "[executor]",
        "[policy]",
        "[tools.hello]",
        "[audit]",
        "[discovery]",
        "[tools]",
        "[[limits]]",
        "[tools.a.b]",
        "[limits.x]",
        "[",
    ];
    const KEYS: &[&str] = &[
        "timeout",
        "grace",
        "cpu",
        "memory",
        "max_output",
        "max_timeout",
        "max_processes",
        "max_file_size",
        "max_open_files",
        "allow",
        "set",
        "backend",
        "max_concurrent",
        "disabled",
        "allowed",
        "profile",
        "path",
        "dirs",
        "peers",
        "cache",
        "env",
        "unknown",
        "\"quoted key\"",
    ];
    const VALUES: &[&str] = &[
        "\"30s\"",
        "\"0s\"",
        "\"-1s\"",
        "\"1e999s\"",
        "99999999999999999999",
        "-1",
        "0",
        "\"1GiB\"",
        "\"18446744073709551616B\"",
        "\"99999999999TiB\"",
        "\"abc\"",
        "[]",
        "[\"PATH\"]",
        "{ A = \"b\" }",
        "{ \"1A\" = \"b\" }",
        "true",
        "\"auto\"",
        "\"plan\"",
        "1.5",
        "nan",
        "inf",
        "\"\"",
        "\"1h1h\"",
        "\"5m\"",
        "\"a\\nb\"",
        "\"\"\"\nmulti\nline\"\"\"",
        "[[1], \"x\"]",
        "1979-05-27T07:32:00Z",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            check_no_panic(&text);
        }

        #[test]
        fn generated_files_never_panic(
            lines in proptest::collection::vec(
                (
                    proptest::sample::select(SECTIONS),
                    proptest::sample::select(KEYS),
                    proptest::sample::select(VALUES),
                    0_u8..4,
                ),
                0..12,
            ),
        ) {
            let mut text = String::new();
            for (section, key, value, kind) in lines {
                match kind {
                    0 => text.push_str(&format!("{section}\n")),
                    _ => text.push_str(&format!("{key} = {value}\n")),
                }
            }
            check_no_panic(&text);
        }
    }
}
